//! operatorpkg's status-condition metrics for Nodes, NodeClaims, NodePools and EC2NodeClasses,
//! under upstream's per-kind names (`operator_<kind>_status_condition_*`,
//! `operator_<kind>_termination_*`), observed from the index as the watch events change it.
//!
//! As upstream's status controller does, [`ConditionObserver`] remembers each object's
//! conditions as it last saw them and reports what changed since: a condition that appears, or
//! whose status changes, counts a transition (by its new type, status and reason) and, when it
//! was seen before, observes how long the old status lasted (the two `lastTransitionTime`s
//! apart, by the type, status and reason it left). Changes that come and go between two looks
//! are not seen, as upstream's are not between two reconciles. The gauges hold one series per
//! condition an object has now (`count` 1, `current_status_seconds` its age) and, while the
//! object is being deleted, the seconds since its `deletionTimestamp`; when the object leaves
//! the index its series go, and the time from its `deletionTimestamp` is observed. Only objects
//! in the index are remembered, so memory follows the cluster.
//!
//! The two per-condition gauges hold no series of their own: each is a view ([`CondGauges`])
//! of the conditions the observer last set for each object, with the time it set them,
//! written out at a scrape. Their label lists, one per series and family, each with its own
//! copy of the object's name and the condition's strings, were 12 MiB of a profile's heap at
//! 2,000 Nodes.
//!
//! The list of families (`docs/karpenter-metrics.txt`) decides the labels: upstream's
//! object-label dimensions on NodeClaims and Nodes (nodepool, node class) are not among them.
//! The objects are cluster-scoped, so `namespace` is empty, as upstream's is.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use nodewright_core::time::Timestamp;
use prometheus_client::encoding::{EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::changes::{Cursor, Since};
use super::{ClusterState, Kind, STATUS_KINDS};
use crate::clock::{from_time, parse_rfc3339};
use crate::metrics::{Counters, Gauges, Histograms, Labels, Metrics, register, registered};

/// Upstream's buckets for these histograms: half a second, doubling up to 8192 s.
fn histogram() -> Histogram {
    Histogram::new((0..15).map(|k| 0.5 * f64::from(1u32 << k)))
}

/// What one object's per-condition gauges read: its conditions as last set, and when.
#[derive(Debug)]
struct Shown {
    conditions: Arc<[Cond]>,
    at: Timestamp,
}

/// The objects of one kind whose condition gauges are served, by name; shared by the
/// observer that sets them and the two families that read them.
#[derive(Clone, Debug, Default)]
struct Showing(Arc<Mutex<BTreeMap<String, Shown>>>);

impl Showing {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Shown>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One of the per-condition gauge families, computed from [`Showing`] at each scrape: one
/// series per condition of each object, valued by `value` from the condition and the time it
/// was set, as the gauge set then would read.
#[derive(Clone, Debug)]
struct CondGauges {
    showing: Showing,
    value: fn(&Cond, Timestamp) -> f64,
}

impl EncodeMetric for CondGauges {
    fn encode(&self, mut encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        let showing = self.showing.lock();
        for (name, shown) in showing.iter() {
            let conds = &shown.conditions[..];
            for (i, c) in conds.iter().enumerate() {
                // A family keeps one series per label set, the last one set: so must this.
                if conds[i + 1..].iter().any(|l| l.same_series(c)) {
                    continue;
                }
                let labels = c.series(name);
                let value = (self.value)(c, shown.at);
                encoder.encode_family(&labels)?.encode_gauge(&value)?;
            }
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Gauge
    }
}

/// `count`'s value: 1 for every condition.
fn one(_: &Cond, _: Timestamp) -> f64 {
    1.0
}

/// `current_status_seconds`' value: the condition's age at `at`, 0 without a transition time.
fn age(c: &Cond, at: Timestamp) -> f64 {
    c.since.map_or(0.0, |t| at.since(t).as_secs_f64())
}

/// One kind's six families.
struct KindFamilies {
    transitions: Counters,
    transition_seconds: Histograms,
    /// What `current_status_seconds` and `count` read.
    showing: Showing,
    termination: Histogram,
    terminating: Gauges,
}

impl KindFamilies {
    /// Registers the families of `kind` (upstream's lowercase kind, the metric names' part),
    /// whose objects are called `noun` in the help texts.
    fn register(r: &mut Registry, kind: &str, noun: &str) -> Self {
        let cond = format!("operator_{kind}_status_condition");
        let term = format!("operator_{kind}_termination");
        KindFamilies {
            transitions: registered(
                r,
                &format!("{cond}_transitions"),
                &format!(
                    "Status changes of {noun} conditions, by the new type, status and reason."
                ),
            ),
            transition_seconds: register(
                r,
                &format!("{cond}_transition_seconds"),
                &format!(
                    "How long a {noun} condition held a status before it changed, by the type, status and reason it left."
                ),
                Histograms::new_with_constructor(histogram),
            ),
            // Registered here so that the families keep their place in the scrape.
            showing: register_views(r, &cond, noun),
            termination: register(
                r,
                &format!("{term}_duration_seconds"),
                &format!("Seconds from a {noun}'s deletionTimestamp to its removal."),
                histogram(),
            ),
            terminating: registered(
                r,
                &format!("{term}_current_time_seconds"),
                &format!("Seconds since the deletionTimestamp of each {noun} being deleted."),
            ),
        }
    }
}

/// Registers `current_status_seconds` and `count` of the families named `cond`, whose
/// objects are called `noun`, as views of what the returned [`Showing`] holds.
fn register_views(r: &mut Registry, cond: &str, noun: &str) -> Showing {
    let showing = Showing::default();
    let view = |value| CondGauges {
        showing: showing.clone(),
        value,
    };
    register(
        r,
        &format!("{cond}_current_status_seconds"),
        &format!("Seconds since each condition of each {noun} last changed status."),
        view(age),
    );
    register(
        r,
        &format!("{cond}_count"),
        &format!("1 for each condition each {noun} has, by type, status and reason."),
        view(one),
    );
    showing
}

/// The families of the four kinds.
pub(crate) struct ConditionMetrics {
    nodes: KindFamilies,
    claims: KindFamilies,
    pools: KindFamilies,
    classes: KindFamilies,
}

impl ConditionMetrics {
    pub(crate) fn register(r: &mut Registry) -> Self {
        ConditionMetrics {
            claims: KindFamilies::register(r, "nodeclaim", "NodeClaim"),
            pools: KindFamilies::register(r, "nodepool", "NodePool"),
            nodes: KindFamilies::register(r, "node", "Node"),
            classes: KindFamilies::register(r, "ec2nodeclass", "EC2NodeClass"),
        }
    }

    /// The families of `kind`, one of [`STATUS_KINDS`] (the observer asks for no other).
    fn of(&self, kind: Kind) -> &KindFamilies {
        match kind {
            Kind::NodeClaim => &self.claims,
            Kind::NodePool => &self.pools,
            Kind::NodeClass => &self.classes,
            _ => &self.nodes,
        }
    }
}

/// A condition as the metrics read it.
#[derive(Clone, Debug, PartialEq)]
struct Cond {
    type_: String,
    status: String,
    reason: String,
    /// Its `lastTransitionTime`, when set and readable.
    since: Option<Timestamp>,
}

impl Cond {
    fn new(type_: &str, status: &str, reason: Option<&str>, since: Option<Timestamp>) -> Self {
        Cond {
            type_: type_.to_owned(),
            status: status.to_owned(),
            reason: reason.unwrap_or_default().to_owned(),
            since,
        }
    }

    /// Labels of the per-kind families: type, status, reason.
    fn labels(&self) -> Labels {
        vec![
            ("type", self.type_.clone()),
            ("status", self.status.clone()),
            ("reason", self.reason.clone()),
        ]
    }

    /// Labels of the per-object gauges: the object, then [`Cond::labels`]; borrowed, as a
    /// scrape writes them out and keeps nothing.
    fn series<'a>(&'a self, name: &'a str) -> [(&'static str, &'a str); 5] {
        [
            ("name", name),
            ("namespace", ""),
            ("type", &self.type_),
            ("status", &self.status),
            ("reason", &self.reason),
        ]
    }

    /// Whether `other` has the same [`Cond::labels`], so the same per-object series.
    fn same_series(&self, other: &Cond) -> bool {
        (&self.type_, &self.status, &self.reason) == (&other.type_, &other.status, &other.reason)
    }
}

fn object_labels(name: &str) -> Labels {
    vec![("name", name.to_owned()), ("namespace", String::new())]
}

/// What the metrics read of one object.
#[derive(Clone, Debug, Default, PartialEq)]
struct Seen {
    /// Shared with the gauges' [`Shown`].
    conditions: Arc<[Cond]>,
    deleting_since: Option<Timestamp>,
}

/// An API object's conditions (NodeClaims, NodePools and EC2NodeClasses share the shape).
macro_rules! api_conds {
    ($conds:expr) => {
        $conds
            .into_iter()
            .flatten()
            .map(|c| {
                let since = c.last_transition_time.as_deref().and_then(parse_rfc3339);
                Cond::new(&c.type_, &c.status, c.reason.as_deref(), since)
            })
            .collect()
    };
}

fn seen(meta: &ObjectMeta, conditions: Vec<Cond>) -> Seen {
    Seen {
        conditions: conditions.into(),
        deleting_since: meta.deletion_timestamp.as_ref().map(from_time),
    }
}

/// What the index holds of `kind`'s object at `key`, if anything.
fn read(s: &ClusterState, kind: Kind, key: &str) -> Option<Seen> {
    match kind {
        Kind::Node => s.nodes.get(key).map(|n| {
            let conds = n.status.as_ref().and_then(|s| s.conditions.as_ref());
            let conds = conds.into_iter().flatten().map(|c| {
                let since = c.last_transition_time.as_ref().map(from_time);
                Cond::new(&c.type_, &c.status, c.reason.as_deref(), since)
            });
            seen(&n.metadata, conds.collect())
        }),
        Kind::NodeClaim => s.nodeclaims.get(key).map(|c| {
            let conds = c.status.as_ref().and_then(|s| s.conditions.as_ref());
            seen(&c.metadata, api_conds!(conds))
        }),
        Kind::NodePool => s.nodepools.get(key).map(|p| {
            let conds = p.status.as_ref().and_then(|s| s.conditions.as_ref());
            seen(&p.metadata, api_conds!(conds))
        }),
        Kind::NodeClass => s.nodeclasses.get(key).map(|c| {
            let conds = c.status.as_ref().and_then(|s| s.conditions.as_ref());
            seen(&c.metadata, api_conds!(conds))
        }),
        _ => None,
    }
}

/// The keys `kind`'s objects have in the index.
fn keys(s: &ClusterState, kind: Kind) -> Vec<String> {
    match kind {
        Kind::Node => s.nodes.keys().cloned().collect(),
        Kind::NodeClaim => s.nodeclaims.keys().cloned().collect(),
        Kind::NodePool => s.nodepools.keys().cloned().collect(),
        Kind::NodeClass => s.nodeclasses.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

/// A [`status_key`] back into its kind and key.
fn parse_key(k: &str) -> Option<(Kind, &str)> {
    let (kind, key) = k.split_once('/')?;
    let kind = STATUS_KINDS.into_iter().find(|s| s.name() == kind)?;
    Some((kind, key))
}

/// Each object's conditions as last seen, and where in the index's log that was.
#[derive(Debug, Default)]
pub struct ConditionObserver {
    cursor: Option<Cursor>,
    seen: BTreeMap<(Kind, String), Seen>,
}

impl ConditionObserver {
    /// Reports, at `now`, what changed in the index since the last call: only the objects
    /// its log names, or every object the first time and after a relist.
    pub fn observe(&mut self, s: &ClusterState, metrics: &Metrics, now: Timestamp) {
        let m = &metrics.conditions;
        match s.status_log.since(self.cursor) {
            Since::Keys(changed) => {
                for (kind, key) in changed.into_iter().filter_map(parse_key) {
                    self.look(s, m, kind, key, now);
                }
            }
            Since::Resync => {
                let known: Vec<(Kind, String)> = self.seen.keys().cloned().collect();
                let listed = STATUS_KINDS
                    .into_iter()
                    .flat_map(|kind| keys(s, kind).into_iter().map(move |k| (kind, k)));
                for (kind, key) in known.into_iter().chain(listed) {
                    self.look(s, m, kind, &key, now);
                }
            }
        }
        self.cursor = Some(s.status_log.head());
    }

    /// Sets every remembered object's ages to what they are at `now`: the gauges of an object
    /// that does not change would stand still otherwise.
    pub fn refresh(&self, metrics: &Metrics, now: Timestamp) {
        for ((kind, name), seen) in &self.seen {
            set_gauges(metrics.conditions.of(*kind), name, seen, now);
        }
    }

    /// Compares `kind`'s object at `key` with what was last seen of it.
    fn look(
        &mut self,
        s: &ClusterState,
        m: &ConditionMetrics,
        kind: Kind,
        key: &str,
        now: Timestamp,
    ) {
        let families = m.of(kind);
        let mut old = self.seen.remove(&(kind, key.to_owned()));
        let new = read(s, kind, key);
        if let (Some(o), Some(n)) = (&old, &new)
            && o.deleting_since.is_some()
            && n.deleting_since.is_none()
        {
            // A deletion is never undone: this is a new object under the old one's name.
            gone(families, key, o, now);
            old = None;
        }
        match new {
            Some(new) => {
                changed(families, key, old.as_ref(), &new, now);
                self.seen.insert((kind, key.to_owned()), new);
            }
            None => {
                if let Some(old) = old {
                    gone(families, key, &old, now);
                }
            }
        }
    }

    /// Objects remembered; for tests.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.seen.len()
    }
}

/// Records what changed between `old` (absent when first seen) and `new` of the object `name`.
fn changed(f: &KindFamilies, name: &str, old: Option<&Seen>, new: &Seen, now: Timestamp) {
    let before = old.map(|o| &o.conditions[..]).unwrap_or_default();
    for n in &new.conditions[..] {
        let was = before.iter().find(|o| o.type_ == n.type_);
        if was.is_some_and(|o| o.status == n.status) {
            continue;
        }
        f.transitions.get_or_create(&n.labels()).inc();
        if let Some(o) = was
            && let (Some(from), Some(to)) = (o.since, n.since)
        {
            let held = to.since(from).as_secs_f64();
            f.transition_seconds
                .get_or_create(&o.labels())
                .observe(held);
        }
    }
    // The old conditions' series go with the old list.
    set_gauges(f, name, new, now);
}

/// Sets the gauges of the object `name`, as `seen`, at `now`.
fn set_gauges(f: &KindFamilies, name: &str, seen: &Seen, now: Timestamp) {
    let shown = Shown {
        conditions: seen.conditions.clone(),
        at: now,
    };
    let mut showing = f.showing.lock();
    match showing.get_mut(name) {
        Some(s) => *s = shown,
        None => {
            showing.insert(name.to_owned(), shown);
        }
    }
    drop(showing);
    if let Some(t) = seen.deleting_since {
        let age = now.since(t).as_secs_f64();
        f.terminating.get_or_create(&object_labels(name)).set(age);
    }
}

/// Drops the series of the object `name`, gone from the index at `now`, last seen as `old`.
fn gone(f: &KindFamilies, name: &str, old: &Seen, now: Timestamp) {
    f.showing.lock().remove(name);
    if let Some(t) = old.deleting_since {
        f.terminating.remove(&object_labels(name));
        f.termination.observe(now.since(t).as_secs_f64());
    }
}

#[cfg(test)]
mod tests;
