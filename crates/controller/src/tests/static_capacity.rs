//! The static capacity loop against the in-memory API: it keeps a static NodePool at its
//! `replicas`, and while no pool is static it asks the cloud for nothing.

use super::Harness;
use crate::static_capacity::StaticCapacity;

#[tokio::test(start_paused = true)]
async fn a_static_pool_gets_its_replicas_once() {
    let h = Harness::new();
    h.nodepool("fixed", None);
    h.edit_nodepool("fixed", |v| v["spec"]["replicas"] = 2.into());
    h.api.mark_synced();
    let statics = StaticCapacity::new(&h.context());

    let first = statics.reconcile().await.unwrap();
    assert_eq!(first.len(), 2, "{first:?}");
    assert!(
        first.iter().all(|d| d.starts_with("created fixed-")),
        "{first:?}"
    );
    assert_eq!(h.claims().len(), 2);
    let second = statics.reconcile().await.unwrap();
    assert!(second.is_empty(), "{second:?}");
    assert_eq!(h.claims().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn no_static_pool_means_no_cloud_call() {
    let h = Harness::new();
    h.nodepool("default", None);
    h.pending_pod("web-1", "1");
    h.api.mark_synced();
    let statics = StaticCapacity::new(&h.context());

    assert!(statics.reconcile().await.unwrap().is_empty());
    assert_eq!(h.cloud.instance_type_calls(), 0);
    assert!(h.claims().is_empty());
}
