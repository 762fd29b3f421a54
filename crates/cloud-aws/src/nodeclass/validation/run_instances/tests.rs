//! The RunInstances request built from a launch template, with and without interfaces, spot.

use super::*;
use crate::launch::template::{self, TemplateSpec};
use nodewright_aws_model::AmiFamily;

fn client() -> aws_sdk_ec2::Client {
    let config = aws_sdk_ec2::Config::builder()
        .behavior_version(aws_sdk_ec2::config::BehaviorVersion::latest())
        .region(aws_sdk_ec2::config::Region::new("us-east-1"))
        .build();
    aws_sdk_ec2::Client::from_conf(config)
}

fn spec() -> TemplateSpec {
    TemplateSpec {
        image_id: "ami-1".into(),
        user_data: "dXNlcg==".into(),
        instance_profile: Some("profile".into()),
        security_group_ids: vec!["sg-1".into(), "sg-2".into()],
        metadata: template::metadata(None),
        block_devices: template::block_devices(AmiFamily::AL2023, None).unwrap(),
        detailed_monitoring: true,
        primary_interface: None,
        efa_interfaces: 0,
        class_interfaces: Vec::new(),
        nested_virtualization: None,
        connection_tracking: None,
        capacity_reservation: None,
        placement: None,
        tags: [("team".to_string(), "a".to_string())].into(),
    }
}

#[test]
fn a_template_without_interfaces_launches_into_the_subnet_with_its_groups() {
    let tags = [("karpenter.sh/nodepool".to_string(), String::new())].into();
    let req = run_instances_request(
        &client(),
        &template::request_data(&spec()),
        "m5.large",
        "subnet-1",
        &tags,
        false,
    );
    let i = req.as_input();
    assert_eq!(i.get_image_id().as_deref(), Some("ami-1"));
    assert_eq!(i.get_user_data().as_deref(), Some("dXNlcg=="));
    assert_eq!(i.get_instance_type(), &Some(InstanceType::M5Large));
    assert_eq!((i.get_min_count(), i.get_max_count()), (&Some(1), &Some(1)));
    assert_eq!(i.get_instance_market_options(), &None, "on-demand");
    assert_eq!(i.get_subnet_id().as_deref(), Some("subnet-1"));
    assert_eq!(
        i.get_security_group_ids().clone().unwrap(),
        vec!["sg-1".to_string(), "sg-2".to_string()]
    );
    assert_eq!(
        i.get_iam_instance_profile().as_ref().and_then(|p| p.name()),
        Some("profile")
    );
    let m = i.get_metadata_options().clone().unwrap();
    assert_eq!(m.http_tokens(), Some(&HttpTokensState::Required));
    assert_eq!(m.http_put_response_hop_limit(), Some(1));
    assert_eq!(
        i.get_monitoring().as_ref().and_then(|m| m.enabled()),
        Some(true)
    );
    let root = &i.get_block_device_mappings().clone().unwrap()[0];
    assert_eq!(root.device_name(), Some("/dev/xvda"));
    assert_eq!(root.ebs().and_then(|e| e.volume_size()), Some(20));
    assert_eq!(root.ebs().and_then(|e| e.encrypted()), Some(true));
    let kinds: Vec<ResourceType> = i
        .get_tag_specifications()
        .clone()
        .unwrap()
        .iter()
        .filter_map(|t| t.resource_type().cloned())
        .collect();
    assert_eq!(
        kinds,
        [
            ResourceType::NetworkInterface,
            ResourceType::Instance,
            ResourceType::Volume
        ]
    );
}

#[test]
fn a_template_with_interfaces_puts_the_primary_one_in_the_subnet() {
    let mut s = spec();
    s.primary_interface = Some(template::PrimaryInterface {
        associate_public_ip_address: Some(false),
        ipv4_prefix_count: Some(2),
        ipv6_address_count: None,
    });
    let req = run_instances_request(
        &client(),
        &template::request_data(&s),
        "m5.large",
        "subnet-9",
        &BTreeMap::new(),
        false,
    );
    let i = req.as_input();
    assert_eq!(i.get_subnet_id(), &None, "EC2 refuses both");
    assert_eq!(i.get_security_group_ids(), &None);
    let nics = i.get_network_interfaces().clone().unwrap();
    assert_eq!(nics.len(), 1);
    assert_eq!(nics[0].subnet_id(), Some("subnet-9"));
    assert_eq!(nics[0].groups(), ["sg-1", "sg-2"]);
    assert_eq!(nics[0].ipv4_prefix_count(), Some(2));
    assert_eq!(nics[0].associate_public_ip_address(), Some(false));
}

#[test]
fn a_spot_launch_asks_for_the_spot_market() {
    let req = run_instances_request(
        &client(),
        &template::request_data(&spec()),
        "m5.large",
        "subnet-1",
        &BTreeMap::new(),
        true,
    );
    let market = req
        .as_input()
        .get_instance_market_options()
        .clone()
        .expect("market options");
    assert_eq!(market.market_type(), Some(&MarketType::Spot));
}
