use super::*;

fn spec() -> TemplateSpec {
    TemplateSpec {
        image_id: "ami-1".into(),
        user_data: "dXNlcg==".into(),
        instance_profile: Some("p".into()),
        security_group_ids: vec!["sg-1".into()],
        metadata: metadata(None),
        block_devices: block_devices(AmiFamily::AL2023, None).unwrap(),
        detailed_monitoring: false,
        primary_interface: None,
        efa_interfaces: 0,
        class_interfaces: Vec::new(),
        nested_virtualization: None,
        connection_tracking: None,
        capacity_reservation: None,
        placement: None,
        tags: BTreeMap::new(),
    }
}

#[test]
fn placement_goes_into_the_template_and_its_name() {
    assert!(request_data(&spec()).placement().is_none());
    let mut s = spec();
    s.placement = Some(LaunchPlacement {
        tenancy: "dedicated",
        group_id: Some("pg-0abc".into()),
        partition: Some(2),
    });
    let d = request_data(&s);
    let p = d.placement().unwrap();
    assert_eq!(
        (p.tenancy(), p.group_id(), p.partition_number()),
        (Some(&Tenancy::Dedicated), Some("pg-0abc"), Some(2))
    );
    assert_ne!(s.name(), spec().name());
    let mut other_partition = s.clone();
    other_partition.placement.as_mut().unwrap().partition = Some(3);
    assert_ne!(s.name(), other_partition.name());
}

#[test]
fn cpu_options_and_connection_tracking() {
    let plain = request_data(&spec());
    assert!(plain.cpu_options().is_none());
    let mut s = spec();
    s.nested_virtualization = Some("enabled".into());
    s.primary_interface = Some(PrimaryInterface {
        associate_public_ip_address: None,
        ipv4_prefix_count: None,
        ipv6_address_count: None,
    });
    s.connection_tracking = Some(ConnectionTrackingSpec {
        tcp_established_timeout: Some(120),
        udp_stream_timeout: None,
        udp_timeout: Some(30),
    });
    let d = request_data(&s);
    assert_eq!(
        d.cpu_options()
            .and_then(|c| c.nested_virtualization())
            .map(|n| n.as_str()),
        Some("enabled")
    );
    let ct = d.network_interfaces()[0]
        .connection_tracking_specification()
        .unwrap();
    assert_eq!(
        (
            ct.tcp_established_timeout(),
            ct.udp_stream_timeout(),
            ct.udp_timeout()
        ),
        (Some(120), None, Some(30))
    );
}

#[test]
fn reservation_targets_in_the_template() {
    assert!(
        request_data(&spec())
            .capacity_reservation_specification()
            .is_none()
    );
    let mut s = spec();
    s.capacity_reservation = Some(ReservationTarget::None);
    let d = request_data(&s);
    let crs = d.capacity_reservation_specification().unwrap();
    assert_eq!(
        crs.capacity_reservation_preference(),
        Some(&CapacityReservationPreference::None)
    );
    assert!(crs.capacity_reservation_target().is_none());
    s.capacity_reservation = Some(ReservationTarget::Only {
        id: "cr-1".into(),
        reservation_type: ReservationType::CapacityBlock,
        interruptible: false,
    });
    let d = request_data(&s);
    let crs = d.capacity_reservation_specification().unwrap();
    assert_eq!(
        crs.capacity_reservation_preference(),
        Some(&CapacityReservationPreference::CapacityReservationsOnly)
    );
    assert_eq!(
        crs.capacity_reservation_target()
            .and_then(|t| t.capacity_reservation_id()),
        Some("cr-1")
    );
    assert_eq!(
        d.instance_market_options().and_then(|m| m.market_type()),
        Some(&MarketType::CapacityBlock)
    );
    assert_ne!(s.name(), spec().name());
    s.capacity_reservation = Some(ReservationTarget::Only {
        id: "cr-2".into(),
        reservation_type: ReservationType::Default,
        interruptible: true,
    });
    let d = request_data(&s);
    assert_eq!(
        d.instance_market_options().and_then(|m| m.market_type()),
        Some(&MarketType::InterruptibleCapacityReservation)
    );
    s.capacity_reservation = Some(ReservationTarget::Only {
        id: "cr-2".into(),
        reservation_type: ReservationType::Default,
        interruptible: false,
    });
    assert!(request_data(&s).instance_market_options().is_none());
}

#[test]
fn efa_interfaces_one_per_card_replace_the_template_groups() {
    let mut s = spec();
    s.efa_interfaces = 2;
    s.primary_interface = Some(PrimaryInterface {
        associate_public_ip_address: Some(false),
        ipv4_prefix_count: Some(3),
        ipv6_address_count: None,
    });
    let data = request_data(&s);
    assert!(
        data.security_group_ids().is_empty(),
        "groups move into the interfaces"
    );
    let nics = data.network_interfaces();
    let got: Vec<_> = nics
        .iter()
        .map(|n| {
            (
                n.network_card_index(),
                n.device_index(),
                n.interface_type(),
                n.associate_public_ip_address(),
                n.groups().to_vec(),
                n.ipv4_prefix_count(),
            )
        })
        .collect();
    let groups = vec!["sg-1".to_string()];
    assert_eq!(
        got,
        [
            (
                Some(0),
                Some(0),
                Some("efa"),
                Some(false),
                groups.clone(),
                None
            ),
            (Some(1), Some(1), Some("efa"), Some(false), groups, None),
        ]
    );
    assert_ne!(s.name(), spec().name());
    assert!(request_data(&spec()).network_interfaces().is_empty());
}

#[test]
fn class_interfaces_are_the_templates_interfaces() {
    let mut s = spec();
    s.efa_interfaces = 4;
    s.primary_interface = Some(PrimaryInterface {
        associate_public_ip_address: Some(true),
        ipv4_prefix_count: None,
        ipv6_address_count: Some(1),
    });
    s.connection_tracking = Some(ConnectionTrackingSpec {
        tcp_established_timeout: Some(120),
        udp_stream_timeout: None,
        udp_timeout: None,
    });
    s.class_interfaces = vec![
        ClassInterface {
            network_card_index: 0,
            device_index: 0,
            efa_only: false,
        },
        ClassInterface {
            network_card_index: 1,
            device_index: 0,
            efa_only: true,
        },
    ];
    let d = request_data(&s);
    assert!(d.security_group_ids().is_empty());
    let got: Vec<_> = d
        .network_interfaces()
        .iter()
        .map(|n| {
            (
                n.network_card_index(),
                n.interface_type(),
                n.associate_public_ip_address(),
                n.ipv6_address_count(),
                n.connection_tracking_specification().is_some(),
                n.groups().len(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (Some(0), None, Some(true), Some(1), true, 1),
            (Some(1), Some("efa-only"), None, None, false, 1),
        ],
        "the class's list, not one EFA interface per card"
    );
    assert_ne!(s.name(), spec().name());
}

#[test]
fn ipv6_clusters_give_the_primary_interface_an_ipv6_address() {
    let mut s = spec();
    s.primary_interface = Some(PrimaryInterface {
        associate_public_ip_address: None,
        ipv4_prefix_count: None,
        ipv6_address_count: Some(1),
    });
    let d = request_data(&s);
    assert_eq!(d.network_interfaces()[0].ipv6_address_count(), Some(1));
    s.efa_interfaces = 2;
    let d = request_data(&s);
    let counts: Vec<_> = d
        .network_interfaces()
        .iter()
        .map(|n| n.ipv6_address_count())
        .collect();
    assert_eq!(counts, [Some(1), None], "only the primary card's interface");
}

#[test]
fn name_follows_the_configuration() {
    let a = spec();
    assert!(a.name().starts_with(NAME_PREFIX));
    assert_eq!(a.name(), spec().name());
    let mut b = spec();
    b.user_data = "b3RoZXI=".into();
    assert_ne!(a.name(), b.name());
}

#[test]
fn defaults_per_family() {
    assert_eq!(metadata(None).http_tokens, "required");
    assert_eq!(metadata(None).http_put_response_hop_limit, 1);
    let br = block_devices(AmiFamily::Bottlerocket, None).unwrap();
    assert_eq!(
        br.iter()
            .map(|b| (b.device_name.as_str(), b.volume_size_gib))
            .collect::<Vec<_>>(),
        [("/dev/xvda", Some(4)), ("/dev/xvdb", Some(20))]
    );
    assert!(block_devices(AmiFamily::Custom, None).unwrap().is_empty());
}

#[test]
fn snapshot_volumes_keep_their_initialization_rate() {
    let m: Vec<BlockDeviceMapping> = serde_json::from_str(
            r#"[{"deviceName":"/dev/xvdb","ebs":{"snapshotID":"snap-1","volumeInitializationRate":200}}]"#,
        )
        .unwrap();
    let mut s = spec();
    s.block_devices = block_devices(AmiFamily::AL2023, Some(&m)).unwrap();
    let d = request_data(&s);
    let ebs = d.block_device_mappings()[0].ebs().unwrap();
    assert_eq!(ebs.snapshot_id(), Some("snap-1"));
    assert_eq!(ebs.volume_initialization_rate(), Some(200));
}

#[test]
fn sizes_round_up_to_whole_gib() {
    let m: Vec<BlockDeviceMapping> = serde_json::from_str(
        r#"[{"deviceName":"/dev/xvda","ebs":{"volumeSize":"1500Mi","volumeType":"gp2"}}]"#,
    )
    .unwrap();
    let b = block_devices(AmiFamily::AL2023, Some(&m)).unwrap();
    assert_eq!(b[0].volume_size_gib, Some(2));
    assert_eq!(b[0].volume_type.as_deref(), Some("gp2"));
}
