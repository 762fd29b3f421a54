use std::collections::BTreeMap;
use std::time::Duration;

use crate::requirements::Requirement;
use crate::resources::Resources;
use crate::taints::Taint;
use crate::time::Timestamp;

/// A Kubernetes Node as the scheduler sees it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Node {
    pub name: String,
    /// `metadata.resourceVersion`: changes with every write to the Node, so one name at one
    /// version is one state of it. Empty when unknown.
    pub resource_version: String,
    pub provider_id: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub capacity: Resources,
    pub allocatable: Resources,
    pub ready: bool,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
    pub creation_timestamp: Timestamp,
    pub deletion_timestamp: Option<Timestamp>,
}

/// A NodeClaim: a request for one node, launched or still in flight.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeClaim {
    pub name: String,
    pub nodepool: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub startup_taints: Vec<Taint>,
    pub requirements: Vec<Requirement>,
    /// Summed requests of the pods it was created for, plus daemon overhead.
    pub requests: Resources,
    pub provider_id: Option<String>,
    pub node_name: Option<String>,
    pub image_id: Option<String>,
    pub capacity: Resources,
    pub allocatable: Resources,
    pub launched: bool,
    pub registered: bool,
    pub initialized: bool,
    pub creation_timestamp: Timestamp,
    pub deletion_timestamp: Option<Timestamp>,
    /// When `Initialized` became true.
    pub initialized_at: Option<Timestamp>,
    /// Last time a pod was bound to or removed from the node.
    pub last_pod_event_time: Option<Timestamp>,
    /// The drift reason, when the claim has drifted.
    pub drifted: Option<String>,
    /// When `Drifted` became true.
    pub drifted_at: Option<Timestamp>,
    pub expire_after: Option<Duration>,
    pub termination_grace_period: Option<Duration>,
}
