//! EC2NodeClass kubelet and block-device settings flowing into capacity and overhead.

mod common;

use common::*;
use nodewright_aws_model::{AmiFamily, BlockDevice, EvictionSignal, NodeClassInput, Settings};
use nodewright_core::resources::{CPU, EPHEMERAL_STORAGE, MEMORY, PODS};

fn nc(family: AmiFamily) -> NodeClassInput {
    NodeClassInput::new(family)
}

#[test]
fn max_pods_overrides_density_but_not_al2023_memory_overhead() {
    let mut c = nc(AmiFamily::AL2023);
    c.max_pods = Some(110);
    let it = build("m5.large", &Settings::default(), &c);
    assert_eq!(it.capacity.get(PODS), 110);
    // AL2023 sizes kube-reserved memory by ENI-limited pods with 0 reserved ENIs: 11 × 29 + 255.
    assert_eq!(it.overhead.kube_reserved.get(MEMORY), 574 * MI);
}

#[test]
fn bottlerocket_memory_overhead_follows_max_pods() {
    let mut c = nc(AmiFamily::Bottlerocket);
    c.max_pods = Some(110);
    let it = build("m5.large", &Settings::default(), &c);
    // 11 × 110 + 255 = 1465 MiB.
    assert_eq!(it.overhead.kube_reserved.get(MEMORY), 1465 * MI);
}

#[test]
fn pods_per_core_caps_pods_except_on_bottlerocket() {
    let mut c = nc(AmiFamily::AL2);
    c.pods_per_core = Some(4);
    // min(4 × 2 vCPU, 29) = 8.
    assert_eq!(
        build("m5.large", &Settings::default(), &c)
            .capacity
            .get(PODS),
        8
    );
    c.ami_family = AmiFamily::Bottlerocket;
    assert_eq!(
        build("m5.large", &Settings::default(), &c)
            .capacity
            .get(PODS),
        29
    );
    // A cap above the ENI limit changes nothing: min(20 × 2, 29) = 29.
    c.ami_family = AmiFamily::AL2;
    c.pods_per_core = Some(20);
    assert_eq!(
        build("m5.large", &Settings::default(), &c)
            .capacity
            .get(PODS),
        29
    );
}

#[test]
fn reserved_enis_reduce_pods_only() {
    let settings = Settings {
        reserved_enis: 1,
        ..Settings::default()
    };
    let it = build("m5.large", &settings, &nc(AmiFamily::AL2023));
    // (3 − 1) × 9 + 2 = 20 pods; kube-reserved memory still counts 29 (0 reserved ENIs).
    assert_eq!(it.capacity.get(PODS), 20);
    assert_eq!(it.overhead.kube_reserved.get(MEMORY), 574 * MI);
}

#[test]
fn windows_has_110_pods_50gi_and_private_ipv4() {
    let it = build(
        "m5.large",
        &Settings::default(),
        &nc(AmiFamily::Windows2019),
    );
    assert_eq!(it.capacity.get(PODS), 110);
    assert_eq!(it.capacity.get(EPHEMERAL_STORAGE), 50 * GI);
    assert_eq!(it.capacity.get("vpc.amazonaws.com/PrivateIPv4Address"), 9);
    // Windows sizes kube-reserved memory by its pods: 11 × 110 + 255 = 1465 MiB;
    // eviction ephemeral 10% of 50Gi = 5Gi.
    assert_eq!(it.overhead.kube_reserved.get(MEMORY), 1465 * MI);
    assert_eq!(
        it.overhead.eviction_threshold.get(EPHEMERAL_STORAGE),
        5 * GI
    );
}

#[test]
fn kube_and_system_reserved_and_eviction_overrides() {
    let mut c = nc(AmiFamily::AL2023);
    c.kube_reserved.insert(CPU.into(), 200);
    c.kube_reserved.insert(EPHEMERAL_STORAGE.into(), 0);
    c.system_reserved.insert(MEMORY.into(), 100 * MI);
    c.eviction_hard_memory = Some(EvictionSignal::Percent(5.0));
    c.eviction_hard_nodefs = Some(EvictionSignal::Percent(100.0));
    let it = build("m5.large", &Settings::default(), &c);
    assert_eq!(it.overhead.kube_reserved.get(CPU), 200);
    // Not overridden: stays computed.
    assert_eq!(it.overhead.kube_reserved.get(MEMORY), 574 * MI);
    assert_eq!(it.overhead.kube_reserved.get(EPHEMERAL_STORAGE), 0);
    assert_eq!(it.overhead.system_reserved.get(MEMORY), 100 * MI);
    // 5% of 7577 MiB = ceil(7945060352 / 100 × 5 = 397253017.6) = 397253018 bytes.
    assert_eq!(it.overhead.eviction_threshold.get(MEMORY), 397_253_018);
    // 100% disables the threshold.
    assert_eq!(it.overhead.eviction_threshold.get(EPHEMERAL_STORAGE), 0);
    let a = it.allocatable();
    assert_eq!(a.get(CPU), 1800);
    assert_eq!(a.get(MEMORY), 7577 * MI - 574 * MI - 100 * MI - 397_253_018);
    assert_eq!(a.get(EPHEMERAL_STORAGE), 20 * GI);

    c.eviction_hard_memory = Some(EvictionSignal::Bytes(500 * MI));
    let it = build("m5.large", &Settings::default(), &c);
    assert_eq!(it.overhead.eviction_threshold.get(MEMORY), 500 * MI);
}

#[test]
fn ephemeral_storage_chain() {
    let dev = |name: &str, gi: Option<i64>, root: bool| BlockDevice {
        device_name: name.into(),
        volume_size: gi.map(|g| g * GI),
        root_volume: root,
    };
    let eph = |c: &NodeClassInput, t: &str| {
        build(t, &Settings::default(), c)
            .capacity
            .get(EPHEMERAL_STORAGE)
    };
    let mut c = nc(AmiFamily::AL2023);
    // 1. RAID0 over NVMe instance store: m5d.large's 75 GB (decimal).
    c.instance_store_raid0 = true;
    assert_eq!(eph(&c, "m5d.large"), 75_000_000_000);
    // ... but not on a type without NVMe instance store.
    assert_eq!(eph(&c, "m5.large"), 20 * GI);
    c.instance_store_raid0 = false;
    // 2. The rootVolume mapping wins over the family's device.
    c.block_device_mappings = vec![
        dev("/dev/xvda", Some(50), false),
        dev("/dev/xvdz", Some(100), true),
    ];
    assert_eq!(eph(&c, "m5.large"), 100 * GI);
    // 4. The mapping on the family's ephemeral device.
    c.block_device_mappings = vec![
        dev("/dev/xvdc", Some(30), false),
        dev("/dev/xvda", Some(50), false),
    ];
    assert_eq!(eph(&c, "m5.large"), 50 * GI);
    // 3. Custom: the last mapping, or 20Gi when it has no size.
    c.ami_family = AmiFamily::Custom;
    assert_eq!(eph(&c, "m5.large"), 50 * GI);
    c.block_device_mappings = vec![
        dev("/dev/xvda", Some(50), false),
        dev("/dev/xvdb", None, false),
    ];
    assert_eq!(eph(&c, "m5.large"), 20 * GI);
    // 5. Bottlerocket default: /dev/xvdb 20Gi, ignoring a mapping on another device.
    c.ami_family = AmiFamily::Bottlerocket;
    c.block_device_mappings = vec![dev("/dev/xvda", Some(8), false)];
    assert_eq!(eph(&c, "m5.large"), 20 * GI);
    // 10% eviction follows the size: 100Gi root volume → 10Gi.
    c.block_device_mappings = vec![dev("/dev/xvda", Some(100), true)];
    let it = build("m5.large", &Settings::default(), &c);
    assert_eq!(
        it.overhead.eviction_threshold.get(EPHEMERAL_STORAGE),
        10 * GI
    );
}
