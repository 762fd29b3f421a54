use super::*;

use nodewright_aws_model::launch::AllocationStrategy;
use nodewright_core::model::Offering;
use nodewright_core::requirements::Requirement;

use crate::nodeclass::ResolvedSubnet;
use crate::nodeclass::aliases::Requirement as AmiRequirement;

fn it(name: &str, gpus: Option<&str>) -> InstanceType {
    let mut requirements = vec![Requirement::new(labels::ARCH, Operator::In, &["amd64"])];
    requirements.push(match gpus {
        Some(n) => Requirement::new(aws::INSTANCE_GPU_COUNT, Operator::In, &[n]),
        None => Requirement::new(aws::INSTANCE_GPU_COUNT, Operator::DoesNotExist, &[]),
    });
    InstanceType {
        name: name.into(),
        requirements,
        capacity: Resources::new()
            .with("cpu", 2000)
            .with("memory", 8 << 30)
            .with("pods", 29)
            .with("nvidia.com/gpu", 0),
        overhead: Default::default(),
        offerings: vec![Offering {
            zone: "z-a".into(),
            capacity_type: CapacityType::OnDemand,
            price: 0.1,
            available: true,
            reservation_id: None,
            reservation_capacity: None,
        }],
    }
}

fn ami(id: &str, reqs: Vec<AmiRequirement>) -> ResolvedAmi {
    ResolvedAmi {
        id: id.into(),
        name: id.into(),
        creation_date: "2025-01-01T00:00:00Z".into(),
        deprecated: false,
        requirements: reqs,
    }
}

fn subnet(id: &str, zone: &str) -> ResolvedSubnet {
    ResolvedSubnet {
        id: id.into(),
        zone: zone.into(),
        zone_id: Some(format!("{zone}-id")),
        available_ips: 100,
    }
}

fn resolved(subnets: Vec<ResolvedSubnet>, amis: Vec<ResolvedAmi>) -> ResolvedNodeClass {
    ResolvedNodeClass {
        subnets,
        security_groups: Vec::new(),
        amis,
        instance_profile: None,
        capacity_reservations: Vec::new(),
        placement_group: None,
        status: Default::default(),
        hash: String::new(),
    }
}

fn over(ty: &str, zone: &str, subnet: &str) -> FleetOverride {
    FleetOverride {
        instance_type: ty.into(),
        zone: zone.into(),
        subnet_id: subnet.into(),
        priority: 0.1,
        reservation_id: None,
    }
}

fn call(overrides: Vec<FleetOverride>) -> FleetCall {
    FleetCall {
        capacity_type: CapacityType::OnDemand,
        default_target_capacity_type: "on-demand",
        allocation_strategy: AllocationStrategy::LowestPrice,
        total_target_capacity: 1,
        configs: vec![fleet::TemplateConfig {
            template_name: "karpenter.k8s.aws/1".into(),
            overrides,
        }],
        tags: [("karpenter.sh/nodeclaim".to_string(), "c".to_string())].into(),
        context: None,
    }
}

#[test]
fn images_serve_types_by_architecture_and_variant() {
    let standard = ami(
        "ami-std",
        vec![
            AmiRequirement::new(labels::ARCH, "In", &["amd64"]),
            AmiRequirement::new(aws::INSTANCE_GPU_COUNT, "DoesNotExist", &[]),
        ],
    );
    let nvidia = ami(
        "ami-gpu",
        vec![
            AmiRequirement::new(labels::ARCH, "In", &["amd64"]),
            AmiRequirement::new(aws::INSTANCE_GPU_COUNT, "Exists", &[]),
        ],
    );
    let arm = ami(
        "ami-arm",
        vec![AmiRequirement::new(labels::ARCH, "In", &["arm64"])],
    );
    let cpu = it("m5.large", None);
    let gpu = it("g5.xlarge", Some("1"));
    assert!(ami_serves(&standard, &cpu) && !ami_serves(&standard, &gpu));
    assert!(ami_serves(&nvidia, &gpu) && !ami_serves(&nvidia, &cpu));
    assert!(!ami_serves(&arm, &cpu));
}

#[test]
fn one_subnet_per_zone_skipping_full_ones() {
    let r = resolved(
        vec![
            subnet("s-a1", "z-a"),
            subnet("s-a2", "z-a"),
            subnet("s-b", "z-b"),
        ],
        Vec::new(),
    );
    let mut cache = UnavailableOfferings::new();
    let t = Timestamp(1_000);
    let got = zonal_subnets(&r, &cache, t);
    assert_eq!(got["z-a"], "s-a1", "most free addresses first");
    assert_eq!(got["z-b"], "s-b");
    cache.mark_subnet("s-a1", t);
    assert_eq!(zonal_subnets(&r, &cache, t)["z-a"], "s-a2");
    cache.mark_subnet("s-b", t);
    assert!(!zonal_subnets(&r, &cache, t).contains_key("z-b"));
}

#[test]
fn errors_are_matched_to_their_override() {
    let c = call(vec![
        over("m5.large", "z-a", "s-a"),
        over("m5.large", "z-b", "s-b"),
    ]);
    let err = |subnet: Option<&str>, zone: Option<&str>| FleetFailure {
        code: "InsufficientInstanceCapacity".into(),
        message: String::new(),
        instance_type: Some("m5.large".into()),
        subnet_id: subnet.map(str::to_string),
        zone: zone.map(str::to_string),
    };
    assert_eq!(
        matching_override(&c, &err(Some("s-b"), None)).map(|o| o.zone.as_str()),
        Some("z-b")
    );
    assert_eq!(
        matching_override(&c, &err(None, Some("z-b"))).map(|o| o.subnet_id.as_str()),
        Some("s-b")
    );
    assert!(matching_override(&c, &err(Some("s-x"), None)).is_none());
    let mut untyped = err(None, None);
    untyped.instance_type = None;
    assert!(matching_override(&c, &untyped).is_none());
}

#[test]
fn launched_instance_carries_labels_capacity_and_zone_from_the_override() {
    let c = call(vec![over("m5.large", "z-b", "s-b")]);
    let r = resolved(
        vec![subnet("s-b", "z-b")],
        vec![ami(
            "ami-std",
            vec![AmiRequirement::new(labels::ARCH, "In", &["amd64"])],
        )],
    );
    let inst = FleetInstance {
        instance_id: "i-0abc".into(),
        instance_type: "m5.large".into(),
        subnet_id: Some("s-b".into()),
        zone: None,
    };
    let got = launched(
        &c,
        &inst,
        &[it("m5.large", None)],
        &r,
        "us-east-1",
        Timestamp(5),
        false,
    )
    .unwrap();
    assert_eq!(got.instance.provider_id, "aws:///z-b/i-0abc");
    assert_eq!(got.instance.image_id.as_deref(), Some("ami-std"));
    assert_eq!(got.instance.tags["karpenter.sh/nodeclaim"], "c");
    assert_eq!(got.labels[labels::ZONE], "z-b");
    assert_eq!(got.labels[aws::ZONE_ID], "z-b-id");
    assert_eq!(got.labels[labels::REGION], "us-east-1");
    assert_eq!(got.labels[labels::CAPACITY_TYPE], "on-demand");
    assert_eq!(got.labels[labels::ARCH], "amd64");
    assert!(!got.labels.contains_key(aws::INSTANCE_GPU_COUNT));
    assert!(
        !got.capacity.contains("nvidia.com/gpu"),
        "zero values left out"
    );
    assert_eq!(got.capacity.get("pods"), 29);

    let stranger = FleetInstance {
        instance_type: "c5.large".into(),
        ..inst
    };
    assert!(
        launched(
            &c,
            &stranger,
            &[it("m5.large", None)],
            &r,
            "r",
            Timestamp(5),
            false
        )
        .is_err()
    );
}

#[test]
fn insufficient_capacity_lists_offerings_and_missing_templates_are_recognised() {
    let e = insufficient(
        "c",
        "no luck",
        vec![("m5.large".into(), "z-a".into(), "spot".into())],
    );
    match e {
        CloudError::InsufficientCapacity { message, offerings } => {
            assert!(message.contains("spot:m5.large:z-a"), "{message}");
            assert_eq!(offerings.len(), 1);
        }
        other => panic!("{other:?}"),
    }
    let missing = AwsError::new("CreateFleet", "gone")
        .with_code("InvalidLaunchTemplateName.NotFoundException");
    assert!(is_missing_template(&missing));
    assert!(!is_missing_template(
        &AwsError::new("CreateFleet", "x").with_code("InsufficientInstanceCapacity")
    ));
}

#[test]
fn context_is_sent_unless_min_values_were_relaxed() {
    let mut class = EC2NodeClass::default();
    class.spec.context = Some("ctx-1".into());
    let mut claim = NodeClaim::default();
    assert_eq!(fleet_context(&claim, &class).as_deref(), Some("ctx-1"));
    claim.metadata.annotations = Some(
        [(
            MIN_VALUES_RELAXED_ANNOTATION.to_string(),
            "false".to_string(),
        )]
        .into(),
    );
    assert_eq!(fleet_context(&claim, &class).as_deref(), Some("ctx-1"));
    claim.metadata.annotations = Some(
        [(
            MIN_VALUES_RELAXED_ANNOTATION.to_string(),
            "true".to_string(),
        )]
        .into(),
    );
    assert_eq!(fleet_context(&claim, &class), None);
}
