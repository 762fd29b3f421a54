//! The sink against a cluster: events go through a bounded queue to a background writer that
//! keeps several writes in flight and writes each series' repeats back at most once per flush
//! interval; what a full queue refuses is counted and logged.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::dedupe::event_namespace;
use super::recorder::admits;
use super::{Deduper, Event, EventSink, Throttle, Write, to_core_event};
use crate::metrics::{Counters, Metrics, registered};
use crate::supervise::Supervisor;

/// Kubernetes events the writer could not take. Upstream has no such family (client-go drops
/// silently), so it carries the project's own prefix.
pub struct EventMetrics {
    dropped: Counters,
}

impl EventMetrics {
    pub(crate) fn register(r: &mut prometheus_client::registry::Registry) -> Self {
        EventMetrics {
            dropped: registered(
                r,
                "nodewright_events_dropped",
                "Number of Kubernetes events dropped because the event writer's queue was full. Labeled by event reason.",
            ),
        }
    }

    /// An event dropped on a full writer queue.
    pub fn dropped(&self, reason: &str) {
        self.dropped
            .get_or_create(&vec![("reason", reason.to_owned())])
            .inc();
    }
}

/// Upstream's event de-duplication window.
pub const DEDUPE_WINDOW: Duration = Duration::from_secs(120);
/// How often repeats are written back as count updates.
pub const FLUSH_INTERVAL: Duration = Duration::from_secs(10);
/// Events queued beyond this are dropped, counted and logged rather than stalling the caller.
/// With the throttle in front, only a burst of distinct, un-limited events (evictions of a
/// thousand pods at once) can reach it.
pub const QUEUE: usize = 1024;
/// Writes the writer keeps in flight: a round trip of 5 ms then allows some 1,600 events a
/// second, well above what the throttle lets through.
pub const WRITES_IN_FLIGHT: usize = 8;
/// Events the writer takes off the queue per round (each round's writes finish before the
/// next, so a series' count update never overtakes its create).
const ROUND: usize = 64;
/// At most one warning per this interval about a full queue; the count goes in it.
const DROP_WARNING_EVERY: Duration = Duration::from_secs(10);

/// Writes events to the API server from a background task.
pub struct KubeEvents {
    tx: mpsc::Sender<Event>,
    throttle: Mutex<Throttle>,
    metrics: Option<Arc<Metrics>>,
    drops: Mutex<Drops>,
}

/// Events dropped on a full queue since the last warning.
#[derive(Default)]
struct Drops {
    since_warning: u64,
    warned: Option<Instant>,
}

impl KubeEvents {
    /// Starts the writer as the loop `event writer` of `loops`. `component` is the reporting
    /// component ("karpenter" keeps dashboards that filter on it working).
    pub fn new(client: kube::Client, component: &str, loops: &mut Supervisor) -> Self {
        Self::with_queue(client, component, QUEUE, loops)
    }

    pub(super) fn with_queue(
        client: kube::Client,
        component: &str,
        queue: usize,
        loops: &mut Supervisor,
    ) -> Self {
        let (tx, rx) = mpsc::channel(queue);
        // Shared, so a writer restarted after a panic takes the same queue over.
        let rx = Arc::new(tokio::sync::Mutex::new(rx));
        let instance = std::env::var("HOSTNAME").unwrap_or_else(|_| component.to_owned());
        let component = component.to_owned();
        loops.spawn("event writer", move || {
            write_loop(
                client.clone(),
                component.clone(),
                instance.clone(),
                rx.clone(),
            )
        });
        KubeEvents {
            tx,
            throttle: Mutex::new(Throttle::new()),
            metrics: None,
            drops: Mutex::new(Drops::default()),
        }
    }

    /// Counts events dropped on a full queue in `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    fn dropped(&self, event: &Event) {
        if let Some(m) = &self.metrics {
            m.events.dropped(&event.reason);
        }
        let now = Instant::now();
        let mut d = self.drops.lock().unwrap_or_else(|e| e.into_inner());
        d.since_warning += 1;
        if d.warned
            .is_none_or(|t| now.saturating_duration_since(t) >= DROP_WARNING_EVERY)
        {
            tracing::warn!(
                dropped = d.since_warning,
                reason = %event.reason,
                "event queue full, dropping events"
            );
            d.since_warning = 0;
            d.warned = Some(now);
        }
    }
}

impl EventSink for KubeEvents {
    fn publish(&self, event: Event) {
        if !admits(&self.throttle, &event) {
            return;
        }
        match self.tx.try_send(event) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(event)) => self.dropped(&event),
            // The writer is gone: the runtime is shutting down.
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }
}

async fn write_loop(
    client: kube::Client,
    component: String,
    instance: String,
    queue: Arc<tokio::sync::Mutex<mpsc::Receiver<Event>>>,
) {
    let mut rx = queue.lock().await;
    let mut dedupe = Deduper::new(DEDUPE_WINDOW);
    // The first flush is one interval out, not immediate.
    let mut tick =
        tokio::time::interval_at(tokio::time::Instant::now() + FLUSH_INTERVAL, FLUSH_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut received = Vec::with_capacity(ROUND);
    loop {
        let writes = tokio::select! {
            n = rx.recv_many(&mut received, ROUND) => {
                if n == 0 {
                    dedupe.flush(Timestamp::now() + DEDUPE_WINDOW)
                } else {
                    let now = Timestamp::now();
                    received
                        .drain(..)
                        .filter_map(|event| dedupe.observe(event, now))
                        .collect()
                }
            }
            _ = tick.tick() => dedupe.flush(Timestamp::now()),
        };
        futures::stream::iter(writes)
            .for_each_concurrent(WRITES_IN_FLIGHT, |write| {
                apply(&client, &component, &instance, write)
            })
            .await;
        if rx.is_closed() && rx.is_empty() && dedupe.is_empty() {
            return;
        }
    }
}

async fn apply(client: &kube::Client, component: &str, instance: &str, write: Write) {
    let result = match &write {
        Write::Create { name, event, at } => {
            let ev = to_core_event(name, event, *at, component, instance);
            let ns = event_namespace(&event.regarding);
            Api::<corev1::Event>::namespaced(client.clone(), &ns)
                .create(&PostParams::default(), &ev)
                .await
                .map(|_| ())
        }
        Write::Update {
            name,
            namespace,
            count,
            last,
        } => {
            let patch = serde_json::json!({
                "count": count,
                "lastTimestamp": Time(*last),
            });
            Api::<corev1::Event>::namespaced(client.clone(), namespace)
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(|_| ())
        }
    };
    if let Err(e) = result {
        tracing::debug!(error = %e, "writing event failed");
    }
}
