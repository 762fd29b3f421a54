//! The kinds of interruption notice a cloud can send about an instance (spot reclaims,
//! scheduled changes, stops, reservation reclaims), spelled as upstream's metric labels and
//! disruption reasons. Providers parse their own messages into these; the controller acts on
//! them without knowing the provider.
//!
//! Offers the kinds and what each does to a claim; parsing a provider's messages is the provider's.

use std::fmt;

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

    /// Every kind, in declaration order.
    pub const ALL: [InterruptionKind; 7] = [
        InterruptionKind::SpotInterrupted,
        InterruptionKind::RebalanceRecommendation,
        InterruptionKind::ScheduledChange,
        InterruptionKind::InstanceStopped,
        InterruptionKind::InstanceTerminated,
        InterruptionKind::CapacityReservationInterrupted,
        InterruptionKind::NoOp,
    ];

    /// Whether the named instances' NodeClaims are deleted (drained and terminated).
    pub fn terminates(self) -> bool {
        !matches!(
            self,
            InterruptionKind::RebalanceRecommendation | InterruptionKind::NoOp
        )
    }
}

impl fmt::Display for InterruptionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
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
