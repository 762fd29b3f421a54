//! The AWS provider's repair policies (upstream's `CloudProvider.RepairPolicies`): the kubelet's
//! `Ready` condition, and the conditions the EKS node monitoring agent writes, each with how
//! long it may stay unhealthy before node repair replaces the node.

use std::time::Duration;

use nodewright_core::repair::Policy;

const MINUTE: u64 = 60;

/// (condition type, unhealthy status, toleration in minutes), as upstream lists them.
const POLICIES: [(&str, &str, u64); 7] = [
    ("Ready", "False", 30),
    ("Ready", "Unknown", 30),
    ("AcceleratedHardwareReady", "False", 10),
    ("StorageReady", "False", 30),
    ("NetworkingReady", "False", 30),
    ("KernelReady", "False", 30),
    ("ContainerRuntimeReady", "False", 30),
];

/// The policies, in upstream's order.
pub fn policies() -> Vec<Policy> {
    POLICIES
        .iter()
        .map(|(condition, status, minutes)| Policy {
            condition: (*condition).into(),
            status: (*status).into(),
            toleration: Duration::from_secs(minutes * MINUTE),
        })
        .collect()
}
