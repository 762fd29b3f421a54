use super::*;
use crate::ice::{FleetError, UnavailableOfferings};
use nodewright_core::resources::{CPU, MEMORY};
use nodewright_core::testkit::{instance_type, offering as off};
use nodewright_core::time::Timestamp;

const OD: CapacityType = CapacityType::OnDemand;
const SPOT: CapacityType = CapacityType::Spot;

fn it(name: &str, cpu_m: i64, offerings: Vec<Offering>) -> InstanceType {
    let (family, size) = name.split_once('.').unwrap();
    let capacity = Resources::new().with(CPU, cpu_m).with(MEMORY, 8 << 30);
    InstanceType {
        requirements: vec![
            Requirement::single(labels::INSTANCE_TYPE, name),
            Requirement::single(aws::INSTANCE_FAMILY, family),
            Requirement::single(aws::INSTANCE_SIZE, size),
            Requirement::single(labels::ARCH, "amd64"),
            Requirement::new(aws::INSTANCE_GPU_COUNT, Operator::DoesNotExist, &[]),
        ],
        ..instance_type(name, capacity, offerings)
    }
}

fn both(zone: &str, od: f64, spot: f64) -> Vec<Offering> {
    vec![off(zone, OD, od), off(zone, SPOT, spot)]
}

fn input(types: Vec<InstanceType>) -> LaunchInput {
    LaunchInput {
        nodeclaim: "default-abc12".into(),
        nodepool: "default".into(),
        nodeclass: "default".into(),
        cluster_name: "prod".into(),
        instance_types: types,
        requirements: Vec::new(),
        requests: Resources::new().with(CPU, 1000),
        subnets: [
            ("us-east-1a".to_string(), "subnet-a".to_string()),
            ("us-east-1b".to_string(), "subnet-b".to_string()),
        ]
        .into(),
        user_tags: BTreeMap::new(),
        node_name: None,
    }
}

fn names(types: &[InstanceType]) -> Vec<&str> {
    types.iter().map(|t| t.name.as_str()).collect()
}

#[test]
fn incompatible_unfit_and_unavailable_are_filtered() {
    let mut gone = it("c5.xlarge", 4000, both("us-east-1a", 0.17, 0.07));
    for o in &mut gone.offerings {
        o.available = false;
    }
    let mut i = input(vec![
        it("m5.large", 2000, both("us-east-1a", 0.096, 0.04)),
        it("t3.small", 500, both("us-east-1a", 0.02, 0.01)),
        it("r5.large", 2000, both("us-east-1b", 0.126, 0.05)),
        gone,
    ]);
    i.requirements = vec![
        Requirement::new(aws::INSTANCE_FAMILY, Operator::NotIn, &["r5"]),
        Requirement::new(labels::CAPACITY_TYPE, Operator::In, &["on-demand"]),
    ];
    let types = filter_instance_types(&i).unwrap();
    assert_eq!(names(&types), vec!["m5.large"]);
    assert!(types[0].offerings.iter().all(|o| o.capacity_type == OD));

    i.requirements = vec![Requirement::new(
        labels::ZONE,
        Operator::In,
        &["us-east-1c"],
    )];
    assert_eq!(
        filter_instance_types(&i),
        Err(LaunchError::InsufficientCapacity {
            stage: "filtering for compatible, available offerings in zones with a subnet"
        })
    );
    // A claim that needs a GPU cannot use a type that has none.
    i.requirements = vec![Requirement::new(
        aws::INSTANCE_GPU_COUNT,
        Operator::Gt,
        &["0"],
    )];
    assert!(filter_instance_types(&i).is_err());
}

#[test]
fn deprecated_beta_keys_constrain_as_their_stable_names() {
    let i = |reqs: Vec<Requirement>| {
        let mut i = input(vec![
            it("m5.large", 2000, both("us-east-1a", 0.096, 0.04)),
            it("r5.large", 2000, both("us-east-1b", 0.126, 0.05)),
        ]);
        i.requirements = reqs;
        i
    };
    let zone = i(vec![Requirement::new(
        "failure-domain.beta.kubernetes.io/zone",
        Operator::In,
        &["us-east-1b"],
    )]);
    assert_eq!(
        names(&filter_instance_types(&zone).unwrap()),
        vec!["r5.large"]
    );
    let arch = i(vec![Requirement::new(
        "beta.kubernetes.io/arch",
        Operator::In,
        &["arm64"],
    )]);
    assert!(filter_instance_types(&arch).is_err());
}

#[test]
fn exotic_types_only_when_nothing_else() {
    let mut gpu = it("g4dn.xlarge", 4000, both("us-east-1a", 0.5, 0.01));
    gpu.capacity.set(NVIDIA_GPU, 1);
    let metal = it("m5.metal", 96000, both("us-east-1a", 4.6, 0.009));
    let plain = it("m5.large", 2000, both("us-east-1a", 0.096, 0.04));
    let i = input(vec![gpu.clone(), metal.clone(), plain]);
    assert_eq!(names(&filter_instance_types(&i).unwrap()), vec!["m5.large"]);
    let i = input(vec![gpu, metal]);
    assert_eq!(
        names(&filter_instance_types(&i).unwrap()),
        vec!["m5.metal", "g4dn.xlarge"]
    );
}

#[test]
fn spot_dearer_than_cheapest_on_demand_is_dropped_for_flexible_claims() {
    let types = vec![
        it("m5.large", 2000, both("us-east-1a", 0.096, 0.04)),
        // Its spot price beats its own on-demand price but not m5.large's.
        it("m5.2xlarge", 8000, both("us-east-1a", 0.384, 0.15)),
        it(
            "c5.xlarge",
            4000,
            vec![off("us-east-1a", SPOT, 0.09), off("us-east-1b", SPOT, 0.2)],
        ),
        it("t3.medium", 2000, vec![off("us-east-1a", OD, 0.1)]),
        // Only dear spot: the type goes.
        it("r5.xlarge", 4000, vec![off("us-east-1b", SPOT, 0.3)]),
    ];
    let out = filter_instance_types(&input(types.clone())).unwrap();
    assert_eq!(
        names(&out),
        vec!["m5.large", "c5.xlarge", "t3.medium", "m5.2xlarge"]
    );
    assert_eq!(out[1].offerings, vec![off("us-east-1a", SPOT, 0.09)]);
    assert_eq!(out[3].offerings, vec![off("us-east-1a", OD, 0.384)]);

    // The cheapest on-demand offering survives even when its own spot price is higher.
    let odd = vec![it("m6i.large", 2000, both("us-east-1a", 0.05, 0.06))];
    let out = filter_instance_types(&input(odd)).unwrap();
    assert_eq!(out[0].offerings, vec![off("us-east-1a", OD, 0.05)]);

    let mut spot_only = input(types.clone());
    spot_only.requirements = vec![Requirement::new(
        labels::CAPACITY_TYPE,
        Operator::In,
        &["spot"],
    )];
    let out = filter_instance_types(&spot_only).unwrap();
    assert_eq!(
        names(&out),
        vec!["m5.large", "c5.xlarge", "m5.2xlarge", "r5.xlarge"]
    );

    // minValues turns the opinionated filters off.
    let mut min = input(types);
    let mut family = Requirement::new(aws::INSTANCE_FAMILY, Operator::Exists, &[]);
    family.min_values = Some(1);
    min.requirements = vec![family];
    assert_eq!(filter_instance_types(&min).unwrap().len(), 5);
}

#[test]
fn one_reservation_per_zone_with_the_most_room() {
    let reserved = |id: &str, zone: &str, room: u32| {
        let mut o = off(zone, CapacityType::Reserved, 0.00001);
        o.reservation_id = Some(id.into());
        o.reservation_capacity = Some(room);
        o
    };
    let mut m5 = it("m5.large", 2000, both("us-east-1a", 0.096, 0.04));
    m5.offerings.extend([
        reserved("cr-small", "us-east-1a", 1),
        reserved("cr-big", "us-east-1a", 5),
        reserved("cr-b", "us-east-1b", 2),
    ]);
    let c5 = it("c5.large", 2000, both("us-east-1a", 0.085, 0.03));
    let out = filter_instance_types(&input(vec![m5.clone(), c5.clone()])).unwrap();
    assert_eq!(names(&out), vec!["m5.large"]);
    let ids: Vec<_> = out[0]
        .offerings
        .iter()
        .map(|o| o.reservation_id.as_deref().unwrap())
        .collect();
    assert_eq!(ids, vec!["cr-big", "cr-b"]);

    // Without any reservation nothing changes.
    let out = filter_instance_types(&input(vec![c5])).unwrap();
    assert_eq!(out[0].offerings.len(), 2);
}

#[test]
fn truncates_to_the_sixty_cheapest_and_checks_min_values() {
    let types: Vec<InstanceType> = (0..80)
        .map(|n| {
            it(
                &format!("f{}.s{n:02}", n % 3),
                2000,
                vec![off("us-east-1a", OD, 1.0 - f64::from(n) / 100.0)],
            )
        })
        .collect();
    let mut i = input(types);
    let out = filter_instance_types(&i).unwrap();
    assert_eq!(out.len(), MAX_INSTANCE_TYPES);
    assert_eq!(out[0].name, "f1.s79");
    assert_eq!(out[59].name, "f2.s20");
    assert!(out.windows(2).all(|w| cheapest(&w[0]) <= cheapest(&w[1])));

    let mut family = Requirement::new(aws::INSTANCE_FAMILY, Operator::Exists, &[]);
    family.min_values = Some(3);
    i.requirements = vec![family.clone()];
    assert!(filter_instance_types(&i).is_ok());
    family.min_values = Some(4);
    i.requirements = vec![family];
    assert_eq!(
        filter_instance_types(&i),
        Err(LaunchError::MinValues {
            key: aws::INSTANCE_FAMILY.into(),
            want: 4,
            got: 3
        })
    );
}

#[test]
fn capacity_type_priority_reserved_spot_on_demand() {
    let mut reserved = off("us-east-1a", CapacityType::Reserved, 0.0000096);
    reserved.reservation_id = Some("cr-123".into());
    let mut with_reserved = it("m5.large", 2000, both("us-east-1a", 0.096, 0.04));
    with_reserved.offerings.push(reserved);
    let plan = plan_launch(&input(vec![with_reserved.clone()])).unwrap();
    assert_eq!(plan.capacity_type, CapacityType::Reserved);
    assert_eq!(plan.default_target_capacity_type, "on-demand");
    assert_eq!(plan.overrides[0].reservation_id.as_deref(), Some("cr-123"));

    let mut i = input(vec![with_reserved]);
    i.requirements = vec![Requirement::new(
        labels::CAPACITY_TYPE,
        Operator::NotIn,
        &["reserved"],
    )];
    let plan = plan_launch(&i).unwrap();
    assert_eq!(plan.capacity_type, SPOT);
    assert_eq!(
        plan.allocation_strategy.as_str(),
        "price-capacity-optimized"
    );
    assert_eq!(plan.default_target_capacity_type, "spot");

    let i = input(vec![it(
        "m5.large",
        2000,
        vec![off("us-east-1a", OD, 0.096)],
    )]);
    let plan = plan_launch(&i).unwrap();
    assert_eq!(plan.capacity_type, OD);
    assert_eq!(plan.allocation_strategy.as_str(), "lowest-price");
    assert_eq!(
        few_types_on_demand_fallback(&i.requirements, plan.capacity_type, &plan.overrides),
        Some(1),
        "spot-flexible claim with 1 type on demand"
    );
}

#[test]
fn few_types_warning_only_for_spot_flexible_claims_launching_on_demand() {
    let o = |ty: &str, zone: &str| FleetOverride {
        instance_type: ty.into(),
        zone: zone.into(),
        subnet_id: format!("subnet-{zone}"),
        priority: 0.1,
        reservation_id: None,
        image_id: None,
    };
    // Four types, one of them in two zones: four distinct types.
    let four = vec![
        o("m5.large", "a"),
        o("m5.large", "b"),
        o("c5.large", "a"),
        o("r5.large", "a"),
        o("m6i.large", "a"),
    ];
    let mut five = four.clone();
    five.push(o("c6i.large", "a"));
    let any: Vec<Requirement> = Vec::new();
    let both = vec![Requirement::new(
        labels::CAPACITY_TYPE,
        Operator::In,
        &["spot", "on-demand"],
    )];
    let od_only = vec![Requirement::single(labels::CAPACITY_TYPE, "on-demand")];
    assert_eq!(few_types_on_demand_fallback(&any, OD, &four), Some(4));
    assert_eq!(few_types_on_demand_fallback(&both, OD, &four), Some(4));
    assert_eq!(
        few_types_on_demand_fallback(&both, OD, &five),
        None,
        "five is enough"
    );
    assert_eq!(
        few_types_on_demand_fallback(&od_only, OD, &four),
        None,
        "the claim never wanted spot"
    );
    assert_eq!(
        few_types_on_demand_fallback(&both, SPOT, &four),
        None,
        "launching spot"
    );
    assert_eq!(
        few_types_on_demand_fallback(&both, CapacityType::Reserved, &four),
        None
    );
}

#[test]
fn the_plan_predicts_the_fewest_pods_per_zone_it_launches_in() {
    let mut small = it("m5.large", 2000, vec![off("us-east-1a", OD, 0.096)]);
    small.capacity.set(nodewright_core::resources::PODS, 29);
    let mut big = it(
        "m5.xlarge",
        4000,
        vec![off("us-east-1a", OD, 0.192), off("us-east-1b", OD, 0.192)],
    );
    big.capacity.set(nodewright_core::resources::PODS, 58);
    let plan = plan_launch(&input(vec![small, big])).unwrap();
    assert_eq!(
        plan.predicted_ips,
        BTreeMap::from([
            ("us-east-1a".to_string(), 29),
            ("us-east-1b".to_string(), 58),
        ])
    );
}

#[test]
fn overrides_pair_types_with_zone_subnets_cheapest_first() {
    let mut i = input(vec![
        it(
            "m5.large",
            2000,
            vec![
                off("us-east-1a", SPOT, 0.04),
                off("us-east-1b", SPOT, 0.035),
                off("us-east-1c", SPOT, 0.01),
                off("us-east-1a", OD, 0.096),
            ],
        ),
        it(
            "c5.large",
            2000,
            vec![off("us-east-1b", SPOT, 0.03), off("us-east-1b", OD, 0.085)],
        ),
    ]);
    let plan = plan_launch(&i).unwrap();
    let got: Vec<(&str, &str, &str, f64)> = plan
        .overrides
        .iter()
        .map(|o| {
            (
                o.instance_type.as_str(),
                o.zone.as_str(),
                o.subnet_id.as_str(),
                o.priority,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("c5.large", "us-east-1b", "subnet-b", 0.03),
            ("m5.large", "us-east-1b", "subnet-b", 0.035),
            ("m5.large", "us-east-1a", "subnet-a", 0.04),
        ]
    );
    assert_eq!(plan.total_target_capacity, 1);
    assert!(plan.overrides.iter().all(|o| o.image_id.is_none()));

    i.subnets.clear();
    let err = plan_launch(&i).unwrap_err();
    assert!(err.is_insufficient_capacity(), "{err}");
    i.subnets.insert("us-east-1a".into(), "subnet-a".into());
    i.user_tags
        .insert("karpenter.sh/nodepool".into(), "x".into());
    assert!(!plan_launch(&i).unwrap_err().is_insufficient_capacity());
}

#[test]
fn tags_are_set_and_restricted_user_tags_rejected() {
    let mut i = input(vec![it("m5.large", 2000, both("us-east-1a", 0.096, 0.04))]);
    i.user_tags.insert("team".into(), "web".into());
    i.node_name = Some("ip-10-0-0-1.ec2.internal".into());
    let tags = plan_launch(&i).unwrap().tags;
    let want: BTreeMap<String, String> = [
        ("team", "web"),
        ("kubernetes.io/cluster/prod", "owned"),
        ("karpenter.sh/nodepool", "default"),
        ("karpenter.sh/nodeclaim", "default-abc12"),
        ("eks:eks-cluster-name", "prod"),
        ("karpenter.k8s.aws/ec2nodeclass", "default"),
        ("Name", "ip-10-0-0-1.ec2.internal"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(tags, want);

    for key in [
        "karpenter.sh/nodepool",
        "karpenter.sh/nodeclaim",
        "eks:eks-cluster-name",
        "karpenter.k8s.aws/ec2nodeclass",
        "kubernetes.io/cluster/other",
    ] {
        let mut bad = i.clone();
        bad.user_tags.insert(key.into(), "x".into());
        assert_eq!(
            plan_launch(&bad),
            Err(LaunchError::RestrictedTag { key: key.into() })
        );
    }
    // Not a cluster tag by the restricted pattern.
    let mut ok = i.clone();
    ok.user_tags
        .insert("kubernetes.io/cluster/".into(), "x".into());
    assert!(plan_launch(&ok).is_ok());
}

#[test]
fn ice_fallback_picks_the_next_offering_then_the_next_capacity_type() {
    let now = Timestamp(5_000_000);
    let mut types = vec![
        it("c5.large", 2000, both("us-east-1a", 0.085, 0.03)),
        it("m5.large", 2000, both("us-east-1b", 0.096, 0.04)),
    ];
    let mut cache = UnavailableOfferings::new();
    let first = plan_launch(&input(types.clone())).unwrap();
    assert_eq!(
        (
            first.overrides[0].instance_type.as_str(),
            first.capacity_type
        ),
        ("c5.large", SPOT)
    );

    let ice = |o: &FleetOverride, ct| FleetError {
        code: "InsufficientInstanceCapacity".into(),
        capacity_type: ct,
        instance_type: o.instance_type.clone(),
        zone: o.zone.clone(),
        subnet_id: Some(o.subnet_id.clone()),
    };
    cache.record(&ice(&first.overrides[0], SPOT), now);
    cache.apply(&mut types, now);
    let second = plan_launch(&input(types.clone())).unwrap();
    assert_eq!(second.capacity_type, SPOT);
    assert_eq!(second.overrides.len(), 1);
    assert_eq!(
        (
            second.overrides[0].instance_type.as_str(),
            second.overrides[0].zone.as_str()
        ),
        ("m5.large", "us-east-1b")
    );

    cache.record(&ice(&second.overrides[0], SPOT), now);
    cache.apply(&mut types, now);
    let third = plan_launch(&input(types.clone())).unwrap();
    assert_eq!(third.capacity_type, OD);
    assert_eq!(third.overrides[0].instance_type, "c5.large");
    assert_eq!(third.overrides.len(), 2);
}

#[test]
fn a_full_subnet_moves_the_launch_to_another_zone() {
    use crate::subnets::{SubnetInfo, zonal_subnets};
    let now = Timestamp(9_000);
    let types = vec![it(
        "m5.large",
        2000,
        vec![off("us-east-1a", SPOT, 0.03), off("us-east-1b", SPOT, 0.04)],
    )];
    let subnets = [
        SubnetInfo {
            id: "subnet-a".into(),
            zone: "us-east-1a".into(),
            available_ips: 10,
        },
        SubnetInfo {
            id: "subnet-b".into(),
            zone: "us-east-1b".into(),
            available_ips: 10,
        },
    ];
    let mut cache = UnavailableOfferings::new();
    let mut i = input(types);
    i.subnets = zonal_subnets(&subnets, &cache, now);
    assert_eq!(plan_launch(&i).unwrap().overrides[0].subnet_id, "subnet-a");

    cache.record(
        &FleetError {
            code: "InsufficientFreeAddressesInSubnet".into(),
            capacity_type: SPOT,
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            subnet_id: Some("subnet-a".into()),
        },
        now,
    );
    i.subnets = zonal_subnets(&subnets, &cache, now);
    let plan = plan_launch(&i).unwrap();
    assert_eq!(plan.overrides.len(), 1);
    assert_eq!(plan.overrides[0].subnet_id, "subnet-b");
}
