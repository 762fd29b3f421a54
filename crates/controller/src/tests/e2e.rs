//! Pending pod → NodeClaim → launched → Node registered → initialized, and the ways a launch
//! goes wrong.

use std::sync::Arc;
use std::time::Duration;

use nodewright_api::v1::nodeclaim::NodeClaim;
use serde_json::json;
use tokio::sync::watch;

use super::Harness;
use crate::conditions;
use crate::context::Context;
use crate::lifecycle::{Lifecycle, Outcome};
use crate::provisioner::{ProvisionError, Provisioner};
use crate::state::{Kind, Object, lock};
use crate::write::{KubeWriter, LeaderGate, WriteError};

fn claim(h: &Harness, name: &str) -> NodeClaim {
    match h.api.get(Kind::NodeClaim, name) {
        Some(Object::NodeClaim(c)) => *c,
        other => panic!("no claim {name}: {other:?}"),
    }
}

fn node(h: &Harness, name: &str) -> k8s_openapi::api::core::v1::Node {
    match h.api.get(Kind::Node, name) {
        Some(Object::Node(n)) => *n,
        other => panic!("no node {name}: {other:?}"),
    }
}

fn parts(h: &Harness) -> (Provisioner, Lifecycle) {
    let w: Arc<dyn KubeWriter> = h.api.clone();
    (
        h.provisioner(),
        Lifecycle::new(&Context {
            writer: w,
            ..h.context()
        }),
    )
}

#[tokio::test(start_paused = true)]
async fn a_pending_pod_gets_a_claim_that_launches_registers_and_initializes() {
    let h = Harness::new();
    h.nodepool("default", None);
    h.pending_pod("web-1", "1500m");
    h.api.mark_synced();
    let (prov, life) = parts(&h);

    let p = prov.provision().await.unwrap();
    assert_eq!(p.created.len(), 1, "{p:?}");
    let name = p.created[0].clone();
    let (prefix, suffix) = name.rsplit_once('-').unwrap();
    assert_eq!(prefix, "default");
    assert_eq!(suffix.len(), 5);

    let c = claim(&h, &name);
    let labels = c.metadata.labels.clone().unwrap();
    assert_eq!(labels["karpenter.sh/nodepool"], "default");
    assert_eq!(labels["team"], "web");
    let ann = c.metadata.annotations.clone().unwrap();
    // Stamped with the template's current hash, not the (stale) annotation on the pool.
    let Some(Object::NodePool(pool)) = h.api.get(Kind::NodePool, "default") else {
        panic!()
    };
    assert_eq!(
        ann["karpenter.sh/nodepool-hash"],
        crate::hash::nodepool_hash(&pool)
    );
    assert_ne!(ann["karpenter.sh/nodepool-hash"], "1234");
    assert_eq!(
        ann["karpenter.sh/nodepool-hash-version"],
        crate::hash::HASH_VERSION
    );
    assert_eq!(
        c.metadata.finalizers.clone().unwrap(),
        vec!["karpenter.sh/termination"]
    );
    let owner = &c.metadata.owner_references.clone().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
        ("NodePool", "default", "np-default")
    );
    let its = c
        .spec
        .requirements
        .iter()
        .find(|r| r.key == "node.kubernetes.io/instance-type")
        .unwrap();
    assert_eq!(its.operator, "In");
    assert_eq!(its.values().first().map(String::as_str), Some("m5.large"));
    assert!(
        its.values().len() >= 2,
        "the claim keeps fallback types: {its:?}"
    );

    // A second pass does not launch the pod again: it is held by the claim.
    assert!(prov.provision().await.unwrap().created.is_empty());

    // Launch.
    let r = life.reconcile_all().await;
    assert_eq!(r[&name], Ok(Outcome::Updated));
    let c = claim(&h, &name);
    let status = c.status.clone().unwrap();
    let pid = status.provider_id.clone().unwrap();
    assert_eq!(pid, "aws:///us-east-1a/i-0001");
    assert_eq!(status.image_id.as_deref(), Some("ami-123"));
    assert!(status.capacity.unwrap().contains_key("cpu"));
    let conds = status.conditions.unwrap();
    assert!(conditions::is_true(&conds, "Launched"));
    assert_eq!(
        conditions::find(&conds, "Registered")
            .unwrap()
            .reason
            .as_deref(),
        Some("NodeNotFound")
    );
    assert_eq!(
        c.metadata.labels.unwrap()["node.kubernetes.io/instance-type"],
        "m5.large"
    );

    // The launch's result is kept until the index shows the claim launched.
    assert_eq!(life.launches_kept(), 1);

    // The kubelet registers the node; the pool's registration health says so.
    let status = h.status();
    status.reconcile_all().await;
    assert_eq!(registration_healthy(&h).status, "Unknown");
    h.node_joins("ip-10-0-0-1", &pid);
    life.reconcile_all().await;
    status.reconcile_all().await;
    assert_eq!(registration_healthy(&h).status, "True");
    let n = node(&h, "ip-10-0-0-1");
    let nl = n.metadata.labels.clone().unwrap();
    assert_eq!(nl["karpenter.sh/nodepool"], "default");
    assert_eq!(nl["karpenter.sh/registered"], "true");
    assert_eq!(nl["karpenter.sh/initialized"], "true");
    assert_eq!(nl["team"], "web");
    assert!(
        n.spec
            .clone()
            .unwrap()
            .taints
            .unwrap_or_default()
            .iter()
            .all(|t| t.key != "karpenter.sh/unregistered")
    );
    assert_eq!(
        n.metadata.finalizers.clone().unwrap(),
        vec!["karpenter.sh/termination"]
    );
    let c = claim(&h, &name);
    let status = c.status.unwrap();
    assert_eq!(status.node_name.as_deref(), Some("ip-10-0-0-1"));
    let conds = status.conditions.unwrap();
    for t in ["Launched", "Registered", "Initialized", "Ready"] {
        assert!(conditions::is_true(&conds, t), "{t}: {conds:?}");
    }
    // Nothing left to do, and nothing of the launch kept.
    assert_eq!(life.reconcile_all().await[&name], Ok(Outcome::Unchanged));
    assert_eq!(life.launches_kept(), 0);
    assert!(prov.provision().await.unwrap().created.is_empty());
}

#[tokio::test(start_paused = true)]
async fn initialization_waits_for_readiness_and_startup_taints() {
    let h = Harness::new();
    h.nodepool("default", None);
    h.pending_pod("web-1", "1");
    h.api.mark_synced();
    let (prov, life) = parts(&h);
    let name = prov.provision().await.unwrap().created[0].clone();
    life.reconcile_all().await;
    let pid = claim(&h, &name).status.unwrap().provider_id.unwrap();
    h.api.put_value(
        Kind::Node,
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
            "spec": {"providerID": pid, "taints": [
                {"key": "karpenter.sh/unregistered", "effect": "NoExecute"},
                {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "False"}]}}),
    );
    life.reconcile_all().await;
    let conds = claim(&h, &name).status.unwrap().conditions.unwrap();
    assert!(conditions::is_true(&conds, "Registered"));
    assert_eq!(
        conditions::find(&conds, "Initialized")
            .unwrap()
            .reason
            .as_deref(),
        Some("NodeNotReady")
    );

    let mut n = serde_json::to_value(node(&h, "n1")).unwrap();
    n["status"]["conditions"] = json!([{"type": "Ready", "status": "True"}]);
    h.api.put_value(Kind::Node, n.clone());
    life.reconcile_all().await;
    let conds = claim(&h, &name).status.unwrap().conditions.unwrap();
    assert_eq!(
        conditions::find(&conds, "Initialized")
            .unwrap()
            .reason
            .as_deref(),
        Some("KnownEphemeralTaintsExist")
    );

    n["spec"]["taints"] = json!([]);
    h.api.put_value(Kind::Node, n);
    life.reconcile_all().await;
    assert!(conditions::is_true(
        &claim(&h, &name).status.unwrap().conditions.unwrap(),
        "Initialized"
    ));
}

#[tokio::test(start_paused = true)]
async fn nothing_launches_before_the_state_is_synced() {
    let h = Harness::new();
    h.nodepool("default", None);
    h.pending_pod("web-1", "1");
    let (prov, _) = parts(&h);
    assert!(matches!(
        prov.provision().await,
        Err(ProvisionError::NotSynced)
    ));
    assert!(h.api.list(Kind::NodeClaim).is_empty());
}

#[tokio::test(start_paused = true)]
async fn nodepool_limits_cap_the_claims_created() {
    let unlimited = Harness::new();
    unlimited.nodepool("default", None);
    let limited = Harness::new();
    // 2 cpu: room for one m5.large and nothing more.
    limited.nodepool("default", Some(json!({"cpu": "2"})));
    for h in [&unlimited, &limited] {
        for i in 0..6 {
            h.pending_pod(&format!("big-{i}"), "1500m");
        }
        h.api.mark_synced();
    }
    let free = parts(&unlimited).0.provision().await.unwrap();
    assert!(free.created.len() >= 2, "{free:?}");
    let (prov, _) = parts(&limited);
    let p = prov.provision().await.unwrap();
    assert_eq!(p.created.len(), 1, "{p:?}");
    assert!(!p.unplaced.is_empty());
    // Another pass with the claim in flight does not go over either.
    prov.provision().await.unwrap();
    assert_eq!(limited.api.list(Kind::NodeClaim).len(), 1);
}

#[tokio::test(start_paused = true)]
async fn insufficient_capacity_deletes_the_claim() {
    let h = Harness::new();
    h.nodepool("default", None);
    h.pending_pod("web-1", "1");
    h.api.mark_synced();
    let (prov, life) = parts(&h);
    let name = prov.provision().await.unwrap().created[0].clone();
    h.cloud.set_ice(true);
    assert_eq!(
        life.reconcile_all().await[&name],
        Ok(Outcome::Deleted("insufficient_capacity"))
    );
    // The finalizer holds it until the next pass finalizes it (nothing was launched).
    life.reconcile_all().await;
    assert!(h.api.get(Kind::NodeClaim, &name).is_none());
    // The provisioner solves again and creates a new claim.
    h.cloud.set_ice(false);
    assert_eq!(prov.provision().await.unwrap().created.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_failing_launch_is_tried_again_after_a_doubling_wait() {
    let h = Harness::new();
    h.nodepool("default", None);
    h.pending_pod("web-1", "1");
    h.api.mark_synced();
    let (prov, life) = parts(&h);
    let name = prov.provision().await.unwrap().created[0].clone();
    h.cloud.set_failing(true);
    // The loop passes every second; the claim is tried at 0, 1, 3, 7 and 15 s.
    let mut tried_at = Vec::new();
    for second in 0..16 {
        let before = h.cloud.create_calls();
        life.reconcile_all().await;
        if h.cloud.create_calls() > before {
            tried_at.push(second);
        }
        tokio::time::advance(Duration::from_secs(1)).await;
    }
    assert_eq!(tried_at, vec![0, 1, 3, 7, 15]);
    // Once the cloud answers, the next try launches and the wait is forgotten.
    h.cloud.set_failing(false);
    tokio::time::advance(Duration::from_secs(16)).await;
    assert_eq!(life.reconcile_all().await[&name], Ok(Outcome::Updated));
    assert!(conditions::is_true(
        &claim(&h, &name).status.unwrap().conditions.unwrap(),
        "Launched"
    ));
}

#[tokio::test(start_paused = true)]
async fn launch_and_registration_time_out() {
    let h = Harness::new();
    h.nodepool("default", None);
    h.pending_pod("web-1", "1");
    h.api.mark_synced();
    let (prov, life) = parts(&h);
    let name = prov.provision().await.unwrap().created[0].clone();
    h.cloud.set_failing(true);
    life.reconcile_all().await;
    let conds = claim(&h, &name).status.unwrap().conditions.unwrap();
    assert_eq!(
        conditions::find(&conds, "Launched")
            .unwrap()
            .reason
            .as_deref(),
        Some("LaunchFailed")
    );
    tokio::time::advance(Duration::from_secs(299)).await;
    assert!(!matches!(
        life.reconcile_all().await[&name],
        Ok(Outcome::Deleted(_))
    ));
    assert!(h.api.get(Kind::NodeClaim, &name).is_some());
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(
        life.reconcile_all().await[&name],
        Ok(Outcome::Deleted("launch_timeout"))
    );

    // Registration: launched, but no node ever joins.
    h.cloud.set_failing(false);
    life.reconcile_all().await; // finalize the timed-out claim
    let name = prov.provision().await.unwrap().created[0].clone();
    life.reconcile_all().await;
    assert!(conditions::is_true(
        &claim(&h, &name).status.unwrap().conditions.unwrap(),
        "Launched"
    ));
    tokio::time::advance(Duration::from_secs(15 * 60 - 1)).await;
    assert_ne!(
        life.reconcile_all().await[&name],
        Ok(Outcome::Deleted("registration_timeout"))
    );
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(
        life.reconcile_all().await[&name],
        Ok(Outcome::Deleted("registration_timeout"))
    );
    // Finalization terminates the instance.
    life.reconcile_all().await;
    life.reconcile_all().await;
    assert!(h.api.get(Kind::NodeClaim, &name).is_none());
    assert!(h.cloud.running().is_empty());

    // Two failures among the pool's last claims: its nodes do not join.
    let status = h.status();
    status.reconcile_all().await;
    let healthy = registration_healthy(&h);
    assert_eq!(healthy.status, "False", "{healthy:?}");
    assert_eq!(healthy.reason.as_deref(), Some("RegistrationFailed"));
    assert!(
        healthy
            .message
            .as_deref()
            .unwrap_or_default()
            .starts_with("2 of the last 4"),
        "{healthy:?}"
    );
}

/// The `default` NodePool's `NodeRegistrationHealthy` condition.
fn registration_healthy(h: &Harness) -> nodewright_api::v1::shared::Condition {
    let Some(Object::NodePool(p)) = h.api.get(Kind::NodePool, "default") else {
        panic!("no NodePool default")
    };
    let conds = p.status.and_then(|s| s.conditions).unwrap_or_default();
    conditions::find(&conds, "NodeRegistrationHealthy")
        .cloned()
        .unwrap_or_else(|| panic!("no NodeRegistrationHealthy in {conds:?}"))
}

#[tokio::test(start_paused = true)]
async fn losing_the_lease_stops_writes() {
    let h = Harness::new();
    h.nodepool("default", None);
    h.pending_pod("web-1", "1");
    h.api.mark_synced();
    let (tx, rx) = watch::channel(false);
    let gated: Arc<dyn KubeWriter> = Arc::new(LeaderGate::new(h.api.clone(), rx));
    let prov = Provisioner::new(&Context {
        writer: gated.clone(),
        ..h.context()
    });
    let life = Lifecycle::new(&Context {
        writer: gated,
        ..h.context()
    });

    let p = prov.provision().await.unwrap();
    assert!(p.created.is_empty());
    assert!(p.errors[0].contains("not the leader"), "{p:?}");
    assert!(h.api.list(Kind::NodeClaim).is_empty());

    tx.send(true).unwrap();
    let name = prov.provision().await.unwrap().created[0].clone();

    tx.send(false).unwrap();
    let before = h.api.log().len();
    let r = life.reconcile_all().await;
    assert_eq!(r[&name], Err(WriteError::NotLeader.to_string()));
    assert_eq!(h.api.log().len(), before, "no write reached the API");
    assert!(lock(&h.state).nodeclaims[&name].status.is_none());
}

#[tokio::test(start_paused = true)]
async fn a_pool_converted_from_a_provisioner_labels_its_claims_the_old_way_too() {
    let h = Harness::new();
    h.nodepool("default", None);
    h.edit_nodepool("default", |v| {
        v["metadata"]["annotations"]["nodewright.io/provisioner-name"] = json!("default");
    });
    h.pending_pod("web-1", "1500m");
    h.api.mark_synced();
    let (prov, _) = parts(&h);
    let name = prov.provision().await.unwrap().created[0].clone();
    let labels = claim(&h, &name).metadata.labels.unwrap();
    assert_eq!(labels["karpenter.sh/provisioner-name"], "default");
    assert_eq!(labels["karpenter.sh/nodepool"], "default");
}
