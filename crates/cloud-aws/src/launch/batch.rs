//! Batching of identical CreateFleet calls: launches that would send the same request (same
//! templates, overrides, capacity type and shared tags) within a short window go out as one
//! call for as many instances, and each caller gets one of them. The claim-specific tags
//! (`karpenter.sh/nodeclaim`, `Name`) are what differ between such calls; they are left out of
//! the merged request and put on each caller's instance afterwards.
//!
//! The windows, the fan-out and the batch metrics (`batcher="create_fleet"`) are
//! [`crate::batcher`]'s; this module says what is merged and how the instances are shared.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_ec2::types::Tag;

use super::fleet::{FleetApi, FleetCall, FleetOutcome};
use crate::AwsClients;
use crate::batcher::{Batcher, Executor, Window};
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

/// Sends a batch of identical calls as one CreateFleet for as many instances.
struct FleetSender {
    inner: Arc<dyn FleetApi>,
    clients: AwsClients,
}

#[async_trait]
impl Executor for FleetSender {
    /// The call without its claim tags, spelled out.
    type Key = String;
    type Item = FleetCall;
    type Output = Result<FleetOutcome, AwsError>;

    async fn execute(&self, _key: &String, calls: Vec<FleetCall>) -> Vec<Self::Output> {
        if calls.len() == 1 {
            // Alone: the original request, claim tags included.
            return vec![self.inner.create_fleet(&calls[0]).await];
        }
        let n = calls.len();
        let (mut call, _) = split(&calls[0]);
        call.total_target_capacity = n as u32;
        tracing::debug!(instances = n, "sending batched CreateFleet");
        match self.inner.create_fleet(&call).await {
            Err(e) => vec![Err(e); n],
            Ok(outcome) => {
                let mut instances = outcome.instances.into_iter();
                let mut out = Vec::with_capacity(n);
                for c in &calls {
                    let mine = instances.next();
                    if let Some(i) = &mine {
                        tag_instance(&self.clients, &i.instance_id, &split(c).1).await;
                    }
                    out.push(Ok(FleetOutcome {
                        instances: mine.into_iter().collect(),
                        errors: outcome.errors.clone(),
                    }));
                }
                out
            }
        }
    }
}

/// A [`FleetApi`] that merges identical calls and sends them through `inner`.
pub struct BatchingFleet {
    batcher: Batcher<FleetSender>,
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
        Self::build(inner, clients, idle, max_wait, Observer::default())
    }

    fn build(
        inner: Arc<dyn FleetApi>,
        clients: AwsClients,
        idle: Duration,
        max_wait: Duration,
        observer: Observer,
    ) -> Self {
        let window = Window {
            idle,
            max_wait,
            max_items: MAX_ITEMS,
        };
        BatchingFleet {
            batcher: Batcher::new(BATCHER, FleetSender { inner, clients }, window, observer),
        }
    }

    /// The same batcher reporting each batch it sends to `observer`.
    pub fn observed_by(self, observer: Observer) -> Self {
        let s = self.batcher.executor();
        let window = self.batcher.window();
        Self::build(
            s.inner.clone(),
            s.clients.clone(),
            window.idle,
            window.max_wait,
            observer,
        )
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
        let key = format!("{:?}", split(call).0);
        self.batcher
            .add(key, call.clone())
            .await
            .unwrap_or_else(|e| Err(AwsError::new("CreateFleet", e.to_string())))
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
