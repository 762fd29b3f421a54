//! The embedded catalog: parses whole, zones and offerings per region, prices.

mod common;

use common::*;
use nodewright_aws_model::catalog::{Catalog, embedded};
use nodewright_aws_model::{NodeClassInput, Settings, SpotPrices, Zone};
use nodewright_core::labels;
use nodewright_core::model::CapacityType;
use nodewright_core::requirements::Operator;

#[test]
fn embedded_data_parses_fully() {
    let c = embedded().expect("embedded catalog parses");
    // One info per row of instance-types.csv (header excluded).
    assert_eq!(c.infos().len(), 1395);
    assert!(c.infos().windows(2).all(|w| w[0].name < w[1].name));
    assert!(c.regions().any(|r| r == "us-east-1"));
    assert!(c.on_demand_prices().get("us-east-1", "m5.large").is_some());
}

#[test]
fn a_catalog_in_one_region_keeps_its_offerings_alone() {
    let all = embedded().unwrap();
    assert!(all.regions().count() > 1);
    let one = all.clone().in_region("eu-west-1");
    assert_eq!(one.regions().collect::<Vec<_>>(), ["eu-west-1"]);
    assert_eq!(one.zones("eu-west-1"), all.zones("eu-west-1"));
    assert_eq!(
        one.offered_zones("eu-west-1", "m5.large"),
        all.offered_zones("eu-west-1", "m5.large")
    );
    assert!(one.zones("us-east-1").is_empty());
    assert_eq!(one.infos(), all.infos());
}

#[test]
fn us_east_1_zones_and_m5_large_offerings() {
    let c = catalog();
    let all: Vec<&str> = c.zones("us-east-1");
    assert_eq!(
        all,
        [
            "us-east-1a",
            "us-east-1b",
            "us-east-1c",
            "us-east-1d",
            "us-east-1e",
            "us-east-1f"
        ]
    );
    // m5.large is offered in every us-east-1 zone but e.
    assert_eq!(
        c.offered_zones("us-east-1", "m5.large"),
        [
            "us-east-1a",
            "us-east-1b",
            "us-east-1c",
            "us-east-1d",
            "us-east-1f"
        ]
    );
    let it = build("m5.large", &Settings::default(), &NodeClassInput::default());
    let zone = req(&it, labels::ZONE);
    assert_eq!(zone.operator, Operator::In);
    assert_eq!(zone.values.len(), 5);
    assert!(!zone.values.iter().any(|z| z == "us-east-1e"));
    // 5 zones × (on-demand, spot).
    assert_eq!(it.offerings.len(), 10);
    let od: Vec<_> = it
        .offerings
        .iter()
        .filter(|o| o.capacity_type == CapacityType::OnDemand)
        .collect();
    assert!(od.iter().all(|o| o.price == 0.096 && o.available));
    for o in it
        .offerings
        .iter()
        .filter(|o| o.capacity_type == CapacityType::Spot)
    {
        assert!(
            o.price > 0.096 * 0.25 - 1e-9 && o.price < 0.096 * 0.45 + 1e-9,
            "{o:?}"
        );
    }
}

#[test]
fn subnet_zones_narrow_zones_and_offerings() {
    let c = catalog();
    let subnets = [
        Zone {
            name: "us-east-1b".into(),
            id: Some("use1-az2".into()),
        },
        Zone::new("us-east-1e"),
    ];
    let its = c.instance_types(
        "us-east-1",
        &subnets,
        &Settings::default(),
        &NodeClassInput::default(),
        &SpotPrices::synthetic(),
    );
    let m5 = its.iter().find(|i| i.name == "m5.large").unwrap();
    assert_eq!(req(m5, labels::ZONE).values[..], ["us-east-1b"]);
    assert_eq!(
        label(m5, nodewright_core::labels::aws::ZONE_ID).as_deref(),
        Some("use1-az2")
    );
    assert!(m5.offerings.iter().all(|o| o.zone == "us-east-1b"));
    assert_eq!(m5.offerings.len(), 2);
}

#[test]
fn instance_types_skip_mac_and_keep_order() {
    let c = catalog();
    let its = c.instance_types(
        "us-east-1",
        &us_east_1_zones(),
        &Settings::default(),
        &NodeClassInput::default(),
        &SpotPrices::synthetic(),
    );
    assert!(its.len() > 1300);
    assert!(its.iter().all(|i| !i.name.starts_with("mac")));
    assert!(its.windows(2).all(|w| w[0].name < w[1].name));
    // Deterministic: the same inputs give the same list.
    let again = c.instance_types(
        "us-east-1",
        &us_east_1_zones(),
        &Settings::default(),
        &NodeClassInput::default(),
        &SpotPrices::synthetic(),
    );
    assert_eq!(its, again);
}

#[test]
fn no_on_demand_price_means_no_offering() {
    // r9g.large is offered in us-east-1 but has no on-demand price in the table; synthetic
    // spot prices derive from on-demand ones, so it has no offering at all.
    let c = catalog();
    assert!(!c.offered_zones("us-east-1", "r9g.large").is_empty());
    assert_eq!(c.on_demand_prices().get("us-east-1", "r9g.large"), None);
    let it = build(
        "r9g.large",
        &Settings::default(),
        &NodeClassInput::default(),
    );
    assert!(it.offerings.is_empty());
    // With observed spot prices it is sold as spot only.
    let spot = SpotPrices::observed([("r9g.large".to_string(), "us-east-1a".to_string(), 0.03)]);
    let its = c.instance_types(
        "us-east-1",
        &us_east_1_zones(),
        &Settings::default(),
        &NodeClassInput::default(),
        &spot,
    );
    let r9 = its.iter().find(|i| i.name == "r9g.large").unwrap();
    assert_eq!(r9.offerings.len(), 1);
    assert_eq!(
        (r9.offerings[0].capacity_type, r9.offerings[0].price),
        (CapacityType::Spot, 0.03)
    );
}

#[test]
fn on_demand_only_types_have_no_spot() {
    // hpc7g.4xlarge supports only the on-demand usage class.
    let it = build(
        "hpc7g.4xlarge",
        &Settings::default(),
        &NodeClassInput::default(),
    );
    assert_eq!(req(&it, labels::CAPACITY_TYPE).values[..], ["on-demand"]);
    assert!(
        it.offerings
            .iter()
            .all(|o| o.capacity_type == CapacityType::OnDemand)
    );
}

#[test]
fn synthetic_spot_is_flagged() {
    let s = SpotPrices::synthetic();
    assert!(s.is_synthetic());
    assert!(s.provenance().contains("synthetic"));
}

#[test]
fn bad_data_names_file_line_and_column() {
    let it_header = "instance_type,vcpu,memory_mib,architectures,hypervisor,bare_metal,current_generation,usage_classes,max_enis,ipv4_per_eni,network_gbps,gpu_count,gpu_name,gpu_manufacturer,gpu_memory_mib,local_nvme_gb,burstable,encryption_in_transit,ebs_baseline_mbps,processor";
    let x_header = "instance_type,default_card_max_enis,ebs_optimized_default,ebs_max_mbps,efa_max_interfaces,nitro_enclaves,sustained_clock_mhz,accelerator_name,accelerator_manufacturer,accelerator_count,neuron_name,neuron_count,neuron_cores_per_device";
    let row = "m5.large,2,8192,x86_64,nitro,0,0,on-demand|spot,3,10,0.75,0,,,0,0,0,0,650,Intel";
    let bad = "m5.large,2,lots,x86_64,nitro,0,0,on-demand|spot,3,10,0.75,0,,,0,0,0,0,650,Intel";
    let extras = format!("{x_header}\nm5.large,3,1,4750,0,0,3100,,,0,,0,0\n");
    let offerings = "region,zone,instance_type\nus-east-1,us-east-1a,m5.large\n";
    let prices = "region,instance_type,usd_per_hour\nus-east-1,m5.large,0.096\n";
    let ok =
        Catalog::from_csv(&format!("{it_header}\n{row}\n"), &extras, offerings, prices).unwrap();
    assert_eq!(ok.infos().len(), 1);
    let e = Catalog::from_csv(&format!("{it_header}\n{bad}\n"), &extras, offerings, prices)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "instance-types.csv:2: column \"memory_mib\": \"lots\" is not a valid number"
    );
    let unknown = "region,zone,instance_type\nus-east-1,us-east-1a,m9.huge\n";
    let e =
        Catalog::from_csv(&format!("{it_header}\n{row}\n"), &extras, unknown, prices).unwrap_err();
    assert_eq!((e.file.as_str(), e.line), ("offerings.csv", 2));
    let no_extras = format!("{x_header}\n");
    let e = Catalog::from_csv(
        &format!("{it_header}\n{row}\n"),
        &no_extras,
        offerings,
        prices,
    )
    .unwrap_err();
    assert!(
        e.reason.contains("no row in instance-type-extras.csv"),
        "{e}"
    );
}

#[test]
fn al2023_cannot_launch_a1() {
    use nodewright_aws_model::AmiFamily;
    let it = build(
        "a1.large",
        &Settings::default(),
        &NodeClassInput::new(AmiFamily::AL2023),
    );
    assert!(!it.offerings.is_empty());
    assert!(it.offerings.iter().all(|o| !o.available));
    assert!(it.cheapest_available().is_none());
    let it = build(
        "a1.large",
        &Settings::default(),
        &NodeClassInput::new(AmiFamily::AL2),
    );
    assert!(it.offerings.iter().all(|o| o.available));
}
