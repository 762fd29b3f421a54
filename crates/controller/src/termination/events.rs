//! The termination loop's events, with upstream's reasons and messages: evictions, drains that
//! fail or run out of time, and the wait for volumes to detach.

use crate::events::{Event, EventType, ObjectRef};

/// Termination: a pod was evicted from a draining node.
pub fn evicted(pod: ObjectRef, reason: &str) -> Event {
    Event::new(
        pod,
        EventType::Normal,
        "Evicted",
        format!("Evicted pod: {reason}"),
    )
    .dedupe_object()
}

/// A pod deleted because the node's termination grace period ran out.
pub fn disrupted_pod_delete(
    pod: ObjectRef,
    node_termination_time: &str,
    grace_seconds: i64,
    pod_grace_seconds: Option<i64>,
) -> Event {
    let pod_grace = pod_grace_seconds.map_or_else(|| "<nil>".to_owned(), |s| s.to_string());
    Event::new(
        pod,
        EventType::Normal,
        "Disrupted",
        format!(
            "Deleting the pod to accommodate the terminationTime {node_termination_time} of the node. The pod was granted {grace_seconds} seconds of grace-period of its {pod_grace} terminationGracePeriodSeconds. This bypasses the PDB of the pod and the do-not-disrupt annotation."
        ),
    )
    .dedupe_object()
}

pub fn failed_draining(node: ObjectRef, error: &str) -> Event {
    Event::new(
        node,
        EventType::Warning,
        "FailedDraining",
        format!("Failed to drain node, {error}"),
    )
    .dedupe_object()
}

pub fn termination_grace_period_expiring(object: ObjectRef, deadline: &str) -> Event {
    Event::new(
        object,
        EventType::Warning,
        "TerminationGracePeriodExpiring",
        format!("All pods will be deleted by {deadline}"),
    )
    .dedupe_object()
}

pub fn failed_termination(object: ObjectRef, error: &str) -> Event {
    Event::new(
        object,
        EventType::Warning,
        "FailedTermination",
        format!("Failed to terminate, {error}"),
    )
    .dedupe_object()
}

pub fn awaiting_volume_detachment(node: ObjectRef, count: usize) -> Event {
    Event::new(
        node,
        EventType::Normal,
        "AwaitingVolumeDetachment",
        format!("Awaiting deletion of bound volumeattachments ({count})"),
    )
    .dedupe_object()
}
