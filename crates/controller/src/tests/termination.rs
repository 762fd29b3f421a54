//! Deleting a claim drains its node in priority groups, honours PDBs, terminates the instance
//! and releases both finalizers.

use std::sync::Arc;

use serde_json::{Value, json};

use super::Harness;
use crate::state::{Kind, Object};
use crate::termination::Progress;
use crate::write::KubeWriter;

/// Runs the loop until a claim is initialized on node `n1`; returns the claim's name.
pub async fn initialized_node(h: &Harness) -> String {
    h.nodepool("default", None);
    h.pending_pod("seed", "1");
    h.api.mark_synced();
    let life = h.lifecycle();
    let name = h.provisioner().provision().await.unwrap().created[0].clone();
    life.reconcile_all().await;
    h.claim_joins("n1", &name);
    life.reconcile_all().await;
    h.api.delete(Kind::Pod, "default/seed").unwrap();
    name
}

fn bound(name: &str, labels: Value, owner: &str, priority_class: Option<&str>) -> Value {
    let mut p = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner, "name": "o", "uid": "o", "controller": true}]},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x",
            "resources": {"requests": {"cpu": "100m"}}}]},
        "status": {"phase": "Running"}
    });
    if let Some(pc) = priority_class {
        p["spec"]["priorityClassName"] = json!(pc);
    }
    p
}

fn pdb(allowed: i32) -> Value {
    json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "db", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "db"}}, "maxUnavailable": 1},
        "status": {"disruptionsAllowed": allowed, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}})
}

/// The claim's `Drained` condition status.
fn drained(h: &Harness, claim: &str) -> Option<String> {
    let Some(Object::NodeClaim(c)) = h.api.get(Kind::NodeClaim, claim) else {
        return None;
    };
    let conds = c.status?.conditions?;
    crate::conditions::find(&conds, crate::conditions::DRAINED).map(|c| c.status.clone())
}

fn pods(h: &Harness) -> Vec<String> {
    h.api.list(Kind::Pod).iter().map(|o| o.key()).collect()
}

/// A node's pods are evicted together: with every request a 100 ms round trip, the first
/// drain pass over 30 pods takes one round trip, not thirty.
#[tokio::test(start_paused = true)]
async fn a_nodes_pods_are_evicted_together_not_one_after_another() {
    let h = Harness::new();
    let claim = initialized_node(&h).await;
    for i in 0..30 {
        h.api.put_value(
            Kind::Pod,
            bound(
                &format!("web-{i}"),
                json!({"app": "web"}),
                "ReplicaSet",
                None,
            ),
        );
    }
    let w: Arc<dyn KubeWriter> = h.api.clone();
    w.delete_nodeclaim(&claim).await.unwrap();
    h.lifecycle().reconcile_all().await;
    let round_trip = std::time::Duration::from_millis(100);
    let slow = crate::write::counting::CountingWriter::new(h.api.clone()).with_latency(round_trip);
    let slow = Arc::new(slow);
    let term = crate::termination::Termination::new(&crate::context::Context {
        writer: slow.clone(),
        ..h.context()
    });
    let started = tokio::time::Instant::now();
    let r = term.reconcile_all().await;
    let took = started.elapsed();
    let Ok(Progress::Draining { evicted, .. }) = &r["n1"] else {
        panic!("{r:?}")
    };
    assert_eq!(evicted.len(), 30);
    assert_eq!(slow.counts().get("create pods/eviction"), Some(&30));
    assert!(
        took < round_trip * 10,
        "the pass took {took:?} for 30 evictions of {round_trip:?} each"
    );
}

#[tokio::test(start_paused = true)]
async fn drain_goes_group_by_group_and_waits_for_pdbs() {
    let h = Harness::new();
    let claim = initialized_node(&h).await;
    h.api.put_value(
        Kind::Pod,
        bound("web", json!({"app": "web"}), "ReplicaSet", None),
    );
    h.api.put_value(
        Kind::Pod,
        bound("db", json!({"app": "db"}), "StatefulSet", None),
    );
    h.api.put_value(
        Kind::Pod,
        bound("agent", json!({"app": "agent"}), "DaemonSet", None),
    );
    h.api.put_value(
        Kind::Pod,
        bound(
            "dns",
            json!({"app": "dns"}),
            "ReplicaSet",
            Some("system-cluster-critical"),
        ),
    );
    h.api.put_value(Kind::Pdb, pdb(0));

    let w: Arc<dyn KubeWriter> = h.api.clone();
    let life = h.lifecycle();
    let term = h.termination();

    w.delete_nodeclaim(&claim).await.unwrap();
    life.reconcile_all().await; // deletes the node (held by its finalizer)
    let Some(Object::Node(n)) = h.api.get(Kind::Node, "n1") else {
        panic!()
    };
    assert!(n.metadata.deletion_timestamp.is_some());

    let r = term.reconcile_all().await;
    let Ok(Progress::Draining {
        evicted, blocked, ..
    }) = &r["n1"]
    else {
        panic!("{r:?}")
    };
    assert_eq!(evicted, &vec!["default/web".to_string()]);
    assert_eq!(blocked, &vec!["default/db".to_string()]);
    assert_eq!(drained(&h, &claim).as_deref(), Some("Unknown"));
    let Some(Object::Node(n)) = h.api.get(Kind::Node, "n1") else {
        panic!()
    };
    assert!(
        n.spec
            .unwrap()
            .taints
            .unwrap()
            .iter()
            .any(|t| t.key == "karpenter.sh/disrupted" && t.effect == "NoSchedule")
    );
    // The daemonset and critical pods wait for the first group.
    assert_eq!(pods(&h), vec!["default/agent", "default/db", "default/dns"]);

    // Still blocked: nothing else moves.
    term.reconcile_all().await;
    assert_eq!(pods(&h), vec!["default/agent", "default/db", "default/dns"]);
    assert!(
        h.api
            .log()
            .iter()
            .any(|l| l == "evict-refused Pod default/db")
    );

    h.api.put_value(Kind::Pdb, pdb(1));
    term.reconcile_all().await;
    assert_eq!(pods(&h), vec!["default/agent", "default/dns"]);
    term.reconcile_all().await;
    assert_eq!(pods(&h), vec!["default/dns"]);
    term.reconcile_all().await;
    assert!(pods(&h).is_empty());
    assert!(!h.cloud.running().is_empty());

    // Drained: the instance is terminated, then the finalizer goes.
    assert_eq!(term.reconcile_all().await["n1"], Ok(Progress::Terminating));
    assert_eq!(drained(&h, &claim).as_deref(), Some("True"));
    assert!(h.cloud.running().is_empty());
    assert_eq!(term.reconcile_all().await["n1"], Ok(Progress::Done));
    assert!(h.api.get(Kind::Node, "n1").is_none());

    // The claim's finalizer follows once the node and the instance are gone.
    life.reconcile_all().await;
    assert!(h.api.get(Kind::NodeClaim, &claim).is_none());
}

/// Upstream's drain leaves a `do-not-disrupt` pod in place and waits for it; the node's
/// `terminationGracePeriod` is what finally removes it, by a delete that fits the deadline.
/// Its neighbours are evicted as usual, and a lapsed duration protects nothing.
#[tokio::test(start_paused = true)]
async fn a_do_not_disrupt_pod_is_not_evicted_but_waited_for_until_the_deadline() {
    let h = Harness::new();
    let claim = initialized_node(&h).await;
    let Some(Object::NodeClaim(c)) = h.api.get(Kind::NodeClaim, &claim) else {
        panic!()
    };
    let mut v = serde_json::to_value(*c).unwrap();
    v["spec"]["terminationGracePeriod"] = json!("10m");
    h.api.put_value(Kind::NodeClaim, v);
    let mut batch = bound("batch", json!({"app": "batch"}), "Job", None);
    batch["metadata"]["annotations"] = json!({"karpenter.sh/do-not-disrupt": "true"});
    batch["spec"]["terminationGracePeriodSeconds"] = json!(30);
    h.api.put_value(Kind::Pod, batch);
    let mut lapsed = bound("lapsed", json!({"app": "lapsed"}), "ReplicaSet", None);
    lapsed["metadata"]["annotations"] = json!({"karpenter.sh/do-not-disrupt": "1s"});
    lapsed["status"]["startTime"] = json!("2024-01-01T00:00:00Z");
    h.api.put_value(Kind::Pod, lapsed);
    h.api.put_value(
        Kind::Pod,
        bound("web", json!({"app": "web"}), "ReplicaSet", None),
    );

    let w: Arc<dyn KubeWriter> = h.api.clone();
    let life = h.lifecycle();
    let term = h.termination();
    w.delete_nodeclaim(&claim).await.unwrap();
    life.reconcile_all().await; // stamps the deadline and deletes the node
    life.reconcile_all().await;

    let r = term.reconcile_all().await;
    let Ok(Progress::Draining {
        evicted, waiting, ..
    }) = &r["n1"]
    else {
        panic!("{r:?}")
    };
    assert_eq!(
        evicted,
        &vec!["default/lapsed".to_string(), "default/web".to_string()]
    );
    assert_eq!(*waiting, 3);
    assert_eq!(pods(&h), vec!["default/batch"]);
    // Minutes pass: still no eviction, and the node is still waiting.
    tokio::time::advance(std::time::Duration::from_secs(9 * 60)).await;
    assert!(matches!(
        term.reconcile_all().await["n1"],
        Ok(Progress::Draining { .. })
    ));
    assert_eq!(pods(&h), vec!["default/batch"]);
    assert!(
        !h.api
            .log()
            .iter()
            .any(|l| l.contains("Pod default/batch") && l.starts_with("evict")),
        "{:?}",
        h.api.log()
    );
    // Once its 30 s no longer fit before the deadline, it is deleted with what is left.
    tokio::time::advance(std::time::Duration::from_secs(31)).await;
    let r = term.reconcile_all().await;
    let Ok(Progress::Draining { deleted, .. }) = &r["n1"] else {
        panic!("{r:?}")
    };
    assert_eq!(deleted, &vec!["default/batch".to_string()]);
    assert!(pods(&h).is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_drained_node_waits_for_its_volumes_to_detach() {
    let h = Harness::new();
    let claim = initialized_node(&h).await;
    h.api.put_value(
        Kind::VolumeAttachment,
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
            "metadata": {"name": "csi-data"},
            "spec": {"attacher": "ebs.csi.aws.com", "nodeName": "n1",
                "source": {"persistentVolumeName": "pv-data"}}}),
    );
    let w: Arc<dyn KubeWriter> = h.api.clone();
    let life = h.lifecycle();
    let term = h.termination();
    w.delete_nodeclaim(&claim).await.unwrap();
    life.reconcile_all().await;

    // Nothing to drain, but the volume is still attached: the instance stays.
    for _ in 0..2 {
        assert_eq!(
            term.reconcile_all().await["n1"],
            Ok(Progress::Detaching {
                attachments: vec!["csi-data".into()]
            })
        );
    }
    assert!(!h.cloud.running().is_empty());
    assert_eq!(drained(&h, &claim).as_deref(), Some("True"));
    let waiting = h.events.with_reason("AwaitingVolumeDetachment");
    assert_eq!(waiting.len(), 2, "one a pass: {waiting:?}");
    assert!(
        waiting
            .iter()
            .all(|e| e.regarding == crate::events::ObjectRef::node("n1")),
        "{waiting:?}"
    );

    // The attach-detach controller removes it: the instance goes.
    h.api.delete(Kind::VolumeAttachment, "csi-data").unwrap();
    assert_eq!(term.reconcile_all().await["n1"], Ok(Progress::Terminating));
    assert!(h.cloud.running().is_empty());
    let Some(Object::NodeClaim(c)) = h.api.get(Kind::NodeClaim, &claim) else {
        panic!("no claim")
    };
    let conds = c.status.unwrap().conditions.unwrap();
    assert!(
        crate::conditions::is_true(&conds, "VolumesDetached"),
        "{conds:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_refused_termination_is_an_event_on_the_claim_and_is_tried_again() {
    let h = Harness::new();
    let claim = initialized_node(&h).await;
    let w: Arc<dyn KubeWriter> = h.api.clone();
    let life = h.lifecycle();
    let term = h.termination();
    w.delete_nodeclaim(&claim).await.unwrap();
    life.reconcile_all().await;

    h.cloud.set_failing(true);
    assert_eq!(term.reconcile_all().await["n1"], Ok(Progress::Terminating));
    assert!(!h.cloud.running().is_empty());
    let failed = h.events.with_reason("FailedTermination");
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(
        failed[0].regarding,
        crate::events::ObjectRef::nodeclaim(&claim)
    );
    assert!(
        failed[0].message.contains("service unavailable"),
        "{failed:?}"
    );

    h.cloud.set_failing(false);
    assert_eq!(term.reconcile_all().await["n1"], Ok(Progress::Terminating));
    assert!(h.cloud.running().is_empty());
    assert_eq!(h.events.with_reason("FailedTermination").len(), 1);
}

#[test]
fn the_disrupted_taint_goes_on_and_off_by_key_and_effect_leaving_other_taints() {
    use crate::termination::with_disrupted_taint;
    use k8s_openapi::api::core::v1::Taint;
    let taint = |key: &str, effect: &str| Taint {
        key: key.into(),
        effect: effect.into(),
        ..Default::default()
    };
    let keys = |ts: &[Taint]| -> Vec<String> {
        ts.iter()
            .map(|t| format!("{}:{}", t.key, t.effect))
            .collect()
    };
    let theirs = vec![
        taint("dedicated", "NoSchedule"),
        taint("karpenter.sh/disrupted", "NoExecute"),
    ];
    let on = with_disrupted_taint(&theirs, true).expect("not there yet");
    assert_eq!(
        keys(&on),
        [
            "dedicated:NoSchedule",
            "karpenter.sh/disrupted:NoExecute",
            "karpenter.sh/disrupted:NoSchedule"
        ]
    );
    assert!(with_disrupted_taint(&on, true).is_none(), "already on");
    let off = with_disrupted_taint(&on, false).expect("there to take off");
    assert_eq!(keys(&off), keys(&theirs));
    assert!(
        with_disrupted_taint(&theirs, false).is_none(),
        "already off"
    );
}
