use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use crate::requirements::NodeSelectorTerm;
use crate::resources::Resources;
use crate::selector::LabelSelector;
use crate::taints::Toleration;
use crate::time::Timestamp;

/// A pod's owner reference.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OwnerRef {
    /// The owner's kind (`ReplicaSet`, `StatefulSet`, `DaemonSet`, `Node`, ...).
    pub kind: String,
    /// The owner's name.
    pub name: String,
    /// The reference's `controller` flag; the rules here only read owners that set it.
    pub controller: bool,
}

/// A pod's phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PodPhase {
    /// Accepted, not every container running yet (bound or not).
    #[default]
    Pending,
    /// Bound, with at least one container running.
    Running,
    /// Every container exited successfully: terminal.
    Succeeded,
    /// Every container exited, at least one in failure: terminal.
    Failed,
    /// The kubelet cannot report the pod's state.
    Unknown,
}

/// What a topology spread constraint does when it cannot be met.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WhenUnsatisfiable {
    /// A hard constraint: the pod stays pending rather than exceed `maxSkew`.
    DoNotSchedule,
    /// A preference: the skew is kept low when it can be, and may be relaxed.
    ScheduleAnyway,
}

/// `nodeAffinityPolicy` / `nodeTaintsPolicy` of a topology spread constraint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InclusionPolicy {
    /// Nodes that fail the rule (the pod's node affinity and selector, or a taint the pod
    /// does not tolerate) are left out of the skew's count.
    Honor,
    /// Every node is counted, whatever the rule says.
    Ignore,
}

/// One of a pod's topology spread constraints.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TopologySpreadConstraint {
    /// `maxSkew`: how far the count of matching pods in one domain may exceed the lowest.
    pub max_skew: i32,
    /// The node label whose values are the domains (zone, hostname, ...).
    pub topology_key: String,
    /// Whether the constraint is required or preferred.
    pub when_unsatisfiable: WhenUnsatisfiable,
    /// Which pods are counted; `None` counts none.
    pub label_selector: Option<LabelSelector>,
    /// `minDomains`: below this many eligible domains, the lowest count is taken as 0.
    pub min_domains: Option<i32>,
    /// Default `Honor`.
    pub node_affinity_policy: InclusionPolicy,
    /// Default `Ignore`.
    pub node_taints_policy: InclusionPolicy,
    /// `matchLabelKeys`: label keys whose values on this pod are added to the selector.
    pub match_label_keys: Vec<String>,
}

/// A pod (anti-)affinity term: pods it selects, in which namespaces, over which topology.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PodAffinityTerm {
    /// The pods the term is about; `None` selects none.
    pub label_selector: Option<LabelSelector>,
    /// Empty together with no `namespace_selector` means the pod's own namespace.
    pub namespaces: Vec<String>,
    /// Namespaces chosen by their labels, besides `namespaces`; an empty selector is every
    /// namespace.
    pub namespace_selector: Option<LabelSelector>,
    /// The node label whose values are the domains (zone, hostname, ...).
    pub topology_key: String,
    /// `matchLabelKeys`: the selected pods must share this pod's values of these keys.
    pub match_label_keys: Vec<String>,
    /// `mismatchLabelKeys`: the selected pods must differ from this pod's values of these
    /// keys.
    pub mismatch_label_keys: Vec<String>,
}

/// A preferred pod (anti-)affinity term with its weight.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WeightedPodAffinityTerm {
    /// 1..=100; heavier terms are tried first.
    pub weight: i32,
    /// The term preferred.
    pub term: PodAffinityTerm,
}

/// A preferred node affinity term with its weight.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WeightedNodeSelectorTerm {
    /// 1..=100; heavier terms are tried first.
    pub weight: i32,
    /// The term preferred.
    pub term: NodeSelectorTerm,
}

/// A host port a container asks for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HostPort {
    /// The port on the node (`hostPort`), greater than 0.
    pub port: i32,
    /// `TCP`, `UDP` or `SCTP`.
    pub protocol: String,
    /// Empty, `0.0.0.0` or `::` mean every address.
    pub host_ip: String,
}

/// A pod: pending (no `node_name`) or bound to a node.
///
/// Its identity and state are its own; everything else (labels, requests, constraints) is
/// its [`PodTemplate`], which pods made from one template share. `pod.labels`,
/// `pod.tolerations` and the rest read through it (`Deref`), and writing one gives the pod
/// a copy of its own (`DerefMut`), so code reads a pod as one flat record.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pod {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`; breaks ties in Karpenter's scheduling queue.
    pub uid: String,
    /// Labels, annotations, owner, requests and every scheduling constraint.
    pub template: Arc<PodTemplate>,
    /// `spec.nodeName`: the node the pod is bound to; `None` while pending.
    pub node_name: Option<String>,
    /// `status.phase`.
    pub phase: PodPhase,
    /// `metadata.creationTimestamp`.
    pub creation_timestamp: Timestamp,
    /// `status.startTime`: when the kubelet accepted the pod; `None` before. Timed
    /// `do-not-disrupt` values count from it.
    pub start_time: Option<Timestamp>,
    /// `metadata.deletionTimestamp`: set once the pod is terminating.
    pub deletion_timestamp: Option<Timestamp>,
    /// True when the pod is Ready (used for PDB `unhealthyPodEvictionPolicy`).
    pub ready: bool,
}

/// What a pod has in common with the other pods its controller made from one template:
/// everything but its identity and state. At 20,000 replicas of one Deployment this is one
/// copy rather than 20,000 (see [`PodTemplates`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PodTemplate {
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `metadata.annotations` (`karpenter.sh/do-not-disrupt`, the pod deletion cost, ...).
    pub annotations: BTreeMap<String, String>,
    /// The controller owner reference, if any.
    pub owner: Option<OwnerRef>,
    /// How many other (non-controller) owner references the pod has. Karpenter counts any
    /// owner reference as ownership, so a pod with only these is not ownerless.
    pub other_owner_references: u32,
    /// Effective requests: max(init containers, sum of containers) plus pod overhead, and
    /// `pods = 1`.
    pub requests: Resources,
    /// `spec.nodeSelector`: labels the node must carry with exactly these values.
    pub node_selector: BTreeMap<String, String>,
    /// ORed terms; empty means no required node affinity.
    pub required_node_affinity: Vec<NodeSelectorTerm>,
    /// Preferred node affinity terms; relaxed when they cannot be met.
    pub preferred_node_affinity: Vec<WeightedNodeSelectorTerm>,
    /// `spec.tolerations`.
    pub tolerations: Vec<Toleration>,
    /// `spec.topologySpreadConstraints`.
    pub topology_spread: Vec<TopologySpreadConstraint>,
    /// Required pod affinity terms: each must find a selected pod in the same domain.
    pub pod_affinity: Vec<PodAffinityTerm>,
    /// Preferred pod affinity terms.
    pub preferred_pod_affinity: Vec<WeightedPodAffinityTerm>,
    /// Required pod anti-affinity terms: no selected pod may share the domain.
    pub pod_anti_affinity: Vec<PodAffinityTerm>,
    /// Preferred pod anti-affinity terms.
    pub preferred_pod_anti_affinity: Vec<WeightedPodAffinityTerm>,
    /// Host ports of the pod's containers and init containers.
    pub host_ports: Vec<HostPort>,
    /// Names of PersistentVolumeClaims (in the pod's namespace) the pod mounts.
    pub volume_claims: Vec<String>,
    /// `spec.priority`; 0 when unset. Orders the kube-scheduler's queue in the consolidation
    /// replay, and adds to the pod's eviction cost.
    pub priority: i32,
    /// `spec.priorityClassName`; empty when unset.
    pub priority_class_name: String,
    /// `spec.terminationGracePeriodSeconds`; `None` when unset (Kubernetes' default, 30 s).
    pub termination_grace_period_seconds: Option<i64>,
}

impl Deref for Pod {
    type Target = PodTemplate;

    fn deref(&self) -> &PodTemplate {
        &self.template
    }
}

impl DerefMut for Pod {
    /// Copy on write: a pod changed alone stops sharing its template.
    fn deref_mut(&mut self) -> &mut PodTemplate {
        Arc::make_mut(&mut self.template)
    }
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
