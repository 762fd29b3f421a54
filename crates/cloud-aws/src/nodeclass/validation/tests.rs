use super::*;
use crate::nodeclass::aliases::{ARCH_LABEL, Requirement as AmiRequirement};
use crate::nodeclass::{ResolvedSecurityGroup, ResolvedSubnet};
use nodewright_core::testkit::{instance_type, offering};

const INSTANCE_TYPE_LABEL: &str = "node.kubernetes.io/instance-type";
use nodewright_core::labels;
use nodewright_core::requirements::{Operator, Requirement};
use nodewright_core::resources::Resources;

fn err(code: &str, message: &str, retryable: bool) -> AwsError {
    AwsError {
        operation: "X".into(),
        code: Some(code.into()),
        message: message.into(),
        retryable,
    }
}

#[test]
fn dry_run_operation_is_a_pass_and_refusals_name_the_call() {
    let ok = err("DryRunOperation", "Request would have succeeded", false);
    for call in [
        Call::CreateFleet,
        Call::CreateLaunchTemplate,
        Call::RunInstances,
    ] {
        assert_eq!(classify(call, &ok), Verdict::Passed);
    }
    let denied = err("UnauthorizedOperation", "You are not authorized", false);
    let reasons: Vec<Verdict> = [
        Call::CreateFleet,
        Call::CreateLaunchTemplate,
        Call::RunInstances,
    ]
    .into_iter()
    .map(|c| classify(c, &denied))
    .collect();
    let names: Vec<&str> = reasons
        .iter()
        .map(|v| match v {
            Verdict::Failed { reason, message } => {
                assert!(message.contains("not authorized"), "{message}");
                *reason
            }
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        names,
        [
            "CreateFleetAuthCheckFailed",
            "CreateLaunchTemplateAuthCheckFailed",
            "RunInstancesAuthCheckFailed"
        ]
    );
    let Verdict::Failed { message, .. } = classify(Call::RunInstances, &denied) else {
        unreachable!()
    };
    assert!(message.contains("ec2:RunInstances"), "{message}");
    for code in ["AccessDenied", "AccessDeniedException"] {
        assert!(matches!(
            classify(Call::CreateFleet, &err(code, "no", false)),
            Verdict::Failed {
                reason: "CreateFleetAuthCheckFailed",
                ..
            }
        ));
    }
}

#[test]
fn oversized_user_data_refusals_are_their_own_reason() {
    // By EC2's code, whatever the message says.
    for message in ["User data is limited to 16384 bytes", "", "request refused"] {
        let e = err("InvalidUserData.Malformed", message, false);
        assert!(
            matches!(
                classify(Call::CreateLaunchTemplate, &e),
                Verdict::Failed {
                    reason: "UserDataSizeLimitExceeded",
                    ..
                }
            ),
            "{message:?}"
        );
    }
    // The same code about the encoding is a broken launch configuration, not its size.
    let encoding = err(
        "InvalidUserData.Malformed",
        "Invalid BASE64 encoding of user data.",
        false,
    );
    assert!(matches!(
        classify(Call::RunInstances, &encoding),
        Verdict::Failed {
            reason: "LaunchConfigurationInvalid",
            ..
        }
    ));
    // By the message only as a fallback, under the generic code.
    let e = err(
        "InvalidParameterValue",
        "User data is limited to 16384 bytes",
        false,
    );
    assert!(matches!(
        classify(Call::RunInstances, &e),
        Verdict::Failed {
            reason: "UserDataSizeLimitExceeded",
            ..
        }
    ));
    // Another invalid parameter is no verdict about the class's permissions.
    let other = err("InvalidParameterValue", "Invalid value for tenancy", false);
    assert!(matches!(
        classify(Call::RunInstances, &other),
        Verdict::Undecided { .. }
    ));
}

#[test]
fn throttling_profiles_not_yet_visible_and_surprises_give_no_verdict() {
    let cases = [
        (err("RequestLimitExceeded", "slow down", true), "throttling"),
        (
            err(
                "InvalidParameterValue",
                "Value (p) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name",
                false,
            ),
            "not visible",
        ),
        (err("InternalError", "boom", false), "unexpected"),
    ];
    for (e, why) in cases {
        match classify(Call::RunInstances, &e) {
            Verdict::Undecided { message } => {
                assert!(message.contains(why), "{message}");
                assert!(message.contains(&e.message), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }
    let transport = AwsError {
        operation: "CreateFleet".into(),
        code: None,
        message: "dispatch failure".into(),
        retryable: true,
    };
    assert!(matches!(
        classify(Call::CreateFleet, &transport),
        Verdict::Undecided { .. }
    ));
}

#[test]
fn the_cache_reuses_a_verdict_for_its_key_until_it_expires() {
    let cache = ValidationCache::new(Duration::from_secs(1800));
    let t0 = Instant::now();
    let failed = Verdict::Failed {
        reason: RUN_INSTANCES_AUTH_FAILED,
        message: "no".into(),
    };
    assert_eq!(cache.get("web", 1, t0), None);
    cache.put("web", 1, failed.clone(), t0);
    assert_eq!(
        cache.get("web", 1, t0 + Duration::from_secs(1799)),
        Some(failed)
    );
    assert_eq!(cache.get("web", 1, t0 + Duration::from_secs(1800)), None);
    assert_eq!(
        cache.get("web", 2, t0),
        None,
        "another key is another check"
    );
    assert_eq!(cache.get("api", 1, t0), None);
    // A new key replaces the class's entry: one entry per class.
    cache.put("web", 2, Verdict::Passed, t0);
    assert_eq!(cache.get("web", 2, t0), Some(Verdict::Passed));
    assert_eq!(cache.get("web", 1, t0), None);
    // No verdict is not stored.
    cache.put(
        "web",
        3,
        Verdict::Undecided {
            message: "throttled".into(),
        },
        t0,
    );
    assert_eq!(cache.get("web", 3, t0), None);
    assert_eq!(cache.get("web", 2, t0), Some(Verdict::Passed));
}

fn ami(id: &str, arch: &str, gpu: bool) -> ResolvedAmi {
    let mut requirements = vec![AmiRequirement::new(ARCH_LABEL, "In", &[arch])];
    requirements.push(AmiRequirement::new(
        GPU_COUNT_LABEL,
        if gpu { "Exists" } else { "DoesNotExist" },
        &[],
    ));
    ResolvedAmi {
        id: id.into(),
        name: id.into(),
        creation_date: String::new(),
        deprecated: false,
        requirements,
    }
}

fn itype(name: &str, arch: &str, cpu: i64, gpus: Option<&str>) -> InstanceType {
    // As the catalog lists them: a well-known label the type lacks is `DoesNotExist`.
    let requirements = vec![
        Requirement::single(ARCH_LABEL, arch),
        match gpus {
            Some(g) => Requirement::single(GPU_COUNT_LABEL, g),
            None => Requirement::new(GPU_COUNT_LABEL, Operator::DoesNotExist, &[]),
        },
    ];
    let capacity = Resources::new().with(CPU, cpu).with(MEMORY, cpu << 22);
    let offering = offering("us-east-1a", CapacityType::OnDemand, 0.1);
    InstanceType {
        requirements,
        ..instance_type(name, capacity, vec![offering])
    }
}

fn pick<'a>(
    types: &'a [InstanceType],
    amis: &'a [ResolvedAmi],
    pools: &'a [PoolDemand],
) -> Option<(&'a str, &'a str)> {
    choose_launch(types, amis, pools).map(|c| (c.instance_type.name.as_str(), c.ami.id.as_str()))
}

fn pool(name: &str, requirements: &[(&str, Operator, &[&str])]) -> PoolDemand {
    PoolDemand {
        name: name.into(),
        requirements: requirements
            .iter()
            .map(|(k, op, v)| Requirement::new(k, *op, v))
            .collect(),
        ..Default::default()
    }
}

#[test]
fn without_pools_the_validation_type_prefers_upstreams_defaults_then_the_smallest_standard_type() {
    let amis = vec![
        ami("ami-gpu", "amd64", true),
        ami("ami-std", "amd64", false),
    ];
    let types = vec![
        itype("g5.xlarge", "amd64", 4000, Some("1")),
        itype("c5.large", "amd64", 2000, None),
        itype("m5.xlarge", "amd64", 4000, None),
        itype("m5.large", "amd64", 2000, None),
    ];
    assert_eq!(pick(&types, &amis, &[]), Some(("m5.large", "ami-std")));
    assert_eq!(
        pick(&types[..3], &amis, &[]).map(|p| p.0),
        Some("c5.large"),
        "smallest, then by name"
    );
    // Only a GPU image: its types are used.
    assert_eq!(
        pick(&types, &amis[..1], &[]),
        Some(("g5.xlarge", "ami-gpu"))
    );
    // An arm64-only class gets an arm64 type.
    let arm = vec![ami("ami-arm", "arm64", false)];
    let mut with_arm = types.clone();
    with_arm.push(itype("m6g.large", "arm64", 2000, None));
    assert_eq!(pick(&with_arm, &arm, &[]).map(|p| p.0), Some("m6g.large"));
    assert_eq!(pick(&types, &arm, &[]), None);
    // On-demand first; a type offered only as spot is validated as spot.
    let mut spot_only = itype("m5.large", "amd64", 2000, None);
    spot_only.offerings[0].capacity_type = CapacityType::Spot;
    let bigger = itype("m5.xlarge", "amd64", 4000, None);
    let both = [spot_only.clone(), bigger];
    let c = choose_launch(&both, &amis, &[]).unwrap();
    assert_eq!(
        (c.instance_type.name.as_str(), c.capacity_type),
        ("m5.xlarge", CapacityType::OnDemand)
    );
    let only = [spot_only];
    let c = choose_launch(&only, &amis, &[]).unwrap();
    assert_eq!(c.capacity_type, CapacityType::Spot);
    assert_eq!(c.nodepool(), None);
}

#[test]
fn with_pools_the_validation_launch_is_one_a_pool_could_make() {
    let amis = vec![
        ami("ami-std", "amd64", false),
        ami("ami-arm", "arm64", false),
    ];
    let mut c5 = itype("c5.xlarge", "amd64", 4000, None);
    c5.requirements
        .push(Requirement::single(INSTANCE_TYPE_LABEL, "c5.xlarge"));
    c5.offerings = vec![
        offering("us-east-1a", CapacityType::OnDemand, 0.1),
        offering("us-east-1b", CapacityType::Spot, 0.1),
        offering("us-east-1b", CapacityType::OnDemand, 0.1),
    ];
    let mut m5 = itype("m5.large", "amd64", 2000, None);
    m5.requirements
        .push(Requirement::single(INSTANCE_TYPE_LABEL, "m5.large"));
    let mut m6g = itype("m6g.large", "arm64", 2000, None);
    m6g.requirements
        .push(Requirement::single(INSTANCE_TYPE_LABEL, "m6g.large"));
    let types = vec![m5, c5, m6g];
    // A pool limited to c5.xlarge: c5.xlarge, not the class-wide default m5.large.
    let c5_only = [pool(
        "compute",
        &[(INSTANCE_TYPE_LABEL, Operator::In, &["c5.xlarge"])],
    )];
    let c = choose_launch(&types, &amis, &c5_only).unwrap();
    assert_eq!(
        (
            c.instance_type.name.as_str(),
            c.zone,
            c.capacity_type,
            c.nodepool()
        ),
        (
            "c5.xlarge",
            "us-east-1a",
            CapacityType::OnDemand,
            Some("compute")
        )
    );
    // The pool's zone and capacity type pick the offering.
    let spot_b = [pool(
        "spot",
        &[
            (INSTANCE_TYPE_LABEL, Operator::In, &["c5.xlarge"]),
            (labels::ZONE, Operator::In, &["us-east-1b"]),
            (labels::CAPACITY_TYPE, Operator::In, &["spot"]),
        ],
    )];
    let c = choose_launch(&types, &amis, &spot_b).unwrap();
    assert_eq!(
        (c.zone, c.capacity_type),
        ("us-east-1b", CapacityType::Spot)
    );
    // An arm64 pool (by a template label) gets the arm64 type and image.
    let arm = [pool("arm", &[(ARCH_LABEL, Operator::In, &["arm64"])])];
    assert_eq!(pick(&types, &amis, &arm), Some(("m6g.large", "ami-arm")));
    // Several pools: the best launch among all of theirs.
    let two = [c5_only[0].clone(), arm[0].clone()];
    assert_eq!(pick(&types, &amis, &two).map(|p| p.0), Some("m6g.large"));
    // A pool no offering satisfies: the class-wide choice, for no pool.
    let nowhere = [pool(
        "nowhere",
        &[(labels::ZONE, Operator::In, &["eu-west-1a"])],
    )];
    let c = choose_launch(&types, &amis, &nowhere).unwrap();
    assert_eq!(
        (c.instance_type.name.as_str(), c.nodepool()),
        ("m5.large", None)
    );
    // The key follows the launch.
    let a = choose_launch(&types, &amis, &c5_only).unwrap().key();
    let b = choose_launch(&types, &amis, &spot_b).unwrap().key();
    let d = choose_launch(&types, &amis, &[]).unwrap().key();
    assert_ne!(a, b);
    assert_ne!(a, d);
    // So do the pool's labels and taints, which its nodes' user data carries.
    let mut labelled = c5_only.clone();
    labelled[0].labels.insert("team".into(), "web".into());
    let e = choose_launch(&types, &amis, &labelled).unwrap().key();
    assert_ne!(a, e);
    let mut tainted = c5_only.clone();
    tainted[0].taints.push(nodewright_core::taints::Taint::new(
        "dedicated",
        "web",
        nodewright_core::taints::TaintEffect::NoSchedule,
    ));
    let f = choose_launch(&types, &amis, &tainted).unwrap().key();
    assert_ne!(a, f);
    assert_ne!(e, f);
}

#[test]
fn a_pool_demand_carries_its_requirements_and_template_labels() {
    let yaml = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: web}\nspec:\n  template:\n    metadata:\n      labels: {team: web}\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n      taints: [{key: dedicated, value: web, effect: NoSchedule}]\n      startupTaints: [{key: warming, effect: NoExecute}]\n      requirements:\n        - {key: kubernetes.io/arch, operator: In, values: [arm64]}\n        - {key: example.com/tier, operator: In, values: [gold]}\n        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, c5.large]}\n";
    let np: nodewright_api::v1::nodepool::NodePool = serde_yaml::from_str(yaml).unwrap();
    let demand = PoolDemand::new(&nodewright_api::to_core::nodepool(&np).unwrap());
    // What a claim of the pool registers with.
    let labels: Vec<(&str, &str)> = demand
        .labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        labels,
        [
            ("example.com/tier", "gold"),
            ("karpenter.sh/nodepool", "web"),
            ("kubernetes.io/arch", "arm64"),
            ("team", "web"),
        ]
    );
    let taints: Vec<&str> = demand.taints.iter().map(|t| t.key.as_str()).collect();
    assert_eq!(
        taints,
        ["dedicated", "warming", "karpenter.sh/unregistered"]
    );
    assert_eq!(demand.name, "web");
    assert!(
        demand
            .requirements
            .contains(&Requirement::single("team", "web"))
    );
    assert!(
        demand
            .requirements
            .contains(&Requirement::single("kubernetes.io/arch", "arm64"))
    );
}

fn resolved() -> ResolvedNodeClass {
    ResolvedNodeClass {
        subnets: vec![ResolvedSubnet {
            id: "subnet-1".into(),
            zone: "us-east-1a".into(),
            zone_id: None,
            available_ips: 250,
        }],
        security_groups: vec![ResolvedSecurityGroup {
            id: "sg-1".into(),
            name: "nodes".into(),
        }],
        amis: vec![ami("ami-std", "amd64", false)],
        instance_profile: Some("profile".into()),
        capacity_reservations: Vec::new(),
        placement_group: None,
        status: Default::default(),
        hash: "1".into(),
    }
}

#[test]
fn the_key_follows_what_is_validated_but_not_free_addresses() {
    let r = resolved();
    let key = |r: &ResolvedNodeClass, hash: &str, it: &str, cluster: &str| {
        cache_key("uid", hash, r, it, &cluster)
    };
    let base = key(&r, "1", "m5.large", "https://a");
    let mut fewer = r.clone();
    fewer.subnets[0].available_ips = 3;
    assert_eq!(key(&fewer, "1", "m5.large", "https://a"), base);
    assert_ne!(key(&r, "2", "m5.large", "https://a"), base, "spec");
    assert_ne!(key(&r, "1", "c5.large", "https://a"), base, "type");
    assert_ne!(key(&r, "1", "m5.large", "https://b"), base, "cluster");
    let mut other = r.clone();
    other.amis[0].id = "ami-new".into();
    assert_ne!(key(&other, "1", "m5.large", "https://a"), base, "image");
    let mut other = r.clone();
    other.instance_profile = Some("p2".into());
    assert_ne!(key(&other, "1", "m5.large", "https://a"), base, "profile");
    let mut other = r.clone();
    other.security_groups[0].id = "sg-2".into();
    assert_ne!(key(&other, "1", "m5.large", "https://a"), base, "groups");
    assert_ne!(
        cache_key("uid2", "1", &r, "m5.large", &"https://a"),
        base,
        "uid"
    );
}

fn cond(type_: &str, status: &str, reason: &str) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        last_transition_time: Some("2026-01-01T00:00:00Z".into()),
        observed_generation: Some(1),
        reason: Some(reason.into()),
        message: Some("m".into()),
        extra: Default::default(),
    }
}

#[test]
fn no_verdict_keeps_the_stored_one_or_holds_the_class_back() {
    let undecided = || Verdict::Undecided {
        message: "throttled".into(),
    };
    let stored_ok = [cond(VALIDATION_SUCCEEDED, "True", VALIDATION_SUCCEEDED)];
    assert_eq!(outcome(undecided(), &stored_ok), Ok(()));
    let stored_denied = [cond(
        VALIDATION_SUCCEEDED,
        "False",
        CREATE_FLEET_AUTH_FAILED,
    )];
    assert_eq!(
        outcome(undecided(), &stored_denied),
        Err((CREATE_FLEET_AUTH_FAILED.into(), "m".into()))
    );
    // Waiting on dependencies is no verdict about launching.
    let waiting = [cond(VALIDATION_SUCCEEDED, "False", "DependenciesNotReady")];
    assert_eq!(
        outcome(undecided(), &waiting),
        Err((AUTH_CHECK_INCOMPLETE.into(), "throttled".into()))
    );
    assert_eq!(
        outcome(undecided(), &[]),
        Err((AUTH_CHECK_INCOMPLETE.into(), "throttled".into()))
    );
    // A fresh verdict wins over the stored one.
    assert_eq!(outcome(Verdict::Passed, &stored_denied), Ok(()));
    assert_eq!(
        outcome(
            Verdict::Failed {
                reason: USER_DATA_SIZE_LIMIT_EXCEEDED,
                message: "big".into()
            },
            &stored_ok
        ),
        Err((USER_DATA_SIZE_LIMIT_EXCEEDED.into(), "big".into()))
    );
}

#[test]
fn a_failed_check_turns_ready_false_and_keeps_the_other_conditions() {
    let t = Timestamp(1_800_000_000_000);
    let conds = conditions::conditions(
        &[
            (conditions::SUBNETS_READY, Ok(())),
            (conditions::AMIS_READY, Ok(())),
            (VALIDATION_SUCCEEDED, Ok(())),
        ],
        &[],
        Some(2),
        t,
    );
    let denied: Outcome = Err((RUN_INSTANCES_AUTH_FAILED.into(), "not allowed".into()));
    let out = with_validation(&conds, &denied, &conds, Some(2), t);
    let get = |type_: &str| out.iter().find(|c| c.type_ == type_).unwrap().clone();
    assert_eq!(out.len(), 4);
    let v = get(VALIDATION_SUCCEEDED);
    assert_eq!(
        (v.status.as_str(), v.reason.as_deref(), v.message.as_deref()),
        (
            "False",
            Some(RUN_INSTANCES_AUTH_FAILED),
            Some("not allowed")
        )
    );
    let ready = get(READY);
    assert_eq!(ready.status, "False");
    assert_eq!(
        ready.message.as_deref(),
        Some("ValidationSucceeded not ready")
    );
    assert_eq!(get(conditions::SUBNETS_READY).status, "True");
    // Passing again: Ready is back, the other conditions keep their transition times.
    let later = Timestamp(1_800_000_060_000);
    let back = with_validation(&out, &Ok(()), &out, Some(2), later);
    let ready = back.iter().find(|c| c.type_ == READY).unwrap();
    assert_eq!(ready.status, "True");
    assert_eq!(ready.last_transition_time, Some(conditions::rfc3339(later)));
    let subnets = back
        .iter()
        .find(|c| c.type_ == conditions::SUBNETS_READY)
        .unwrap();
    assert_eq!(subnets.last_transition_time, Some(conditions::rfc3339(t)));
}

#[test]
fn only_al2023_needs_the_service_cidr_and_the_reason_says_why_it_is_missing() {
    let unknown = ClusterInfo {
        endpoint: "https://a".into(),
        service_cidr_unknown: Some("EKS DescribeCluster for CLUSTER_NAME=prod failed".into()),
        ..Default::default()
    };
    let why = cluster_cidr_missing(AmiFamily::AL2023, &unknown).expect("missing");
    assert!(why.contains("service CIDR"), "{why}");
    assert!(why.contains("CLUSTER_NAME=prod"), "{why}");
    for family in [AmiFamily::AL2, AmiFamily::Bottlerocket, AmiFamily::Custom] {
        assert_eq!(cluster_cidr_missing(family, &unknown), None, "{family:?}");
    }
    let known = ClusterInfo {
        service_cidr: Some("10.100.0.0/16".into()),
        ..unknown
    };
    assert_eq!(cluster_cidr_missing(AmiFamily::AL2023, &known), None);
}
