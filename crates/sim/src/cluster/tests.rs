//! The workload controllers' reconcile.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

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

/// Work beside the view sees it as it was when the work started, and the next view waits for
/// the work to end; a copy of the cluster does not wait, and changes only its own view.
#[test]
fn work_beside_the_view_reads_it_unchanged_until_it_ends() {
    let mut c = cluster_with(WorkloadKind::Deployment, 2);
    c.reconcile(Timestamp(0));
    assert_eq!(c.view(Timestamp(0)).pods.len(), 2);

    let (go, wait) = mpsc::channel::<()>();
    let seen = Arc::new(AtomicUsize::new(0));
    let ended = Arc::new(AtomicBool::new(false));
    let (seen_in, ended_in) = (seen.clone(), ended.clone());
    c.beside_view(move |view| {
        wait.recv().unwrap();
        seen_in.store(view.pods.len(), Ordering::SeqCst);
        ended_in.store(true, Ordering::SeqCst);
    });

    // More replicas while the work runs: a copy of the cluster sees them at once.
    c.workloads
        .get_mut(&("default".to_string(), "app".to_string()))
        .unwrap()
        .replicas = 3;
    c.reconcile(Timestamp(1_000));
    let mut copy = c.clone();
    assert_eq!(copy.view(Timestamp(1_000)).pods.len(), 3);
    assert!(
        !ended.load(Ordering::SeqCst),
        "the copy waited for the work"
    );

    // The work is let go only later: the next view must wait for it.
    let later = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        go.send(()).unwrap();
    });
    assert_eq!(c.view(Timestamp(1_000)).pods.len(), 3);
    assert!(
        ended.load(Ordering::SeqCst),
        "the view did not wait for the work"
    );
    assert_eq!(
        seen.load(Ordering::SeqCst),
        2,
        "the work saw the view change"
    );
    later.join().unwrap();
}
