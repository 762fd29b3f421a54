//! NodePool and EC2NodeClass status, the drift hash and the `Drifted` condition.

use std::sync::Arc;

use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_api::v1::nodepool::NodePool;
use nodewright_api::v1::shared::Condition;
use nodewright_core::cadence::{DisruptionCadence, DisruptionTimings};
use nodewright_testkit::json::merge;
use nodewright_testkit::k8s;
use serde_json::{Value, json};
use tokio::sync::watch;

use super::Harness;
use super::termination::initialized_node;
use crate::conditions;
use crate::context::Context;
use crate::disruption::{Disruptor, Step};
use crate::hash;
use crate::state::{Kind, Object};
use crate::status::StatusController;
use crate::write::{KubeWriter, LeaderGate};

pub fn nodeclass(h: &Harness) {
    h.api.put_value(
        Kind::NodeClass,
        json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": "default", "generation": 1},
            "spec": {"role": "KarpenterNodeRole",
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
                "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}]}
        }),
    );
}

fn controller(h: &Harness) -> StatusController {
    let w: Arc<dyn KubeWriter> = h.api.clone();
    StatusController::new(&Context {
        writer: w,
        ..h.context()
    })
}

fn pool(h: &Harness) -> NodePool {
    match h.api.get(Kind::NodePool, "default") {
        Some(Object::NodePool(p)) => *p,
        other => panic!("no pool: {other:?}"),
    }
}

fn claim(h: &Harness, name: &str) -> NodeClaim {
    match h.api.get(Kind::NodeClaim, name) {
        Some(Object::NodeClaim(c)) => *c,
        other => panic!("no claim {name}: {other:?}"),
    }
}

fn condition(conds: &[Condition], t: &str) -> (String, String) {
    let c = conditions::find(conds, t).unwrap_or_else(|| panic!("no {t} in {conds:?}"));
    (c.status.clone(), c.reason.clone().unwrap_or_default())
}

fn pool_conditions(h: &Harness) -> Vec<Condition> {
    pool(h).status.unwrap().conditions.unwrap()
}

fn resources(h: &Harness) -> Value {
    serde_json::to_value(pool(h).status.unwrap().resources.unwrap()).unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_provisioned_pool_reports_its_nodes_resources_and_readiness() {
    let h = Harness::new();
    nodeclass(&h);
    let name = initialized_node(&h).await;
    let s = controller(&h);
    let w = s.reconcile_all().await;
    assert!(w.errors.is_empty(), "{w:?}");
    assert_eq!(w.nodeclass_status, vec!["default"]);
    assert_eq!(w.nodepool_status, vec!["default"]);

    // The class's status is what the provider resolved.
    let Some(Object::NodeClass(class)) = h.api.get(Kind::NodeClass, "default") else {
        panic!()
    };
    let cs = class.status.unwrap();
    assert_eq!(cs.subnets.unwrap()[0].id, "subnet-1");
    assert_eq!(cs.instance_profile.as_deref(), Some("test-node"));

    let st = pool(&h).status.unwrap();
    assert_eq!(st.nodes, Some(1));
    assert_eq!(st.node_class_observed_generation, Some(1));
    // The registered node's capacity (4 cpu, 16Gi, 110 pods), not the claim's.
    assert_eq!(
        resources(&h),
        json!({"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "0", "nodes": "1"})
    );
    let conds = pool_conditions(&h);
    assert_eq!(
        condition(&conds, "ValidationSucceeded"),
        ("True".into(), "ValidationSucceeded".into())
    );
    assert_eq!(
        condition(&conds, "NodeClassReady"),
        ("True".into(), "NodeClassReady".into())
    );
    assert_eq!(condition(&conds, "Ready"), ("True".into(), "Ready".into()));
    assert!(claim(&h, &name).status.is_some());

    // Nothing changed: nothing is written.
    let log = h.api.log().len();
    let w = s.reconcile_all().await;
    assert_eq!(w, Default::default());
    assert_eq!(h.api.log().len(), log);

    // The node goes away: counts drop to zero and stay listed.
    h.api.delete(Kind::NodeClaim, &name).unwrap();
    let fin = claim(&h, &name).metadata.finalizers.clone();
    assert!(fin.is_some());
    let w2: Arc<dyn KubeWriter> = h.api.clone();
    w2.patch_nodeclaim_meta(
        &name,
        &crate::write::MetaPatch {
            finalizers: Some(vec![]),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    w2.patch_node(
        "n1",
        &crate::write::NodePatch {
            meta: crate::write::MetaPatch {
                finalizers: Some(vec![]),
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .await
    .unwrap();
    h.api.delete(Kind::Node, "n1").unwrap();
    s.reconcile_all().await;
    assert_eq!(pool(&h).status.unwrap().nodes, Some(0));
    assert_eq!(
        resources(&h),
        json!({"cpu": "0", "memory": "0", "pods": "0", "ephemeral-storage": "0", "nodes": "0"})
    );
}

#[tokio::test(start_paused = true)]
async fn a_pool_is_not_ready_while_its_class_is_missing_or_not_ready() {
    let h = Harness::new();
    h.nodepool("default", None);
    h.api.mark_synced();
    let s = controller(&h);
    s.reconcile_all().await;
    let conds = pool_conditions(&h);
    assert_eq!(
        condition(&conds, "NodeClassReady"),
        ("False".into(), "NodeClassNotFound".into())
    );
    assert_eq!(
        condition(&conds, "Ready"),
        ("False".into(), "NodeClassReadyNotTrue".into())
    );

    // A class that has not been resolved yet is unknown, not failed.
    nodeclass(&h);
    let unresolved =
        crate::status::nodepool::nodeclass_readiness(&crate::state::lock(&h.state), &pool(&h));
    assert_eq!(unresolved.0, "Unknown");

    h.cloud.set_class_not_ready(Some("no subnets match"));
    s.reconcile_all().await;
    let Some(Object::NodeClass(class)) = h.api.get(Kind::NodeClass, "default") else {
        panic!()
    };
    let cc = crate::status::nodeclass::class_conditions(
        class
            .status
            .as_ref()
            .unwrap()
            .conditions
            .as_deref()
            .unwrap(),
    );
    assert_eq!(
        condition(&cc, "Ready"),
        ("False".into(), "NodeClassNotReady".into())
    );
    let conds = pool_conditions(&h);
    assert_eq!(
        condition(&conds, "NodeClassReady"),
        ("False".into(), "NodeClassNotReady".into())
    );
    assert_eq!(
        conditions::find(&conds, "NodeClassReady")
            .unwrap()
            .message
            .as_deref(),
        Some("no subnets match")
    );
    assert_eq!(condition(&conds, "Ready").0, "False");
    // The engine leaves a pool that is not ready alone.
    let (snap, _) = crate::state::lock(&h.state).snapshot(h.clock.now(), Default::default());
    assert!(!snap.nodepools[0].ready);

    // The class recovers (re-resolved on its next generation).
    h.cloud.set_class_not_ready(None);
    let mut v = h.api.get(Kind::NodeClass, "default").unwrap().to_value();
    v["metadata"]["generation"] = json!(2);
    h.api.put_value(Kind::NodeClass, v);
    s.reconcile_all().await;
    let conds = pool_conditions(&h);
    assert_eq!(condition(&conds, "NodeClassReady").0, "True");
    assert_eq!(condition(&conds, "Ready").0, "True");
}

#[tokio::test(start_paused = true)]
async fn an_invalid_pool_fails_validation() {
    let h = Harness::new();
    nodeclass(&h);
    h.nodepool("default", None);
    let mut v = h.api.get(Kind::NodePool, "default").unwrap().to_value();
    v["spec"]["template"]["metadata"]["labels"]["karpenter.sh/custom"] = json!("x");
    h.api.put_value(Kind::NodePool, v);
    h.api.mark_synced();
    controller(&h).reconcile_all().await;
    let conds = pool_conditions(&h);
    assert_eq!(
        condition(&conds, "ValidationSucceeded"),
        ("False".into(), "NodePoolValidationFailed".into())
    );
    let msg = conditions::find(&conds, "ValidationSucceeded")
        .unwrap()
        .message
        .clone()
        .unwrap();
    assert!(msg.contains("karpenter.sh/custom"), "{msg}");
    assert_eq!(condition(&conds, "Ready").0, "False");
}

#[tokio::test(start_paused = true)]
async fn a_template_change_drifts_the_claim_and_the_node_is_replaced() {
    let h = Harness::new();
    nodeclass(&h);
    let name = initialized_node(&h).await;
    h.bind("web", "n1");
    let s = controller(&h);
    let w = s.reconcile_all().await;
    assert_eq!(w.nodepool_hash, vec!["default"]);
    let current = hash::nodepool_hash(&pool(&h));
    let ann = pool(&h).metadata.annotations.unwrap();
    assert_eq!(ann[hash::HASH_ANNOTATION], current);
    assert_eq!(ann[hash::HASH_VERSION_ANNOTATION], hash::HASH_VERSION);
    let c = claim(&h, &name);
    assert_eq!(
        c.metadata.annotations.as_ref().unwrap()[hash::HASH_ANNOTATION],
        current
    );
    assert!(
        conditions::find(
            c.status.as_ref().unwrap().conditions.as_ref().unwrap(),
            "Drifted"
        )
        .is_none()
    );

    // The user changes a template label.
    let mut v = h.api.get(Kind::NodePool, "default").unwrap().to_value();
    v["spec"]["template"]["metadata"]["labels"]["team"] = json!("api");
    h.api.put_value(Kind::NodePool, v);
    let w = s.reconcile_all().await;
    assert_eq!(w.nodepool_hash, vec!["default"]);
    assert_eq!(w.nodeclaim_drift, vec![name.clone()]);
    let new_hash = hash::nodepool_hash(&pool(&h));
    assert_ne!(new_hash, current);
    assert_eq!(
        pool(&h).metadata.annotations.unwrap()[hash::HASH_ANNOTATION],
        new_hash
    );
    let conds = claim(&h, &name).status.unwrap().conditions.unwrap();
    assert_eq!(
        condition(&conds, "Drifted"),
        ("True".into(), "NodePoolDrifted".into())
    );

    // The disruption engine replaces it for drift.
    let wr: Arc<dyn KubeWriter> = h.api.clone();
    let d = Disruptor::new(&Context {
        writer: wr,
        ..h.context()
    });
    let mut cadence = DisruptionCadence::new(DisruptionTimings::default(), h.clock.now());
    assert_eq!(d.step(&mut cadence).await, Step::Started(1));
    let running = d.running();
    assert_eq!(running.len(), 1);
    assert_eq!(running[0].replacements.len(), 1);
    let conds = claim(&h, &name).status.unwrap().conditions.unwrap();
    assert_eq!(condition(&conds, "DisruptionReason").1, "Drifted");
    // The replacement is stamped with the new hash and is not drifted.
    let r = claim(&h, &running[0].replacements[0]);
    assert_eq!(
        r.metadata.annotations.unwrap()[hash::HASH_ANNOTATION],
        new_hash
    );

    // Changing the label back undrifts the claim.
    let mut v = h.api.get(Kind::NodePool, "default").unwrap().to_value();
    v["spec"]["template"]["metadata"]["labels"]["team"] = json!("web");
    h.api.put_value(Kind::NodePool, v);
    s.reconcile_all().await;
    let conds = claim(&h, &name).status.unwrap().conditions.unwrap();
    assert!(conditions::find(&conds, "Drifted").is_none());
}

#[tokio::test(start_paused = true)]
async fn a_claim_stamped_with_another_version_is_restamped_not_drifted() {
    let h = Harness::new();
    nodeclass(&h);
    let name = initialized_node(&h).await;
    let wr: Arc<dyn KubeWriter> = h.api.clone();
    wr.patch_nodeclaim_meta(
        &name,
        &crate::write::MetaPatch {
            annotations: [
                (
                    hash::HASH_ANNOTATION.to_string(),
                    Some("6821584717896284000".to_string()),
                ),
                (
                    hash::HASH_VERSION_ANNOTATION.to_string(),
                    Some("v3".to_string()),
                ),
            ]
            .into_iter()
            .collect(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let s = controller(&h);
    let w = s.reconcile_all().await;
    assert_eq!(w.nodeclaim_hash, vec![name.clone()]);
    s.reconcile_all().await;
    let c = claim(&h, &name);
    let ann = c.metadata.annotations.unwrap();
    assert_eq!(ann[hash::HASH_ANNOTATION], hash::nodepool_hash(&pool(&h)));
    assert_eq!(ann[hash::HASH_VERSION_ANNOTATION], hash::HASH_VERSION);
    let conds = c.status.unwrap().conditions.unwrap();
    assert!(conditions::find(&conds, "Drifted").is_none());
}

#[tokio::test(start_paused = true)]
async fn a_follower_writes_no_status() {
    let h = Harness::new();
    nodeclass(&h);
    h.nodepool("default", None);
    h.api.mark_synced();
    let (_tx, rx) = watch::channel(false);
    let w: Arc<dyn KubeWriter> = Arc::new(LeaderGate::new(h.api.clone(), rx.clone()));
    let s = StatusController::new(&Context {
        writer: w,
        ..h.context()
    })
    .with_leader(rx);
    let log = h.api.log().len();
    assert_eq!(s.reconcile_all().await, Default::default());
    assert_eq!(h.api.log().len(), log);
    assert!(pool(&h).status.is_none());
}

#[tokio::test(start_paused = true)]
async fn provider_drift_is_asked_every_five_minutes() {
    let h = Harness::new();
    nodeclass(&h);
    let name = initialized_node(&h).await;
    h.cloud.set_drift(Some("AMIDrift"));
    let s = controller(&h);
    s.reconcile_all().await;
    let conds = claim(&h, &name).status.unwrap().conditions.unwrap();
    assert_eq!(
        condition(&conds, "Drifted"),
        ("True".into(), "AMIDrift".into())
    );
    let (snap, _) = crate::state::lock(&h.state).snapshot(h.clock.now(), Default::default());
    let c = snap.node_claims.iter().find(|c| c.name == name).unwrap();
    assert_eq!(c.drifted.as_deref(), Some("AMIDrift"));

    // The provider stops reporting drift; the answer is trusted for five minutes.
    h.cloud.set_drift(None);
    tokio::time::advance(std::time::Duration::from_secs(60)).await;
    s.reconcile_all().await;
    let conds = claim(&h, &name).status.unwrap().conditions.unwrap();
    assert!(conditions::find(&conds, "Drifted").is_some());
    tokio::time::advance(std::time::Duration::from_secs(240)).await;
    s.reconcile_all().await;
    let conds = claim(&h, &name).status.unwrap().conditions.unwrap();
    assert!(conditions::find(&conds, "Drifted").is_none());
}

/// A pool of class `class` whose template carries the label `team`.
fn team_pool(h: &Harness, name: &str, class: &str, team: &str) {
    let template = json!({"metadata": {"labels": {"team": team}},
        "spec": {"nodeClassRef": {"name": class}}});
    let pool = merge(k8s::nodepool(name), json!({"spec": {"template": template}}));
    h.api.put_value(Kind::NodePool, pool);
}

#[tokio::test(start_paused = true)]
async fn a_pool_change_reconciles_the_class_it_names_at_once() {
    let h = Harness::new();
    nodeclass(&h);
    team_pool(&h, "web", "default", "web");
    h.api.mark_synced();
    let s = controller(&h);
    s.reconcile_all().await;
    let first = (
        "default".to_string(),
        vec![r#"web{"team": "web"}"#.to_string()],
    );
    assert_eq!(h.cloud.class_reconciles(), [first]);

    // Nothing changed: the class waits for its minute.
    tokio::time::advance(std::time::Duration::from_secs(5)).await;
    s.reconcile_all().await;
    assert_eq!(h.cloud.class_reconciles().len(), 1);

    // The pool's template changes: the class is validated with it on the next pass.
    team_pool(&h, "web", "default", "payments");
    tokio::time::advance(std::time::Duration::from_secs(5)).await;
    s.reconcile_all().await;
    let calls = h.cloud.class_reconciles();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1].1, [r#"web{"team": "payments"}"#]);

    // A pool of another class changes nothing for this one.
    team_pool(&h, "elsewhere", "other", "web");
    s.reconcile_all().await;
    assert_eq!(h.cloud.class_reconciles().len(), 2);

    // A second pool naming the class is created, then deleted.
    team_pool(&h, "batch", "default", "batch");
    s.reconcile_all().await;
    let calls = h.cloud.class_reconciles();
    assert_eq!(calls.len(), 3);
    assert_eq!(
        calls[2].1,
        [r#"batch{"team": "batch"}"#, r#"web{"team": "payments"}"#]
    );
    h.api.delete(Kind::NodePool, "batch").unwrap();
    s.reconcile_all().await;
    let calls = h.cloud.class_reconciles();
    assert_eq!(calls.len(), 4);
    assert_eq!(calls[3].1, [r#"web{"team": "payments"}"#]);
    // Still under a minute since the first reconcile.
    assert!(
        h.clock
            .now()
            .since(nodewright_core::time::Timestamp(1_717_200_000_000))
            < crate::status::nodeclass::RESOLVE_EVERY
    );
}

#[test]
fn a_class_is_validated_with_the_pools_that_name_it() {
    let np = |name: &str, class: &str, kind: &str| -> NodePool {
        let class = json!({"kind": kind, "name": class});
        let class = json!({"spec": {"template": {"spec": {"nodeClassRef": class}}}});
        serde_json::from_value(merge(k8s::nodepool(name), class)).unwrap()
    };
    let pools = [
        np("a", "default", "EC2NodeClass"),
        np("b", "other", "EC2NodeClass"),
        np("c", "default", "SomeOtherClass"),
        np("d", "default", "EC2NodeClass"),
    ];
    let names: Vec<String> = crate::status::nodeclass::pools_using(&pools, "default")
        .iter()
        .map(|p| p.metadata.name.clone().unwrap_or_default())
        .collect();
    assert_eq!(names, ["a", "d"]);
}
