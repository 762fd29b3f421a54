use std::collections::BTreeMap;

use crate::requirements::NodeSelectorTerm;
use crate::resources::Resources;
use crate::selector::LabelSelector;
use crate::taints::Toleration;
use crate::time::Timestamp;

/// A pod's owner reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnerRef {
    pub kind: String,
    pub name: String,
    pub controller: bool,
}

/// A pod's phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PodPhase {
    #[default]
    Pending,
    Running,
    Succeeded,
    Failed,
    Unknown,
}

/// What a topology spread constraint does when it cannot be met.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WhenUnsatisfiable {
    DoNotSchedule,
    ScheduleAnyway,
}

/// `nodeAffinityPolicy` / `nodeTaintsPolicy` of a topology spread constraint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InclusionPolicy {
    Honor,
    Ignore,
}

/// One of a pod's topology spread constraints.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TopologySpreadConstraint {
    pub max_skew: i32,
    pub topology_key: String,
    pub when_unsatisfiable: WhenUnsatisfiable,
    pub label_selector: Option<LabelSelector>,
    pub min_domains: Option<i32>,
    /// Default `Honor`.
    pub node_affinity_policy: InclusionPolicy,
    /// Default `Ignore`.
    pub node_taints_policy: InclusionPolicy,
    pub match_label_keys: Vec<String>,
}

/// A pod (anti-)affinity term: pods it selects, in which namespaces, over which topology.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PodAffinityTerm {
    pub label_selector: Option<LabelSelector>,
    /// Empty together with no `namespace_selector` means the pod's own namespace.
    pub namespaces: Vec<String>,
    pub namespace_selector: Option<LabelSelector>,
    pub topology_key: String,
    pub match_label_keys: Vec<String>,
    pub mismatch_label_keys: Vec<String>,
}

/// A preferred pod (anti-)affinity term with its weight.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WeightedPodAffinityTerm {
    pub weight: i32,
    pub term: PodAffinityTerm,
}

/// A preferred node affinity term with its weight.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WeightedNodeSelectorTerm {
    pub weight: i32,
    pub term: NodeSelectorTerm,
}

/// A host port a container asks for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HostPort {
    pub port: i32,
    /// `TCP`, `UDP` or `SCTP`.
    pub protocol: String,
    /// Empty, `0.0.0.0` or `::` mean every address.
    pub host_ip: String,
}

/// A pod: pending (no `node_name`) or bound to a node.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pod {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// The controller owner reference, if any.
    pub owner: Option<OwnerRef>,
    /// How many other (non-controller) owner references the pod has. Karpenter counts any
    /// owner reference as ownership, so a pod with only these is not ownerless.
    pub other_owner_references: u32,
    /// Effective requests: max(init containers, sum of containers) plus pod overhead, and
    /// `pods = 1`.
    pub requests: Resources,
    pub node_selector: BTreeMap<String, String>,
    /// ORed terms; empty means no required node affinity.
    pub required_node_affinity: Vec<NodeSelectorTerm>,
    pub preferred_node_affinity: Vec<WeightedNodeSelectorTerm>,
    pub tolerations: Vec<Toleration>,
    pub topology_spread: Vec<TopologySpreadConstraint>,
    pub pod_affinity: Vec<PodAffinityTerm>,
    pub preferred_pod_affinity: Vec<WeightedPodAffinityTerm>,
    pub pod_anti_affinity: Vec<PodAffinityTerm>,
    pub preferred_pod_anti_affinity: Vec<WeightedPodAffinityTerm>,
    pub host_ports: Vec<HostPort>,
    /// Names of PersistentVolumeClaims (in the pod's namespace) the pod mounts.
    pub volume_claims: Vec<String>,
    pub priority: i32,
    pub priority_class_name: String,
    pub node_name: Option<String>,
    pub phase: PodPhase,
    pub creation_timestamp: Timestamp,
    pub start_time: Option<Timestamp>,
    pub deletion_timestamp: Option<Timestamp>,
    pub termination_grace_period_seconds: Option<i64>,
    /// True when the pod is Ready (used for PDB `unhealthyPodEvictionPolicy`).
    pub ready: bool,
}

impl Pod {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Whether a DaemonSet controls the pod.
    pub fn is_daemonset_pod(&self) -> bool {
        self.owner
            .as_ref()
            .is_some_and(|o| o.controller && o.kind == "DaemonSet")
    }

    pub(crate) fn is_statefulset_pod(&self) -> bool {
        self.owner
            .as_ref()
            .is_some_and(|o| o.controller && o.kind == "StatefulSet")
    }

    /// Static pods mirrored by the kubelet are owned by their Node.
    pub(crate) fn is_mirror_pod(&self) -> bool {
        self.owner
            .as_ref()
            .is_some_and(|o| o.controller && o.kind == "Node")
            || self.annotations.contains_key("kubernetes.io/config.mirror")
    }

    /// No owner reference at all: nothing recreates the pod once it is evicted.
    pub fn is_ownerless(&self) -> bool {
        self.owner.is_none() && self.other_owner_references == 0
    }

    /// Whether the pod has finished (succeeded or failed).
    pub fn is_terminal(&self) -> bool {
        matches!(self.phase, PodPhase::Succeeded | PodPhase::Failed)
    }

    pub(crate) fn is_terminating(&self) -> bool {
        self.deletion_timestamp.is_some()
    }
}
