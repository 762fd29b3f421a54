//! Capacity and kubelet overhead of an instance type: Karpenter's AWS formulas.
//!
//! Floating-point steps are written in the same order as upstream (`bytes × pct / 1024 / 1024`,
//! `storage / 100 × 10`) so that rounding, and therefore every byte, comes out the same.

use std::collections::BTreeMap;

use nodewright_core::model::Overhead;
use nodewright_core::resources::{CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Resources};

use crate::info::InstanceTypeInfo;
use crate::nodeclass::{AmiFamily, EvictionSignal, NodeClassInput};
use crate::settings::Settings;

pub const MI: i64 = 1 << 20;
pub const GI: i64 = 1 << 30;

pub const NVIDIA_GPU: &str = "nvidia.com/gpu";
pub const AMD_GPU: &str = "amd.com/gpu";
pub const HABANA_GAUDI: &str = "habana.ai/gaudi";
pub const AWS_NEURON: &str = "aws.amazon.com/neuron";
pub const AWS_NEURON_CORE: &str = "aws.amazon.com/neuroncore";
pub const EFA: &str = "vpc.amazonaws.com/efa";
pub const PRIVATE_IPV4_ADDRESS: &str = "vpc.amazonaws.com/PrivateIPv4Address";

/// Pods used when the family's pod density is not ENI-limited and `maxPods` is unset.
pub const DEFAULT_MAX_PODS: i64 = 110;
/// Ephemeral storage when nothing else says how big the disk is.
pub const DEFAULT_EPHEMERAL_BYTES: i64 = 20 * GI;

/// Memory the kubelet sees, bytes: MiB, less 64 MiB when the first architecture is arm64
/// (Graviton's CMA reservation), less `ceil(MiB × vm_memory_overhead_percent)` MiB.
pub fn memory_bytes(info: &InstanceTypeInfo, settings: &Settings) -> i64 {
    let mut mib = info.memory_mib as i64;
    if info.architectures.first().map(String::as_str) == Some("arm64") {
        mib -= 64;
    }
    let bytes = mib * MI;
    let overhead_mib =
        (bytes as f64 * settings.vm_memory_overhead_percent / 1024.0 / 1024.0).ceil() as i64;
    bytes - overhead_mib * MI
}

/// `(ENIs − reserved) × (IPv4 per ENI − 1) + 2`, with ENIs of the default network card;
/// 0 when no ENI is left.
pub fn eni_limited_pods(info: &InstanceTypeInfo, reserved_enis: u32) -> i64 {
    let usable = info.default_card_max_enis.saturating_sub(reserved_enis) as i64;
    if usable == 0 {
        return 0;
    }
    usable * (info.ipv4_per_eni as i64 - 1) + 2
}

/// The `pods` capacity: `maxPods`, else ENI-limited (or 110 for Windows), then capped at
/// `podsPerCore × vCPUs` where the family honours it.
pub fn pods(info: &InstanceTypeInfo, settings: &Settings, nc: &NodeClassInput) -> i64 {
    let family = nc.ami_family;
    let mut count = match nc.max_pods {
        Some(m) => m as i64,
        // efa-only interfaces on the default card take ENI slots no pod address comes from.
        None if family.eni_limited_pod_density() => {
            eni_limited_pods(info, settings.reserved_enis + nc.efa_only_on_card_zero())
        }
        None => DEFAULT_MAX_PODS,
    };
    if let Some(ppc) = nc
        .pods_per_core
        .filter(|&p| p > 0 && family.pods_per_core_enabled())
    {
        count = count.min(ppc as i64 * info.vcpus as i64);
    }
    count
}

/// The node's ephemeral storage, bytes; the first of these that applies:
/// RAID0 over NVMe instance store (its size in GB), the `rootVolume` mapping, (Custom) the last
/// mapping, the mapping on the family's ephemeral device, the family default, 20Gi.
pub fn ephemeral_storage_bytes(info: &InstanceTypeInfo, nc: &NodeClassInput) -> i64 {
    if let Some(gb) = info
        .local_nvme_gb
        .filter(|&g| g > 0 && nc.instance_store_raid0)
    {
        return gb as i64 * 1_000_000_000;
    }
    let bdms = &nc.block_device_mappings;
    if !bdms.is_empty() {
        if let Some(size) = bdms
            .iter()
            .find(|b| b.root_volume)
            .and_then(|b| b.volume_size)
        {
            return size;
        }
        if nc.ami_family == AmiFamily::Custom {
            return bdms
                .last()
                .and_then(|b| b.volume_size)
                .unwrap_or(DEFAULT_EPHEMERAL_BYTES);
        }
        let device = nc.ami_family.ephemeral_device();
        let on_device = bdms.iter().find(|b| Some(b.device_name.as_str()) == device);
        if let Some(size) = on_device.and_then(|b| b.volume_size) {
            return size;
        }
    }
    nc.ami_family
        .default_ephemeral_bytes()
        .unwrap_or(DEFAULT_EPHEMERAL_BYTES)
}

/// Everything the node reports as capacity.
pub fn capacity(info: &InstanceTypeInfo, settings: &Settings, nc: &NodeClassInput) -> Resources {
    let mut r = Resources::new()
        .with(CPU, info.vcpus as i64 * 1000)
        .with(MEMORY, memory_bytes(info, settings))
        .with(EPHEMERAL_STORAGE, ephemeral_storage_bytes(info, nc))
        .with(PODS, pods(info, settings, nc));
    for gpu in &info.gpus {
        let name = match gpu.manufacturer.as_str() {
            "NVIDIA" => NVIDIA_GPU,
            "AMD" => AMD_GPU,
            "Habana" => HABANA_GAUDI,
            _ => continue,
        };
        r.set(name, r.get(name) + gpu.count as i64);
    }
    let devices: i64 = info.neuron_devices.iter().map(|d| d.count as i64).sum();
    let cores: i64 = info
        .neuron_devices
        .iter()
        .map(|d| d.count as i64 * d.cores_per_device as i64)
        .sum();
    r.set(AWS_NEURON, devices);
    r.set(AWS_NEURON_CORE, cores);
    // With `networkInterfaces`, the node has exactly the efa-only interfaces it lists.
    let efa = nc
        .efa_only_interfaces()
        .filter(|_| info.efa_max_interfaces > 0)
        .unwrap_or(info.efa_max_interfaces);
    r.set(EFA, efa as i64);
    if nc.ami_family.is_windows() {
        r.set(PRIVATE_IPV4_ADDRESS, info.ipv4_per_eni as i64 - 1);
    }
    r
}

/// Kube-reserved CPU in millicores: 6% of the first core, 1% of the second, 0.5% of the
/// third and fourth, 0.25% of every core above four (each band truncated to whole millicores).
pub fn kube_reserved_cpu_millis(cpu_millis: i64) -> i64 {
    const BANDS: [(i64, i64, f64); 4] = [
        (0, 1000, 0.06),
        (1000, 2000, 0.01),
        (2000, 4000, 0.005),
        (4000, 1 << 31, 0.0025),
    ];
    let mut total = 0;
    for (start, end, pct) in BANDS {
        if cpu_millis >= start {
            let span = if cpu_millis < end {
                cpu_millis - start
            } else {
                end - start
            };
            total += (span as f64 * pct) as i64;
        }
    }
    total
}

fn assign(base: &mut Resources, overrides: &BTreeMap<String, i64>) {
    for (k, v) in overrides {
        base.set(k, *v);
    }
}

fn eviction_amount(capacity: i64, signal: EvictionSignal) -> i64 {
    match signal {
        EvictionSignal::Bytes(b) => b,
        EvictionSignal::Percent(p) => {
            let p = if p == 100.0 { 0.0 } else { p };
            (capacity as f64 / 100.0 * p).ceil() as i64
        }
    }
}

/// Kube-reserved, system-reserved and the hard-eviction threshold for an instance type whose
/// capacity is `capacity` (from [`capacity`]).
pub fn overhead(info: &InstanceTypeInfo, nc: &NodeClassInput, capacity: &Resources) -> Overhead {
    // AL2, AL2023 and Custom size kube-reserved memory by the ENI-limited density with no
    // reserved ENIs, whatever maxPods says; the others by the pods capacity.
    let pods_for_memory = if nc.ami_family.uses_eni_limited_memory_overhead() {
        eni_limited_pods(info, 0)
    } else {
        capacity.get(PODS)
    };
    let mut kube_reserved = Resources::new()
        .with(CPU, kube_reserved_cpu_millis(capacity.get(CPU)))
        .with(MEMORY, (11 * pods_for_memory + 255) * MI)
        .with(EPHEMERAL_STORAGE, GI);
    assign(&mut kube_reserved, &nc.kube_reserved);

    let mut system_reserved = Resources::new();
    assign(&mut system_reserved, &nc.system_reserved);

    let storage = capacity.get(EPHEMERAL_STORAGE);
    let mut eviction_threshold = Resources::new().with(MEMORY, 100 * MI).with(
        EPHEMERAL_STORAGE,
        (storage as f64 / 100.0 * 10.0).ceil() as i64,
    );
    if let Some(s) = nc.eviction_hard_memory {
        eviction_threshold.set(MEMORY, eviction_amount(capacity.get(MEMORY), s));
    }
    if let Some(s) = nc.eviction_hard_nodefs {
        eviction_threshold.set(EPHEMERAL_STORAGE, eviction_amount(storage, s));
    }
    Overhead {
        kube_reserved,
        system_reserved,
        eviction_threshold,
    }
}
