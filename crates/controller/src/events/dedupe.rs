//! client-go's correlator as pure data: repeats of the same (object, reason, message) fold
//! into one series, written as one core/v1 Event whose count a flush updates.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;

use super::{Event, EventType, ObjectRef};

/// What identifies "the same event again".
type Key = (ObjectRef, EventType, String, String);

#[derive(Clone, Debug, PartialEq)]
struct Series {
    name: String,
    count: i32,
    first: Timestamp,
    last: Timestamp,
    /// A repeat arrived since the API object was last written.
    dirty: bool,
}

/// What the writer must do for an incoming event.
#[derive(Clone, Debug, PartialEq)]
pub enum Write {
    Create {
        name: String,
        event: Event,
        at: Timestamp,
    },
    Update {
        name: String,
        namespace: String,
        count: i32,
        last: Timestamp,
    },
}

/// Folds repeats of an event into a series: the first occurrence is created, repeats within
/// `window` only bump the count, and [`Deduper::flush`] emits one update per series that
/// changed. After `window` without a repeat a series is forgotten and the next occurrence
/// starts a new Event object.
#[derive(Debug)]
pub struct Deduper {
    window: Duration,
    series: BTreeMap<Key, Series>,
    created: u64,
}

impl Deduper {
    pub fn new(window: Duration) -> Self {
        Deduper {
            window,
            series: BTreeMap::new(),
            created: 0,
        }
    }

    /// Records `event` at `now`; returns the create to issue, or `None` for a repeat.
    pub fn observe(&mut self, event: Event, now: Timestamp) -> Option<Write> {
        let key = (
            event.regarding.clone(),
            event.event_type,
            event.reason.clone(),
            event.message.clone(),
        );
        if let Some(series) = self.series.get_mut(&key)
            && now.duration_since(series.last).as_secs_f64() < self.window.as_secs_f64()
        {
            series.count += 1;
            series.last = now;
            series.dirty = true;
            return None;
        }
        self.created += 1;
        let name = format!(
            "{}.{:x}{:04x}",
            event.regarding.name,
            now.as_nanosecond(),
            self.created & 0xffff
        );
        self.series.insert(
            key,
            Series {
                name: name.clone(),
                count: 1,
                first: now,
                last: now,
                dirty: false,
            },
        );
        Some(Write::Create {
            name,
            event,
            at: now,
        })
    }

    /// Updates for every series with unwritten repeats; forgets series idle past the window.
    pub fn flush(&mut self, now: Timestamp) -> Vec<Write> {
        let window = self.window.as_secs_f64();
        let mut out = Vec::new();
        self.series.retain(|key, s| {
            if s.dirty {
                s.dirty = false;
                out.push(Write::Update {
                    name: s.name.clone(),
                    namespace: event_namespace(&key.0),
                    count: s.count,
                    last: s.last,
                });
            }
            now.duration_since(s.last).as_secs_f64() < window
        });
        out
    }

    /// Series currently tracked; for tests.
    pub fn len(&self) -> usize {
        self.series.len()
    }

    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }
}

/// Events about cluster-scoped objects live in `default`, as kubectl and client-go put them.
pub(super) fn event_namespace(regarding: &ObjectRef) -> String {
    regarding
        .namespace
        .clone()
        .unwrap_or_else(|| "default".to_owned())
}

/// The core/v1 Event written for a new series.
pub fn to_core_event(
    name: &str,
    event: &Event,
    at: Timestamp,
    component: &str,
    instance: &str,
) -> corev1::Event {
    let r = &event.regarding;
    corev1::Event {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(event_namespace(r)),
            ..ObjectMeta::default()
        },
        involved_object: corev1::ObjectReference {
            api_version: Some(r.api_version.clone()),
            kind: Some(r.kind.clone()),
            name: Some(r.name.clone()),
            namespace: r.namespace.clone(),
            uid: r.uid.clone(),
            ..corev1::ObjectReference::default()
        },
        reason: Some(event.reason.clone()),
        message: Some(event.message.clone()),
        type_: Some(event.event_type.as_str().to_owned()),
        count: Some(1),
        first_timestamp: Some(Time(at)),
        last_timestamp: Some(Time(at)),
        source: Some(corev1::EventSource {
            component: Some(component.to_owned()),
            host: None,
        }),
        reporting_component: Some(component.to_owned()),
        reporting_instance: Some(instance.to_owned()),
        ..corev1::Event::default()
    }
}
