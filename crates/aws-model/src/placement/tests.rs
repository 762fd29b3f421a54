use nodewright_core::model::CapacityType;
use nodewright_core::resources::Resources;
use nodewright_core::testkit::{instance_type, offering};

use super::*;

fn group(strategy: Strategy, partitions: u32) -> PlacementGroup {
    PlacementGroup {
        id: "pg-0abc".into(),
        name: "ml".into(),
        strategy,
        partition_count: partitions,
        spread_level: None,
    }
}

fn info(name: &str, burstable: bool) -> InstanceTypeInfo {
    InstanceTypeInfo {
        name: name.into(),
        burstable,
        ..Default::default()
    }
}

fn it(name: &str) -> InstanceType {
    let offering = offering("us-east-1a", CapacityType::OnDemand, 0.1);
    InstanceType {
        requirements: vec![Requirement::single("kubernetes.io/arch", "amd64")],
        ..instance_type(name, Resources::default(), vec![offering])
    }
}

fn req(key: &str, op: Operator, values: &[&str]) -> Requirement {
    Requirement::new(key, op, values)
}

#[test]
fn a_partition_group_adds_its_id_and_partitions_one_to_n() {
    let r = group(Strategy::Partition, 3).requirements();
    assert_eq!(
        r,
        vec![
            Requirement::single(aws::PLACEMENT_GROUP_ID, "pg-0abc"),
            req(
                aws::PLACEMENT_GROUP_PARTITION,
                Operator::In,
                &["1", "2", "3"]
            ),
        ]
    );
    for s in [Strategy::Cluster, Strategy::Spread] {
        assert_eq!(
            group(s, 0).requirements(),
            vec![Requirement::single(aws::PLACEMENT_GROUP_ID, "pg-0abc")],
            "{s:?}"
        );
    }
}

#[test]
fn a_cluster_group_cannot_hold_burstable_mac_or_flex_types() {
    let cluster = group(Strategy::Cluster, 0);
    assert!(cluster.admits(&info("c5.large", false)));
    assert!(!cluster.admits(&info("t3.large", true)));
    assert!(!cluster.admits(&info("mac1.metal", false)));
    assert!(!cluster.admits(&info("m7i-flex.large", false)));
    assert!(group(Strategy::Spread, 0).admits(&info("t3.large", true)));

    let infos = [info("c5.large", false), info("t3.large", true)];
    let mut types = vec![it("c5.large"), it("t3.large"), it("x9.unknown")];
    apply_placement_group(&mut types, &cluster, |n| infos.iter().find(|i| i.name == n));
    let avail: Vec<bool> = types.iter().map(|t| t.offerings[0].available).collect();
    assert_eq!(avail, vec![true, false, true]);
    for t in &types {
        assert!(
            t.requirements
                .contains(&Requirement::single(aws::PLACEMENT_GROUP_ID, "pg-0abc"))
        );
    }
    // Applying another group replaces the first one's requirements.
    let mut other = group(Strategy::Partition, 2);
    other.id = "pg-0def".into();
    apply_placement_group(&mut types, &other, |_| None);
    let ids: Vec<&Requirement> = types[0]
        .requirements
        .iter()
        .filter(|r| r.key == aws::PLACEMENT_GROUP_ID)
        .collect();
    assert_eq!(
        ids,
        vec![&Requirement::single(aws::PLACEMENT_GROUP_ID, "pg-0def")]
    );
}

#[test]
fn tenancy_is_shared_unless_the_claim_rules_it_out() {
    assert_eq!(launch_tenancy(&[]), TENANCY_DEFAULT);
    let both = req(
        aws::INSTANCE_TENANCY,
        Operator::In,
        &["default", "dedicated"],
    );
    assert_eq!(launch_tenancy(&[both]), TENANCY_DEFAULT);
    let dedicated = req(aws::INSTANCE_TENANCY, Operator::In, &["dedicated"]);
    assert_eq!(launch_tenancy(&[dedicated]), TENANCY_DEDICATED);
    let not_default = req(aws::INSTANCE_TENANCY, Operator::NotIn, &["default"]);
    assert_eq!(launch_tenancy(&[not_default]), TENANCY_DEDICATED);
}

#[test]
fn a_partition_is_pinned_only_when_the_claim_allows_exactly_one() {
    let g = group(Strategy::Partition, 4);
    assert_eq!(launch_partition(&[], &g), None);
    let one = req(aws::PLACEMENT_GROUP_PARTITION, Operator::In, &["3"]);
    assert_eq!(launch_partition(std::slice::from_ref(&one), &g), Some(3));
    let two = req(aws::PLACEMENT_GROUP_PARTITION, Operator::In, &["2", "3"]);
    assert_eq!(launch_partition(std::slice::from_ref(&two), &g), None);
    let narrowed = req(aws::PLACEMENT_GROUP_PARTITION, Operator::NotIn, &["2"]);
    assert_eq!(launch_partition(&[two, narrowed], &g), Some(3));
    assert_eq!(launch_partition(&[one], &group(Strategy::Cluster, 0)), None);
    // Numeric operators compare numbers, as the kube-scheduler's node affinity does.
    let above_three = req(aws::PLACEMENT_GROUP_PARTITION, Operator::Gt, &["3"]);
    assert_eq!(launch_partition(&[above_three], &g), Some(4));
    let a_word = req(aws::INSTANCE_TENANCY, Operator::Gt, &["1"]);
    assert_eq!(launch_tenancy(&[a_word]), TENANCY_DEDICATED);
}

#[test]
fn launch_placement_labels_and_ice_scope() {
    let g = group(Strategy::Partition, 4);
    let pinned = LaunchPlacement::new(
        &[
            req(aws::PLACEMENT_GROUP_PARTITION, Operator::In, &["2"]),
            req(aws::INSTANCE_TENANCY, Operator::In, &["dedicated"]),
        ],
        Some(&g),
    );
    assert!(!pinned.is_default());
    assert_eq!(
        pinned.labels(),
        vec![
            (aws::INSTANCE_TENANCY, "dedicated".to_string()),
            (aws::PLACEMENT_GROUP_ID, "pg-0abc".to_string()),
            (aws::PLACEMENT_GROUP_PARTITION, "2".to_string()),
        ]
    );
    assert_eq!(pinned.ice_scope().as_deref(), Some("pg-0abc:2"));
    let free = LaunchPlacement::new(&[], Some(&g));
    assert_eq!(free.ice_scope().as_deref(), Some("pg-0abc"));
    let plain = LaunchPlacement::new(&[], None);
    assert!(plain.is_default());
    assert_eq!(plain.ice_scope(), None);
    assert_eq!(
        plain.labels(),
        vec![(aws::INSTANCE_TENANCY, "default".to_string())]
    );
}

#[test]
fn a_spread_group_offers_shared_tenancy_only() {
    let tenancy = req(aws::INSTANCE_TENANCY, Operator::In, TENANCIES);
    let with_tenancy = || {
        let mut t = it("m5.large");
        t.requirements.push(tenancy.clone());
        t
    };
    let mut spread = vec![with_tenancy()];
    apply_placement_group(&mut spread, &group(Strategy::Spread, 0), |_| None);
    let got = spread[0]
        .requirements
        .iter()
        .find(|r| r.key == aws::INSTANCE_TENANCY)
        .unwrap();
    assert_eq!(
        (got.operator, got.values.to_vec()),
        (Operator::In, vec!["default".to_string()])
    );
    for s in [Strategy::Cluster, Strategy::Partition] {
        let mut other = vec![with_tenancy()];
        apply_placement_group(&mut other, &group(s, 2), |_| None);
        assert!(other[0].requirements.contains(&tenancy), "{s:?}");
    }
}
