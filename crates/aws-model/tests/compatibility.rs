//! Launch settings of an EC2NodeClass that rule instance types out (nested virtualization,
//! connection tracking, network interfaces), and what `networkInterfaces` does to a type's
//! EFA count and pod density.

mod common;

use common::{build_info, p3_2xlarge};
use nodewright_aws_model::resources::EFA;
use nodewright_aws_model::{
    AmiFamily, InstanceTypeInfo, NetworkInterface, NodeClassInput, Settings, nodeclass_compatible,
};
use nodewright_core::resources::PODS;

/// An EFA-capable Nitro type with two network cards of 4 and 2 interfaces (p3_2xlarge's
/// facts otherwise).
fn efa_nitro() -> InstanceTypeInfo {
    InstanceTypeInfo {
        name: "p5.test".into(),
        hypervisor: "nitro".into(),
        efa_max_interfaces: 2,
        nested_virtualization: Some(false),
        ena_supported: Some(true),
        network_cards: vec![4, 2],
        ..p3_2xlarge()
    }
}

fn nic(card: u32, device: u32, efa_only: bool) -> NetworkInterface {
    NetworkInterface {
        network_card_index: card,
        device_index: device,
        efa_only,
    }
}

#[test]
fn nested_virtualization_needs_a_type_that_reports_it() {
    let mut nc = NodeClassInput::new(AmiFamily::AL2023);
    nc.nested_virtualization = true;
    let mut info = efa_nitro();
    assert!(!nodeclass_compatible(&info, &nc));
    info.nested_virtualization = Some(true);
    assert!(nodeclass_compatible(&info, &nc));
    info.nested_virtualization = None;
    assert!(nodeclass_compatible(&info, &nc), "unknown filters nothing");
    nc.nested_virtualization = false;
    info.nested_virtualization = Some(false);
    assert!(nodeclass_compatible(&info, &nc), "not asked for");
}

#[test]
fn connection_tracking_needs_nitro() {
    let mut nc = NodeClassInput::new(AmiFamily::AL2023);
    nc.connection_tracking = true;
    assert!(!nodeclass_compatible(&p3_2xlarge(), &nc), "p3 is xen");
    assert!(nodeclass_compatible(&efa_nitro(), &nc));
    nc.connection_tracking = false;
    assert!(nodeclass_compatible(&p3_2xlarge(), &nc));
}

#[test]
fn network_interfaces_must_exist_on_the_type() {
    let mut nc = NodeClassInput::new(AmiFamily::AL2023);
    nc.network_interfaces = vec![nic(0, 0, false), nic(1, 1, true)];
    let info = efa_nitro();
    assert!(nodeclass_compatible(&info, &nc));
    nc.network_interfaces = vec![nic(0, 0, false), nic(2, 0, true)];
    assert!(!nodeclass_compatible(&info, &nc), "no third card");
    nc.network_interfaces = vec![nic(0, 0, false), nic(1, 2, true)];
    assert!(
        !nodeclass_compatible(&info, &nc),
        "card 1 has devices 0 and 1"
    );
    nc.network_interfaces = vec![nic(0, 0, false), nic(1, 0, true)];
    let no_efa = InstanceTypeInfo {
        efa_max_interfaces: 0,
        ..efa_nitro()
    };
    assert!(!nodeclass_compatible(&no_efa, &nc), "efa-only needs EFA");
    let no_ena = InstanceTypeInfo {
        ena_supported: Some(false),
        ..efa_nitro()
    };
    assert!(!nodeclass_compatible(&no_ena, &nc));
}

#[test]
fn incompatible_types_keep_their_offerings_but_none_is_available() {
    let mut nc = NodeClassInput::new(AmiFamily::AL2023);
    nc.connection_tracking = true;
    let it = build_info(&p3_2xlarge(), &Settings::default(), &nc);
    assert!(!it.offerings.is_empty());
    assert!(it.offerings.iter().all(|o| !o.available));
}

#[test]
fn network_interfaces_set_the_efa_count_and_take_pod_slots_on_card_zero() {
    let settings = Settings::default();
    let plain = build_info(
        &efa_nitro(),
        &settings,
        &NodeClassInput::new(AmiFamily::AL2023),
    );
    assert_eq!(
        plain.capacity.get(EFA),
        2,
        "MaximumEfaInterfaces without the field"
    );
    // p3.2xlarge facts: 4 ENIs on card 0, 15 IPv4 each.
    assert_eq!(plain.capacity.get(PODS), 4 * 14 + 2);

    let mut nc = NodeClassInput::new(AmiFamily::AL2023);
    nc.network_interfaces = vec![nic(0, 0, false), nic(0, 1, true)];
    let one = build_info(&efa_nitro(), &settings, &nc);
    assert_eq!(one.capacity.get(EFA), 1, "one efa-only interface listed");
    assert_eq!(one.capacity.get(PODS), 3 * 14 + 2, "card 0 lost a slot");

    nc.network_interfaces = vec![nic(0, 0, false), nic(1, 0, true)];
    let other_card = build_info(&efa_nitro(), &settings, &nc);
    assert_eq!(other_card.capacity.get(EFA), 1);
    assert_eq!(
        other_card.capacity.get(PODS),
        4 * 14 + 2,
        "card 1 is not the CNI's"
    );

    nc.network_interfaces = vec![nic(0, 0, false)];
    let none = build_info(&efa_nitro(), &settings, &nc);
    assert_eq!(none.capacity.get(EFA), 0, "no efa-only interface, no EFA");
}
