//! The parts of an EC2NodeClass that change an instance type's labels, capacity or overhead:
//! the AMI family, the kubelet settings and the block devices. Values arrive already parsed
//! (quantities as integers), so nothing here reads strings.

use std::collections::BTreeMap;

const GI: i64 = 1 << 30;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AmiFamily {
    AL2,
    AL2023,
    Bottlerocket,
    Custom,
    Windows2019,
    Windows2022,
    Windows2025,
}

impl AmiFamily {
    /// The family named by an EC2NodeClass's `amiFamily` (or an alias's family), as spelled in
    /// the API.
    pub fn from_name(name: &str) -> Option<AmiFamily> {
        Some(match name {
            "AL2" => AmiFamily::AL2,
            "AL2023" => AmiFamily::AL2023,
            "Bottlerocket" => AmiFamily::Bottlerocket,
            "Custom" => AmiFamily::Custom,
            "Windows2019" => AmiFamily::Windows2019,
            "Windows2022" => AmiFamily::Windows2022,
            "Windows2025" => AmiFamily::Windows2025,
            _ => return None,
        })
    }

    pub fn is_windows(self) -> bool {
        matches!(
            self,
            AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025
        )
    }

    /// `node.kubernetes.io/windows-build` for Windows families.
    pub fn windows_build(self) -> Option<&'static str> {
        match self {
            AmiFamily::Windows2019 => Some("10.0.17763"),
            AmiFamily::Windows2022 => Some("10.0.20348"),
            AmiFamily::Windows2025 => Some("10.0.26100"),
            _ => None,
        }
    }

    /// Kube-reserved memory counts ENI-limited pods (with no reserved ENIs), not `pods`.
    pub fn uses_eni_limited_memory_overhead(self) -> bool {
        matches!(self, AmiFamily::AL2 | AmiFamily::AL2023 | AmiFamily::Custom)
    }

    /// `podsPerCore` is honoured (Bottlerocket ignores it).
    pub fn pods_per_core_enabled(self) -> bool {
        self != AmiFamily::Bottlerocket
    }

    /// Without `maxPods`, pod density is ENI-limited (Windows uses 110).
    pub fn eni_limited_pod_density(self) -> bool {
        !self.is_windows()
    }

    /// The device whose size is the node's ephemeral storage.
    pub fn ephemeral_device(self) -> Option<&'static str> {
        match self {
            AmiFamily::AL2 | AmiFamily::AL2023 => Some("/dev/xvda"),
            AmiFamily::Bottlerocket => Some("/dev/xvdb"),
            AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025 => {
                Some("/dev/sda1")
            }
            AmiFamily::Custom => None,
        }
    }

    /// Size of the family's default ephemeral block device, bytes.
    pub fn default_ephemeral_bytes(self) -> Option<i64> {
        match self {
            AmiFamily::AL2 | AmiFamily::AL2023 | AmiFamily::Bottlerocket => Some(20 * GI),
            AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025 => {
                Some(50 * GI)
            }
            AmiFamily::Custom => None,
        }
    }
}

/// One `blockDeviceMappings` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockDevice {
    pub device_name: String,
    /// `ebs.volumeSize` in bytes, when set.
    pub volume_size: Option<i64>,
    pub root_volume: bool,
}

/// One `evictionHard` threshold value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum EvictionSignal {
    /// An absolute quantity in bytes (`500Mi`).
    Bytes(i64),
    /// A percentage of capacity (`10%` is `10.0`); `100%` disables the threshold.
    Percent(f64),
}

/// What the instance-type formulas read from an EC2NodeClass.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeClassInput {
    pub ami_family: AmiFamily,
    /// `kubelet.maxPods`.
    pub max_pods: Option<u32>,
    /// `kubelet.podsPerCore`.
    pub pods_per_core: Option<u32>,
    /// `kubelet.kubeReserved`, resource name → amount in canonical units (millicores, bytes).
    /// A key present here replaces the computed default, even with 0.
    pub kube_reserved: BTreeMap<String, i64>,
    /// `kubelet.systemReserved`, same units.
    pub system_reserved: BTreeMap<String, i64>,
    /// `kubelet.evictionHard["memory.available"]`.
    pub eviction_hard_memory: Option<EvictionSignal>,
    /// `kubelet.evictionHard["nodefs.available"]`.
    pub eviction_hard_nodefs: Option<EvictionSignal>,
    pub block_device_mappings: Vec<BlockDevice>,
    /// `instanceStorePolicy: RAID0`.
    pub instance_store_raid0: bool,
    /// `cpuOptions.nestedVirtualization: enabled`: only types that support it.
    pub nested_virtualization: bool,
    /// `connectionTracking` is set: only Nitro types.
    pub connection_tracking: bool,
    /// `networkInterfaces`; empty when unset.
    pub network_interfaces: Vec<NetworkInterface>,
}

/// One `networkInterfaces` entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetworkInterface {
    pub network_card_index: u32,
    pub device_index: u32,
    /// `interfaceType: efa-only` (else `interface`).
    pub efa_only: bool,
}

impl NodeClassInput {
    /// The number of `efa-only` interfaces, on any card (`None` without `networkInterfaces`).
    pub fn efa_only_interfaces(&self) -> Option<u32> {
        (!self.network_interfaces.is_empty()).then(|| {
            self.network_interfaces
                .iter()
                .filter(|n| n.efa_only)
                .count() as u32
        })
    }

    /// `efa-only` interfaces on the default network card: they take ENI slots the VPC CNI
    /// cannot use for pods.
    pub fn efa_only_on_card_zero(&self) -> u32 {
        self.network_interfaces
            .iter()
            .filter(|n| n.efa_only && n.network_card_index == 0)
            .count() as u32
    }
}

impl NodeClassInput {
    /// A NodeClass of `family` with every optional setting unset.
    pub fn new(ami_family: AmiFamily) -> Self {
        NodeClassInput {
            ami_family,
            max_pods: None,
            pods_per_core: None,
            kube_reserved: BTreeMap::new(),
            system_reserved: BTreeMap::new(),
            eviction_hard_memory: None,
            eviction_hard_nodefs: None,
            block_device_mappings: Vec::new(),
            instance_store_raid0: false,
            nested_virtualization: false,
            connection_tracking: false,
            network_interfaces: Vec::new(),
        }
    }
}

impl Default for NodeClassInput {
    fn default() -> Self {
        NodeClassInput::new(AmiFamily::AL2023)
    }
}
