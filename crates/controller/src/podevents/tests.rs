use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use nodewright_cloud::Registration;
use nodewright_core::cadence::{DisruptionCadence, DisruptionTimings};
use nodewright_testkit::json::merge;
use nodewright_testkit::k8s;
use serde_json::{Value, json};

use super::*;
use crate::disruption::Step;
use crate::lifecycle::Outcome;
use crate::state::{Kind, Object, WatchEvent};
use crate::tests::Harness;
use crate::tests::registration::joined;
use crate::tests::termination::initialized_node;

/// A pod of the ReplicaSet `web` in `phase`, bound to `node` if given.
fn pod(name: &str, node: Option<&str>, phase: &str) -> Value {
    merge(
        k8s::pod("default", name),
        json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": "web", "uid": "rs", "controller": true}]},
            "spec": {"nodeName": node}, "status": {"phase": phase}}),
    )
}

fn apply(s: &mut ClusterState, v: &Value) {
    let p: Pod = serde_json::from_value(v.clone()).unwrap();
    s.apply(WatchEvent::Apply(Object::Pod(Box::new(p))));
}

fn delete(s: &mut ClusterState, v: &Value) {
    let p: Pod = serde_json::from_value(v.clone()).unwrap();
    s.apply(WatchEvent::Delete(Object::Pod(Box::new(p))));
}

fn nodes(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| n.to_string()).collect()
}

#[test]
fn binds_finishes_and_departures_are_events_other_updates_are_not() {
    let mut s = ClusterState::default();
    let mut t = Tracker::default();
    let running = pod("a", Some("n1"), "Running");
    apply(&mut s, &running);
    // What was there before the first look is not news.
    assert_eq!(t.observe(&s), nodes(&[]));

    let pending = pod("b", None, "Pending");
    apply(&mut s, &pending);
    assert_eq!(t.observe(&s), nodes(&[]), "a pending pod is on no node");
    apply(&mut s, &pod("b", Some("n2"), "Pending"));
    assert_eq!(t.observe(&s), nodes(&["n2"]), "bound");

    let mut relabelled = running.clone();
    relabelled["metadata"]["labels"] = json!({"x": "y"});
    apply(&mut s, &relabelled);
    assert_eq!(t.observe(&s), nodes(&[]), "an update that moves nothing");

    let mut terminating = relabelled.clone();
    terminating["metadata"]["deletionTimestamp"] = json!("2024-06-01T00:00:00Z");
    apply(&mut s, &terminating);
    assert_eq!(t.observe(&s), nodes(&["n1"]), "terminating");
    delete(&mut s, &terminating);
    assert_eq!(
        t.observe(&s),
        nodes(&[]),
        "its departure was counted already"
    );

    let finished = pod("b", Some("n2"), "Succeeded");
    apply(&mut s, &finished);
    assert_eq!(t.observe(&s), nodes(&["n2"]), "finished");
    delete(&mut s, &finished);
    assert_eq!(t.observe(&s), nodes(&[]));

    let c = pod("c", Some("n3"), "Running");
    apply(&mut s, &c);
    let d = pod("d", Some("n1"), "Running");
    apply(&mut s, &d);
    assert_eq!(t.observe(&s), nodes(&["n1", "n3"]), "two binds in one look");
    delete(&mut s, &c);
    assert_eq!(
        t.observe(&s),
        nodes(&["n3"]),
        "a running pod deleted outright"
    );
}

#[test]
fn daemonset_pods_are_ignored() {
    let mut s = ClusterState::default();
    let mut t = Tracker::default();
    t.observe(&s);
    let mut ds = pod("agent", Some("n1"), "Running");
    ds["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "DaemonSet",
        "name": "agent", "uid": "ds", "controller": true}]);
    apply(&mut s, &ds);
    assert_eq!(t.observe(&s), nodes(&[]));
    delete(&mut s, &ds);
    assert_eq!(t.observe(&s), nodes(&[]));
}

#[test]
fn a_relist_compares_with_what_was_seen() {
    let mut s = ClusterState::default();
    let mut t = Tracker::default();
    let a = pod("a", Some("n1"), "Running");
    apply(&mut s, &a);
    t.observe(&s);
    // The watch restarts: `a` is gone from the new list and `b` is new.
    s.apply(WatchEvent::Init(Kind::Pod));
    let b: Pod = serde_json::from_value(pod("b", Some("n2"), "Running")).unwrap();
    s.apply(WatchEvent::InitApply(Object::Pod(Box::new(b))));
    s.apply(WatchEvent::InitDone(Kind::Pod));
    assert_eq!(t.observe(&s), nodes(&["n1", "n2"]));
}

fn claim_time(h: &Harness, name: &str) -> Option<String> {
    let Some(Object::NodeClaim(c)) = h.api.get(Kind::NodeClaim, name) else {
        panic!("no claim {name}")
    };
    c.status.and_then(|s| s.last_pod_event_time)
}

fn loop_for(h: &Harness) -> PodEvents {
    let w: Arc<dyn KubeWriter> = h.api.clone();
    PodEvents::new(&Context {
        writer: w,
        ..h.context()
    })
}

#[tokio::test(start_paused = true)]
async fn the_claim_records_pod_events_at_most_every_ten_seconds() {
    let h = Harness::new();
    let claim = initialized_node(&h).await;
    let pe = loop_for(&h);
    assert!(pe.pass().await.is_empty(), "the first look only learns");
    let before = claim_time(&h, &claim);

    h.bind("a", "n1");
    assert_eq!(pe.pass().await, vec![claim.clone()]);
    let first = claim_time(&h, &claim);
    assert_ne!(first, before);
    assert_eq!(first, Some(rfc3339(h.clock.now())));

    tokio::time::advance(Duration::from_secs(5)).await;
    h.bind("b", "n1");
    assert!(pe.pass().await.is_empty(), "within ten seconds of the last");
    assert_eq!(claim_time(&h, &claim), first);

    tokio::time::advance(Duration::from_secs(5)).await;
    h.api.delete(Kind::Pod, "default/a").unwrap();
    assert_eq!(pe.pass().await, vec![claim.clone()]);
    assert_eq!(claim_time(&h, &claim), Some(rfc3339(h.clock.now())));

    // A standby keeps track but writes nothing.
    let (tx, rx) = watch::channel(false);
    let standby = loop_for(&h).with_leader(rx);
    standby.pass().await;
    tokio::time::advance(Duration::from_secs(20)).await;
    h.api.delete(Kind::Pod, "default/b").unwrap();
    assert!(standby.pass().await.is_empty());
    drop(tx);
}

/// The NodePool `default` waiting `after` before consolidating.
fn consolidate_after(h: &Harness, after: &str) {
    let Some(Object::NodePool(np)) = h.api.get(Kind::NodePool, "default") else {
        panic!("no NodePool")
    };
    let mut np = serde_json::to_value(*np).unwrap();
    np["spec"]["disruption"]["consolidateAfter"] = json!(after);
    h.api.put_value(Kind::NodePool, np);
}

#[tokio::test(start_paused = true)]
async fn consolidate_after_counts_from_the_last_pod_leaving() {
    for record in [true, false] {
        let h = Harness::new();
        initialized_node(&h).await;
        consolidate_after(&h, "30s");
        h.bind("a", "n1");
        let pe = loop_for(&h);
        pe.pass().await;
        // Long after initialization, the node's last pod goes.
        tokio::time::advance(Duration::from_secs(120)).await;
        h.api.delete(Kind::Pod, "default/a").unwrap();
        if record {
            pe.pass().await;
        }
        let d = h.disruptor();
        let mut cadence = DisruptionCadence::new(DisruptionTimings::default(), h.clock.now());
        if !record {
            // Without the time, the wait counts from initialization and is long over.
            assert_eq!(d.step(&mut cadence).await, Step::Planned(1));
            continue;
        }
        assert_eq!(
            d.step(&mut cadence).await,
            Step::Idle,
            "30 s have not passed"
        );
        tokio::time::advance(Duration::from_secs(31)).await;
        assert_eq!(d.step(&mut cadence).await, Step::Planned(1));
    }
}

#[tokio::test(start_paused = true)]
async fn a_status_write_from_an_older_copy_keeps_the_newer_pod_event_time() {
    let h = Harness::new();
    let pending = Registration::pending("partition not known yet");
    let claim = joined(&h, Some(Ok(pending))).await;
    let life = h.lifecycle();
    life.reconcile_all().await;
    let pe = loop_for(&h);
    pe.pass().await;
    h.bind("a", "n1");
    assert_eq!(pe.pass().await, vec![claim.clone()]);

    // The claim watch lags: the index keeps the copy from before the next pod event.
    h.api.hold(Kind::NodeClaim);
    tokio::time::advance(Duration::from_secs(15)).await;
    h.bind("b", "n1");
    assert_eq!(pe.pass().await, vec![claim.clone()]);
    let newer = Some(rfc3339(h.clock.now()));
    assert_eq!(claim_time(&h, &claim), newer);

    // Registration completes from that older copy: its status write is refused, since the
    // claim changed after that copy was read, and the pass after the watch delivered the
    // claim writes it.
    h.cloud.set_registration(Some(Ok(Registration::done())));
    let refused = life.reconcile_all().await.get(&claim).cloned();
    assert!(
        matches!(&refused, Some(Err(e)) if e.to_string().contains("conflict")),
        "{refused:?}"
    );
    h.api.release(Kind::NodeClaim);
    assert_eq!(
        life.reconcile_all().await.get(&claim),
        Some(&Ok(Outcome::Updated))
    );
    assert_eq!(claim_time(&h, &claim), newer);
}
