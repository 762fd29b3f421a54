//! Shared helpers for the integration tests.
#![allow(dead_code)]

use nodewright_aws_model::catalog::{self, Catalog};
use nodewright_aws_model::{
    Ebs, Gpu, InstanceTypeInfo, NodeClassInput, OnDemandPrices, PriceBook, Settings, SpotPrices,
    Zone, build_instance_type,
};
use nodewright_core::model::InstanceType;
use nodewright_core::requirements::{Operator, Requirement};

pub const MI: i64 = 1 << 20;
pub const GI: i64 = 1 << 30;

/// The embedded catalog, parsed once per test binary.
pub fn catalog() -> &'static Catalog {
    static CATALOG: std::sync::OnceLock<Catalog> = std::sync::OnceLock::new();
    CATALOG.get_or_init(|| catalog::embedded().expect("embedded catalog parses"))
}

pub fn us_east_1_zones() -> Vec<Zone> {
    ["a", "b", "c", "d", "e", "f"]
        .iter()
        .map(|s| Zone::new(&format!("us-east-1{s}")))
        .collect()
}

/// Builds `name` from the embedded catalog in us-east-1 with every zone as a subnet zone.
pub fn build(name: &str, settings: &Settings, nc: &NodeClassInput) -> InstanceType {
    let c = catalog();
    let info = c.info(name).unwrap_or_else(|| panic!("{name} in catalog"));
    let zones: Vec<Zone> = c
        .offered_zones("us-east-1", name)
        .iter()
        .map(|z| Zone::new(z))
        .collect();
    let spot = SpotPrices::synthetic();
    let prices = PriceBook {
        on_demand: c.on_demand_prices(),
        spot: &spot,
    };
    build_instance_type(info, settings, nc, "us-east-1", &zones, prices).unwrap()
}

/// p3.2xlarge is not in the embedded data (moto lists only p3dn); these are its published
/// DescribeInstanceTypes facts.
pub fn p3_2xlarge() -> InstanceTypeInfo {
    InstanceTypeInfo {
        name: "p3.2xlarge".into(),
        vcpus: 8,
        memory_mib: 62464,
        architectures: vec!["x86_64".into()],
        hypervisor: "xen".into(),
        bare_metal: false,
        current_generation: true,
        usage_classes: vec!["on-demand".into(), "spot".into()],
        max_network_interfaces: 4,
        default_card_max_enis: 4,
        ipv4_per_eni: 15,
        network_baseline_gbps: 2.5,
        efa_max_interfaces: 0,
        encryption_in_transit: false,
        gpus: vec![Gpu {
            name: "V100".into(),
            manufacturer: "NVIDIA".into(),
            count: 1,
            memory_mib: 16384,
        }],
        inference_accelerators: vec![],
        neuron_devices: vec![],
        local_nvme_gb: None,
        burstable: false,
        ebs: Ebs {
            optimized_by_default: true,
            baseline_mbps: 1750,
            max_mbps: 1750,
        },
        processor_manufacturer: Some("Intel".into()),
        sustained_clock_mhz: Some(2300),
        nitro_enclaves: false,
        nested_virtualization: None,
        ena_supported: None,
        network_cards: vec![],
    }
}

pub fn build_info(
    info: &InstanceTypeInfo,
    settings: &Settings,
    nc: &NodeClassInput,
) -> InstanceType {
    let mut od = OnDemandPrices::new();
    od.insert("us-east-1", &info.name, 3.06);
    let spot = SpotPrices::synthetic();
    let prices = PriceBook {
        on_demand: &od,
        spot: &spot,
    };
    build_instance_type(
        info,
        settings,
        nc,
        "us-east-1",
        &[Zone::new("us-east-1a")],
        prices,
    )
    .unwrap()
}

pub fn req<'a>(it: &'a InstanceType, key: &str) -> &'a Requirement {
    it.requirements
        .iter()
        .find(|r| r.key == key)
        .unwrap_or_else(|| panic!("{} has no requirement on {key}", it.name))
}

/// The single `In` value of `key`, or `None` for `DoesNotExist`.
pub fn label(it: &InstanceType, key: &str) -> Option<String> {
    let r = req(it, key);
    match r.operator {
        Operator::DoesNotExist => None,
        Operator::In if r.values.len() == 1 => Some(r.values[0].clone()),
        _ => panic!("{}: {key} is not single-valued: {r}", it.name),
    }
}
