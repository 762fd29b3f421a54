//! Well-known label keys, their deprecated aliases, and the label domains users may not set.
//!
//! Offers the keys as constants and the key rules; matching a label against a requirement is
//! [`crate::requirements::Requirement::admits`], not here.

/// The NodePool a node belongs to.
pub const NODEPOOL: &str = "karpenter.sh/nodepool";
/// How the node is paid for (`on-demand`, `spot`, `reserved`).
pub const CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";
/// Set once the claim's node has joined the cluster.
pub const REGISTERED: &str = "karpenter.sh/registered";
/// Set once the node is ready and its startup taints are gone.
pub const INITIALIZED: &str = "karpenter.sh/initialized";
/// On a node: do not copy the claim's taints onto it at registration.
pub const DO_NOT_SYNC_TAINTS: &str = "karpenter.sh/do-not-sync-taints";
/// The zone a node runs in.
pub const ZONE: &str = "topology.kubernetes.io/zone";
/// The region a node runs in.
pub const REGION: &str = "topology.kubernetes.io/region";
/// The node's instance type.
pub const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
/// The node's CPU architecture.
pub const ARCH: &str = "kubernetes.io/arch";
/// The node's operating system.
pub const OS: &str = "kubernetes.io/os";
/// The node's hostname.
pub const HOSTNAME: &str = "kubernetes.io/hostname";
/// A Windows node's build number.
pub const WINDOWS_BUILD: &str = "node.kubernetes.io/windows-build";

/// The v1alpha5 label that became [`NODEPOOL`].
pub const LEGACY_PROVISIONER_NAME: &str = "karpenter.sh/provisioner-name";

/// The [`CAPACITY_TYPE`] value of on-demand capacity.
pub const CAPACITY_TYPE_ON_DEMAND: &str = "on-demand";
/// The [`CAPACITY_TYPE`] value of spot capacity.
pub const CAPACITY_TYPE_SPOT: &str = "spot";
/// The [`CAPACITY_TYPE`] value of capacity reservations.
pub const CAPACITY_TYPE_RESERVED: &str = "reserved";

/// AWS provider labels (`karpenter.k8s.aws/...` and `topology.k8s.aws/zone-id`).
pub mod aws {
    /// The family letter(s) (`c`, `m`, `r`, ...).
    pub const INSTANCE_CATEGORY: &str = "karpenter.k8s.aws/instance-category";
    /// The generation number of the family.
    pub const INSTANCE_GENERATION: &str = "karpenter.k8s.aws/instance-generation";
    /// The family (`m5`, `c7g`, ...).
    pub const INSTANCE_FAMILY: &str = "karpenter.k8s.aws/instance-family";
    /// The size (`large`, `2xlarge`, `metal`, ...).
    pub const INSTANCE_SIZE: &str = "karpenter.k8s.aws/instance-size";
    /// vCPUs.
    pub const INSTANCE_CPU: &str = "karpenter.k8s.aws/instance-cpu";
    /// The CPU maker (`intel`, `amd`, `aws`).
    pub const INSTANCE_CPU_MANUFACTURER: &str = "karpenter.k8s.aws/instance-cpu-manufacturer";
    /// The sustained clock speed, in MHz.
    pub const INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ: &str =
        "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz";
    /// Memory, in MiB.
    pub const INSTANCE_MEMORY: &str = "karpenter.k8s.aws/instance-memory";
    /// EBS bandwidth, in Mbps.
    pub const INSTANCE_EBS_BANDWIDTH: &str = "karpenter.k8s.aws/instance-ebs-bandwidth";
    /// Network bandwidth, in Mbps.
    pub const INSTANCE_NETWORK_BANDWIDTH: &str = "karpenter.k8s.aws/instance-network-bandwidth";
    /// The hypervisor (`nitro`, `xen`, or empty for metal).
    pub const INSTANCE_HYPERVISOR: &str = "karpenter.k8s.aws/instance-hypervisor";
    /// Whether traffic between instances is encrypted in transit.
    pub const INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED: &str =
        "karpenter.k8s.aws/instance-encryption-in-transit-supported";
    /// Whether the type supports Nitro Enclaves.
    pub const NITRO_SANDBOX: &str = "karpenter.k8s.aws/nitro-sandbox";
    /// Total local NVMe instance storage, in GB.
    pub const INSTANCE_LOCAL_NVME: &str = "karpenter.k8s.aws/instance-local-nvme";
    /// Whether the type is a flex instance.
    pub const INSTANCE_CAPABILITY_FLEX: &str = "karpenter.k8s.aws/instance-capability-flex";
    /// The GPU model.
    pub const INSTANCE_GPU_NAME: &str = "karpenter.k8s.aws/instance-gpu-name";
    /// The GPU maker.
    pub const INSTANCE_GPU_MANUFACTURER: &str = "karpenter.k8s.aws/instance-gpu-manufacturer";
    /// GPUs.
    pub const INSTANCE_GPU_COUNT: &str = "karpenter.k8s.aws/instance-gpu-count";
    /// GPU memory, in MiB.
    pub const INSTANCE_GPU_MEMORY: &str = "karpenter.k8s.aws/instance-gpu-memory";
    /// The accelerator model (Inferentia, Trainium, ...).
    pub const INSTANCE_ACCELERATOR_NAME: &str = "karpenter.k8s.aws/instance-accelerator-name";
    /// The accelerator maker.
    pub const INSTANCE_ACCELERATOR_MANUFACTURER: &str =
        "karpenter.k8s.aws/instance-accelerator-manufacturer";
    /// Accelerators.
    pub const INSTANCE_ACCELERATOR_COUNT: &str = "karpenter.k8s.aws/instance-accelerator-count";
    /// The tenancy (`default` or `dedicated`).
    pub const INSTANCE_TENANCY: &str = "karpenter.k8s.aws/instance-tenancy";
    /// The capacity reservation a reserved node runs in.
    pub const CAPACITY_RESERVATION_ID: &str = "karpenter.k8s.aws/capacity-reservation-id";
    /// The kind of that reservation (`default` or `capacity-block`).
    pub const CAPACITY_RESERVATION_TYPE: &str = "karpenter.k8s.aws/capacity-reservation-type";
    /// Whether that reservation may be reclaimed.
    pub const CAPACITY_RESERVATION_INTERRUPTIBLE: &str =
        "karpenter.k8s.aws/capacity-reservation-interruptible";
    /// The placement group a node runs in.
    pub const PLACEMENT_GROUP_ID: &str = "karpenter.k8s.aws/placement-group-id";
    /// The partition of a partition placement group.
    pub const PLACEMENT_GROUP_PARTITION: &str = "karpenter.k8s.aws/placement-group-partition";
    /// The EC2NodeClass a node was launched from.
    pub const EC2NODECLASS: &str = "karpenter.k8s.aws/ec2nodeclass";
    /// The zone id (`use1-az1`), the same zone under every account.
    pub const ZONE_ID: &str = "topology.k8s.aws/zone-id";

    /// Every AWS label a NodePool requirement or a pod selector may name.
    pub const WELL_KNOWN: &[&str] = &[
        INSTANCE_CATEGORY,
        INSTANCE_GENERATION,
        INSTANCE_FAMILY,
        INSTANCE_SIZE,
        INSTANCE_CPU,
        INSTANCE_CPU_MANUFACTURER,
        INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ,
        INSTANCE_MEMORY,
        INSTANCE_EBS_BANDWIDTH,
        INSTANCE_NETWORK_BANDWIDTH,
        INSTANCE_HYPERVISOR,
        INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED,
        NITRO_SANDBOX,
        INSTANCE_LOCAL_NVME,
        INSTANCE_CAPABILITY_FLEX,
        INSTANCE_GPU_NAME,
        INSTANCE_GPU_MANUFACTURER,
        INSTANCE_GPU_COUNT,
        INSTANCE_GPU_MEMORY,
        INSTANCE_ACCELERATOR_NAME,
        INSTANCE_ACCELERATOR_MANUFACTURER,
        INSTANCE_ACCELERATOR_COUNT,
        INSTANCE_TENANCY,
        CAPACITY_RESERVATION_ID,
        CAPACITY_RESERVATION_TYPE,
        CAPACITY_RESERVATION_INTERRUPTIBLE,
        PLACEMENT_GROUP_ID,
        PLACEMENT_GROUP_PARTITION,
        EC2NODECLASS,
        ZONE_ID,
    ];
}

/// Core well-known labels: a pod may require one of these even when no NodePool mentions it.
pub const WELL_KNOWN: &[&str] = &[
    NODEPOOL,
    ZONE,
    REGION,
    INSTANCE_TYPE,
    ARCH,
    OS,
    CAPACITY_TYPE,
    WINDOWS_BUILD,
];

/// True for a core or AWS well-known label key.
pub fn is_well_known(key: &str) -> bool {
    WELL_KNOWN.contains(&key) || aws::WELL_KNOWN.contains(&key)
}

/// Maps deprecated beta label keys to their stable names; other keys are returned unchanged.
pub fn normalize_key(key: &str) -> &str {
    match key {
        "failure-domain.beta.kubernetes.io/zone" => ZONE,
        "failure-domain.beta.kubernetes.io/region" => REGION,
        "beta.kubernetes.io/arch" => ARCH,
        "beta.kubernetes.io/os" => OS,
        "beta.kubernetes.io/instance-type" => INSTANCE_TYPE,
        other => other,
    }
}

/// The domain of a label key: the part before `/`, or `""` when there is none.
pub(crate) fn domain(key: &str) -> &str {
    key.split_once('/').map(|(d, _)| d).unwrap_or("")
}

fn in_domain(domain: &str, restricted: &str) -> bool {
    domain == restricted || domain.ends_with(&format!(".{restricted}"))
}

/// Why a label key may not be set by a user in NodePool requirements or labels, or `None`.
///
/// `karpenter.sh` (and subdomains) is Karpenter's, except `capacity-type` and `nodepool`;
/// `karpenter.k8s.aws` is the AWS provider's, except its well-known labels;
/// `kubernetes.io/hostname` is set per node by the kubelet.
pub fn restriction(key: &str) -> Option<String> {
    let key = normalize_key(key);
    if key == HOSTNAME {
        return Some(format!("label {key:?} is restricted"));
    }
    let d = domain(key);
    if in_domain(d, "karpenter.sh") && key != CAPACITY_TYPE && key != NODEPOOL {
        return Some(format!("label domain {:?} is restricted", "karpenter.sh"));
    }
    if in_domain(d, "karpenter.k8s.aws") && !aws::WELL_KNOWN.contains(&key) {
        return Some(format!(
            "label domain {:?} is restricted",
            "karpenter.k8s.aws"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restricted_domains() {
        assert!(restriction("karpenter.sh/foo").is_some());
        assert!(restriction("sub.karpenter.sh/foo").is_some());
        assert!(restriction(CAPACITY_TYPE).is_none());
        assert!(restriction(NODEPOOL).is_none());
        assert!(restriction(HOSTNAME).is_some());
        assert!(restriction("karpenter.k8s.aws/instance-family").is_none());
        assert!(restriction("karpenter.k8s.aws/made-up").is_some());
        assert!(restriction("notkarpenter.sh/ok").is_none());
        assert!(restriction("example.com/team").is_none());
    }

    #[test]
    fn beta_keys_normalize() {
        assert_eq!(
            normalize_key("failure-domain.beta.kubernetes.io/zone"),
            ZONE
        );
        assert_eq!(normalize_key("example.com/x"), "example.com/x");
    }
}
