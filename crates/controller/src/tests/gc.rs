//! Garbage collection: leaked instances and claims whose instance is gone.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::watch;

use super::Harness;
use super::termination::initialized_node;
use crate::context::Context;
use crate::gc::GarbageCollector;
use crate::state::{Kind, Object};
use crate::write::KubeWriter;

fn collector(h: &Harness, leader: bool) -> GarbageCollector {
    let w: Arc<dyn KubeWriter> = h.api.clone();
    GarbageCollector::new(&Context {
        writer: w,
        ..h.context()
    })
    .with_leader(watch::channel(leader).1)
}

fn provider_id(h: &Harness, claim: &str) -> String {
    let Some(Object::NodeClaim(c)) = h.api.get(Kind::NodeClaim, claim) else {
        panic!()
    };
    c.status.unwrap().provider_id.unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_leaked_instance_is_terminated_once_it_is_old_enough() {
    let h = Harness::new();
    let name = initialized_node(&h).await;
    let owned = provider_id(&h, &name);
    let now = h.clock.now();
    let old = h.cloud.leak(
        "i-old",
        Some(nodewright_core::time::Timestamp(now.0 - 60_000)),
    );
    let young = h.cloud.leak(
        "i-young",
        Some(nodewright_core::time::Timestamp(now.0 - 5_000)),
    );
    // A Node registered for the leaked instance goes with it.
    h.node_joins("leaked", &old);
    let gc = collector(&h, true);
    let c = gc.collect().await.unwrap();
    assert_eq!(c.instances, vec![old.clone()]);
    assert_eq!(c.nodes, vec!["leaked".to_string()]);
    assert!(c.nodeclaims.is_empty());
    assert!(h.api.get(Kind::Node, "leaked").is_none());
    let running: Vec<String> = h
        .cloud
        .running()
        .into_iter()
        .map(|i| i.provider_id)
        .collect();
    assert!(running.contains(&owned), "the claimed instance stays");
    assert!(running.contains(&young), "a young instance stays");
    assert!(!running.contains(&old));

    // 30 s later the young one is old enough.
    tokio::time::advance(Duration::from_secs(30)).await;
    let c = gc.collect().await.unwrap();
    assert_eq!(c.instances, vec![young]);
}

#[tokio::test(start_paused = true)]
async fn an_instance_without_a_launch_time_ages_from_when_it_was_first_seen() {
    let h = Harness::new();
    h.nodepool("default", None);
    h.api.mark_synced();
    let pid = h.cloud.leak("i-x", None);
    let gc = collector(&h, true);
    assert!(gc.collect().await.unwrap().instances.is_empty());
    tokio::time::advance(Duration::from_secs(31)).await;
    assert_eq!(gc.collect().await.unwrap().instances, vec![pid]);
}

#[tokio::test(start_paused = true)]
async fn a_claim_whose_instance_is_gone_is_deleted_unless_its_node_is_ready() {
    let h = Harness::new();
    let name = initialized_node(&h).await;
    let pid = provider_id(&h, &name);
    h.cloud.vanish(&pid);
    tokio::time::advance(Duration::from_secs(60)).await;
    let gc = collector(&h, true);
    // The node still reports Ready: the listing may lag, so the claim stays.
    let c = gc.collect().await.unwrap();
    assert!(c.nodeclaims.is_empty(), "{c:?}");

    // The kubelet stops reporting.
    let mut v = h.api.get(Kind::Node, "n1").unwrap().to_value();
    v["status"]["conditions"] = json!([{"type": "Ready", "status": "Unknown"}]);
    h.api.put_value(Kind::Node, v);
    let c = gc.collect().await.unwrap();
    assert_eq!(c.nodeclaims, vec![name.clone()]);
    assert_eq!(c.nodes, vec!["n1".to_string()]);
    let Some(Object::NodeClaim(claim)) = h.api.get(Kind::NodeClaim, &name) else {
        panic!()
    };
    assert!(claim.metadata.deletion_timestamp.is_some());
    let text = h.metrics.encode();
    let line = text
        .lines()
        .find(|l| {
            l.starts_with("karpenter_nodeclaims_disrupted_total{")
                && l.contains("reason=\"garbage_collected\"")
        })
        .unwrap_or_else(|| panic!("no garbage_collected disruption in\n{text}"));
    assert!(line.contains("nodepool=\"default\""), "{line}");
    assert!(line.ends_with(" 1"), "{line}");
}

#[tokio::test(start_paused = true)]
async fn a_claim_with_a_live_instance_or_a_fresh_launch_is_kept() {
    let h = Harness::new();
    let name = initialized_node(&h).await;
    let pid = provider_id(&h, &name);
    let mut v = h.api.get(Kind::Node, "n1").unwrap().to_value();
    v["status"]["conditions"] = json!([{"type": "Ready", "status": "False"}]);
    h.api.put_value(Kind::Node, v);
    let gc = collector(&h, true);
    // Launched just now: even with the instance gone the claim is kept for 10 s.
    h.cloud.vanish(&pid);
    assert!(gc.collect().await.unwrap().nodeclaims.is_empty());
    tokio::time::advance(Duration::from_secs(11)).await;
    assert_eq!(gc.collect().await.unwrap().nodeclaims, vec![name]);
}

#[tokio::test(start_paused = true)]
async fn a_follower_collects_nothing() {
    let h = Harness::new();
    initialized_node(&h).await;
    let now = h.clock.now();
    let old = h.cloud.leak(
        "i-old",
        Some(nodewright_core::time::Timestamp(now.0 - 60_000)),
    );
    let c = collector(&h, false).collect().await.unwrap();
    assert_eq!(c, Default::default());
    assert!(h.cloud.running().iter().any(|i| i.provider_id == old));
}
