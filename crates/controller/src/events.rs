//! Kubernetes events with Karpenter's reasons and messages, so `kubectl describe` reads the
//! same as upstream. Each loop builds its [`Event`]s with the constructors beside it
//! (`provisioner/events.rs`, `termination/events.rs`, ...) and hands them to an
//! [`EventSink`]: [`MemoryEvents`] in tests, [`KubeEvents`] against a cluster.
//!
//! Volume is bounded the way upstream bounds it, in two stages:
//! - [`Throttle`] (upstream's recorder): an event carrying [`Dedupe`] values is published once
//!   per (reason, values) within its timeout (two minutes unless the event says otherwise), and
//!   an event under a [`Limit`] also needs a token from that limit's shared bucket (`Nominated`:
//!   5 a second, bursts of 10). [`Recorded`] puts a throttle in front of any sink.
//! - [`KubeEvents`] (client-go's broadcaster and correlator): events go through a bounded queue
//!   to a background writer, which folds repeats of the same (object, reason, message) into one
//!   core/v1 Event whose `count` and `lastTimestamp` it patches at most once per flush
//!   interval, and keeps several writes in flight so a burst does not wait out one round trip
//!   per event. An event that still finds the queue full is counted
//!   (`nodewright_events_dropped_total`) and logged as a warning, never lost silently.

use std::sync::{Arc, Mutex};
use std::time::Duration;

mod dedupe;
mod recorder;
mod writer;

pub use dedupe::{Deduper, Write, to_core_event};
pub use recorder::{Recorded, Refused, Throttle};
pub use writer::{
    DEDUPE_WINDOW, EventMetrics, FLUSH_INTERVAL, KubeEvents, QUEUE, WRITES_IN_FLIGHT,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// The object an event is about.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectRef {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub namespace: Option<String>,
    pub uid: Option<String>,
}

impl ObjectRef {
    pub fn pod(namespace: &str, name: &str) -> Self {
        Self::build("v1", "Pod", name, Some(namespace))
    }
    pub fn node(name: &str) -> Self {
        Self::build("v1", "Node", name, None)
    }
    pub fn nodeclaim(name: &str) -> Self {
        Self::build("karpenter.sh/v1", "NodeClaim", name, None)
    }
    pub fn nodepool(name: &str) -> Self {
        Self::build("karpenter.sh/v1", "NodePool", name, None)
    }
    pub fn ec2nodeclass(name: &str) -> Self {
        Self::build("karpenter.k8s.aws/v1", "EC2NodeClass", name, None)
    }
    pub fn with_uid(mut self, uid: impl Into<String>) -> Self {
        self.uid = Some(uid.into());
        self
    }
    /// What names the object in a de-duplication key: its uid, as upstream keys by, or its
    /// kind and name when the uid is not known.
    fn identity(&self) -> String {
        match &self.uid {
            Some(uid) => uid.clone(),
            None => format!(
                "{}/{}/{}",
                self.kind,
                self.namespace.as_deref().unwrap_or_default(),
                self.name
            ),
        }
    }
    fn build(api_version: &str, kind: &str, name: &str, namespace: Option<&str>) -> Self {
        ObjectRef {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
            namespace: namespace.map(str::to_owned),
            uid: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub regarding: ObjectRef,
    pub event_type: EventType,
    pub reason: String,
    pub message: String,
    /// Publish at most once per (reason, values) within the timeout; `None` publishes every
    /// occurrence (the writer still folds identical repeats into one Event's count).
    pub dedupe: Option<Dedupe>,
    /// The shared rate limit the event is subject to, if any.
    pub limit: Option<Limit>,
}

/// What makes two events "the same" for upstream's recorder, and for how long.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dedupe {
    pub values: Vec<String>,
    pub timeout: Duration,
}

/// Upstream's default de-duplication timeout.
pub const DEFAULT_DEDUPE_TIMEOUT: Duration = Duration::from_secs(120);

/// A rate limit shared by every event that names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Limit {
    /// `Nominated`: a token bucket of 5 a second with bursts of 10, as upstream.
    PodNomination,
}

impl Limit {
    /// (events per second, burst).
    fn rate(self) -> (f64, f64) {
        match self {
            Limit::PodNomination => (5.0, 10.0),
        }
    }
}

impl Event {
    pub fn new(
        regarding: ObjectRef,
        event_type: EventType,
        reason: &str,
        message: impl Into<String>,
    ) -> Self {
        Event {
            regarding,
            event_type,
            reason: reason.into(),
            message: message.into(),
            dedupe: None,
            limit: None,
        }
    }

    /// De-duplicated on the object and `extra` values for `timeout`.
    pub(crate) fn dedupe_on(mut self, extra: &[&str], timeout: Duration) -> Self {
        let mut values = vec![self.regarding.identity()];
        values.extend(extra.iter().map(|v| (*v).to_owned()));
        self.dedupe = Some(Dedupe { values, timeout });
        self
    }

    /// De-duplicated on the object alone for the default timeout.
    pub(crate) fn dedupe_object(self) -> Self {
        self.dedupe_on(&[], DEFAULT_DEDUPE_TIMEOUT)
    }

    pub(crate) fn limited(mut self, limit: Limit) -> Self {
        self.limit = Some(limit);
        self
    }
}

/// Where events go. Publishing must not block or fail the caller.
pub trait EventSink: Send + Sync {
    fn publish(&self, event: Event);
}

/// Keeps every event in memory, in order; for tests.
#[derive(Default)]
pub struct MemoryEvents {
    events: Mutex<Vec<Event>>,
}

impl MemoryEvents {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn events(&self) -> Vec<Event> {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
    /// The events with `reason`, for assertions.
    pub fn with_reason(&self, reason: &str) -> Vec<Event> {
        self.events()
            .into_iter()
            .filter(|e| e.reason == reason)
            .collect()
    }
}

impl EventSink for MemoryEvents {
    fn publish(&self, event: Event) {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(event);
    }
}

/// Drops every event; for callers that do not care.
pub struct NoEvents;

impl EventSink for NoEvents {
    fn publish(&self, _event: Event) {}
}

// ---- shared by the constructors each loop keeps beside it (`provisioner/events.rs` ...) ----

/// Upstream capitalises the reason in disruption messages ("Disrupting Node: Underutilized").
pub(crate) fn title(reason: &str) -> String {
    let mut chars = reason.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Long cloud errors (a fleet error lists every offering) are cut the way upstream cuts them.
pub(crate) fn truncate(message: &str) -> String {
    const MAX: usize = 1024;
    if message.len() <= MAX {
        return message.to_owned();
    }
    let mut end = MAX - 3;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &message[..end])
}

impl<S: EventSink + ?Sized> EventSink for Arc<S> {
    fn publish(&self, event: Event) {
        (**self).publish(event)
    }
}

#[cfg(test)]
mod tests;
