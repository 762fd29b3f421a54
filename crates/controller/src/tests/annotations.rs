//! Annotations a cloud provider reports: the node class hash written on the EC2NodeClass and
//! on each claim at launch, claim annotations copied onto the Node at registration, and
//! static node class drift through the simulated cloud.

use std::sync::Arc;
use std::time::Duration;

use nodewright_api::aws::v1::EC2NodeClass;
use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_cloud::CloudProvider;
use nodewright_cloud::annotations::{NODECLASS_HASH, NODECLASS_HASH_VERSION};
use nodewright_cloud_sim::{SimCloud, SimCloudConfig};
use serde_json::json;
use tokio::sync::watch;

use super::Harness;
use super::status::nodeclass;
use super::termination::initialized_node;
use crate::conditions;
use crate::context::Context;
use crate::hash;
use crate::lifecycle::Lifecycle;
use crate::provisioner::Provisioner;
use crate::state::{Kind, Object};
use crate::status::StatusController;
use crate::write::{KubeWriter, LeaderGate};

fn claim(h: &Harness, name: &str) -> NodeClaim {
    match h.api.get(Kind::NodeClaim, name) {
        Some(Object::NodeClaim(c)) => *c,
        other => panic!("no claim {name}: {other:?}"),
    }
}

fn class(h: &Harness) -> EC2NodeClass {
    match h.api.get(Kind::NodeClass, "default") {
        Some(Object::NodeClass(c)) => *c,
        other => panic!("no class: {other:?}"),
    }
}

fn status_controller(h: &Harness, cloud: Arc<dyn CloudProvider>, leader: bool) -> StatusController {
    let (tx, rx) = watch::channel(leader);
    // The sender is dropped; the receiver keeps the last value.
    drop(tx);
    let w: Arc<dyn KubeWriter> = Arc::new(LeaderGate::new(h.api.clone(), rx.clone()));
    StatusController::new(&Context {
        writer: w,
        cloud,
        ..h.context()
    })
    .with_leader(rx)
}

fn writes(h: &Harness, what: &str) -> usize {
    h.api.log().iter().filter(|l| *l == what).count()
}

#[tokio::test(start_paused = true)]
async fn the_claim_carries_its_class_hash_and_the_node_gets_the_claims_annotations() {
    let h = Harness::new();
    nodeclass(&h);
    let name = initialized_node(&h).await;
    let ann = claim(&h, &name).metadata.annotations.unwrap();
    assert_eq!(ann[NODECLASS_HASH], "role-KarpenterNodeRole");
    assert_eq!(ann[NODECLASS_HASH_VERSION], "test1");
    // The pool's stamp from creation is still there.
    assert!(ann.contains_key(hash::HASH_ANNOTATION));

    let Some(Object::Node(n)) = h.api.get(Kind::Node, "n1") else {
        panic!("no node")
    };
    let node_ann = n.metadata.annotations.unwrap_or_default();
    for k in [
        NODECLASS_HASH,
        NODECLASS_HASH_VERSION,
        hash::HASH_ANNOTATION,
        hash::HASH_VERSION_ANNOTATION,
    ] {
        assert_eq!(node_ann.get(k), ann.get(k), "{k}");
    }
}

#[tokio::test(start_paused = true)]
async fn provider_annotations_override_the_claims_and_node_annotations_are_kept() {
    let h = Harness::new();
    nodeclass(&h);
    h.nodepool("default", None);
    h.pending_pod("seed", "1");
    h.api.mark_synced();
    let w: Arc<dyn KubeWriter> = h.api.clone();
    let prov = h.provisioner();
    let life = h.lifecycle();
    let name = prov.provision().await.unwrap().created[0].clone();
    // A stale stamp on the claim (say, from a template annotation) loses to the provider's.
    let mut stale = crate::write::MetaPatch::default();
    stale
        .annotations
        .insert(NODECLASS_HASH.into(), Some("stale".into()));
    w.patch_nodeclaim_meta(&name, &stale).await.unwrap();
    life.reconcile_all().await;
    let c = claim(&h, &name);
    assert_eq!(
        c.metadata.annotations.as_ref().unwrap()[NODECLASS_HASH],
        "role-KarpenterNodeRole"
    );

    // The node comes up with an annotation of its own: registration adds, never removes.
    let pid = c.status.unwrap().provider_id.unwrap();
    h.node_joins("n1", &pid);
    let mut v = h.api.get(Kind::Node, "n1").unwrap().to_value();
    v["metadata"]["annotations"] = json!({"node.alpha.kubernetes.io/ttl": "0"});
    h.api.put_value(Kind::Node, v);
    life.reconcile_all().await;
    let Some(Object::Node(n)) = h.api.get(Kind::Node, "n1") else {
        panic!()
    };
    let ann = n.metadata.annotations.unwrap();
    assert_eq!(ann["node.alpha.kubernetes.io/ttl"], "0");
    assert_eq!(ann[NODECLASS_HASH], "role-KarpenterNodeRole");
}

#[tokio::test(start_paused = true)]
async fn the_class_gets_its_hash_in_one_patch_only_when_it_changes_and_only_from_the_leader() {
    let h = Harness::new();
    nodeclass(&h);
    initialized_node(&h).await;

    let follower = status_controller(&h, h.cloud.clone(), false);
    let w = follower.reconcile_all().await;
    assert!(w.nodeclass_meta.is_empty(), "{w:?}");
    assert!(class(&h).metadata.annotations.is_none());

    let s = status_controller(&h, h.cloud.clone(), true);
    let w = s.reconcile_all().await;
    assert_eq!(w.nodeclass_meta, vec!["default"], "{w:?}");
    // One patch for the finalizer, one for every annotation.
    assert_eq!(w.nodeclass_finalizer, vec!["default"], "{w:?}");
    assert_eq!(writes(&h, "patch EC2NodeClass default"), 2);
    let ann = class(&h).metadata.annotations.unwrap();
    assert_eq!(ann[NODECLASS_HASH], "role-KarpenterNodeRole");
    assert_eq!(ann[NODECLASS_HASH_VERSION], "test1");

    // Resolved again a minute later: the hash is the same, nothing is written.
    tokio::time::advance(Duration::from_secs(61)).await;
    let w = s.reconcile_all().await;
    assert!(w.nodeclass_meta.is_empty(), "{w:?}");
    assert_eq!(writes(&h, "patch EC2NodeClass default"), 2);

    // The user edits the spec (and keeps an annotation of their own): the hash follows.
    let mut v = h.api.get(Kind::NodeClass, "default").unwrap().to_value();
    v["spec"]["role"] = json!("OtherRole");
    v["metadata"]["generation"] = json!(2);
    v["metadata"]["annotations"]["team"] = json!("platform");
    h.api.put_value(Kind::NodeClass, v);
    let w = s.reconcile_all().await;
    assert_eq!(w.nodeclass_meta, vec!["default"], "{w:?}");
    let ann = class(&h).metadata.annotations.unwrap();
    assert_eq!(ann[NODECLASS_HASH], "role-OtherRole");
    assert_eq!(ann["team"], "platform");
}

#[tokio::test(start_paused = true)]
async fn editing_the_class_drifts_claims_launched_before_in_the_simulated_cloud() {
    let h = Harness::new();
    nodeclass(&h);
    h.nodepool("default", None);
    h.pending_pod("seed", "1");
    h.api.mark_synced();
    let cloud: Arc<dyn CloudProvider> = Arc::new(SimCloud::new(SimCloudConfig::default()).unwrap());
    let w: Arc<dyn KubeWriter> = h.api.clone();
    let s = status_controller(&h, cloud.clone(), true);
    // The class is resolved first, as it would be in a running controller.
    s.reconcile_all().await;
    let class_hash = class(&h).metadata.annotations.unwrap()[NODECLASS_HASH].clone();
    let prov = Provisioner::new(&Context {
        writer: w.clone(),
        cloud: cloud.clone(),
        ..h.context()
    });
    let life = Lifecycle::new(&Context {
        writer: w,
        cloud: cloud.clone(),
        ..h.context()
    });
    let name = prov.provision().await.unwrap().created[0].clone();
    life.reconcile_all().await;
    let c = claim(&h, &name);
    assert_eq!(
        c.metadata.annotations.as_ref().unwrap()[NODECLASS_HASH],
        class_hash
    );
    h.node_joins("n1", &c.status.unwrap().provider_id.unwrap());
    life.reconcile_all().await;
    s.reconcile_all().await;
    let conds = claim(&h, &name).status.unwrap().conditions.unwrap();
    assert!(conditions::find(&conds, "Drifted").is_none(), "{conds:?}");

    let mut v = h.api.get(Kind::NodeClass, "default").unwrap().to_value();
    v["spec"]["tags"] = json!({"team": "platform"});
    v["metadata"]["generation"] = json!(2);
    h.api.put_value(Kind::NodeClass, v);
    // The provider's drift answer is trusted for five minutes.
    tokio::time::advance(crate::status::drift::PROVIDER_DRIFT_EVERY).await;
    s.reconcile_all().await;
    assert_ne!(
        class(&h).metadata.annotations.unwrap()[NODECLASS_HASH],
        class_hash
    );
    let conds = claim(&h, &name).status.unwrap().conditions.unwrap();
    let drifted = conditions::find(&conds, "Drifted").expect("drifted");
    assert_eq!(
        (drifted.status.as_str(), drifted.reason.as_deref()),
        ("True", Some("NodeClassDrift"))
    );
}
