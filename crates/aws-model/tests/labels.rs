//! Well-known labels derived from the embedded facts.

mod common;

use common::*;
use nodewright_aws_model::{AmiFamily, NodeClassInput, Settings};
use nodewright_core::labels::{self, aws};
use nodewright_core::requirements::Operator;

fn al2023(name: &str) -> nodewright_core::model::InstanceType {
    build(
        name,
        &Settings::default(),
        &NodeClassInput::new(AmiFamily::AL2023),
    )
}

#[test]
fn m5_large_labels() {
    let it = al2023("m5.large");
    let want = [
        (labels::INSTANCE_TYPE, Some("m5.large")),
        (labels::ARCH, Some("amd64")),
        (labels::OS, Some("linux")),
        (labels::REGION, Some("us-east-1")),
        (labels::WINDOWS_BUILD, None),
        (aws::INSTANCE_CATEGORY, Some("m")),
        (aws::INSTANCE_GENERATION, Some("5")),
        (aws::INSTANCE_FAMILY, Some("m5")),
        (aws::INSTANCE_SIZE, Some("large")),
        (aws::INSTANCE_CPU, Some("2")),
        (aws::INSTANCE_CPU_MANUFACTURER, Some("intel")),
        (aws::INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ, Some("3100")),
        (aws::INSTANCE_MEMORY, Some("8192")),
        (aws::INSTANCE_HYPERVISOR, Some("nitro")),
        (aws::INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED, Some("false")),
        (aws::NITRO_SANDBOX, Some("false")),
        (aws::INSTANCE_EBS_BANDWIDTH, Some("4750")),
        (aws::INSTANCE_NETWORK_BANDWIDTH, Some("750")),
        (aws::INSTANCE_LOCAL_NVME, None),
        (aws::INSTANCE_CAPABILITY_FLEX, Some("false")),
        (aws::INSTANCE_GPU_NAME, None),
        (aws::INSTANCE_GPU_COUNT, None),
        (aws::INSTANCE_ACCELERATOR_NAME, None),
        (aws::ZONE_ID, None),
    ];
    for (key, value) in want {
        assert_eq!(label(&it, key).as_deref(), value, "{key}");
    }
    let ct = req(&it, labels::CAPACITY_TYPE);
    assert_eq!(
        (ct.operator, ct.values.to_vec()),
        (Operator::In, vec!["on-demand".into(), "spot".into()])
    );
    // Both tenancies are offered; the launch picks one.
    let tenancy = req(&it, aws::INSTANCE_TENANCY);
    assert_eq!(
        (tenancy.operator, tenancy.values.to_vec()),
        (Operator::In, vec!["default".into(), "dedicated".into()])
    );
}

#[test]
fn gpu_labels_when_one_gpu_kind() {
    let it = al2023("p3dn.24xlarge");
    assert_eq!(label(&it, aws::INSTANCE_GPU_NAME).as_deref(), Some("v100"));
    assert_eq!(
        label(&it, aws::INSTANCE_GPU_MANUFACTURER).as_deref(),
        Some("nvidia")
    );
    assert_eq!(label(&it, aws::INSTANCE_GPU_COUNT).as_deref(), Some("8"));
    assert_eq!(
        label(&it, aws::INSTANCE_GPU_MEMORY).as_deref(),
        Some("32768")
    );
    assert_eq!(
        label(&it, aws::INSTANCE_LOCAL_NVME).as_deref(),
        Some("1800")
    );
    let g = al2023("g6.xlarge");
    assert_eq!(label(&g, aws::INSTANCE_GPU_NAME).as_deref(), Some("l4"));
    assert_eq!(
        label(&g, aws::INSTANCE_CPU_MANUFACTURER).as_deref(),
        Some("amd")
    );
}

#[test]
fn accelerator_labels_prefer_neuron_devices() {
    let inf = al2023("inf1.xlarge");
    assert_eq!(
        label(&inf, aws::INSTANCE_ACCELERATOR_NAME).as_deref(),
        Some("inferentia")
    );
    assert_eq!(
        label(&inf, aws::INSTANCE_ACCELERATOR_MANUFACTURER).as_deref(),
        Some("aws")
    );
    assert_eq!(
        label(&inf, aws::INSTANCE_ACCELERATOR_COUNT).as_deref(),
        Some("1")
    );
    let trn = al2023("trn1.2xlarge");
    assert_eq!(
        label(&trn, aws::INSTANCE_ACCELERATOR_NAME).as_deref(),
        Some("trainium")
    );
    // dl2q has inference accelerators and no Neuron devices.
    let dl = al2023("dl2q.24xlarge");
    assert_eq!(
        label(&dl, aws::INSTANCE_ACCELERATOR_NAME).as_deref(),
        Some("qualcomm-ai100")
    );
    assert_eq!(
        label(&dl, aws::INSTANCE_ACCELERATOR_MANUFACTURER).as_deref(),
        Some("qualcomm")
    );
    assert_eq!(
        label(&dl, aws::INSTANCE_ACCELERATOR_COUNT).as_deref(),
        Some("8")
    );
}

#[test]
fn flex_metal_nvme_and_graviton() {
    let flex = al2023("m7i-flex.large");
    assert_eq!(
        label(&flex, aws::INSTANCE_CAPABILITY_FLEX).as_deref(),
        Some("true")
    );
    assert_eq!(
        label(&flex, aws::INSTANCE_FAMILY).as_deref(),
        Some("m7i-flex")
    );
    assert_eq!(label(&flex, aws::INSTANCE_GENERATION).as_deref(), Some("7"));
    let metal = al2023("c5.metal");
    // Bare metal has no hypervisor: the label exists with an empty value, as upstream.
    assert_eq!(label(&metal, aws::INSTANCE_HYPERVISOR).as_deref(), Some(""));
    assert_eq!(
        label(&al2023("m5d.large"), aws::INSTANCE_LOCAL_NVME).as_deref(),
        Some("75")
    );
    let g = al2023("c6g.xlarge");
    assert_eq!(label(&g, labels::ARCH).as_deref(), Some("arm64"));
    assert_eq!(
        label(&g, aws::INSTANCE_CPU_MANUFACTURER).as_deref(),
        Some("aws")
    );
    assert_eq!(label(&g, aws::INSTANCE_GENERATION).as_deref(), Some("6"));
    assert_eq!(label(&g, aws::NITRO_SANDBOX).as_deref(), Some("true"));
    // m3.medium is not EBS-optimized by default: no EBS bandwidth label.
    assert_eq!(
        label(&al2023("m3.medium"), aws::INSTANCE_EBS_BANDWIDTH),
        None
    );
}

#[test]
fn every_aws_requirement_key_is_well_known() {
    let it = al2023("m5.large");
    for r in &it.requirements {
        assert!(
            labels::is_well_known(&r.key),
            "{} is not a well-known label",
            r.key
        );
    }
}

#[test]
fn windows_families_label_os_and_build_on_amd64_only() {
    let nc = NodeClassInput::new(AmiFamily::Windows2022);
    let it = build("m5.large", &Settings::default(), &nc);
    assert_eq!(label(&it, labels::OS).as_deref(), Some("windows"));
    assert_eq!(
        label(&it, labels::WINDOWS_BUILD).as_deref(),
        Some("10.0.20348")
    );
    let arm = build("c6g.xlarge", &Settings::default(), &nc);
    let os = req(&arm, labels::OS);
    assert_eq!((os.operator, os.values.len()), (Operator::In, 0));
}
