//! Batching of identical CreateFleet calls: launches that would send the same request (same
//! templates, overrides, capacity type and shared tags) within a short window go out as one
//! call for as many instances, and each caller gets one of them. The claim-specific tags
//! (`karpenter.sh/nodeclaim`, `Name`) are what differ between such calls; they are left out of
//! the merged request and put on each caller's instance afterwards.
//!
//! Each batch sent is reported to the observer (its size and how long its window stayed open),
//! as upstream's `karpenter_cloudprovider_batcher_batch_size` and `_batch_time_seconds` with
//! `batcher="create_fleet"`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_ec2::types::Tag;
use tokio::sync::{Mutex, oneshot};
use tokio::time::Instant;

use super::fleet::{FleetApi, FleetCall, FleetOutcome};
use crate::AwsClients;
use crate::error::AwsError;
use crate::observe::Observer;

/// The `batcher` label of this batcher's metrics.
pub const BATCHER: &str = "create_fleet";

/// A batch closes once no call joined for this long ...
pub const IDLE: Duration = Duration::from_millis(35);
/// ... or this long after it opened ...
pub const MAX_WAIT: Duration = Duration::from_secs(1);
/// ... or when it holds this many calls.
pub const MAX_ITEMS: usize = 1000;

const CLAIM_TAGS: &[&str] = &[
    nodewright_cloud::tags::NODECLAIM,
    nodewright_cloud::tags::NAME,
];

type Reply = oneshot::Sender<Result<FleetOutcome, AwsError>>;

struct Waiter {
    /// The caller's claim-specific tags.
    own_tags: BTreeMap<String, String>,
    reply: Reply,
}

struct Batch {
    call: FleetCall,
    waiters: Vec<Waiter>,
    opened: Instant,
    last_join: Instant,
}

/// A [`FleetApi`] that merges identical calls and sends them through `inner`.
pub struct BatchingFleet {
    inner: Arc<dyn FleetApi>,
    clients: AwsClients,
    idle: Duration,
    max_wait: Duration,
    open: Arc<Mutex<BTreeMap<String, Batch>>>,
    observer: Observer,
}

/// The call without claim-specific tags, and those tags.
fn split(call: &FleetCall) -> (FleetCall, BTreeMap<String, String>) {
    let mut shared = call.clone();
    let mut own = BTreeMap::new();
    for k in CLAIM_TAGS {
        if let Some(v) = shared.tags.remove(*k) {
            own.insert(k.to_string(), v);
        }
    }
    (shared, own)
}

impl BatchingFleet {
    pub fn new(inner: Arc<dyn FleetApi>, clients: AwsClients) -> Self {
        Self::with_window(inner, clients, IDLE, MAX_WAIT)
    }

    pub fn with_window(
        inner: Arc<dyn FleetApi>,
        clients: AwsClients,
        idle: Duration,
        max_wait: Duration,
    ) -> Self {
        BatchingFleet {
            inner,
            clients,
            idle,
            max_wait,
            open: Arc::new(Mutex::new(BTreeMap::new())),
            observer: Observer::default(),
        }
    }

    /// The same batcher reporting each batch it sends to `observer`.
    pub fn observed_by(mut self, observer: Observer) -> Self {
        self.observer = observer;
        self
    }

    /// Waits out the batch's window, then sends it and hands out the instances.
    async fn flush(
        inner: Arc<dyn FleetApi>,
        clients: AwsClients,
        open: Arc<Mutex<BTreeMap<String, Batch>>>,
        key: String,
        idle: Duration,
        max_wait: Duration,
        observer: Observer,
    ) {
        let batch = loop {
            let wake = {
                let mut map = open.lock().await;
                let Some(b) = map.get(&key) else { return };
                let idle_until = b.last_join + idle;
                let deadline = b.opened + max_wait;
                let now = Instant::now();
                if now >= idle_until || now >= deadline || b.waiters.len() >= MAX_ITEMS {
                    break map.remove(&key);
                }
                idle_until.min(deadline)
            };
            tokio::time::sleep_until(wake).await;
        };
        let Some(batch) = batch else { return };
        let n = batch.waiters.len();
        observer.batch_flushed(&nodewright_cloud::BatchFlushed {
            batcher: BATCHER,
            size: n,
            window_seconds: batch.opened.elapsed().as_secs_f64(),
        });
        if n == 1 {
            // Alone: the original request, claim tags included.
            let w = batch.waiters.into_iter().next();
            if let Some(w) = w {
                let mut call = batch.call;
                call.tags.extend(w.own_tags);
                let _ = w.reply.send(inner.create_fleet(&call).await);
            }
            return;
        }
        let mut call = batch.call;
        call.total_target_capacity = n as u32;
        tracing::debug!(instances = n, "sending batched CreateFleet");
        match inner.create_fleet(&call).await {
            Err(e) => {
                for w in batch.waiters {
                    let _ = w.reply.send(Err(e.clone()));
                }
            }
            Ok(outcome) => {
                let mut instances = outcome.instances.into_iter();
                for w in batch.waiters {
                    let mine = instances.next();
                    if let Some(i) = &mine {
                        tag_instance(&clients, &i.instance_id, &w.own_tags).await;
                    }
                    let _ = w.reply.send(Ok(FleetOutcome {
                        instances: mine.into_iter().collect(),
                        errors: outcome.errors.clone(),
                    }));
                }
            }
        }
    }
}

/// Puts the claim's own tags on its instance. A failure is logged, not returned: the instance
/// exists and is the claim's either way, and the claim records its provider id.
async fn tag_instance(clients: &AwsClients, id: &str, tags: &BTreeMap<String, String>) {
    if tags.is_empty() {
        return;
    }
    let mut req = clients.ec2.create_tags().resources(id);
    for (k, v) in tags {
        req = req.tags(Tag::builder().key(k).value(v).build());
    }
    if let Err(e) = req.send().await {
        let e = AwsError::from_sdk("CreateTags", e);
        tracing::warn!(instance = %id, error = %e, "tagging a batched instance failed");
    }
}

#[async_trait]
impl FleetApi for BatchingFleet {
    async fn create_fleet(&self, call: &FleetCall) -> Result<FleetOutcome, AwsError> {
        let (shared, own_tags) = split(call);
        let key = format!("{shared:?}");
        let (tx, rx) = oneshot::channel();
        {
            let mut map = self.open.lock().await;
            let waiter = Waiter {
                own_tags,
                reply: tx,
            };
            match map.get_mut(&key) {
                Some(b) => {
                    b.waiters.push(waiter);
                    b.last_join = Instant::now();
                }
                None => {
                    let now = Instant::now();
                    map.insert(
                        key.clone(),
                        Batch {
                            call: shared,
                            waiters: vec![waiter],
                            opened: now,
                            last_join: now,
                        },
                    );
                    // Its own task, so a caller that gives up does not strand the others.
                    tokio::spawn(Self::flush(
                        self.inner.clone(),
                        self.clients.clone(),
                        self.open.clone(),
                        key,
                        self.idle,
                        self.max_wait,
                        self.observer.clone(),
                    ));
                }
            }
        }
        rx.await.unwrap_or_else(|_| {
            Err(AwsError::new(
                "CreateFleet",
                "the batched request was dropped before it was sent",
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ClientOptions, StaticCredentials};
    use nodewright_aws_model::launch::AllocationStrategy;
    use nodewright_core::model::CapacityType;
    use std::sync::Mutex as StdMutex;

    /// Records calls and fails them, so nothing reaches a network.
    struct Failing(StdMutex<Vec<FleetCall>>);

    #[async_trait]
    impl FleetApi for Failing {
        async fn create_fleet(&self, call: &FleetCall) -> Result<FleetOutcome, AwsError> {
            self.0.lock().unwrap().push(call.clone());
            Err(AwsError::new("CreateFleet", "boom"))
        }
    }

    fn call(claim: &str) -> FleetCall {
        FleetCall {
            capacity_type: CapacityType::OnDemand,
            default_target_capacity_type: "on-demand",
            allocation_strategy: AllocationStrategy::LowestPrice,
            total_target_capacity: 1,
            configs: Vec::new(),
            tags: [
                ("karpenter.sh/nodeclaim".to_string(), claim.to_string()),
                ("karpenter.sh/nodepool".to_string(), "default".to_string()),
            ]
            .into(),
            context: None,
        }
    }

    async fn batching(inner: Arc<Failing>) -> BatchingFleet {
        let clients = AwsClients::new(&ClientOptions {
            region: "us-east-1".into(),
            endpoint_url: Some("http://127.0.0.1:9".into()),
            credentials: Some(StaticCredentials {
                access_key_id: "x".into(),
                secret_access_key: "x".into(),
            }),
        })
        .await;
        BatchingFleet::with_window(
            inner,
            clients,
            Duration::from_millis(50),
            Duration::from_secs(2),
        )
    }

    #[tokio::test]
    async fn identical_calls_go_out_once_and_share_the_failure() {
        let inner = Arc::new(Failing(StdMutex::new(Vec::new())));
        let b = batching(inner.clone()).await;
        let (ca, cb) = (call("a"), call("b"));
        let (x, y) = tokio::join!(b.create_fleet(&ca), b.create_fleet(&cb));
        assert!(x.is_err() && y.is_err());
        let calls = inner.0.lock().unwrap().clone();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].total_target_capacity, 2);
        assert!(!calls[0].tags.contains_key("karpenter.sh/nodeclaim"));
        assert_eq!(calls[0].tags["karpenter.sh/nodepool"], "default");
    }

    #[tokio::test]
    async fn a_lone_or_different_call_keeps_its_own_request() {
        let inner = Arc::new(Failing(StdMutex::new(Vec::new())));
        let b = batching(inner.clone()).await;
        let mut spot = call("b");
        spot.capacity_type = CapacityType::Spot;
        let ca = call("a");
        let _ = tokio::join!(b.create_fleet(&ca), b.create_fleet(&spot));
        let mut calls = inner.0.lock().unwrap().clone();
        calls.sort_by_key(|c| c.tags["karpenter.sh/nodeclaim"].clone());
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].tags["karpenter.sh/nodeclaim"], "a");
        assert_eq!(calls[1].capacity_type, CapacityType::Spot);
        assert!(calls.iter().all(|c| c.total_target_capacity == 1));
    }

    #[derive(Default)]
    struct Batches(StdMutex<Vec<nodewright_cloud::BatchFlushed>>);

    impl nodewright_cloud::ProviderObserver for Batches {
        fn launch_failed(&self, _: &nodewright_cloud::LaunchFailure) {}
        fn batch_flushed(&self, b: &nodewright_cloud::BatchFlushed) {
            self.0.lock().unwrap().push(b.clone());
        }
    }

    #[tokio::test]
    async fn every_batch_sent_is_reported_with_its_size_and_window() {
        let inner = Arc::new(Failing(StdMutex::new(Vec::new())));
        let seen = Arc::new(Batches::default());
        let observer = Observer::default();
        let b = batching(inner.clone()).await.observed_by(observer.clone());
        // Registered after the batcher was built, as the controller does.
        observer.set(seen.clone());
        let (ca, cb) = (call("a"), call("b"));
        let _ = tokio::join!(b.create_fleet(&ca), b.create_fleet(&cb));
        let _ = b.create_fleet(&call("c")).await;
        let got = seen.0.lock().unwrap().clone();
        let sizes: Vec<(&str, usize)> = got.iter().map(|f| (f.batcher, f.size)).collect();
        assert_eq!(sizes, vec![("create_fleet", 2), ("create_fleet", 1)]);
        // Each window stayed open at least the idle time and closed well before the maximum.
        for f in &got {
            assert!(f.window_seconds >= 0.05, "{f:?}");
            assert!(f.window_seconds < 2.0, "{f:?}");
        }
    }
}
