//! The interruption feed: notices from the cloud that instances are about to go away (spot
//! reclaims, scheduled retirements, stops), read from a queue the controller polls. A provider
//! parses its own wire format; the controller sees only [`Interruption`]s and acknowledges each
//! delivery once it has acted, so a crash in between means the notice comes again.

use async_trait::async_trait;
use nodewright_core::time::Timestamp;

use crate::CloudError;

/// What a notice asks of the instances it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum InterruptionKind {
    /// The spot instance is reclaimed in about two minutes.
    SpotInterrupted,
    /// The spot instance is at elevated risk of interruption; informational only.
    RebalanceRecommendation,
    /// A scheduled change (retirement, maintenance) affects the instance.
    ScheduledChange,
    /// The instance is stopping or stopped.
    InstanceStopped,
    /// The instance is shutting down or terminated.
    InstanceTerminated,
    /// The instance's capacity reservation reclaims it.
    CapacityReservationInterrupted,
    /// A notice the controller does not act on.
    NoOp,
}

impl InterruptionKind {
    /// Upstream's spelling, used as the `message_type` metric label and the disruption reason.
    pub fn as_str(self) -> &'static str {
        match self {
            InterruptionKind::SpotInterrupted => "spot_interrupted",
            InterruptionKind::RebalanceRecommendation => "rebalance_recommendation",
            InterruptionKind::ScheduledChange => "scheduled_change",
            InterruptionKind::InstanceStopped => "instance_stopped",
            InterruptionKind::InstanceTerminated => "instance_terminated",
            InterruptionKind::CapacityReservationInterrupted => "capacity_reservation_interrupted",
            InterruptionKind::NoOp => "no_op",
        }
    }

    /// Whether the named instances' NodeClaims are deleted (drained and terminated).
    pub fn terminates(self) -> bool {
        !matches!(
            self,
            InterruptionKind::RebalanceRecommendation | InterruptionKind::NoOp
        )
    }
}

/// One parsed notice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interruption {
    pub kind: InterruptionKind,
    /// The notice's own id (for logs).
    pub id: String,
    /// The cloud's instance ids (the last segment of a provider id), without repeats.
    pub instance_ids: Vec<String>,
    /// When the cloud emitted the notice.
    pub time: Option<Timestamp>,
}

/// Identifies one delivery for [`InterruptionSource::ack`]; opaque to the controller.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AckHandle(pub String);

/// One delivery: the parsed notice, or why its body could not be read (such a delivery is
/// acknowledged all the same, since reading it again cannot help).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    pub message: Result<Interruption, String>,
    pub ack: AckHandle,
}

/// A queue of interruption notices.
#[async_trait]
pub trait InterruptionSource: Send + Sync {
    /// The next deliveries, waiting up to the source's poll time; empty when none arrived.
    /// Deliveries not acknowledged come back later.
    async fn receive(&self) -> Result<Vec<Delivery>, CloudError>;

    /// Removes a delivery from the queue for good.
    async fn ack(&self, handle: &AckHandle) -> Result<(), CloudError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_notices_of_an_ending_instance_terminate() {
        use InterruptionKind::*;
        let terminating: Vec<&str> = [
            SpotInterrupted,
            RebalanceRecommendation,
            ScheduledChange,
            InstanceStopped,
            InstanceTerminated,
            CapacityReservationInterrupted,
            NoOp,
        ]
        .into_iter()
        .filter(|k| k.terminates())
        .map(InterruptionKind::as_str)
        .collect();
        assert_eq!(
            terminating,
            [
                "spot_interrupted",
                "scheduled_change",
                "instance_stopped",
                "instance_terminated",
                "capacity_reservation_interrupted"
            ]
        );
    }
}
