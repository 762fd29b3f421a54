//! Static capacity's rules: the target, the cap by `limits.nodes`, and which claims go first.

use super::*;
use crate::disruption::candidates::DO_NOT_DISRUPT;
use crate::disruption::fixture::cluster;
use crate::model::NodeClaim;
use crate::requirements::Requirement;
use crate::resources::Resources;
use crate::time::Timestamp;

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
            delete: vec![]
        }]
    );
    // Claims being deleted no longer count.
    s.node_claims[0].deletion_timestamp = Some(Timestamp(1));
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
    s.node_claims.push(NodeClaim {
        name: "c-unlaunched".into(),
        nodepool: "default".into(),
        ..NodeClaim::default()
    });
    // A lone do-not-disrupt pod: fewer pods than `busy`, still last.
    let mut pod = s.pods[0].clone();
    pod.name = "guarded-0".into();
    pod.uid = "guarded-0".into();
    pod.node_name = Some("guarded".into());
    pod.annotations.insert(DO_NOT_DISRUPT.into(), "true".into());
    s.pods.push(pod);
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
