use crate::requirements::NodeSelectorTerm;
use crate::selector::LabelSelector;

/// A PersistentVolumeClaim and the volume or class it binds to.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PersistentVolumeClaim {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// The bound volume, if any.
    pub volume_name: Option<String>,
    /// `spec.storageClassName`, whose `allowedTopologies` place an unbound claim; `None`
    /// when unset.
    pub storage_class: Option<String>,
}

/// A PersistentVolume, as far as placement cares: where it may be used.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PersistentVolume {
    /// `metadata.name`.
    pub name: String,
    /// ORed terms from `spec.nodeAffinity.required`.
    pub node_affinity: Vec<NodeSelectorTerm>,
    /// Local and hostPath volumes pin a node by hostname; those terms are ignored for new nodes.
    pub local_or_host_path: bool,
}

/// A StorageClass, as far as placement cares: when and where its volumes bind.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StorageClass {
    /// `metadata.name`.
    pub name: String,
    /// The driver that makes its volumes (`ebs.csi.aws.com`); placement does not read it.
    pub provisioner: String,
    /// `WaitForFirstConsumer` or `Immediate`.
    pub volume_binding_mode: String,
    /// ORed terms from `allowedTopologies`.
    pub allowed_topologies: Vec<NodeSelectorTerm>,
}

/// A PodDisruptionBudget's `unhealthyPodEvictionPolicy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UnhealthyPodEvictionPolicy {
    /// A pod that is not Ready may be evicted only while the budget allows evictions (the
    /// default).
    #[default]
    IfHealthyBudget,
    /// A pod that is not Ready may always be evicted.
    AlwaysAllow,
}

/// A PodDisruptionBudget: which pods it covers and how many may be evicted now.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodDisruptionBudget {
    /// `metadata.namespace`: it covers pods of this namespace only.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `None` selects nothing.
    pub selector: Option<LabelSelector>,
    /// `status.disruptionsAllowed`.
    pub disruptions_allowed: i32,
    /// `spec.unhealthyPodEvictionPolicy`: whether pods that are not Ready may be evicted
    /// past the budget.
    pub unhealthy_pod_eviction_policy: UnhealthyPodEvictionPolicy,
    /// True for `maxUnavailable: 0` / `0%` or `minAvailable: 100%`: no eviction ever allowed.
    pub fully_blocking: bool,
}
