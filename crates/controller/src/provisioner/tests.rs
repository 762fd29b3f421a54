use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use nodewright_core::cadence::BatchWindow;
use tokio::sync::watch;

use super::Provisioner;
use crate::context::Context;
use crate::events::{EventSink, Recorded};
use crate::state::{Kind, lock};
use crate::tests::Harness;

fn provisioner(h: &Harness) -> Provisioner {
    let sink: Arc<dyn EventSink> = Arc::new(Recorded::new(h.events.clone()));
    Provisioner::new(&Context {
        events: sink,
        ..h.context()
    })
}

/// Upstream's recorder in front of the events: a 5,000-pod pass nominates every pod in
/// the index but publishes 10 `Nominated` events (the rate limit's burst), each for a
/// distinct pod; pods arriving a second later get the 5 tokens that refilled.
#[tokio::test(start_paused = true)]
async fn a_large_pass_nominates_every_pod_and_publishes_what_upstream_would() {
    let h = Harness::new();
    h.nodepool("default", None);
    h.api.mark_synced();
    for i in 0..5000 {
        h.pending_pod(&format!("p{i:04}"), "250m");
    }
    let prov = provisioner(&h);
    let out = prov.provision().await.unwrap();
    assert!(out.errors.is_empty() && out.unplaced.is_empty(), "{out:?}");
    let now = h.clock.now();
    {
        let s = lock(&h.state);
        for i in 0..5000 {
            let key = format!("default/p{i:04}");
            assert!(
                s.nominated_claim(&key, now).is_some(),
                "{key} not nominated"
            );
        }
    }
    let nominated = h.events.with_reason("Nominated");
    let pods: BTreeSet<String> = nominated.iter().map(|e| e.regarding.name.clone()).collect();
    assert_eq!((nominated.len(), pods.len()), (10, 10));

    tokio::time::advance(Duration::from_secs(1)).await;
    for i in 0..100 {
        h.pending_pod(&format!("q{i:03}"), "250m");
    }
    let out = prov.provision().await.unwrap();
    assert!(out.errors.is_empty() && out.unplaced.is_empty(), "{out:?}");
    assert_eq!(h.events.with_reason("Nominated").len(), 15);
}

/// Each pass counts its pending pods by the zone they can go to; a pass with none left
/// leaves no series.
#[tokio::test(start_paused = true)]
async fn pending_pods_are_counted_by_effective_zone() {
    let h = Harness::new();
    h.nodepool("default", None);
    h.api.mark_synced();
    h.pending_pod("free", "1");
    let mut pinned = crate::tests::pending_pod_json("pinned", "1");
    pinned["spec"]["nodeSelector"] =
        serde_json::json!({"topology.kubernetes.io/zone": "us-east-1a"});
    h.api.put_value(Kind::Pod, pinned);
    let prov = provisioner(&h);
    prov.provision().await.unwrap();
    let series = |h: &Harness| {
        h.metrics
            .encode()
            .lines()
            .filter(|l| l.starts_with("karpenter_scheduler_pending_pods_by_effective_zone_count{"))
            .map(str::to_owned)
            .collect::<std::collections::BTreeSet<_>>()
    };
    assert_eq!(
        series(&h).into_iter().collect::<Vec<_>>(),
        [
            r#"karpenter_scheduler_pending_pods_by_effective_zone_count{controller="provisioner",zone="flexible"} 1.0"#,
            r#"karpenter_scheduler_pending_pods_by_effective_zone_count{controller="provisioner",zone="us-east-1a"} 1.0"#,
        ]
    );
    h.api.delete(Kind::Pod, "default/free").unwrap();
    h.api.delete(Kind::Pod, "default/pinned").unwrap();
    prov.provision().await.unwrap();
    assert!(series(&h).is_empty(), "{:?}", series(&h));
}

/// A NodePool whose requirements no instance type meets gets `NoCompatibleInstanceTypes`
/// on a pass with pending pods, and no claim; the pool that can launch gets none.
#[tokio::test(start_paused = true)]
async fn a_pool_that_can_launch_nothing_is_told_so() {
    let h = Harness::new();
    h.nodepool("default", None);
    h.nodepool("gpus", None);
    h.edit_nodepool("gpus", |np| {
        np["spec"]["template"]["spec"]["requirements"] = serde_json::json!([
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["p5.48xlarge"]}
        ]);
    });
    h.api.mark_synced();
    let prov = provisioner(&h);
    prov.provision().await.unwrap();
    assert!(h.events.with_reason("NoCompatibleInstanceTypes").is_empty());
    h.pending_pod("web-1", "1");
    prov.provision().await.unwrap();
    let told = h.events.with_reason("NoCompatibleInstanceTypes");
    let pools: Vec<&str> = told.iter().map(|e| e.regarding.name.as_str()).collect();
    assert_eq!(pools, ["gpus"]);
    assert_eq!(told[0].regarding.uid.as_deref(), Some("np-gpus"));
}

/// A standby runs no pass (its claims would be refused, one warning each), and the replica
/// that takes the lease provisions within the batch window instead of waiting out a
/// pod's requeue.
#[tokio::test(start_paused = true)]
async fn a_standby_runs_no_pass_and_a_new_leader_provisions_within_the_batch_window() {
    let h = Harness::new();
    h.nodepool("default", None);
    h.api.mark_synced();
    h.pending_pod("web-1", "1");
    let (lead, leader) = watch::channel(false);
    let prov = Arc::new(provisioner(&h).with_leader(leader));
    let window = BatchWindow {
        idle: Duration::from_secs(1),
        max: Duration::from_secs(10),
    };
    tokio::spawn(prov.run(
        window,
        crate::metrics::Reconciler::new(h.metrics.clone(), "provisioner"),
    ));
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(h.api.list(Kind::NodeClaim).is_empty());
    lead.send(true).unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(h.api.list(Kind::NodeClaim).len(), 1);
}
