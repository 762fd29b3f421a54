//! Interruption notices against the in-memory API: the claim is deleted and then terminated by
//! the ordinary path, the queue sees each delivery acknowledged once handled, failures leave
//! the delivery on the queue, and a standby does not read the queue at all.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use nodewright_cloud::{
    AckHandle, CloudError, Delivery, Interruption, InterruptionKind, InterruptionSource,
};
use nodewright_core::time::Timestamp;
use tokio::sync::watch;

use super::Harness;
use super::termination::initialized_node;
use crate::context::Context;
use crate::interruption::{InterruptionController, PARALLELISM};
use crate::state::{Kind, Object};
use crate::termination::Termination;
use crate::write::{KubeWriter, LeaderGate};

/// A queue in memory: batches handed out by `receive`, acknowledgements recorded.
#[derive(Default)]
struct FakeQueue {
    batches: Mutex<VecDeque<Vec<Delivery>>>,
    acked: Mutex<Vec<String>>,
    receives: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

impl FakeQueue {
    fn push(&self, batch: Vec<Delivery>) {
        self.batches.lock().unwrap().push_back(batch);
    }
    fn acked(&self) -> Vec<String> {
        let mut a = self.acked.lock().unwrap().clone();
        a.sort();
        a
    }
}

#[async_trait]
impl InterruptionSource for FakeQueue {
    async fn receive(&self) -> Result<Vec<Delivery>, CloudError> {
        self.receives.fetch_add(1, Ordering::SeqCst);
        let next = self.batches.lock().unwrap().pop_front();
        match next {
            Some(b) => Ok(b),
            None => {
                // A long poll that found nothing.
                tokio::time::sleep(Duration::from_secs(20)).await;
                Ok(Vec::new())
            }
        }
    }

    async fn ack(&self, handle: &AckHandle) -> Result<(), CloudError> {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(5)).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        if handle.0.starts_with("unackable") {
            return Err(CloudError::Api {
                operation: "DeleteMessage".into(),
                message: "ReceiptHandleIsInvalid".into(),
                retryable: false,
            });
        }
        self.acked.lock().unwrap().push(handle.0.clone());
        Ok(())
    }
}

fn delivery(
    handle: &str,
    kind: InterruptionKind,
    ids: &[&str],
    time: Option<Timestamp>,
) -> Delivery {
    Delivery {
        message: Ok(Interruption {
            kind,
            id: format!("event-{handle}"),
            instance_ids: ids.iter().map(|s| s.to_string()).collect(),
            time,
        }),
        ack: AckHandle(handle.into()),
    }
}

fn controller(h: &Harness, queue: Arc<FakeQueue>) -> InterruptionController {
    InterruptionController::new(&h.context(), queue)
}

fn deleting(h: &Harness, claim: &str) -> bool {
    match h.api.get(Kind::NodeClaim, claim) {
        Some(Object::NodeClaim(c)) => c.metadata.deletion_timestamp.is_some(),
        _ => false,
    }
}

fn metric(h: &Harness, line: &str) -> bool {
    h.metrics.encode().lines().any(|l| l == line)
}

#[tokio::test(start_paused = true)]
async fn a_spot_interruption_terminates_the_node_through_the_normal_path() {
    let h = Harness::new();
    let claim = initialized_node(&h).await;
    let queue = Arc::new(FakeQueue::default());
    let emitted = Timestamp(h.clock.now().0 - 3_000);
    queue.push(vec![delivery(
        "r1",
        InterruptionKind::SpotInterrupted,
        &["i-0001"],
        Some(emitted),
    )]);
    let ctl = controller(&h, queue.clone());

    let handled = ctl.poll_once().await.unwrap();
    assert_eq!(handled.deleted, vec![claim.clone()]);
    assert_eq!((handled.acked, handled.failed.len()), (1, 0));
    assert_eq!(queue.acked(), ["r1"]);
    assert!(deleting(&h, &claim));

    let reasons: Vec<(String, String)> = h
        .events
        .events()
        .into_iter()
        .filter(|e| e.reason == "SpotInterrupted" || e.reason == "TerminatingOnInterruption")
        .map(|e| (e.reason, e.regarding.name))
        .collect();
    assert_eq!(
        reasons,
        [
            ("SpotInterrupted".to_string(), claim.clone()),
            ("SpotInterrupted".to_string(), "n1".to_string()),
            ("TerminatingOnInterruption".to_string(), claim.clone()),
            ("TerminatingOnInterruption".to_string(), "n1".to_string()),
        ]
    );
    assert!(metric(
        &h,
        r#"karpenter_interruption_received_messages_total{message_type="spot_interrupted"} 1"#
    ));
    assert!(metric(
        &h,
        "karpenter_interruption_deleted_messages_total 1"
    ));
    assert!(metric(
        &h,
        "karpenter_interruption_message_queue_duration_seconds_count 1"
    ));
    assert!(metric(
        &h,
        "karpenter_interruption_message_queue_duration_seconds_sum 3.0"
    ));
    assert!(metric(
        &h,
        r#"karpenter_nodeclaims_disrupted_total{reason="spot_interrupted",nodepool="default",capacity_type="on-demand",consolidation_policy="WhenEmptyOrUnderutilized",termination_mode="graceful"} 1"#
    ));

    // The ordinary termination follows: node deleted and drained, instance terminated,
    // finalizers released.
    let life = h.lifecycle();
    let term = Termination::new(&h.context());
    for _ in 0..6 {
        life.reconcile_all().await;
        term.reconcile_all().await;
    }
    assert!(h.cloud.running().is_empty());
    assert!(h.api.get(Kind::Node, "n1").is_none());
    assert!(h.api.get(Kind::NodeClaim, &claim).is_none());
}

#[tokio::test(start_paused = true)]
async fn a_rebalance_recommendation_is_acknowledged_without_deleting() {
    let h = Harness::new();
    let claim = initialized_node(&h).await;
    let queue = Arc::new(FakeQueue::default());
    queue.push(vec![delivery(
        "r1",
        InterruptionKind::RebalanceRecommendation,
        &["i-0001"],
        None,
    )]);
    let handled = controller(&h, queue.clone()).poll_once().await.unwrap();
    assert!(handled.deleted.is_empty());
    assert_eq!(queue.acked(), ["r1"]);
    assert!(!deleting(&h, &claim));
    assert_eq!(h.events.with_reason("SpotRebalanceRecommendation").len(), 2);
    assert!(h.events.with_reason("TerminatingOnInterruption").is_empty());
    assert!(metric(
        &h,
        r#"karpenter_interruption_received_messages_total{message_type="rebalance_recommendation"} 1"#
    ));
    assert!(
        !h.metrics
            .encode()
            .contains("karpenter_nodeclaims_disrupted_total{")
    );
}

#[tokio::test(start_paused = true)]
async fn unreadable_no_op_and_unknown_messages_are_deleted() {
    let h = Harness::new();
    let claim = initialized_node(&h).await;
    let queue = Arc::new(FakeQueue::default());
    queue.push(vec![
        Delivery {
            message: Err("unreadable interruption message: not json".into()),
            ack: AckHandle("garbage".into()),
        },
        delivery("noop", InterruptionKind::NoOp, &[], None),
        delivery(
            "other",
            InterruptionKind::InstanceTerminated,
            &["i-0999"],
            None,
        ),
    ]);
    let handled = controller(&h, queue.clone()).poll_once().await.unwrap();
    assert_eq!(handled.acked, 3);
    assert_eq!(queue.acked(), ["garbage", "noop", "other"]);
    assert!(!deleting(&h, &claim));
    assert!(metric(
        &h,
        "karpenter_interruption_deleted_messages_total 3"
    ));
    // An unreadable body has no type to count.
    assert!(metric(
        &h,
        r#"karpenter_interruption_received_messages_total{message_type="no_op"} 1"#
    ));
    assert!(metric(
        &h,
        r#"karpenter_interruption_received_messages_total{message_type="instance_terminated"} 1"#
    ));
}

#[tokio::test(start_paused = true)]
async fn a_failed_delete_or_ack_leaves_the_message_on_the_queue() {
    let h = Harness::new();
    let claim = initialized_node(&h).await;
    let queue = Arc::new(FakeQueue::default());
    let (_tx, standby) = watch::channel(false);
    let gated: Arc<dyn KubeWriter> = Arc::new(LeaderGate::new(h.api.clone(), standby));
    let ctl = InterruptionController::new(
        &Context {
            writer: gated,
            ..h.context()
        },
        queue.clone(),
    );
    let handled = ctl
        .handle(vec![delivery(
            "r1",
            InterruptionKind::InstanceStopped,
            &["i-0001"],
            None,
        )])
        .await;
    assert_eq!(handled.acked, 0);
    assert_eq!(handled.failed.len(), 1, "{handled:?}");
    assert!(handled.failed[0].contains(&claim), "{handled:?}");
    assert!(queue.acked().is_empty());
    assert!(!deleting(&h, &claim));
    assert!(
        !h.metrics
            .encode()
            .contains("karpenter_interruption_deleted_messages_total 1")
    );

    let ctl = controller(&h, queue.clone());
    let handled = ctl
        .handle(vec![delivery(
            "unackable",
            InterruptionKind::InstanceStopped,
            &["i-0001"],
            None,
        )])
        .await;
    assert_eq!(handled.deleted, vec![claim.clone()]);
    assert_eq!(handled.acked, 0);
    assert!(handled.failed[0].contains("acknowledging"), "{handled:?}");
}

#[tokio::test(start_paused = true)]
async fn deliveries_are_handled_ten_at_a_time() {
    let h = Harness::new();
    initialized_node(&h).await;
    let queue = Arc::new(FakeQueue::default());
    let batch: Vec<Delivery> = (0..25)
        .map(|i| delivery(&format!("r{i:02}"), InterruptionKind::NoOp, &[], None))
        .collect();
    let handled = controller(&h, queue.clone()).handle(batch).await;
    assert_eq!(handled.acked, 25);
    assert_eq!(queue.max_in_flight.load(Ordering::SeqCst), PARALLELISM);
}

#[tokio::test(start_paused = true)]
async fn only_the_synced_leader_reads_the_queue() {
    let h = Harness::new();
    let queue = Arc::new(FakeQueue::default());
    let (leader_tx, leader) = watch::channel(false);
    let ctl = Arc::new(controller(&h, queue.clone()).with_leader(leader));
    let r = crate::metrics::Reconciler::new(h.metrics.clone(), "interruption");
    let task = tokio::spawn(ctl.clone().run(r));

    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(queue.receives.load(Ordering::SeqCst), 0);

    // Leading but not synced: still nothing.
    leader_tx.send(true).unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(queue.receives.load(Ordering::SeqCst), 0);

    h.api.mark_synced();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(queue.receives.load(Ordering::SeqCst), 1);
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert_eq!(queue.receives.load(Ordering::SeqCst), 2);

    // Losing the lease stops the polling once the poll under way returns.
    leader_tx.send(false).unwrap();
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(queue.receives.load(Ordering::SeqCst), 2);
    task.abort();
}

/// The test cloud with failing health checks to report.
struct AilingCloud {
    inner: Arc<super::cloud::TestCloud>,
    reports: Mutex<Vec<nodewright_cloud::InstanceHealth>>,
}

#[async_trait]
impl nodewright_cloud::CloudProvider for AilingCloud {
    fn name(&self) -> &'static str {
        "test"
    }
    async fn reconcile_node_class(
        &self,
        class: &nodewright_api::aws::v1::EC2NodeClass,
    ) -> Result<nodewright_cloud::ReconciledNodeClass, CloudError> {
        self.inner.reconcile_node_class(class).await
    }
    async fn instance_types(
        &self,
        class: Option<&nodewright_api::aws::v1::EC2NodeClass>,
    ) -> Result<std::sync::Arc<Vec<nodewright_core::model::InstanceType>>, CloudError> {
        self.inner.instance_types(class).await
    }
    async fn create(
        &self,
        claim: &nodewright_api::v1::nodeclaim::NodeClaim,
        class: Option<&nodewright_api::aws::v1::EC2NodeClass>,
    ) -> Result<nodewright_cloud::Launched, CloudError> {
        self.inner.create(claim, class).await
    }
    async fn delete(&self, provider_id: &str) -> Result<(), CloudError> {
        self.inner.delete(provider_id).await
    }
    async fn get(&self, provider_id: &str) -> Result<nodewright_cloud::Instance, CloudError> {
        self.inner.get(provider_id).await
    }
    async fn list(&self) -> Result<Vec<nodewright_cloud::Instance>, CloudError> {
        self.inner.list().await
    }
    async fn is_drifted(
        &self,
        claim: &nodewright_api::v1::nodeclaim::NodeClaim,
        class: Option<&nodewright_api::aws::v1::EC2NodeClass>,
    ) -> Result<Option<String>, CloudError> {
        self.inner.is_drifted(claim, class).await
    }
    async fn unhealthy_instances(
        &self,
    ) -> Result<Vec<nodewright_cloud::InstanceHealth>, CloudError> {
        Ok(self.reports.lock().unwrap().clone())
    }
}

#[tokio::test(start_paused = true)]
async fn a_failing_status_check_deletes_the_claim_forcefully_after_two_minutes() {
    use crate::interruption::health::InstanceHealthController;
    use nodewright_cloud::{FailedCheck, HealthCategory, InstanceHealth};

    let h = Harness::new();
    let claim = initialized_node(&h).await;
    let cloud = Arc::new(AilingCloud {
        inner: h.cloud.clone(),
        reports: Mutex::new(vec![InstanceHealth {
            instance_id: "i-0001".into(),
            failed: vec![FailedCheck {
                category: HealthCategory::SystemStatus,
                name: "reachability".into(),
                since: None,
            }],
        }]),
    });
    let ctl = InstanceHealthController::new(&h.context().with_cloud(cloud.clone()));
    assert_eq!(ctl.poll_once().await.unwrap(), Vec::<String>::new());
    tokio::time::advance(Duration::from_secs(60)).await;
    assert!(ctl.poll_once().await.unwrap().is_empty(), "60 s in");
    tokio::time::advance(Duration::from_secs(60)).await;
    assert_eq!(ctl.poll_once().await.unwrap(), vec![claim.clone()]);
    assert!(deleting(&h, &claim));
    let Some(Object::NodeClaim(c)) = h.api.get(Kind::NodeClaim, &claim) else {
        panic!("claim gone before its finalizer ran")
    };
    let stamp = c
        .metadata
        .annotations
        .unwrap_or_default()
        .get(crate::lifecycle::TERMINATION_TIMESTAMP)
        .cloned();
    assert_eq!(stamp, Some(crate::clock::rfc3339(h.clock.now())));
    assert!(metric(
        &h,
        r#"karpenter_interruption_instance_status_unhealthy_total{category="SystemStatus"} 1"#
    ));
    assert!(metric(
        &h,
        r#"karpenter_nodeclaims_disrupted_total{reason="system_status",nodepool="default",capacity_type="on-demand",consolidation_policy="WhenEmptyOrUnderutilized",termination_mode="forceful"} 1"#
    ));
    let reasons: Vec<String> = h.events.events().into_iter().map(|e| e.reason).collect();
    assert!(reasons.contains(&"InstanceUnhealthy".to_string()));
    assert!(reasons.contains(&"TerminatingOnInterruption".to_string()));

    // Once the claim is deleting, later polls leave it alone and count nothing more.
    tokio::time::advance(Duration::from_secs(60)).await;
    assert!(ctl.poll_once().await.unwrap().is_empty());
    assert!(metric(
        &h,
        r#"karpenter_interruption_instance_status_unhealthy_total{category="SystemStatus"} 1"#
    ));
}

#[tokio::test(start_paused = true)]
async fn a_spot_interruption_hands_the_claims_pool_to_the_source() {
    #[derive(Default)]
    struct Marking {
        queue: FakeQueue,
        marked: Mutex<Vec<nodewright_cloud::InterruptedOffering>>,
    }
    #[async_trait]
    impl InterruptionSource for Marking {
        async fn receive(&self) -> Result<Vec<Delivery>, CloudError> {
            self.queue.receive().await
        }
        async fn ack(&self, handle: &AckHandle) -> Result<(), CloudError> {
            self.queue.ack(handle).await
        }
        fn offering_interrupted(&self, o: &nodewright_cloud::InterruptedOffering) {
            self.marked.lock().unwrap().push(o.clone());
        }
    }
    let h = Harness::new();
    initialized_node(&h).await;
    let source = Arc::new(Marking::default());
    source.queue.push(vec![delivery(
        "r1",
        InterruptionKind::SpotInterrupted,
        &["i-0001", "i-elsewhere"],
        None,
    )]);
    let ctl = InterruptionController::new(&h.context(), source.clone());
    ctl.poll_once().await.unwrap();
    let marked = source.marked.lock().unwrap().clone();
    assert_eq!(
        marked.len(),
        1,
        "only the instance with a claim: {marked:?}"
    );
    assert_eq!(marked[0].kind, InterruptionKind::SpotInterrupted);
    assert_eq!(marked[0].instance_type, "m5.large");
    assert_eq!(marked[0].zone, "us-east-1a");
}

#[tokio::test(start_paused = true)]
async fn a_claim_whose_reservation_ended_is_relabelled_on_demand_with_its_node() {
    use crate::interruption::reservations::ReservationController;
    use crate::write::{MetaPatch, NodePatch};

    let h = Harness::new();
    let claim = initialized_node(&h).await;
    // Launched into a reservation that EC2 has since dropped: the test cloud reports the
    // instance as on-demand.
    let mut p = MetaPatch::default();
    p.labels
        .insert("karpenter.sh/capacity-type".into(), Some("reserved".into()));
    p.labels.insert(
        "karpenter.k8s.aws/capacity-reservation-id".into(),
        Some("cr-1".into()),
    );
    h.api.patch_nodeclaim_meta(&claim, &p).await.unwrap();
    h.api
        .patch_node(
            "n1",
            &NodePatch {
                meta: p.clone(),
                taints: None,
            },
        )
        .await
        .unwrap();
    let ctl = ReservationController::new(&h.context());
    let pass = ctl.pass().await;
    assert!(pass.failed.is_empty(), "{:?}", pass.failed);
    assert_eq!(pass.relabelled, vec![claim.clone(), "n1".to_string()]);
    let Some(Object::NodeClaim(c)) = h.api.get(Kind::NodeClaim, &claim) else {
        panic!()
    };
    let labels = c.metadata.labels.unwrap_or_default();
    assert_eq!(labels["karpenter.sh/capacity-type"], "on-demand");
    assert!(!labels.contains_key("karpenter.k8s.aws/capacity-reservation-id"));
    let Some(Object::Node(n)) = h.api.get(Kind::Node, "n1") else {
        panic!()
    };
    assert_eq!(
        n.metadata.labels.unwrap_or_default()["karpenter.sh/capacity-type"],
        "on-demand"
    );
    assert_eq!(ctl.pass().await, Default::default(), "nothing left to do");
}

#[tokio::test(start_paused = true)]
async fn a_claim_in_a_capacity_block_no_class_lists_is_deleted_before_the_block_ends() {
    use crate::interruption::reservations::{EXPIRING_WINDOW, ReservationController};
    use crate::write::MetaPatch;
    use nodewright_cloud::ReservationEnd;

    let h = Harness::new();
    let claim = initialized_node(&h).await;
    let mut p = MetaPatch::default();
    for (k, v) in [
        ("karpenter.sh/capacity-type", "reserved"),
        ("karpenter.k8s.aws/capacity-reservation-id", "cr-block"),
        (
            "karpenter.k8s.aws/capacity-reservation-type",
            "capacity-block",
        ),
    ] {
        p.labels.insert(k.into(), Some(v.into()));
    }
    let ctl = ReservationController::new(&h.context());
    let block_ending_in = |d: Duration| {
        h.cloud.set_reservations(vec![ReservationEnd {
            id: "cr-block".into(),
            capacity_block: true,
            end: Some(h.clock.now().plus(d)),
        }]);
    };
    // The block ends in 41 minutes: not yet. (The test cloud reports the instance as
    // on-demand, so the same pass relabels the claim; the labels are put back below.)
    h.api.patch_nodeclaim_meta(&claim, &p).await.unwrap();
    block_ending_in(EXPIRING_WINDOW + Duration::from_secs(60));
    let pass = ctl.pass().await;
    assert!(pass.deleted.is_empty(), "{pass:?}");
    assert_eq!(
        h.cloud.reservation_lookups(),
        vec![vec!["cr-block".to_string()]]
    );
    // Forty minutes before its end the claim goes.
    h.api.patch_nodeclaim_meta(&claim, &p).await.unwrap();
    block_ending_in(EXPIRING_WINDOW);
    let pass = ctl.pass().await;
    assert_eq!(pass.deleted, vec![claim.clone()], "{pass:?}");
    let Some(Object::NodeClaim(c)) = h.api.get(Kind::NodeClaim, &claim) else {
        panic!()
    };
    assert!(c.metadata.deletion_timestamp.is_some());
}
