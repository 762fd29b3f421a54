//! What a provider reports about its instances, as plain data.

use std::collections::BTreeMap;

use nodewright_core::model::CapacityType;
use nodewright_core::resources::Resources;
use nodewright_core::time::Timestamp;

/// Tag keys every launched instance carries, so `list` and garbage collection can find the
/// instances of this cluster and map them back to claims.
pub mod tags {
    pub const NODEPOOL: &str = "karpenter.sh/nodepool";
    pub const NODECLAIM: &str = "karpenter.sh/nodeclaim";
    pub const NODECLASS: &str = "karpenter.k8s.aws/ec2nodeclass";
    pub const MANAGED_BY: &str = "karpenter.sh/managed-by";
    pub const NAME: &str = "Name";
    /// `kubernetes.io/cluster/<cluster name>` = `owned`.
    pub fn cluster(name: &str) -> String {
        format!("kubernetes.io/cluster/{name}")
    }
}

/// Annotation keys a provider reports for the controller to write.
pub mod annotations {
    /// The node class's drift hash: on the EC2NodeClass, and copied onto each claim launched
    /// from it. A claim whose hash differs from its class's (same version) has drifted.
    pub const NODECLASS_HASH: &str = "karpenter.k8s.aws/ec2nodeclass-hash";
    /// How the hash was computed; hashes of different versions are not compared.
    pub const NODECLASS_HASH_VERSION: &str = "karpenter.k8s.aws/ec2nodeclass-hash-version";
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum InstanceState {
    Pending,
    Running,
    ShuttingDown,
    Terminated,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Instance {
    /// `aws:///<zone>/<instance id>` for EC2; the simulated cloud uses the same shape.
    pub provider_id: String,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: CapacityType,
    pub image_id: Option<String>,
    pub state: InstanceState,
    pub launched_at: Option<Timestamp>,
    pub tags: BTreeMap<String, String>,
}

impl Instance {
    /// The claim this instance was launched for, from its tags.
    pub fn nodeclaim(&self) -> Option<&str> {
        self.tags.get(tags::NODECLAIM).map(String::as_str)
    }
}

/// The result of a successful launch: the instance plus what the controller writes into the
/// claim's status and labels.
#[derive(Clone, Debug, PartialEq)]
pub struct Launched {
    pub instance: Instance,
    pub capacity: Resources,
    pub allocatable: Resources,
    /// Well-known labels of the launched type and offering (instance type, zone, capacity
    /// type, architecture, os, instance family ...), merged into the claim's labels.
    pub labels: BTreeMap<String, String>,
    /// Annotations for the claim (the node class hash it was launched with). These override
    /// the claim's own values for the same keys.
    pub annotations: BTreeMap<String, String>,
}
