//! The periodic gauges upstream derives from its cluster state (`karpenter_nodes_*`,
//! `karpenter_pods_state`, `karpenter_nodepools_usage`/`_limit`) and the pod startup and
//! bound durations, computed from the index. Values are in upstream's units: CPU in cores,
//! memory and storage in bytes, everything else as counts.
//!
//! Both are incremental: [`set_all`] and [`PodStartup`] read the index's change logs and
//! revisit only the pods and nodes that changed since their last call, so a tick costs the
//! changes, not the cluster. The index keeps each node's summed requests and limits as pods
//! come and go. [`node_gauges`] and [`pod_gauges`] recount everything from scratch; the tests
//! hold the incremental rows to them.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use nodewright_core::labels;
use nodewright_core::model::Shared;
use nodewright_core::resources::{CPU, NODES, Resources};
use nodewright_core::time::Timestamp;

use super::changes::{Cursor, Since};
use super::metrics::{Amounts, NodeDims, NodeGauge, PodGauge, PodNode, node_dimensions};
use super::{ClusterState, PodKey, PodRecord, convert};
use crate::metrics::Metrics;

/// `r` in the gauges' units, sorted by resource name, each name taken from `texts`.
fn amounts(r: &Resources, texts: &mut Shared<str>) -> Amounts {
    let mut out: Amounts = r
        .iter()
        .map(|(k, v)| {
            let value = if k == CPU {
                v as f64 / 1000.0
            } else {
                v as f64
            };
            (texts.text(k), value)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Summed container limits (the `karpenter_nodes_total_pod_limits` input).
pub(super) fn pod_limits(p: &Pod) -> Resources {
    let mut sum = Resources::new();
    for c in p.spec.iter().flat_map(|s| s.containers.iter()) {
        for (k, q) in c
            .resources
            .as_ref()
            .and_then(|r| r.limits.as_ref())
            .into_iter()
            .flatten()
        {
            if let Ok(v) = nodewright_api::quantity::parse_resource(k, &q.0) {
                sum.set(k, sum.get(k) + v);
            }
        }
    }
    sum
}

/// One gauge row per Node, recounted from scratch over every pod.
pub fn node_gauges(s: &ClusterState) -> Vec<NodeGauge> {
    let mut texts = Shared::default();
    s.nodes
        .values()
        .map(|n| {
            let name = n.metadata.name.clone().unwrap_or_default();
            let allocatable = allocatable(s, &name, n);
            let (mut requests, mut limits, mut daemon, mut daemon_limits) = (
                Resources::new(),
                Resources::new(),
                Resources::new(),
                Resources::new(),
            );
            for p in s.pods_on(&name) {
                if p.finished() {
                    continue;
                }
                // What the record took from the pod when the watch reported it.
                let Some(u) = p.usage() else {
                    continue;
                };
                requests.add(&u.requests);
                limits.add(&u.limits);
                if p.owned_by("DaemonSet") {
                    daemon.add(&u.requests);
                    daemon_limits.add(&u.limits);
                }
            }
            NodeGauge {
                labels: Arc::new(node_dimensions(n, s.node_labels(&name), &mut texts)),
                allocatable: amounts(&allocatable, &mut texts),
                pod_requests: amounts(&requests, &mut texts),
                pod_limits: amounts(&limits, &mut texts),
                daemon_requests: amounts(&daemon, &mut texts),
                daemon_limits: amounts(&daemon_limits, &mut texts),
                system_overhead: amounts(&system_overhead(n, &allocatable), &mut texts),
            }
        })
        .collect()
}

/// What the node keeps for itself (`karpenter_nodes_system_overhead`): its capacity less its
/// allocatable, per resource it reports a capacity for.
fn system_overhead(n: &Node, allocatable: &Resources) -> Resources {
    let capacity = n.status.as_ref().and_then(|s| s.capacity.as_ref());
    let mut out = Resources::new();
    for (k, q) in capacity.into_iter().flatten() {
        if let Ok(v) = nodewright_api::quantity::parse_resource(k, &q.0) {
            out.set(k, (v - allocatable.get(k)).max(0));
        }
    }
    out
}

/// One `karpenter_pods_state` row per pod, recounted from scratch.
pub fn pod_gauges(s: &ClusterState) -> Vec<PodGauge> {
    let mut values = RowValues::default();
    s.pods
        .iter()
        .map(|(key, p)| pod_row(s, key, p, &mut values))
        .collect()
}

/// One copy of each value the rows hold; the pods' rows also share their nodes' parts.
#[derive(Debug, Default)]
struct RowValues {
    texts: Shared<str>,
    pod_nodes: Shared<PodNode>,
}

/// The `karpenter_pods_state` row of `p` (at `key` in the index), its values taken from
/// `values` where it holds them.
fn pod_row(s: &ClusterState, key: &PodKey, p: &PodRecord, values: &mut RowValues) -> PodGauge {
    let node = p.node_name.as_deref().unwrap_or_default();
    let mut text = |t: &str| values.texts.text(t);
    let nl = s.node_labels(node);
    let mut label = |k: &str| text(nl.and_then(|l| l.get(k)).map_or("", |v| v));
    let mut on = Arc::new(PodNode {
        nodepool: label(labels::NODEPOOL),
        zone: label(labels::ZONE),
        arch: label(labels::ARCH),
        instance_type: label(labels::INSTANCE_TYPE),
        capacity_type: label(labels::CAPACITY_TYPE),
        name: text(node),
    });
    values.pod_nodes.share(&mut on);
    let mut text = |t: &str| values.texts.text(t);
    PodGauge {
        key: Arc::clone(key),
        scheduled: !node.is_empty(),
        owner: match &p.shape.controller {
            Some((kind, name)) => text(&format!("{kind}/{name}")),
            None => text(""),
        },
        node: on,
        phase: text(p.phase.as_deref().unwrap_or_default()),
        ready: p.condition_true("Ready"),
    }
}

/// Sets every NodePool's usage (what its claims hold) and its limits.
pub fn set_nodepools(s: &ClusterState, metrics: &Metrics) {
    // One pass over the claims, not one per pool.
    let mut by_pool: BTreeMap<&str, (Resources, i64)> = BTreeMap::new();
    let mut texts = Shared::default();
    for c in s.all_claims() {
        if c.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let Some(pool) = c
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(labels::NODEPOOL))
        else {
            continue;
        };
        let (used, nodes) = by_pool.entry(pool.as_str()).or_default();
        *nodes += 1;
        used.add(
            &convert::resources(c.status.as_ref().and_then(|s| s.capacity.as_ref()))
                .unwrap_or_default(),
        );
    }
    for (name, pool) in &s.nodepools {
        let (mut used, nodes) = by_pool.remove(name.as_str()).unwrap_or_default();
        used.set(NODES, nodes);
        for (k, v) in amounts(&used, &mut texts) {
            metrics.state.nodepool_usage(name, &k, v);
        }
        let limits = convert::resources(pool.spec.limits.as_ref()).unwrap_or_default();
        for (k, v) in amounts(&limits, &mut texts) {
            metrics.state.nodepool_limit(name, &k, v);
        }
    }
}

/// Observes each pod's startup (creation → Ready) and bind (creation → PodScheduled) once,
/// for pods this controller saw pending: the pods it provisioned for, not the ones that were
/// already running when it started.
/// Only pods that changed since the last call are looked at.
#[derive(Debug, Default)]
pub struct PodStartup {
    /// Pod keys seen provisionable; the value says whether the bind was observed.
    pending: BTreeMap<String, bool>,
    /// Where the index's pod change log was read up to.
    read: Option<Cursor>,
}

impl PodStartup {
    pub fn observe(&mut self, s: &ClusterState, metrics: &Metrics) {
        match s.pod_log.since(self.read) {
            Since::Keys(keys) => {
                for key in keys {
                    self.look_at(s, key, metrics);
                }
            }
            Since::Resync => {
                for key in s.pods.keys() {
                    self.look_at(s, key, metrics);
                }
                self.pending.retain(|k, _| s.pods.contains_key(k.as_str()));
            }
        }
        self.read = Some(s.pod_log.head());
    }

    /// Pods remembered as seen pending; for tests.
    pub fn watching(&self) -> usize {
        self.pending.len()
    }

    /// The pods seen pending that are not Ready yet, each with whether it is bound.
    pub fn waiting(&self) -> impl Iterator<Item = (&str, bool)> {
        self.pending.iter().map(|(k, bound)| (k.as_str(), *bound))
    }

    fn look_at(&mut self, s: &ClusterState, key: &str, metrics: &Metrics) {
        {
            let Some(p) = s.pods.get(key) else {
                self.pending.remove(key);
                return;
            };
            if p.provisionable() {
                self.pending.entry(key.to_owned()).or_insert(false);
                return;
            }
            let Some(bound_seen) = self.pending.get_mut(key) else {
                return;
            };
            let Some(created) = p.created else {
                return;
            };
            let since = |type_: &str| p.true_since(type_);
            // From when the provisioner first found the pod room; not for a pod bound before
            // that (the kube-scheduler found it room on its own).
            let room = s.pod_scheduling(key).schedulable;
            let after_room = |t: Timestamp| room.filter(|r| t >= *r).map(|r| t.since(r));
            if !*bound_seen && let Some(t) = since("PodScheduled") {
                metrics.state.pod_bound(t.since(created).as_secs_f64());
                if let Some(d) = after_room(t) {
                    metrics.state.pod_provisioning_bound(d.as_secs_f64());
                }
                *bound_seen = true;
            }
            if let Some(t) = since("Ready") {
                metrics.state.pod_startup(t.since(created).as_secs_f64());
                if let Some(d) = after_room(t) {
                    metrics.state.pod_provisioning_startup(d.as_secs_f64());
                }
                self.pending.remove(key);
            }
        }
    }
}

/// One node's published row, with the integer sums behind the utilisation totals.
#[derive(Clone, Debug, PartialEq)]
struct NodeRow {
    /// Shared with the gauges that serve it.
    gauge: Arc<NodeGauge>,
    allocatable: Resources,
    requests: Resources,
}

/// The Node's allocatable, read from its conversion rather than converting it again.
fn allocatable(s: &ClusterState, name: &str, n: &Node) -> Resources {
    match s.models.node(name, n) {
        Ok(m) => m.allocatable.clone(),
        Err(_) => Resources::new(),
    }
}

/// The node's row from its object and the index's summed usage of its pods, its values
/// taken from `texts` where it holds them.
fn node_row(s: &ClusterState, name: &str, texts: &mut Shared<str>) -> Option<NodeRow> {
    let n = s.nodes.get(name)?;
    let allocatable = allocatable(s, name, n);
    let empty = super::NodeUsage::default();
    let usage = s.node_usage(name).unwrap_or(&empty);
    Some(NodeRow {
        gauge: Arc::new(NodeGauge {
            labels: Arc::new(node_dimensions(n, s.node_labels(name), texts)),
            allocatable: amounts(&allocatable, texts),
            pod_requests: amounts(&usage.requests, texts),
            pod_limits: amounts(&usage.limits, texts),
            daemon_requests: amounts(&usage.daemon_requests, texts),
            daemon_limits: amounts(&usage.daemon_limits, texts),
            system_overhead: amounts(&system_overhead(n, &allocatable), texts),
        }),
        allocatable,
        requests: usage.requests.clone(),
    })
}

/// The gauge rows last published and where the index's change logs were read up to; lives
/// in [`Metrics`] so that [`set_all`] only revisits what changed.
#[derive(Debug, Default)]
pub struct Published {
    pods_read: Option<Cursor>,
    nodes_read: Option<Cursor>,
    pods: BTreeMap<PodKey, Arc<PodGauge>>,
    /// One copy of each value the pod and node rows hold.
    values: RowValues,
    nodes: BTreeMap<String, NodeRow>,
    allocatable: Resources,
    requested: Resources,
}

impl Published {
    fn update(&mut self, s: &ClusterState, metrics: &Metrics) {
        match s.pod_log.since(self.pods_read) {
            Since::Keys(keys) => {
                for key in keys {
                    // The index's copy of the key, which the row shares.
                    let live = s.pods.get_key_value(key);
                    let row = live.map(|(k, p)| Arc::new(pod_row(s, k, p, &mut self.values)));
                    let old = self.pods.get(key);
                    if row.as_ref() == old {
                        continue;
                    }
                    metrics.state.replace_pod(old, row.as_ref());
                    match (live, row) {
                        (Some((k, _)), Some(r)) => self.pods.insert(Arc::clone(k), r),
                        _ => self.pods.remove(key),
                    };
                }
            }
            Since::Resync => {
                self.pods = s
                    .pods
                    .iter()
                    .map(|(k, p)| {
                        let row = pod_row(s, k, p, &mut self.values);
                        (k.clone(), Arc::new(row))
                    })
                    .collect();
                let rows: Vec<Arc<PodGauge>> = self.pods.values().cloned().collect();
                metrics.state.set_pods(&rows);
            }
        }
        self.pods_read = Some(s.pod_log.head());
        match s.node_log.since(self.nodes_read) {
            Since::Keys(keys) => {
                let mut changed = false;
                for name in keys {
                    let row = node_row(s, name, &mut self.values.texts);
                    let old = self.nodes.get(name);
                    if row.as_ref() == old {
                        continue;
                    }
                    changed = true;
                    metrics
                        .state
                        .replace_node(old.map(|r| &r.gauge), row.as_ref().map(|r| &r.gauge));
                    if let Some(old) = old {
                        self.allocatable.sub(&old.allocatable);
                        self.requested.sub(&old.requests);
                    }
                    match row {
                        Some(r) => {
                            self.allocatable.add(&r.allocatable);
                            self.requested.add(&r.requests);
                            self.nodes.insert(name.to_owned(), r);
                        }
                        None => {
                            self.nodes.remove(name);
                        }
                    }
                }
                if changed {
                    metrics.state.set_utilization(&self.utilization());
                }
            }
            Since::Resync => {
                self.nodes = s
                    .nodes
                    .keys()
                    .filter_map(|n| node_row(s, n, &mut self.values.texts).map(|r| (n.clone(), r)))
                    .collect();
                self.allocatable = Resources::new();
                self.requested = Resources::new();
                for r in self.nodes.values() {
                    self.allocatable.add(&r.allocatable);
                    self.requested.add(&r.requests);
                }
                let rows: Vec<Arc<NodeGauge>> =
                    self.nodes.values().map(|r| r.gauge.clone()).collect();
                metrics.state.set_nodes(&rows);
            }
        }
        self.nodes_read = Some(s.node_log.head());
    }

    /// `karpenter_cluster_utilization_percent` by resource: requests over allocatable.
    fn utilization(&self) -> BTreeMap<String, f64> {
        self.allocatable
            .iter()
            .filter(|(_, a)| *a != 0)
            .map(|(k, a)| {
                let used = self.requested.get(k);
                (k.to_owned(), 100.0 * used as f64 / a as f64)
            })
            .collect()
    }

    /// The set the rows' values are kept in, for other series built alike.
    pub(crate) fn texts(&mut self) -> &mut Shared<str> {
        &mut self.values.texts
    }

    /// The dimensions last published for the node `name`, to be shared by its other series.
    pub(crate) fn dims(&self, name: &str) -> Option<Arc<NodeDims>> {
        self.nodes.get(name).map(|r| r.gauge.labels.clone())
    }

    /// The rows published; for tests.
    pub fn rows(&self) -> (Vec<NodeGauge>, Vec<PodGauge>) {
        (
            self.nodes.values().map(|r| (*r.gauge).clone()).collect(),
            self.pods.values().map(|p| (**p).clone()).collect(),
        )
    }
}

/// Every periodic gauge at once: the node and pod rows that changed since the last call (all
/// of them on the first call, or after a relist), the NodePools' usage and limits.
pub fn set_all(s: &ClusterState, metrics: &Metrics) {
    metrics.state.cluster_state(s.synced(), s.nodes.len());
    metrics
        .state
        .gauge_rows()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .update(s, metrics);
    set_nodepools(s, metrics);
}

/// How often the node, pod and NodePool gauges are refreshed (upstream's node metrics period).
pub const GAUGES_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// What upstream's metrics controllers keep up to date, ticked once a second: the state's own
/// sync gauges always; pod startup times, status conditions and the node, pod and NodePool
/// gauges unless `DISABLE_CLUSTER_STATE_OBSERVABILITY` turned them off.
///
/// Time is read from `clock` and tokio's clock, so the same ticks run under a paused runtime
/// (`bench controller`) as on the system clock.
pub struct StateMetrics {
    startup: PodStartup,
    conditions: super::conditions::ConditionObserver,
    ages: super::ages::Ages,
    last_gauges: Option<tokio::time::Instant>,
    enabled: bool,
    clock: crate::clock::Clock,
}

impl StateMetrics {
    pub fn new(enabled: bool, clock: crate::clock::Clock) -> Self {
        StateMetrics {
            startup: PodStartup::default(),
            conditions: Default::default(),
            ages: super::ages::Ages::default(),
            last_gauges: None,
            enabled,
            clock,
        }
    }

    pub fn tick(&mut self, s: &ClusterState, metrics: &Metrics) {
        let instant = tokio::time::Instant::now();
        metrics.state.cluster_state(s.synced(), s.nodes.len());
        self.ages.tick(s.synced(), metrics, instant.into_std());
        if !self.enabled {
            return;
        }
        self.startup.observe(s, metrics);
        let now = self.clock.now();
        self.conditions.observe(s, metrics, now);
        if self
            .last_gauges
            .is_none_or(|t| instant.saturating_duration_since(t) >= GAUGES_EVERY)
        {
            set_all(s, metrics);
            self.conditions.refresh(metrics, now);
            super::ages::set_lifetimes(s, metrics, now);
            super::ages::set_pod_waits(s, metrics, now, self.startup.waiting());
            self.last_gauges = Some(instant);
        }
    }
}

#[cfg(test)]
mod tests;
