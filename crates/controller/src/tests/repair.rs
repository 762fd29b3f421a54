//! The node repair loop against the in-memory API: a Node's `Ready=False` read from its
//! status, nothing done within the toleration, then the claim stamped with a termination
//! deadline of now and deleted, counted in both disruption metrics; a pool over the guard
//! gets `NodeRepairBlocked` instead.

use std::time::Duration;

use serde_json::json;

use super::Harness;
use super::termination::initialized_node;
use crate::clock::{rfc3339, to_time};
use crate::lifecycle::TERMINATION_TIMESTAMP;
use crate::repair::NodeRepair;
use crate::state::{Kind, Object};

/// Node `name` gets `Ready=False` since `minutes_ago` by the harness clock.
fn not_ready(h: &Harness, name: &str, minutes_ago: i64) {
    let Some(Object::Node(n)) = h.api.get(Kind::Node, name) else {
        panic!("no node {name}")
    };
    let mut v = serde_json::to_value(&*n).unwrap();
    let since = nodewright_core::time::Timestamp(h.clock.now().0 - minutes_ago * 60_000);
    v["status"]["conditions"] = json!([{
        "type": "Ready", "status": "False", "reason": "KubeletNotReady",
        "lastTransitionTime": to_time(since),
    }]);
    h.api.put_value(Kind::Node, v);
}

#[tokio::test(start_paused = true)]
async fn a_node_not_ready_past_its_toleration_loses_its_claim_at_once() {
    let h = Harness::new();
    let claim = initialized_node(&h).await;
    let repair = NodeRepair::new(&h.context()).expect("the test cloud has a policy");
    not_ready(&h, "n1", 29);
    assert_eq!(repair.reconcile().await, Ok(vec![]));
    assert!(h.claims()[0].metadata.deletion_timestamp.is_none());

    tokio::time::advance(Duration::from_secs(60)).await;
    assert_eq!(repair.reconcile().await, Ok(vec![claim.clone()]));
    let c = h
        .claims()
        .into_iter()
        .find(|c| c.metadata.name.as_deref() == Some(&claim));
    let c = c.expect("held by its finalizer");
    assert!(c.metadata.deletion_timestamp.is_some());
    assert_eq!(
        c.metadata.annotations.unwrap().get(TERMINATION_TIMESTAMP),
        Some(&rfc3339(h.clock.now()))
    );
    let metrics = h.metrics.encode();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("karpenter_nodeclaims_disrupted_total{")
                && l.contains(r#"reason="unhealthy""#)
                && l.contains(r#"nodepool="default""#)
                && l.ends_with(" 1")),
        "{metrics}"
    );
    assert!(
        metrics.lines().any(
            |l| l.starts_with("karpenter_nodeclaims_unhealthy_disrupted_total{")
                && l.contains(r#"condition="ready""#)
                && l.ends_with(" 1")
        ),
        "{metrics}"
    );
    // Already deleting, its deadline passed: nothing more to do.
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(repair.reconcile().await, Ok(vec![]));
    assert!(h.events.with_reason("NodeRepairBlocked").is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_pool_over_the_guard_is_left_alone_and_says_why() {
    let h = Harness::new();
    let claim = initialized_node(&h).await;
    // A second node of the same pool, for a pod n1 has no room for.
    h.bind("busy", "n1");
    h.pending_pod("second", "3");
    let second = h.provisioner().provision().await.unwrap().created[0].clone();
    let life = h.lifecycle();
    life.reconcile_all().await;
    h.claim_joins("n2", &second);
    life.reconcile_all().await;
    not_ready(&h, "n1", 31);
    not_ready(&h, "n2", 1);
    let repair = NodeRepair::new(&h.context()).unwrap();
    assert_eq!(repair.reconcile().await, Ok(vec![]));
    let blocked = h.events.with_reason("NodeRepairBlocked");
    let mut on: Vec<String> = blocked
        .iter()
        .map(|e| format!("{}/{}", e.regarding.kind, e.regarding.name))
        .collect();
    on.sort();
    assert_eq!(
        on,
        [
            "Node/n1".to_string(),
            format!("NodeClaim/{claim}"),
            "NodePool/default".to_string(),
        ],
        "{blocked:?}"
    );
    assert!(
        blocked[0]
            .message
            .contains("more than 20% of nodes in nodepool \"default\"")
    );
    assert!(
        h.claims()
            .iter()
            .all(|c| c.metadata.deletion_timestamp.is_none())
    );
}
