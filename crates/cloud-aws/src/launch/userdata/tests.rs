//! One launch template's configuration: kubelet values, endpoint, IPv6 and interfaces.

use super::*;
use nodewright_core::resources::Resources;

fn class() -> EC2NodeClass {
    let mut c = EC2NodeClass::default();
    c.metadata.name = Some("web".into());
    c
}

fn resolved() -> ResolvedNodeClass {
    ResolvedNodeClass {
        subnets: Vec::new(),
        security_groups: vec![
            crate::nodeclass::ResolvedSecurityGroup {
                id: "sg-b".into(),
                name: "b".into(),
            },
            crate::nodeclass::ResolvedSecurityGroup {
                id: "sg-a".into(),
                name: "a".into(),
            },
        ],
        amis: Vec::new(),
        instance_profile: Some("profile".into()),
        capacity_reservations: Vec::new(),
        placement_group: None,
        status: Default::default(),
        hash: String::new(),
    }
}

fn it() -> InstanceType {
    let mut it = InstanceType {
        name: "m5.large".into(),
        requirements: Vec::new(),
        capacity: Resources::new().with(PODS, 29).with(CPU, 2000),
        overhead: Default::default(),
        offerings: Vec::new(),
    };
    it.overhead.kube_reserved = Resources::new().with(CPU, 70).with(MEMORY, 574 << 20);
    it
}

fn ami() -> ResolvedAmi {
    ResolvedAmi {
        id: "ami-1".into(),
        name: "n".into(),
        creation_date: String::new(),
        deprecated: false,
        requirements: Vec::new(),
    }
}

#[test]
fn kubelet_gets_the_types_pods_and_kube_reserved_and_the_capacity_type_label() {
    let (c, r) = (class(), resolved());
    let cluster = ClusterInfo {
        endpoint: "https://e".into(),
        ..Default::default()
    };
    let base = BaseConfig {
        class: &c,
        resolved: &r,
        family: AmiFamily::AL2,
        cluster_name: "prod",
        cluster: &cluster,
        node_labels: [("team".to_string(), "web".to_string())].into(),
        taints: Vec::new(),
        placement: nodewright_aws_model::placement::LaunchPlacement::new(&[], None),
    };
    let b = base.bootstrap(&it(), CapacityType::Spot).unwrap();
    assert_eq!(b.kubelet.max_pods, Some(29));
    assert_eq!(b.kubelet.kube_reserved["cpu"], "70m");
    assert_eq!(b.kubelet.kube_reserved["memory"], "574Mi");
    assert_eq!(b.labels[labels::CAPACITY_TYPE], "spot");
    assert_eq!(b.labels["team"], "web");

    let tags: BTreeMap<String, String> = [
        ("karpenter.sh/nodeclaim", "c1"),
        ("karpenter.sh/nodepool", "default"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let t = base
        .template(&ami(), &it(), CapacityType::Spot, &tags, false, None)
        .unwrap();
    assert_eq!(t.security_group_ids, ["sg-a", "sg-b"]);
    assert_eq!(t.instance_profile.as_deref(), Some("profile"));
    assert!(
        !t.tags.contains_key("karpenter.sh/nodeclaim"),
        "shared by claims"
    );
    assert_eq!(t.tags[CLUSTER_TAG], "prod");
    assert_eq!(t.primary_interface, None);
    let other = base
        .template(&ami(), &it(), CapacityType::OnDemand, &tags, false, None)
        .unwrap();
    assert_ne!(t.name(), other.name(), "capacity type is in the user data");
}

#[test]
fn families_that_join_need_an_endpoint() {
    let (c, r) = (class(), resolved());
    let cluster = ClusterInfo::default();
    let mut base = BaseConfig {
        class: &c,
        resolved: &r,
        family: AmiFamily::AL2023,
        cluster_name: "prod",
        cluster: &cluster,
        node_labels: BTreeMap::new(),
        taints: Vec::new(),
        placement: nodewright_aws_model::placement::LaunchPlacement::new(&[], None),
    };
    let e = base.bootstrap(&it(), CapacityType::OnDemand).unwrap_err();
    assert!(e.to_string().contains("endpoint"), "{e}");
    let known = ClusterInfo {
        endpoint: "https://e".into(),
        service_cidr_unknown: Some("EKS DescribeCluster for CLUSTER_NAME=prod failed".into()),
        ..Default::default()
    };
    base.cluster = &known;
    let e = base.bootstrap(&it(), CapacityType::OnDemand).unwrap_err();
    assert!(e.to_string().contains("EC2NodeClass web"), "{e}");
    assert!(e.to_string().contains("service CIDR"), "{e}");
    assert!(e.to_string().contains("CLUSTER_NAME=prod failed"), "{e}");
    base.family = AmiFamily::AL2;
    assert!(base.bootstrap(&it(), CapacityType::OnDemand).is_ok());
    base.cluster = &cluster;
    base.family = AmiFamily::Custom;
    assert!(base.bootstrap(&it(), CapacityType::OnDemand).is_ok());
}

#[test]
fn ipv6_clusters_and_class_interfaces_shape_the_template() {
    let (mut c, r) = (class(), resolved());
    c.spec.network_interfaces = Some(vec![
        nodewright_api::aws::v1::NetworkInterface {
            network_card_index: Some(0),
            device_index: Some(0),
            interface_type: Some("interface".into()),
            ..Default::default()
        },
        nodewright_api::aws::v1::NetworkInterface {
            network_card_index: Some(1),
            device_index: Some(0),
            interface_type: Some("efa-only".into()),
            ..Default::default()
        },
    ]);
    let cluster = ClusterInfo {
        endpoint: "https://e".into(),
        service_cidr: Some("fd00:10:96::/112".into()),
        ..Default::default()
    };
    let base = BaseConfig {
        class: &c,
        resolved: &r,
        family: AmiFamily::AL2023,
        cluster_name: "prod",
        cluster: &cluster,
        node_labels: BTreeMap::new(),
        taints: Vec::new(),
        placement: nodewright_aws_model::placement::LaunchPlacement::new(&[], None),
    };
    let t = base
        .template(
            &ami(),
            &it(),
            CapacityType::OnDemand,
            &BTreeMap::new(),
            false,
            None,
        )
        .unwrap();
    assert_eq!(
        t.primary_interface
            .as_ref()
            .and_then(|p| p.ipv6_address_count),
        Some(1)
    );
    assert_eq!(
        t.class_interfaces,
        [
            template::ClassInterface {
                network_card_index: 0,
                device_index: 0,
                efa_only: false
            },
            template::ClassInterface {
                network_card_index: 1,
                device_index: 0,
                efa_only: true
            }
        ]
    );
    let v4 = ClusterInfo {
        service_cidr: Some("10.100.0.0/16".into()),
        ..cluster.clone()
    };
    assert!(!ipv6_cluster(&v4, None));
    let unknown = ClusterInfo {
        service_cidr: None,
        ..cluster
    };
    let dns6 = KubeletConfiguration {
        cluster_dns: Some(vec!["fd00:10:96::a".into()]),
        ..Default::default()
    };
    assert!(ipv6_cluster(&unknown, Some(&dns6)));
    assert!(!ipv6_cluster(&unknown, None));
}

#[test]
fn primary_interface_only_when_asked_for() {
    assert_eq!(primary_interface(None, None, false, false), Ok(None));
    assert!(
        primary_interface(None, None, true, false)
            .unwrap()
            .is_some()
    );
    let v6 = primary_interface(None, None, false, true).unwrap().unwrap();
    assert_eq!(v6.ipv6_address_count, Some(1));
    let p = primary_interface(Some(false), Some(2), false, false)
        .unwrap()
        .unwrap();
    assert_eq!(
        (p.associate_public_ip_address, p.ipv4_prefix_count),
        (Some(false), Some(2))
    );
    assert!(primary_interface(None, Some(i64::MAX), false, false).is_err());
    let big = nodewright_api::aws::v1::ConnectionTracking {
        udp_timeout: Some(i64::MAX),
        ..Default::default()
    };
    assert!(
        connection_tracking(Some(&big))
            .unwrap_err()
            .contains("udpTimeout")
    );
}
