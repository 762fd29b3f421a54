//! The provisioner's events, with upstream's reasons and messages: where a pod will land, and
//! why it or its NodePool cannot get capacity.

use std::time::Duration;

use crate::events::{Event, EventType, Limit, ObjectRef};

/// Scheduling: the pod will land on `nodeclaim` (and `node`, when it already exists).
pub fn nominated(pod: ObjectRef, nodeclaim: &str) -> Event {
    Event::new(
        pod,
        EventType::Normal,
        "Nominated",
        format!("Pod should schedule on: nodeclaim/{nodeclaim}"),
    )
    .dedupe_object()
    .limited(Limit::PodNomination)
}

pub fn nominated_on_node(pod: ObjectRef, node: &str, nodeclaim: Option<&str>) -> Event {
    let target = match nodeclaim {
        Some(nc) => format!("nodeclaim/{nc}, node/{node}"),
        None => format!("node/{node}"),
    };
    Event::new(
        pod,
        EventType::Normal,
        "Nominated",
        format!("Pod should schedule on: {target}"),
    )
    .dedupe_object()
    .limited(Limit::PodNomination)
}

pub fn failed_scheduling(pod: ObjectRef, error: &str) -> Event {
    Event::new(
        pod,
        EventType::Warning,
        "FailedScheduling",
        format!("Failed to schedule pod, {error}"),
    )
    .dedupe_on(&[], Duration::from_secs(300))
}

pub fn no_compatible_instance_types(nodepool: ObjectRef) -> Event {
    Event::new(
        nodepool,
        EventType::Warning,
        "NoCompatibleInstanceTypes",
        "NodePool requirements filtered out all compatible available instance types",
    )
    // The instance types on offer change as capacity comes and goes.
    .dedupe_on(&[], Duration::from_secs(60))
}
