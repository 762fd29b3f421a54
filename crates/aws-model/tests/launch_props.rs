//! Invariants of launch planning over random instance types and offerings.

use std::collections::{BTreeMap, BTreeSet};

use nodewright_aws_model::launch::{LaunchInput, MAX_INSTANCE_TYPES, plan_launch};
use nodewright_core::labels;
use nodewright_core::model::{CapacityType, InstanceType, Offering, Overhead};
use nodewright_core::requirements::{Operator, Requirement};
use nodewright_core::resources::{CPU, Resources};
use proptest::prelude::*;

const ZONES: [&str; 3] = ["z-a", "z-b", "z-c"];
const CAPACITY: [CapacityType; 3] = [
    CapacityType::OnDemand,
    CapacityType::Spot,
    CapacityType::Reserved,
];

fn offering() -> impl Strategy<Value = Offering> {
    (0..3usize, 0..3usize, 1..1000u32, prop::bool::weighted(0.8)).prop_map(|(z, c, p, avail)| {
        let ct = CAPACITY[c];
        Offering {
            zone: ZONES[z].into(),
            capacity_type: ct,
            price: f64::from(p) / 1000.0,
            available: avail,
            reservation_id: (ct == CapacityType::Reserved).then(|| format!("cr-{z}-{p}")),
            reservation_capacity: (ct == CapacityType::Reserved).then_some(p % 4),
        }
    })
}

fn types() -> impl Strategy<Value = Vec<InstanceType>> {
    prop::collection::vec((1..16i64, prop::collection::vec(offering(), 0..6)), 1..90).prop_map(
        |specs| {
            specs
                .into_iter()
                .enumerate()
                .map(|(i, (cpus, offerings))| InstanceType {
                    name: format!("t{i}.x"),
                    requirements: vec![Requirement::single(
                        labels::INSTANCE_TYPE,
                        &format!("t{i}.x"),
                    )],
                    capacity: Resources::new().with(CPU, cpus * 1000),
                    overhead: Overhead::default(),
                    offerings,
                })
                .collect()
        },
    )
}

fn capacity_requirement() -> impl Strategy<Value = Vec<Requirement>> {
    prop::sample::subsequence(vec!["on-demand", "spot", "reserved"], 1..=3).prop_map(
        |cts: Vec<&str>| vec![Requirement::new(labels::CAPACITY_TYPE, Operator::In, &cts)],
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]
    #[test]
    fn plans_only_allowed_available_offerings(
        types in types(),
        requirements in capacity_requirement(),
        cpu in 0..8000i64,
        subnet_zones in prop::sample::subsequence(ZONES.to_vec(), 0..=3),
    ) {
        let subnets: BTreeMap<String, String> =
            subnet_zones.iter().map(|z| (z.to_string(), format!("subnet-{z}"))).collect();
        let input = LaunchInput {
            nodeclaim: "c".into(),
            nodepool: "p".into(),
            nodeclass: "n".into(),
            cluster_name: "k".into(),
            instance_types: types.clone(),
            requirements: requirements.clone(),
            requests: Resources::new().with(CPU, cpu),
            subnets: subnets.clone(),
            user_tags: BTreeMap::new(),
            node_name: None,
        };
        let allowed: BTreeSet<&str> = requirements[0].values.iter().map(String::as_str).collect();
        let launchable = |ct: CapacityType| {
            allowed.contains(ct.as_str())
                && types.iter().any(|it| {
                    it.capacity.get(CPU) >= cpu
                        && it.offerings.iter().any(|o| {
                            o.available && o.capacity_type == ct && subnets.contains_key(&o.zone)
                        })
                })
        };
        match plan_launch(&input) {
            Ok(plan) => {
                prop_assert!(allowed.contains(plan.capacity_type.as_str()));
                prop_assert!(!plan.overrides.is_empty());
                let names: BTreeSet<&str> =
                    plan.overrides.iter().map(|o| o.instance_type.as_str()).collect();
                prop_assert!(names.len() <= MAX_INSTANCE_TYPES);
                let mut pairs = BTreeSet::new();
                for o in &plan.overrides {
                    prop_assert!(pairs.insert((&o.instance_type, &o.zone)), "duplicate pool");
                    prop_assert_eq!(Some(&o.subnet_id), subnets.get(&o.zone));
                    let it = types.iter().find(|t| t.name == o.instance_type).unwrap();
                    prop_assert!(it.capacity.get(CPU) >= cpu);
                    prop_assert!(it.offerings.iter().any(|of| of.available
                        && of.zone == o.zone
                        && of.capacity_type == plan.capacity_type
                        && of.price == o.priority));
                }
                prop_assert!(plan.overrides.windows(2).all(|w| w[0].priority <= w[1].priority));
                // A higher-priority capacity type is chosen whenever it could be launched.
                // (Reserved is chosen whenever launchable; spot may be filtered as too dear.)
                if plan.capacity_type != CapacityType::Reserved {
                    prop_assert!(!launchable(CapacityType::Reserved));
                }
            }
            Err(_) => {
                prop_assert!(CAPACITY.iter().all(|ct| !launchable(*ct)));
            }
        }
    }
}
