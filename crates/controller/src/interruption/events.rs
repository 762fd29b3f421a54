//! The interruption loop's events, with upstream's reasons and messages: one per kind of
//! message the queue delivers, and the node's termination that follows.

use crate::events::{Event, EventType, ObjectRef};

/// AWS interruption events, each sent for the NodeClaim and for its Node and published once
/// per object per two minutes, as upstream: a message the queue delivers again (SQS is
/// at-least-once) or a health check that keeps failing is not news.
pub fn spot_interrupted(object: ObjectRef) -> Event {
    Event::new(
        object,
        EventType::Warning,
        "SpotInterrupted",
        "Spot interruption warning was triggered",
    )
    .dedupe_object()
}

pub fn spot_rebalance_recommendation(object: ObjectRef) -> Event {
    Event::new(
        object,
        EventType::Normal,
        "SpotRebalanceRecommendation",
        "Spot rebalance recommendation was triggered",
    )
    .dedupe_object()
}

pub fn instance_stopping(object: ObjectRef) -> Event {
    Event::new(
        object,
        EventType::Warning,
        "InstanceStopping",
        "Instance is stopping",
    )
    .dedupe_object()
}

pub fn instance_terminating(object: ObjectRef) -> Event {
    Event::new(
        object,
        EventType::Warning,
        "InstanceTerminating",
        "Instance is terminating",
    )
    .dedupe_object()
}

pub fn instance_unhealthy(object: ObjectRef) -> Event {
    Event::new(
        object,
        EventType::Warning,
        "InstanceUnhealthy",
        "An unhealthy warning was triggered for the instance",
    )
    .dedupe_object()
}

pub fn capacity_reservation_interrupted(object: ObjectRef) -> Event {
    Event::new(
        object,
        EventType::Warning,
        "CapacityReservationInstanceInterrupted",
        "Capacity reservation interruption warning was triggered",
    )
    .dedupe_object()
}

/// Sent for the NodeClaim and for its Node, each message naming its own kind.
pub fn terminating_on_interruption(object: ObjectRef) -> Event {
    let message = format!("Interruption triggered termination for the {}", object.kind);
    Event::new(
        object,
        EventType::Warning,
        "TerminatingOnInterruption",
        message,
    )
    .dedupe_object()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interruption_termination_names_each_object() {
        assert_eq!(
            terminating_on_interruption(ObjectRef::nodeclaim("nc")).message,
            "Interruption triggered termination for the NodeClaim"
        );
        assert_eq!(
            terminating_on_interruption(ObjectRef::node("n")).message,
            "Interruption triggered termination for the Node"
        );
    }
}
