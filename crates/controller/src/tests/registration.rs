//! Provider registration hooks: while one is pending the Node keeps the unregistered taint and
//! the claim stays `Registered=False` (`RegistrationHookPending`); once done, the labels it
//! reports land on the claim and the Node and registration completes.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_cloud::Registration;

use super::Harness;
use crate::conditions as cond;
use crate::lifecycle::Outcome;
use crate::state::{Kind, Object};
use nodewright_core::taints::UNREGISTERED_TAINT;

const PARTITION: &str = "karpenter.k8s.aws/placement-group-partition";

fn claim(h: &Harness, name: &str) -> NodeClaim {
    match h.api.get(Kind::NodeClaim, name) {
        Some(Object::NodeClaim(c)) => *c,
        other => panic!("no claim {name}: {other:?}"),
    }
}

fn node(h: &Harness, name: &str) -> Node {
    match h.api.get(Kind::Node, name) {
        Some(Object::Node(n)) => *n,
        other => panic!("no node {name}: {other:?}"),
    }
}

fn registered(c: &NodeClaim) -> (String, String, String) {
    let conds = c.status.as_ref().unwrap().conditions.clone().unwrap();
    let r = cond::find(&conds, "Registered").unwrap();
    (
        r.status.clone(),
        r.reason.clone().unwrap_or_default(),
        r.message.clone().unwrap_or_default(),
    )
}

fn unregistered_taint(n: &Node) -> bool {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .any(|t| t.key == UNREGISTERED_TAINT)
}

fn label(labels: &Option<std::collections::BTreeMap<String, String>>, k: &str) -> Option<String> {
    labels.as_ref().and_then(|l| l.get(k).cloned())
}

/// A launched claim whose Node has joined, with the hooks answering `hook`.
pub(crate) async fn joined(h: &Harness, hook: Option<Result<Registration, String>>) -> String {
    h.nodepool("default", None);
    h.pending_pod("web-1", "1");
    h.api.mark_synced();
    h.cloud.set_registration(hook);
    let name = h.provisioner().provision().await.unwrap().created[0].clone();
    let life = h.lifecycle();
    life.reconcile_all().await;
    life.reconcile_all().await;
    h.claim_joins("n1", &name);
    name
}

#[tokio::test(start_paused = true)]
async fn a_pending_hook_holds_registration_until_it_reports_its_labels() {
    let h = Harness::new();
    let name = joined(
        &h,
        Some(Ok(Registration::pending("partition not known yet"))),
    )
    .await;
    let life = h.lifecycle();
    life.reconcile_all().await;
    let c = claim(&h, &name);
    assert_eq!(
        registered(&c),
        (
            "False".into(),
            "RegistrationHookPending".into(),
            "partition not known yet".into()
        )
    );
    assert!(c.status.as_ref().unwrap().node_name.is_none());
    let n = node(&h, "n1");
    assert!(
        unregistered_taint(&n),
        "the taint stays while a hook is pending"
    );
    assert_eq!(label(&n.metadata.labels, "karpenter.sh/registered"), None);
    // Everything before the hooks is synced already: the claim's labels and our finalizer.
    assert_eq!(
        label(&n.metadata.labels, "karpenter.sh/nodepool").as_deref(),
        Some("default")
    );
    assert!(
        n.metadata
            .finalizers
            .unwrap_or_default()
            .contains(&"karpenter.sh/termination".to_string())
    );
    assert!(!cond::is_true(
        &c.status.unwrap().conditions.unwrap(),
        "Initialized"
    ));

    // The hook learns the partition: both objects carry it and the node registers.
    h.cloud
        .set_registration(Some(Ok(Registration::done().with_label(PARTITION, "2"))));
    life.reconcile_all().await;
    let c = claim(&h, &name);
    assert_eq!(registered(&c).0, "True");
    assert_eq!(label(&c.metadata.labels, PARTITION).as_deref(), Some("2"));
    let n = node(&h, "n1");
    assert_eq!(label(&n.metadata.labels, PARTITION).as_deref(), Some("2"));
    assert_eq!(
        label(&n.metadata.labels, "karpenter.sh/registered").as_deref(),
        Some("true")
    );
    assert!(!unregistered_taint(&n));
    assert_eq!(c.status.as_ref().unwrap().node_name.as_deref(), Some("n1"));
}

#[tokio::test(start_paused = true)]
async fn hook_labels_fill_in_but_never_replace_the_claims_own() {
    let h = Harness::new();
    let name = joined(
        &h,
        Some(Ok(Registration::done()
            .with_label(PARTITION, "3")
            .with_label("karpenter.sh/nodepool", "other"))),
    )
    .await;
    h.lifecycle().reconcile_all().await;
    let c = claim(&h, &name);
    assert_eq!(registered(&c).0, "True");
    assert_eq!(label(&c.metadata.labels, PARTITION).as_deref(), Some("3"));
    assert_eq!(
        label(&c.metadata.labels, "karpenter.sh/nodepool").as_deref(),
        Some("default")
    );
    let n = node(&h, "n1");
    assert_eq!(
        label(&n.metadata.labels, "karpenter.sh/nodepool").as_deref(),
        Some("default")
    );
}

#[tokio::test(start_paused = true)]
async fn a_failing_hook_keeps_the_node_unregistered_and_times_out_like_a_missing_node() {
    let h = Harness::new();
    let name = joined(&h, Some(Err("throttled".into()))).await;
    let life = h.lifecycle();
    life.reconcile_all().await;
    let (status, reason, message) = registered(&claim(&h, &name));
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "RegistrationHookPending")
    );
    assert!(message.contains("throttled"), "{message}");
    assert!(unregistered_taint(&node(&h, "n1")));
    assert!(h.cloud.hook_calls() >= 1);

    tokio::time::advance(Duration::from_secs(16 * 60)).await;
    assert_eq!(
        life.reconcile_all().await[&name],
        Ok(Outcome::Deleted("registration_timeout"))
    );
}

#[tokio::test(start_paused = true)]
async fn without_hooks_registration_is_immediate() {
    let h = Harness::new();
    let name = joined(&h, None).await;
    h.lifecycle().reconcile_all().await;
    assert_eq!(registered(&claim(&h, &name)).0, "True");
    assert!(!unregistered_taint(&node(&h, "n1")));
    assert_eq!(h.cloud.hook_calls(), 1);
}
