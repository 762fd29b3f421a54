//! Static capacity's rules: the target, the cap by `limits.nodes`, and which claims go first.

use super::*;
use crate::disruption::candidates::DO_NOT_DISRUPT;
use crate::model::NodeClaim;
use crate::requirements::Requirement;
use crate::resources::Resources;
use crate::testkit::cluster::cluster;
use crate::time::Timestamp;
use std::sync::Arc;

fn static_pool(s: &mut Snapshot, replicas: i64) {
    s.nodepools[0].replicas = Some(replicas);
}

#[test]
fn a_pool_below_its_replicas_creates_the_difference_and_dynamic_pools_are_left_alone() {
    let mut s = cluster(&["a"], &[("n1", "small", &[])]);
    assert!(plan(&s).is_empty(), "a pool without replicas is not static");
    static_pool(&mut s, 3);
    assert_eq!(
        plan(&s),
        vec![Scale {
            nodepool: "default".into(),
            create: 2,
            ..Scale::default()
        }]
    );
    // Claims being deleted no longer count.
    s.claim_mut(0).deletion_timestamp = Some(Timestamp(1));
    assert_eq!(plan(&s)[0].create, 3);
}

#[test]
fn limits_nodes_caps_the_target() {
    let mut s = cluster(&["a"], &[]);
    static_pool(&mut s, 5);
    s.nodepools[0].limits = Resources::new().with(NODES, 2);
    assert_eq!(plan(&s)[0].create, 2);
    static_pool(&mut s, 1);
    assert_eq!(plan(&s)[0].create, 1);
}

#[test]
fn extra_claims_go_unlaunched_first_then_empty_then_fewest_pods_and_protected_last() {
    let mut s = cluster(
        &["a"],
        &[
            ("busy", "large", &[500, 500, 500]),
            ("quiet", "large", &[500]),
            ("empty", "large", &[]),
            ("guarded", "large", &[]),
        ],
    );
    s.node_claims.push(Arc::new(NodeClaim {
        name: "c-unlaunched".into(),
        nodepool: "default".into(),
        ..NodeClaim::default()
    }));
    // A lone do-not-disrupt pod: fewer pods than `busy`, still last.
    let mut pod = (*s.pods[0]).clone();
    pod.name = "guarded-0".into();
    pod.uid = "uid-guarded-0".into();
    pod.node_name = Some("guarded".into());
    pod.annotations.insert(DO_NOT_DISRUPT.into(), "true".into());
    s.pods.push(pod.into());
    static_pool(&mut s, 1);
    assert_eq!(
        plan(&s)[0].delete,
        ["c-unlaunched", "c-empty", "c-quiet", "c-busy"]
    );
    static_pool(&mut s, 5);
    assert!(plan(&s).is_empty(), "at its target: nothing to do");
}

#[test]
fn static_claims_may_be_any_type_the_pool_admits_cheapest_first() {
    let mut s = cluster(&["a", "b"], &[]);
    let types = s.instance_types["default"].clone();
    assert_eq!(instance_types(&s.nodepools[0], &types), ["small", "large"]);
    s.nodepools[0].template.requirements =
        vec![Requirement::single(crate::labels::INSTANCE_TYPE, "large")];
    assert_eq!(instance_types(&s.nodepools[0], &types), ["large"]);
    // A zone no offering is in leaves nothing.
    s.nodepools[0].template.requirements = vec![Requirement::single(crate::labels::ZONE, "z")];
    assert!(instance_types(&s.nodepools[0], &types).is_empty());
}

#[test]
fn a_static_pools_empty_node_is_no_candidate_for_emptiness_or_consolidation() {
    use crate::disruption::candidates::{Blocker, select_both_counted};
    let mut s = cluster(&["a"], &[("n1", "large", &[])]);
    let (graceful, _, _) = select_both_counted(&s);
    assert!(graceful.candidates.iter().any(|c| c.node.name == "n1"));
    static_pool(&mut s, 1);
    let (graceful, _, _) = select_both_counted(&s);
    assert!(graceful.candidates.is_empty());
    assert!(
        graceful
            .blocked
            .iter()
            .any(|(n, b)| n == "n1" && matches!(b, Blocker::StaticNodePool { .. })),
        "{:?}",
        graceful.blocked
    );
}

#[test]
fn drifted_claims_are_replaced_one_for_one_within_the_drift_budget() {
    let mut s = cluster(
        &["a"],
        &[
            ("n1", "large", &[500]),
            ("n2", "large", &[]),
            ("n3", "large", &[]),
        ],
    );
    static_pool(&mut s, 3);
    for (c, at) in s
        .node_claims
        .iter_mut()
        .map(Arc::make_mut)
        .zip([30, 10, 20])
    {
        c.launched = true;
        c.drifted = Some("NodePoolDrifted".into());
        c.drifted_at = Some(Timestamp(at));
    }
    s.nodepools[0].disruption.budgets = vec![crate::model::Budget {
        nodes: crate::model::BudgetNodes::Count(1),
        schedule: None,
        duration: None,
        reasons: vec![],
    }];
    // One at a time, longest drifted first; the pool is at its size, so nothing else.
    let sc = &plan(&s)[0];
    assert_eq!((sc.create, sc.delete.clone()), (0, vec![]));
    assert_eq!(sc.replace, ["c-n2"]);

    // The replacement exists: the pair counts as one claim, and the budget is used up.
    let mut new = NodeClaim {
        name: "c-new".into(),
        nodepool: "default".into(),
        launched: true,
        ..NodeClaim::default()
    };
    Arc::make_mut(&mut new.annotations).insert(REPLACES.into(), "c-n2".into());
    s.node_claims.push(Arc::new(new));
    assert!(plan(&s).is_empty(), "{:?}", plan(&s));

    // Initialized, it takes over: the drifted claim goes.
    s.node_claims
        .last_mut()
        .map(Arc::make_mut)
        .unwrap()
        .initialized = true;
    let sc = &plan(&s)[0];
    assert_eq!(sc.replaced, ["c-n2"]);
    assert!(sc.replace.is_empty() && sc.delete.is_empty() && sc.create == 0);
}

#[test]
fn the_drift_method_leaves_a_static_pools_drifted_nodes_to_static_capacity() {
    use crate::disruption::engine_simulator::EngineSimulator;
    use crate::disruption::plan::{Settings, plan as disrupt};
    let mut s = cluster(&["a"], &[("n1", "large", &[500])]);
    s.claim_mut(0).drifted = Some("NodePoolDrifted".into());
    s.claim_mut(0).drifted_at = Some(Timestamp(1));
    let drift = |s: &Snapshot| {
        disrupt(s, &EngineSimulator::default(), Settings::default())
            .commands
            .iter()
            .any(|c| c.method == crate::disruption::command::Method::Drift)
    };
    assert!(
        drift(&s),
        "a dynamic pool's drifted node is replaced by drift"
    );
    static_pool(&mut s, 1);
    assert!(!drift(&s));
}
