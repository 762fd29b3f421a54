use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::requirements::Requirement;
use crate::resources::Resources;
use crate::taints::Taint;
use crate::time::Timestamp;

/// A Kubernetes Node as the scheduler sees it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Node {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.resourceVersion`: changes with every write to the Node, so one name at one
    /// version is one state of it. Empty when unknown.
    pub resource_version: String,
    /// `spec.providerID`, the cloud's name for the instance; empty when unset.
    pub provider_id: String,
    /// `metadata.labels` (instance type, zone, capacity type, `karpenter.sh/nodepool`, ...).
    pub labels: BTreeMap<String, String>,
    /// `metadata.annotations`; shared, as Nodes of one NodePool carry the same.
    pub annotations: Arc<BTreeMap<String, String>>,
    /// `spec.taints`.
    pub taints: Vec<Taint>,
    /// `status.capacity`.
    pub capacity: Resources,
    /// `status.allocatable`: what pods may request.
    pub allocatable: Resources,
    /// The `Ready` condition is `True`.
    pub ready: bool,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
    /// `metadata.creationTimestamp`.
    pub creation_timestamp: Timestamp,
    /// `metadata.deletionTimestamp`: set once the Node is being deleted.
    pub deletion_timestamp: Option<Timestamp>,
}

/// A NodeClaim: a request for one node, launched or still in flight.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeClaim {
    /// `metadata.name`.
    pub name: String,
    /// The NodePool that owns the claim (its `karpenter.sh/nodepool` label); empty for a
    /// claim no NodePool manages.
    pub nodepool: String,
    /// `metadata.labels`, which its Node gets. Shared: claims launched as one instance type
    /// in one zone carry the same labels (see [`Shared`](super::Shared)).
    pub labels: Arc<BTreeMap<String, String>>,
    /// `metadata.annotations` (the hash of the NodePool template it was made from, ...),
    /// shared as the labels are.
    pub annotations: Arc<BTreeMap<String, String>>,
    /// `spec.taints`, which its Node gets.
    pub taints: Vec<Taint>,
    /// `spec.startupTaints`: taints the Node starts with and something else removes; pods
    /// need not tolerate them.
    pub startup_taints: Vec<Taint>,
    /// `spec.requirements`: what the launched instance must satisfy.
    pub requirements: Vec<Requirement>,
    /// Summed requests of the pods it was created for, plus daemon overhead.
    pub requests: Resources,
    /// `status.providerID`: the instance, once launched.
    pub provider_id: Option<String>,
    /// `status.nodeName`: its Node, once registered.
    pub node_name: Option<String>,
    /// `status.imageID`: the image the instance runs, once launched.
    pub image_id: Option<String>,
    /// `status.capacity`, once launched (empty before).
    pub capacity: Resources,
    /// `status.allocatable`, once launched (empty before).
    pub allocatable: Resources,
    /// The `Launched` condition is `True`: the instance exists.
    pub launched: bool,
    /// The `Registered` condition is `True`: its Node joined the cluster.
    pub registered: bool,
    /// The `Initialized` condition is `True`: its Node is ready and takes pods.
    pub initialized: bool,
    /// `metadata.creationTimestamp`.
    pub creation_timestamp: Timestamp,
    /// `metadata.deletionTimestamp`: set once the claim is being deleted.
    pub deletion_timestamp: Option<Timestamp>,
    /// When `Initialized` became true.
    pub initialized_at: Option<Timestamp>,
    /// Last time a pod was bound to or removed from the node.
    pub last_pod_event_time: Option<Timestamp>,
    /// The drift reason, when the claim has drifted.
    pub drifted: Option<String>,
    /// When `Drifted` became true.
    pub drifted_at: Option<Timestamp>,
    /// `spec.expireAfter`: the age at which expiration removes the claim; `None` falls back
    /// to its NodePool's.
    pub expire_after: Option<Duration>,
    /// `spec.terminationGracePeriod`: how long its drain may take before pods are deleted
    /// whatever protects them; `None` waits forever. When set, drift ignores pod blockers.
    pub termination_grace_period: Option<Duration>,
}
