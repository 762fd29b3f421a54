//! Pods that finished and pods that ask not to be disrupted: a Succeeded or Failed pod holds
//! no share of its node (it neither blocks disruption nor takes capacity from a pending
//! pod), and a `karpenter.sh/do-not-disrupt` block is kept without a `DisruptionBlocked`
//! event, as upstream.

use std::time::Duration;

use nodewright_core::cadence::{DisruptionCadence, DisruptionTimings};
use serde_json::{Value, json};

use super::Harness;
use super::termination::initialized_node;
use crate::disruption::Step;
use crate::state::{Kind, Object, gauges, lock};

/// A pod of the Job `batch` on `n1`, running, asking not to be disrupted.
fn job_pod(cpu: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "batch-1", "namespace": "default", "uid": "pod-batch-1",
            "annotations": {"karpenter.sh/do-not-disrupt": "true"},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "batch",
                "uid": "job", "controller": true}]},
        "spec": {"nodeName": "n1", "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "x",
                "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
        "status": {"phase": "Running", "startTime": "2024-06-01T00:00:00Z",
            "conditions": [{"type": "Ready", "status": "True"}]}
    })
}

/// Writes `pod` in `phase`; a finished pod is no longer Ready.
fn finish(h: &Harness, mut pod: Value, phase: &str) {
    pod["status"]["phase"] = json!(phase);
    if phase != "Running" {
        pod["status"]["conditions"] = json!([{"type": "Ready", "status": "False",
            "reason": if phase == "Succeeded" { "PodCompleted" } else { "PodFailed" }}]);
    }
    h.api.put_value(Kind::Pod, pod);
}

/// `n1`'s summed pod requests for CPU in the node gauge (a node without any has no series).
fn cpu_requests_on_n1(h: &Harness) -> f64 {
    gauges::set_all(&lock(&h.state), &h.metrics);
    let text = h.metrics.encode();
    text.lines()
        .find(|l| {
            l.starts_with("karpenter_nodes_total_pod_requests{")
                && l.contains(r#"node_name="n1""#)
                && l.contains(r#"resource_type="cpu""#)
        })
        .and_then(|l| l.rsplit(' ').next())
        .map_or(0.0, |v| v.parse().unwrap())
}

#[tokio::test(start_paused = true)]
async fn a_do_not_disrupt_pod_blocks_its_node_without_an_event() {
    let h = Harness::new();
    initialized_node(&h).await;
    h.api.put_value(Kind::Pod, job_pod("100m"));
    let d = h.disruptor();
    let mut cadence = DisruptionCadence::new(DisruptionTimings::default(), h.clock.now());
    assert_eq!(d.step(&mut cadence).await, Step::Idle);
    assert!(
        h.events.with_reason("DisruptionBlocked").is_empty(),
        "{:?}",
        h.events.with_reason("DisruptionBlocked")
    );

    // The same for the annotation on the node itself.
    let h = Harness::new();
    initialized_node(&h).await;
    let Some(Object::Node(n)) = h.api.get(Kind::Node, "n1") else {
        panic!("no node")
    };
    let mut n = serde_json::to_value(*n).unwrap();
    n["metadata"]["annotations"] = json!({"karpenter.sh/do-not-disrupt": "true"});
    h.api.put_value(Kind::Node, n);
    let d = h.disruptor();
    let mut cadence = DisruptionCadence::new(DisruptionTimings::default(), h.clock.now());
    assert_eq!(d.step(&mut cadence).await, Step::Idle);
    assert!(h.events.with_reason("DisruptionBlocked").is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_finished_job_pod_leaves_its_node_empty() {
    for phase in ["Succeeded", "Failed"] {
        let h = Harness::new();
        initialized_node(&h).await;
        let pod = job_pod("1");
        h.api.put_value(Kind::Pod, pod.clone());
        assert_eq!(cpu_requests_on_n1(&h), 1.0);
        let d = h.disruptor();
        let mut cadence = DisruptionCadence::new(DisruptionTimings::default(), h.clock.now());
        assert_eq!(d.step(&mut cadence).await, Step::Idle, "{phase}");

        // The container exits: the do-not-disrupt annotation no longer protects anything,
        // and the node is empty.
        finish(&h, pod, phase);
        assert_eq!(cpu_requests_on_n1(&h), 0.0, "{phase}");
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(d.step(&mut cadence).await, Step::Planned(1), "{phase}");
        assert!(h.events.with_reason("DisruptionBlocked").is_empty());
    }
}

#[tokio::test(start_paused = true)]
async fn a_finished_pod_frees_its_share_of_the_node_for_pending_pods() {
    // n1 has 3920m allocatable. With a running 3-CPU pod on it, another needs a new claim;
    // once that pod has finished, the next one goes on n1.
    for (phase, new_claims) in [("Running", 1), ("Succeeded", 0), ("Failed", 0)] {
        let h = Harness::new();
        initialized_node(&h).await;
        finish(&h, job_pod("3"), phase);
        h.pending_pod("next", "3");
        let placed = h.provisioner().provision().await.unwrap();
        assert_eq!(placed.created.len(), new_claims, "{phase}: {placed:?}");
        assert!(placed.unplaced.is_empty(), "{phase}: {placed:?}");
        let on_n1 = h
            .events
            .with_reason("Nominated")
            .iter()
            .any(|e| e.regarding.name == "next" && e.message.ends_with("node/n1"));
        assert_eq!(on_n1, new_claims == 0, "{phase}");
    }
}
