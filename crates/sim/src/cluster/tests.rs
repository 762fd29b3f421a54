//! The workload controllers' reconcile.

use nodewright_core::model::Pod;
use nodewright_core::time::Timestamp;

use super::{Cluster, Workload, WorkloadKind};

fn cluster_with(kind: WorkloadKind, replicas: u32) -> Cluster {
    let mut c = Cluster::default();
    let w = Workload::new(kind, "default", "app", replicas, Pod::default());
    c.workloads
        .insert(("default".to_string(), "app".to_string()), w);
    c
}

#[test]
fn a_bare_pod_is_made_once_and_keeps_its_node() {
    let mut c = cluster_with(WorkloadKind::Pod, 1);
    let (created, _) = c.reconcile(Timestamp(0));
    assert_eq!(created, vec!["default/app".to_string()]);
    c.bind("default/app", "n1", Timestamp(1_000));
    let (created, deleted) = c.reconcile(Timestamp(2_000));
    assert!(created.is_empty() && deleted.is_empty());
    assert_eq!(c.pods["default/app"].node_name.as_deref(), Some("n1"));

    // Once deleted, nothing brings it back.
    c.remove_pod("default/app", Timestamp(3_000));
    let (created, _) = c.reconcile(Timestamp(4_000));
    assert!(created.is_empty());
    assert!(c.pods.is_empty());
}

#[test]
fn a_deployment_replaces_a_removed_replica() {
    let mut c = cluster_with(WorkloadKind::Deployment, 2);
    let (created, _) = c.reconcile(Timestamp(0));
    assert_eq!(created.len(), 2);
    c.remove_pod(&created[0], Timestamp(1_000));
    let (again, _) = c.reconcile(Timestamp(2_000));
    assert_eq!(again.len(), 1);
    assert_eq!(c.pods.len(), 2);
}
