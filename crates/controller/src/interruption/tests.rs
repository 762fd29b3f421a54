//! The decision as plain data: notices against a small cluster state.

use nodewright_cloud::{Interruption, InterruptionKind};
use serde_json::{Value, json};

use nodewright_testkit::json::merge;
use nodewright_testkit::k8s;

use super::*;
use crate::state::{Kind, Object};
use crate::tests::{object, state_of};

/// A claim of the NodePool `spot`, launched as `instance` if given, with `extra` merged in.
fn claim(name: &str, instance: Option<&str>, extra: Value) -> Object {
    let mut v = merge(
        k8s::nodeclaim(name),
        json!({"metadata": {"labels": {"karpenter.sh/nodepool": "spot",
            "karpenter.sh/capacity-type": "spot", "node.kubernetes.io/instance-type": "m5.large",
            "topology.kubernetes.io/zone": "us-west-2a"}}}),
    );
    if let Some(id) = instance {
        v["status"] = json!({"providerID": format!("aws:///us-west-2a/{id}")});
    }
    object(Kind::NodeClaim, merge(v, extra))
}

fn node(name: &str, instance: &str) -> Object {
    let provider_id = format!("aws:///us-west-2a/{instance}");
    object(Kind::Node, k8s::node(name, &provider_id))
}

fn notice(kind: InterruptionKind, ids: &[&str]) -> Interruption {
    Interruption {
        kind,
        id: "event-1".into(),
        instance_ids: ids.iter().map(|s| s.to_string()).collect(),
        time: None,
    }
}

fn reasons(d: &Decision) -> Vec<(String, String)> {
    d.notify
        .iter()
        .map(|e| (e.reason.clone(), e.regarding.name.clone()))
        .collect()
}

fn run(n: &Interruption, s: &ClusterState) -> Decision {
    decide(n, s, &InstanceIndex::new(s))
}

#[test]
fn a_spot_interruption_deletes_the_claim_and_names_claim_and_node() {
    let s = state_of(vec![
        claim("spot-a", Some("i-1"), json!({})),
        node("ip-10-0-0-1", "i-1"),
        claim("spot-b", Some("i-2"), json!({})),
    ]);
    let d = run(&notice(InterruptionKind::SpotInterrupted, &["i-1"]), &s);
    assert_eq!(
        reasons(&d),
        [
            ("SpotInterrupted".into(), "spot-a".into()),
            ("SpotInterrupted".into(), "ip-10-0-0-1".into())
        ]
    );
    assert_eq!(
        d.delete,
        vec![Deletion {
            nodeclaim: "spot-a".into(),
            provider_id: "aws:///us-west-2a/i-1".into(),
            node: Some("ip-10-0-0-1".into()),
            nodepool: "spot".into(),
            capacity_type: "spot".into(),
            consolidation_policy: "WhenEmptyOrUnderutilized".into(),
            termination_mode: "graceful",
        }]
    );
    assert!(d.unknown.is_empty());
}

#[test]
fn each_terminating_kind_publishes_its_event() {
    let s = state_of(vec![claim("c", Some("i-1"), json!({}))]);
    for (kind, reason) in [
        (InterruptionKind::ScheduledChange, "InstanceUnhealthy"),
        (InterruptionKind::InstanceStopped, "InstanceStopping"),
        (InterruptionKind::InstanceTerminated, "InstanceTerminating"),
        (
            InterruptionKind::CapacityReservationInterrupted,
            "CapacityReservationInstanceInterrupted",
        ),
    ] {
        let d = run(&notice(kind, &["i-1"]), &s);
        assert_eq!(
            reasons(&d),
            [(reason.to_string(), "c".to_string())],
            "{kind:?}"
        );
        assert_eq!(d.delete.len(), 1, "{kind:?}");
        assert_eq!(d.delete[0].node, None);
    }
}

#[test]
fn a_rebalance_recommendation_only_tells() {
    let s = state_of(vec![claim("c", Some("i-1"), json!({})), node("n", "i-1")]);
    let d = run(
        &notice(InterruptionKind::RebalanceRecommendation, &["i-1"]),
        &s,
    );
    assert_eq!(
        reasons(&d),
        [
            ("SpotRebalanceRecommendation".into(), "c".into()),
            ("SpotRebalanceRecommendation".into(), "n".into())
        ]
    );
    assert!(d.delete.is_empty());
}

#[test]
fn no_ops_and_unknown_instances_do_nothing() {
    let s = state_of(vec![claim("c", Some("i-1"), json!({}))]);
    assert_eq!(
        run(&notice(InterruptionKind::NoOp, &["i-1"]), &s),
        Decision::default()
    );
    let d = run(&notice(InterruptionKind::SpotInterrupted, &["i-9"]), &s);
    assert!(d.notify.is_empty() && d.delete.is_empty());
    assert_eq!(d.unknown, vec!["i-9"]);
}

#[test]
fn a_scheduled_change_covers_every_named_instance() {
    let s = state_of(vec![
        claim("a", Some("i-1"), json!({})),
        claim("b", Some("i-2"), json!({})),
        claim("unlaunched", None, json!({})),
    ]);
    let d = run(
        &notice(InterruptionKind::ScheduledChange, &["i-2", "i-1", "i-3"]),
        &s,
    );
    let deleted: Vec<&str> = d.delete.iter().map(|x| x.nodeclaim.as_str()).collect();
    assert_eq!(deleted, ["b", "a"]);
    assert_eq!(d.unknown, vec!["i-3"]);
}

#[test]
fn a_claim_already_deleting_is_told_but_not_deleted_again() {
    let s = state_of(vec![claim(
        "c",
        Some("i-1"),
        json!({"metadata": {"deletionTimestamp": "2024-06-01T00:00:00Z", "finalizers": ["karpenter.sh/termination"]}}),
    )]);
    let d = run(&notice(InterruptionKind::SpotInterrupted, &["i-1"]), &s);
    assert_eq!(reasons(&d), [("SpotInterrupted".into(), "c".into())]);
    assert!(d.delete.is_empty());
}

#[test]
fn the_termination_mode_and_policy_follow_the_claim_and_pool() {
    let s = state_of(vec![
        claim(
            "c",
            Some("i-1"),
            json!({"spec": {"terminationGracePeriod": "0s"}}),
        ),
        object(
            Kind::NodePool,
            merge(
                k8s::nodepool("spot"),
                json!({"spec": {"disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"}}}),
            ),
        ),
    ]);
    let d = run(&notice(InterruptionKind::InstanceTerminated, &["i-1"]), &s);
    assert_eq!(d.delete[0].termination_mode, "forceful");
    assert_eq!(d.delete[0].consolidation_policy, "WhenEmpty");
}

#[test]
fn instance_ids_come_from_the_last_segment() {
    assert_eq!(instance_id("aws:///us-east-1a/i-0abc"), Some("i-0abc"));
    assert_eq!(instance_id("kwok://node-1/i-7"), Some("i-7"));
    assert_eq!(instance_id("aws:///us-east-1a/"), None);
    assert_eq!(instance_id("i-0abc"), None);
}

#[test]
fn only_interrupted_claims_mark_their_pool_from_their_labels() {
    let s = state_of(vec![claim("spot-a", Some("i-1"), json!({}))]);
    let d = run(
        &notice(InterruptionKind::SpotInterrupted, &["i-1", "i-unknown"]),
        &s,
    );
    assert_eq!(
        d.mark,
        vec![InterruptedOffering {
            kind: InterruptionKind::SpotInterrupted,
            instance_type: "m5.large".into(),
            zone: "us-west-2a".into(),
            reservation_id: None,
        }],
        "the instance without a claim marks nothing"
    );
    assert_eq!(d.unknown, ["i-unknown"]);
    for kind in [
        InterruptionKind::RebalanceRecommendation,
        InterruptionKind::ScheduledChange,
        InterruptionKind::InstanceStopped,
    ] {
        assert!(run(&notice(kind, &["i-1"]), &s).mark.is_empty(), "{kind:?}");
    }
}

#[test]
fn a_reservation_interruption_names_the_claims_reservation() {
    let s = state_of(vec![claim(
        "r",
        Some("i-1"),
        json!({"metadata": {"labels": {
            "karpenter.sh/nodepool": "default", "karpenter.sh/capacity-type": "reserved",
            "karpenter.k8s.aws/capacity-reservation-id": "cr-1",
        }}}),
    )]);
    let d = run(
        &notice(InterruptionKind::CapacityReservationInterrupted, &["i-1"]),
        &s,
    );
    assert_eq!(d.mark.len(), 1);
    assert_eq!(d.mark[0].reservation_id.as_deref(), Some("cr-1"));
    assert_eq!(d.delete.len(), 1);
}
