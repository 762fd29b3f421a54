//! Spot checks of capacity and allocatable against Karpenter's formulas, worked by hand.

mod common;

use common::*;
use nodewright_aws_model::{AmiFamily, NodeClassInput, Settings};
use nodewright_core::resources::{CPU, EPHEMERAL_STORAGE, MEMORY, PODS};

#[test]
fn m5_large_on_al2023() {
    let it = build(
        "m5.large",
        &Settings::default(),
        &NodeClassInput::new(AmiFamily::AL2023),
    );
    // cpu: 2 vCPU = 2000m.
    // memory: 8192 MiB − ceil(8192 × 0.075 = 614.4) = 8192 − 615 = 7577 MiB.
    // pods: ENI-limited, (3 ENIs − 0 reserved) × (10 IPv4 − 1) + 2 = 29.
    // ephemeral-storage: AL2023's default /dev/xvda, 20Gi.
    assert_eq!(it.capacity.get(CPU), 2000);
    assert_eq!(it.capacity.get(MEMORY), 7577 * MI);
    assert_eq!(it.capacity.get(PODS), 29);
    assert_eq!(it.capacity.get(EPHEMERAL_STORAGE), 20 * GI);
    // kube-reserved: cpu 6% of 1000m + 1% of 1000m = 60 + 10 = 70m;
    // memory 11 × 29 + 255 = 574 MiB; ephemeral 1Gi.
    assert_eq!(it.overhead.kube_reserved.get(CPU), 70);
    assert_eq!(it.overhead.kube_reserved.get(MEMORY), 574 * MI);
    assert_eq!(it.overhead.kube_reserved.get(EPHEMERAL_STORAGE), GI);
    // eviction: memory 100Mi, ephemeral 10% of 20Gi = 2Gi.
    assert_eq!(it.overhead.eviction_threshold.get(MEMORY), 100 * MI);
    assert_eq!(
        it.overhead.eviction_threshold.get(EPHEMERAL_STORAGE),
        2 * GI
    );
    assert!(it.overhead.system_reserved.is_empty());
    // allocatable: cpu 2000 − 70 = 1930m; memory 7577 − 574 − 100 = 6903 MiB;
    // ephemeral 20 − 1 − 2 = 17Gi; pods 29.
    let a = it.allocatable();
    assert_eq!(a.get(CPU), 1930);
    assert_eq!(a.get(MEMORY), 6903 * MI);
    assert_eq!(a.get(EPHEMERAL_STORAGE), 17 * GI);
    assert_eq!(a.get(PODS), 29);
}

#[test]
fn c6g_xlarge_arm64_loses_64_mib_first() {
    let it = build(
        "c6g.xlarge",
        &Settings::default(),
        &NodeClassInput::new(AmiFamily::AL2023),
    );
    // memory: arm64 first, so 8192 − 64 = 8128 MiB; then − ceil(8128 × 0.075 = 609.6) = 610
    // → 7518 MiB.
    assert_eq!(it.capacity.get(MEMORY), 7518 * MI);
    // pods: 4 ENIs × (15 − 1) + 2 = 58.
    assert_eq!(it.capacity.get(PODS), 58);
    // kube-reserved cpu: 60 + 10 + 0.5% of 2000m (= 10) = 80m; memory 11 × 58 + 255 = 893 MiB.
    assert_eq!(it.overhead.kube_reserved.get(CPU), 80);
    assert_eq!(it.overhead.kube_reserved.get(MEMORY), 893 * MI);
    // allocatable: cpu 4000 − 80 = 3920m; memory 7518 − 893 − 100 = 6525 MiB.
    let a = it.allocatable();
    assert_eq!(a.get(CPU), 3920);
    assert_eq!(a.get(MEMORY), 6525 * MI);
    assert_eq!(a.get(EPHEMERAL_STORAGE), 17 * GI);
    assert_eq!(a.get(PODS), 58);
}

#[test]
fn p3_2xlarge_with_a_gpu() {
    let it = build_info(
        &p3_2xlarge(),
        &Settings::default(),
        &NodeClassInput::new(AmiFamily::AL2),
    );
    // memory: 62464 MiB − ceil(62464 × 0.075 = 4684.8) = 62464 − 4685 = 57779 MiB.
    assert_eq!(it.capacity.get(MEMORY), 57779 * MI);
    // pods: 4 × (15 − 1) + 2 = 58; one NVIDIA GPU.
    assert_eq!(it.capacity.get(PODS), 58);
    assert_eq!(it.capacity.get("nvidia.com/gpu"), 1);
    // kube-reserved cpu: 60 + 10 + 10 + 0.25% of (8000 − 4000) = 10 → 90m;
    // memory 11 × 58 + 255 = 893 MiB.
    assert_eq!(it.overhead.kube_reserved.get(CPU), 90);
    assert_eq!(it.overhead.kube_reserved.get(MEMORY), 893 * MI);
    // allocatable: cpu 8000 − 90 = 7910m; memory 57779 − 893 − 100 = 56786 MiB.
    let a = it.allocatable();
    assert_eq!(a.get(CPU), 7910);
    assert_eq!(a.get(MEMORY), 56786 * MI);
    assert_eq!(a.get("nvidia.com/gpu"), 1);
    assert_eq!(
        label(&it, "karpenter.k8s.aws/instance-gpu-name").as_deref(),
        Some("v100")
    );
    assert_eq!(
        label(&it, "karpenter.k8s.aws/instance-gpu-memory").as_deref(),
        Some("16384")
    );
}

#[test]
fn eni_limited_pods_use_the_default_network_card() {
    // p4d.24xlarge has 60 ENIs over 4 cards; the VPC CNI uses card 0's 15:
    // 15 × (50 − 1) + 2 = 737, not 60 × 49 + 2.
    let it = build(
        "p4d.24xlarge",
        &Settings::default(),
        &NodeClassInput::default(),
    );
    assert_eq!(it.capacity.get(PODS), 737);
    assert_eq!(it.capacity.get("nvidia.com/gpu"), 8);
    assert_eq!(it.capacity.get("vpc.amazonaws.com/efa"), 4);
}

#[test]
fn vm_memory_overhead_setting_applies() {
    let settings = Settings {
        vm_memory_overhead_percent: 0.0,
        reserved_enis: 0,
    };
    let it = build("m5.large", &settings, &NodeClassInput::default());
    assert_eq!(it.capacity.get(MEMORY), 8192 * MI);
}

#[test]
fn neuron_devices_and_cores() {
    // inf1.xlarge: one Inferentia device with 4 NeuronCores.
    let it = build(
        "inf1.xlarge",
        &Settings::default(),
        &NodeClassInput::default(),
    );
    assert_eq!(it.capacity.get("aws.amazon.com/neuron"), 1);
    assert_eq!(it.capacity.get("aws.amazon.com/neuroncore"), 4);
    // trn1.32xlarge: 16 Trainium devices × 2 cores.
    let it = build(
        "trn1.32xlarge",
        &Settings::default(),
        &NodeClassInput::default(),
    );
    assert_eq!(it.capacity.get("aws.amazon.com/neuron"), 16);
    assert_eq!(it.capacity.get("aws.amazon.com/neuroncore"), 32);
}
