//! Instance tagging after registration against the in-memory API and cloud.

use std::sync::Arc;

use nodewright_testkit::json::merge;
use nodewright_testkit::k8s;
use serde_json::json;
use tokio::sync::watch;

use super::Harness;
use super::termination::initialized_node;
use crate::context::Context;
use crate::state::{Kind, Object};
use crate::tagging::TaggingController;
use crate::write::{KubeWriter, LeaderGate};

const MARKERS: &[(&str, &str)] = &[
    ("karpenter.k8s.aws/tagged", "true"),
    (
        "compatibility.karpenter.k8s.aws/cluster-name-tagged",
        "true",
    ),
];

fn tagger(h: &Harness, leader: bool) -> TaggingController {
    let (tx, rx) = watch::channel(leader);
    drop(tx);
    let w: Arc<dyn KubeWriter> = Arc::new(LeaderGate::new(h.api.clone(), rx.clone()));
    TaggingController::new(&Context {
        writer: w,
        ..h.context()
    })
    .with_leader(rx)
}

fn annotations(h: &Harness, name: &str) -> std::collections::BTreeMap<String, String> {
    let Some(Object::NodeClaim(c)) = h.api.get(Kind::NodeClaim, name) else {
        panic!("no claim {name}")
    };
    c.metadata.annotations.unwrap_or_default()
}

fn claim_patches(h: &Harness, name: &str) -> usize {
    let line = format!("patch NodeClaim {name}");
    h.api.log().iter().filter(|l| **l == line).count()
}

/// A claim launched (it has a provider id) whose Node has not joined.
fn launched_only(h: &Harness, name: &str) {
    let launched = json!({"metadata": {"labels": {"karpenter.sh/nodepool": "default"}},
        "status": {"providerID": "aws:///us-east-1a/i-9999"}});
    h.api
        .put_value(Kind::NodeClaim, merge(k8s::nodeclaim(name), launched));
}

#[tokio::test(start_paused = true)]
async fn a_registered_claim_is_tagged_and_marked_once() {
    let h = Harness::new();
    h.cloud.set_tagging(MARKERS);
    let name = initialized_node(&h).await;
    launched_only(&h, "launched-only");
    let t = tagger(&h, true);

    let first = t.pass().await;
    assert_eq!(first.tagged, vec![name.clone()]);
    assert!(first.failed.is_empty(), "{:?}", first.failed);
    let tagged = h.cloud.tagged();
    assert_eq!(tagged.len(), 1, "only the registered claim: {tagged:?}");
    assert_eq!(tagged[0].nodeclaim, name);
    assert_eq!(tagged[0].node_name, "n1");
    let instance = h
        .cloud
        .running()
        .into_iter()
        .find(|i| i.provider_id == tagged[0].provider_id)
        .unwrap();
    assert_eq!(instance.tags["Name"], "n1");
    let ann = annotations(&h, &name);
    for (k, v) in MARKERS {
        assert_eq!(ann.get(*k).map(String::as_str), Some(*v), "{k}");
    }
    assert!(
        MARKERS
            .iter()
            .all(|(k, _)| !annotations(&h, "launched-only").contains_key(*k)),
        "an unregistered claim is not marked"
    );

    // Marked: later passes leave it alone.
    let patches = claim_patches(&h, &name);
    let second = t.pass().await;
    assert_eq!(second, Default::default());
    assert_eq!(h.cloud.tagged().len(), 1);
    assert_eq!(claim_patches(&h, &name), patches);
}

#[tokio::test(start_paused = true)]
async fn a_cloud_that_does_not_tag_gets_no_markers() {
    let h = Harness::new();
    let name = initialized_node(&h).await;
    let patches = claim_patches(&h, &name);
    let pass = tagger(&h, true).pass().await;
    assert_eq!(pass, Default::default());
    assert!(h.cloud.tagged().is_empty());
    assert_eq!(claim_patches(&h, &name), patches);
    assert!(
        MARKERS
            .iter()
            .all(|(k, _)| !annotations(&h, &name).contains_key(*k))
    );
}

#[tokio::test(start_paused = true)]
async fn a_standby_replica_neither_tags_nor_marks() {
    let h = Harness::new();
    h.cloud.set_tagging(MARKERS);
    let name = initialized_node(&h).await;
    let pass = tagger(&h, false).pass().await;
    assert_eq!(pass, Default::default());
    assert!(h.cloud.tagged().is_empty());
    assert!(!annotations(&h, &name).contains_key(MARKERS[0].0));
}

#[tokio::test(start_paused = true)]
async fn a_vanished_instance_is_not_marked() {
    let h = Harness::new();
    h.cloud.set_tagging(MARKERS);
    let name = initialized_node(&h).await;
    let pid = {
        let Some(Object::NodeClaim(c)) = h.api.get(Kind::NodeClaim, &name) else {
            panic!()
        };
        c.status.unwrap().provider_id.unwrap()
    };
    h.cloud.vanish(&pid);
    let pass = tagger(&h, true).pass().await;
    assert_eq!(pass.gone, vec![name.clone()]);
    assert!(pass.tagged.is_empty());
    assert!(!annotations(&h, &name).contains_key(MARKERS[0].0));
}
