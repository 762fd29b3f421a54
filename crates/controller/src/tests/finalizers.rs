//! Finalizer writes are guarded by the resourceVersion they were computed from: with a watch
//! that lags, releasing our finalizer never drops one another controller added meanwhile.

use std::sync::Arc;

use super::Harness;
use crate::lifecycle::Outcome;
use crate::state::{Kind, Object};
use crate::write::KubeWriter;

#[tokio::test(start_paused = true)]
async fn a_finalizer_added_behind_our_back_survives_the_release_of_ours() {
    let h = Harness::new();
    h.nodepool("default", None);
    h.pending_pod("web-1", "1");
    h.api.mark_synced();
    let w: Arc<dyn KubeWriter> = h.api.clone();
    let prov = h.provisioner();
    let life = h.lifecycle();
    // Never launched, so finalizing is only the release of our finalizer.
    let name = prov.provision().await.unwrap().created[0].clone();
    w.delete_nodeclaim(&name).await.unwrap();

    // Another controller adds its finalizer; our watch has not delivered that yet.
    let Some(Object::NodeClaim(mut c)) = h.api.get(Kind::NodeClaim, &name) else {
        panic!()
    };
    c.metadata
        .finalizers
        .get_or_insert_with(Vec::new)
        .push("example.com/keep".into());
    h.api.put_unseen(Object::NodeClaim(c.clone()));

    let r = life.reconcile_all().await;
    let err = r[&name].clone().unwrap_err();
    assert!(
        err.starts_with(&format!("conflict writing NodeClaim {name}")),
        "{err}"
    );
    let Some(Object::NodeClaim(stored)) = h.api.get(Kind::NodeClaim, &name) else {
        panic!("the claim was removed with a finalizer still on it")
    };
    assert_eq!(
        stored.metadata.finalizers.unwrap(),
        vec!["karpenter.sh/termination", "example.com/keep"]
    );

    // The watch catches up: ours is released, theirs stays and holds the object.
    h.api.put(Object::NodeClaim(c));
    assert_eq!(life.reconcile_all().await[&name], Ok(Outcome::Finalized));
    let Some(Object::NodeClaim(stored)) = h.api.get(Kind::NodeClaim, &name) else {
        panic!("the claim was removed with a finalizer still on it")
    };
    assert_eq!(
        stored.metadata.finalizers.unwrap(),
        vec!["example.com/keep"]
    );
}
