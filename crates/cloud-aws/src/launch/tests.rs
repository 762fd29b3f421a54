use super::*;

use nodewright_aws_model::launch::AllocationStrategy;
use nodewright_core::labels::{self, aws};
use nodewright_core::requirements::{Operator, Requirement};
use nodewright_core::resources::Resources;
use nodewright_core::testkit::{instance_type, offering};

use crate::nodeclass::ResolvedSubnet;
use crate::nodeclass::aliases::Requirement as AmiRequirement;

fn it(name: &str, gpus: Option<&str>) -> InstanceType {
    let mut requirements = vec![Requirement::new(labels::ARCH, Operator::In, &["amd64"])];
    requirements.push(match gpus {
        Some(n) => Requirement::new(aws::INSTANCE_GPU_COUNT, Operator::In, &[n]),
        None => Requirement::new(aws::INSTANCE_GPU_COUNT, Operator::DoesNotExist, &[]),
    });
    let capacity = Resources::new()
        .with("cpu", 2000)
        .with("memory", 8 << 30)
        .with("pods", 29)
        .with("nvidia.com/gpu", 0);
    let offering = offering("z-a", CapacityType::OnDemand, 0.1);
    InstanceType {
        requirements,
        ..instance_type(name, capacity, vec![offering])
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
        image_id: None,
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
    // Numeric operators compare the type's value; a key the type does not mention
    // constrains nothing; an operator that does not parse admits nothing.
    let cpus = aws::INSTANCE_CPU;
    let mut two_cpus = cpu.clone();
    two_cpus.requirements.push(Requirement::single(cpus, "2"));
    let big = ami("ami-big", vec![AmiRequirement::new(cpus, "Gt", &["4"])]);
    let small = ami("ami-small", vec![AmiRequirement::new(cpus, "Lte", &["2"])]);
    assert!(!ami_serves(&big, &two_cpus) && ami_serves(&small, &two_cpus));
    let other = ami(
        "ami-other",
        vec![AmiRequirement::new("example.com/k", "In", &["x"])],
    );
    assert!(ami_serves(&other, &cpu));
    let bogus = ami(
        "ami-bogus",
        vec![AmiRequirement::new(labels::ARCH, "Bogus", &[])],
    );
    assert!(!ami_serves(&bogus, &cpu));
}

fn arm(name: &str) -> InstanceType {
    let mut t = it(name, None);
    t.requirements[0] = Requirement::new(labels::ARCH, Operator::In, &["arm64"]);
    t
}

#[test]
fn each_override_names_the_image_for_its_architecture() {
    let amis = vec![
        ami(
            "ami-amd",
            vec![AmiRequirement::new(labels::ARCH, "In", &["amd64"])],
        ),
        ami(
            "ami-arm",
            vec![AmiRequirement::new(labels::ARCH, "In", &["arm64"])],
        ),
    ];
    let types = vec![it("m5.large", None), arm("m6g.large"), arm("c6g.large")];
    let overrides = vec![
        over("m6g.large", "z-a", "s-a"),
        over("m5.large", "z-a", "s-a"),
        over("c6g.large", "z-b", "s-b"),
        over("x9.large", "z-a", "s-a"),
    ];
    let mut no_image = Vec::new();
    let got = with_images(&overrides, &types, &amis, &mut no_image);
    let images: Vec<(&str, Option<&str>)> = got
        .iter()
        .map(|(o, _, _)| (o.instance_type.as_str(), o.image_id.as_deref()))
        .collect();
    assert_eq!(
        images,
        vec![
            ("m6g.large", Some("ami-arm")),
            ("m5.large", Some("ami-amd")),
            ("c6g.large", Some("ami-arm")),
        ],
        "a type the launch does not know is left out"
    );
    assert!(no_image.is_empty());

    let only_amd = &amis[..1];
    let got = with_images(&overrides, &types, only_amd, &mut no_image);
    assert_eq!(got.len(), 1);
    assert_eq!(no_image, vec!["m6g.large", "c6g.large"]);

    // The CreateFleet input carries each override's image.
    let mut c = call(Vec::new());
    c.configs = vec![
        fleet::TemplateConfig {
            template_name: "karpenter.k8s.aws/arm".into(),
            overrides: with_images(&overrides[..1], &types, &amis, &mut Vec::new())
                .into_iter()
                .map(|(o, _, _)| o)
                .collect(),
        },
        fleet::TemplateConfig {
            template_name: "karpenter.k8s.aws/amd".into(),
            overrides: with_images(&overrides[1..2], &types, &amis, &mut Vec::new())
                .into_iter()
                .map(|(o, _, _)| o)
                .collect(),
        },
    ];
    let sent: Vec<(String, String, String)> = fleet::template_configs(&c)
        .iter()
        .flat_map(|cfg| {
            let name = cfg
                .launch_template_specification()
                .and_then(|s| s.launch_template_name())
                .unwrap_or_default()
                .to_string();
            cfg.overrides()
                .iter()
                .map(move |o| {
                    (
                        name.clone(),
                        o.instance_type()
                            .map(|t| t.as_str().to_string())
                            .unwrap_or_default(),
                        o.image_id().unwrap_or_default().to_string(),
                    )
                })
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(
        sent,
        vec![
            (
                "karpenter.k8s.aws/arm".into(),
                "m6g.large".into(),
                "ami-arm".into()
            ),
            (
                "karpenter.k8s.aws/amd".into(),
                "m5.large".into(),
                "ami-amd".into()
            ),
        ]
    );
}

#[test]
fn the_subnets_launched_into_come_from_the_instances_or_their_overrides() {
    let c = call(vec![
        over("m5.large", "z-a", "s-a"),
        over("m5.large", "z-b", "s-b"),
        over("c5.large", "z-c", "s-c"),
    ]);
    let inst = |ty: &str, subnet: Option<&str>, zone: Option<&str>| FleetInstance {
        instance_id: "i-1".into(),
        instance_type: ty.into(),
        subnet_id: subnet.map(str::to_string),
        zone: zone.map(str::to_string),
    };
    let outcome = FleetOutcome {
        instances: vec![
            inst("m5.large", Some("s-b"), None),
            inst("c5.large", None, None),
            inst("m5.large", None, Some("z-a")),
        ],
        errors: Vec::new(),
    };
    let got: Vec<String> = launched_subnets(&c, &outcome).into_iter().collect();
    assert_eq!(got, vec!["s-a", "s-b", "s-c"]);
    assert!(launched_subnets(&c, &FleetOutcome::default()).is_empty());
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
