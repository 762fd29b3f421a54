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
use nodewright_core::resources::{CPU, NODES, Resources};
use nodewright_core::time::Timestamp;

use super::changes::{Cursor, Since};
use super::metrics::{NodeGauge, PodGauge, node_dimensions};
use super::{ClusterState, PodRecord, convert};
use crate::metrics::Metrics;

fn amounts(r: &Resources) -> BTreeMap<String, f64> {
    r.iter()
        .map(|(k, v)| {
            let value = if k == CPU {
                v as f64 / 1000.0
            } else {
                v as f64
            };
            (k.to_string(), value)
        })
        .collect()
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
    s.nodes
        .values()
        .map(|n| {
            let name = n.metadata.name.clone().unwrap_or_default();
            let allocatable = convert::node(n).map(|n| n.allocatable).unwrap_or_default();
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
                labels: std::sync::Arc::new(node_dimensions(n)),
                allocatable: amounts(&allocatable),
                pod_requests: amounts(&requests),
                pod_limits: amounts(&limits),
                daemon_requests: amounts(&daemon),
                daemon_limits: amounts(&daemon_limits),
                system_overhead: amounts(&system_overhead(n, &allocatable)),
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
    s.pods.values().map(|p| pod_row(s, p)).collect()
}

/// The `karpenter_pods_state` row of `p`.
fn pod_row(s: &ClusterState, p: &PodRecord) -> PodGauge {
    {
        {
            let node = p.node_name.clone().unwrap_or_default();
            let nl = s.nodes.get(&node).and_then(|n| n.metadata.labels.as_ref());
            let label = |k: &str| nl.and_then(|l| l.get(k)).cloned().unwrap_or_default();
            PodGauge {
                name: p.name.clone(),
                namespace: p.namespace.clone(),
                owner: p
                    .controller
                    .as_ref()
                    .map(|(kind, name)| format!("{kind}/{name}"))
                    .unwrap_or_default(),
                scheduled: !node.is_empty(),
                node,
                nodepool: label(labels::NODEPOOL),
                zone: label(labels::ZONE),
                arch: label(labels::ARCH),
                instance_type: label(labels::INSTANCE_TYPE),
                capacity_type: label(labels::CAPACITY_TYPE),
                phase: p.phase.as_deref().unwrap_or_default().to_owned(),
                ready: p.condition_true("Ready"),
            }
        }
    }
}

/// Sets every NodePool's usage (what its claims hold) and its limits.
pub fn set_nodepools(s: &ClusterState, metrics: &Metrics) {
    // One pass over the claims, not one per pool.
    let mut by_pool: BTreeMap<&str, (Resources, i64)> = BTreeMap::new();
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
        for (k, v) in amounts(&used) {
            metrics.state.nodepool_usage(name, &k, v);
        }
        let limits = convert::resources(pool.spec.limits.as_ref()).unwrap_or_default();
        for (k, v) in amounts(&limits) {
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
                self.pending.retain(|k, _| s.pods.contains_key(k));
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
    gauge: NodeGauge,
    allocatable: Resources,
    requests: Resources,
}

/// The node's row from its object and the index's summed usage of its pods.
fn node_row(s: &ClusterState, name: &str) -> Option<NodeRow> {
    let n = s.nodes.get(name)?;
    let allocatable = convert::node(n).map(|n| n.allocatable).unwrap_or_default();
    let empty = super::NodeUsage::default();
    let usage = s.node_usage(name).unwrap_or(&empty);
    Some(NodeRow {
        gauge: NodeGauge {
            labels: std::sync::Arc::new(node_dimensions(n)),
            allocatable: amounts(&allocatable),
            pod_requests: amounts(&usage.requests),
            pod_limits: amounts(&usage.limits),
            daemon_requests: amounts(&usage.daemon_requests),
            daemon_limits: amounts(&usage.daemon_limits),
            system_overhead: amounts(&system_overhead(n, &allocatable)),
        },
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
    pods: BTreeMap<String, Arc<PodGauge>>,
    nodes: BTreeMap<String, NodeRow>,
    allocatable: Resources,
    requested: Resources,
}

impl Published {
    fn update(&mut self, s: &ClusterState, metrics: &Metrics) {
        match s.pod_log.since(self.pods_read) {
            Since::Keys(keys) => {
                for key in keys {
                    let row = s.pods.get(key).map(|p| Arc::new(pod_row(s, p)));
                    let old = self.pods.get(key);
                    if row.as_ref() == old {
                        continue;
                    }
                    metrics.state.replace_pod(old, row.as_ref());
                    match row {
                        Some(r) => self.pods.insert(key.to_owned(), r),
                        None => self.pods.remove(key),
                    };
                }
            }
            Since::Resync => {
                self.pods = s
                    .pods
                    .iter()
                    .map(|(k, p)| (k.clone(), Arc::new(pod_row(s, p))))
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
                    let row = node_row(s, name);
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
                    .filter_map(|n| node_row(s, n).map(|r| (n.clone(), r)))
                    .collect();
                self.allocatable = Resources::new();
                self.requested = Resources::new();
                for r in self.nodes.values() {
                    self.allocatable.add(&r.allocatable);
                    self.requested.add(&r.requests);
                }
                let rows: Vec<NodeGauge> = self.nodes.values().map(|r| r.gauge.clone()).collect();
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

    /// The rows published; for tests.
    pub fn rows(&self) -> (Vec<NodeGauge>, Vec<PodGauge>) {
        (
            self.nodes.values().map(|r| r.gauge.clone()).collect(),
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
mod tests {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;
    use crate::state::{Kind, Object, WatchEvent};

    const NODES: usize = 4;
    const PODS: usize = 12;

    #[derive(Clone, Debug)]
    enum Op {
        /// Add or update pod `i`: bound to node `node` (or pending), with a cpu request of
        /// `cpu` halves, a phase, Ready or not, owned by a DaemonSet or a ReplicaSet.
        Pod {
            i: usize,
            node: Option<usize>,
            cpu: u8,
            phase: usize,
            ready: bool,
            daemon: bool,
        },
        DeletePod(usize),
        /// Add or update node `i` with a zone, a NodePool and a cpu allocatable.
        Node {
            i: usize,
            zone: usize,
            pool: usize,
            cpu: u8,
        },
        DeleteNode(usize),
        /// Relist the pods, dropping those whose index is a multiple of `drop`.
        RelistPods(usize),
        /// Publish the gauges now.
        Tick,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0..PODS, prop::option::of(0..NODES + 1), 0u8..5, 0usize..4, any::<bool>(), any::<bool>())
                .prop_map(|(i, node, cpu, phase, ready, daemon)| Op::Pod { i, node, cpu, phase, ready, daemon }),
            2 => (0..PODS).prop_map(Op::DeletePod),
            3 => (0..NODES, 0usize..2, 0usize..2, 1u8..5)
                .prop_map(|(i, zone, pool, cpu)| Op::Node { i, zone, pool, cpu }),
            1 => (0..NODES).prop_map(Op::DeleteNode),
            1 => (2usize..4).prop_map(Op::RelistPods),
            3 => Just(Op::Tick),
        ]
    }

    fn pod_json(
        i: usize,
        node: Option<usize>,
        cpu: u8,
        phase: usize,
        ready: bool,
        daemon: bool,
    ) -> Value {
        let phase = ["Pending", "Running", "Succeeded", "Failed"][phase];
        let owner = if daemon { "DaemonSet" } else { "ReplicaSet" };
        let mut v = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("p{i}"), "namespace": "web", "uid": format!("u{i}"),
                "creationTimestamp": "2024-06-01T00:00:00Z",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner, "name": "o",
                    "uid": "o", "controller": true}]},
            "spec": {"containers": [{"name": "c", "image": "x", "resources": {
                "requests": {"cpu": format!("{}m", 500 * cpu as u32), "memory": "1Gi"},
                "limits": {"memory": "2Gi"}}}]},
            "status": {"phase": phase, "conditions": [
                {"type": "Ready", "status": if ready { "True" } else { "False" },
                 "lastTransitionTime": "2024-06-01T00:01:00Z"}]}
        });
        match node {
            Some(n) => {
                v["spec"]["nodeName"] = json!(format!("n{n}"));
                v["status"]["conditions"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!({"type": "PodScheduled", "status": "True",
                        "lastTransitionTime": "2024-06-01T00:00:30Z"}));
            }
            None => v["status"]["conditions"].as_array_mut().unwrap().push(
                json!({"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}),
            ),
        }
        v
    }

    fn node_json(i: usize, zone: usize, pool: usize, cpu: u8) -> Value {
        json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": format!("n{i}"), "labels": {
                "karpenter.sh/nodepool": format!("pool-{pool}"),
                "topology.kubernetes.io/zone": format!("zone-{zone}"),
                "node.kubernetes.io/instance-type": "m5.large",
                "karpenter.sh/capacity-type": "on-demand",
                "kubernetes.io/arch": "amd64"}},
            "status": {"allocatable": {"cpu": format!("{cpu}"), "memory": "8Gi", "pods": "110"}}
        })
    }

    fn apply(s: &mut ClusterState, kind: Kind, v: Value) {
        s.apply(WatchEvent::Apply(Object::from_value(kind, v).unwrap()));
    }

    /// The node and pod gauge lines of `m` (utilisation aside: its sums may differ in the
    /// last bit).
    fn samples(m: &Metrics) -> Vec<String> {
        let mut out: Vec<String> = m
            .encode()
            .lines()
            .filter(|l| {
                !l.starts_with('#')
                    && (l.starts_with("karpenter_nodes_") || l.starts_with("karpenter_pods_state{"))
            })
            .map(str::to_owned)
            .collect();
        out.sort();
        out
    }

    fn utilization(m: &Metrics) -> BTreeMap<String, f64> {
        m.encode()
            .lines()
            .filter(|l| l.starts_with("karpenter_cluster_utilization_percent{"))
            .map(|l| {
                let (k, v) = l.rsplit_once(' ').unwrap();
                (k.to_owned(), v.parse().unwrap())
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// After any sequence of pod and node changes (and relists), the incrementally
        /// published rows and metrics equal a recount from scratch, and the incremental
        /// startup observer records what a full walk every tick records.
        #[test]
        fn incremental_gauges_equal_a_full_recount(ops in prop::collection::vec(op(), 1..60)) {
            let mut s = ClusterState::default();
            let incremental = Metrics::new();
            let walked = Metrics::new();
            let mut startup = PodStartup::default();
            let mut walking = PodStartup::default();
            let mut live: BTreeMap<usize, Value> = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Pod { i, node, cpu, phase, ready, daemon } => {
                        let v = pod_json(i, node, cpu, phase, ready, daemon);
                        live.insert(i, v.clone());
                        apply(&mut s, Kind::Pod, v);
                    }
                    Op::DeletePod(i) => {
                        if let Some(v) = live.remove(&i) {
                            s.apply(WatchEvent::Delete(Object::from_value(Kind::Pod, v).unwrap()));
                        }
                    }
                    Op::Node { i, zone, pool, cpu } => apply(&mut s, Kind::Node, node_json(i, zone, pool, cpu)),
                    Op::DeleteNode(i) => {
                        if s.nodes.contains_key(&format!("n{i}")) {
                            let v = node_json(i, 0, 0, 1);
                            s.apply(WatchEvent::Delete(Object::from_value(Kind::Node, v).unwrap()));
                        }
                    }
                    Op::RelistPods(drop) => {
                        live.retain(|i, _| i % drop != 0);
                        s.apply(WatchEvent::Init(Kind::Pod));
                        for v in live.values() {
                            s.apply(WatchEvent::InitApply(Object::from_value(Kind::Pod, v.clone()).unwrap()));
                        }
                        s.apply(WatchEvent::InitDone(Kind::Pod));
                    }
                    Op::Tick => {
                        set_all(&s, &incremental);
                        startup.observe(&s, &incremental);
                        walking.read = None;
                        walking.observe(&s, &walked);
                    }
                }
            }
            set_all(&s, &incremental);
            let (nodes, pods) = incremental.state.gauge_rows().lock().unwrap().rows();
            prop_assert_eq!(&nodes, &node_gauges(&s));
            prop_assert_eq!(&pods, &pod_gauges(&s));

            let recount = Metrics::new();
            recount.state.set_nodes(&node_gauges(&s));
            let recounted: Vec<Arc<PodGauge>> = pod_gauges(&s).into_iter().map(Arc::new).collect();
            recount.state.set_pods(&recounted);
            prop_assert_eq!(samples(&incremental), samples(&recount));
            let (a, b) = (utilization(&incremental), utilization(&recount));
            prop_assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
            for (k, v) in &a {
                prop_assert!((v - b[k]).abs() < 1e-9, "{}: {} vs {}", k, v, b[k]);
            }

            startup.observe(&s, &incremental);
            walking.read = None;
            walking.observe(&s, &walked);
            let startup_lines = |m: &Metrics| -> Vec<String> {
                m.encode()
                    .lines()
                    .filter(|l| l.starts_with("karpenter_pods_startup_duration_seconds")
                        || l.starts_with("karpenter_pods_bound_duration_seconds"))
                    .map(str::to_owned)
                    .collect()
            };
            prop_assert_eq!(startup_lines(&incremental), startup_lines(&walked));
            prop_assert_eq!(startup.watching(), walking.watching());
        }
    }

    #[test]
    fn disabled_observability_keeps_only_the_states_own_gauges() {
        let mut s = ClusterState::default();
        let mut node = node_json(0, 0, 0, 4);
        node["status"]["conditions"] = json!([{"type": "Ready", "status": "True",
            "lastTransitionTime": "2024-06-01T00:00:00Z"}]);
        apply(&mut s, Kind::Node, node);
        apply(&mut s, Kind::Pod, pod_json(1, Some(0), 1, 1, true, false));
        let on = Metrics::new();
        let off = Metrics::new();
        StateMetrics::new(true, crate::clock::Clock::system()).tick(&s, &on);
        StateMetrics::new(false, crate::clock::Clock::system()).tick(&s, &off);
        let (on, off) = (on.encode(), off.encode());
        for family in [
            "karpenter_nodes_allocatable{",
            "karpenter_pods_state{",
            "operator_node_status_condition_count{",
        ] {
            assert!(on.contains(family), "{family} missing when enabled:\n{on}");
            assert!(
                !off.contains(family),
                "{family} exported when disabled:\n{off}"
            );
        }
        assert!(off.contains("karpenter_cluster_state_node_count"), "{off}");
    }

    /// The gauges are refreshed every `GAUGES_EVERY` of tokio's clock, so `bench controller`,
    /// whose runtime's clock is paused, sees them move as the controller would.
    #[tokio::test(start_paused = true)]
    async fn the_gauges_follow_tokios_clock() {
        let mut s = ClusterState::default();
        let m = Metrics::new();
        let mut observed = StateMetrics::new(
            true,
            crate::clock::Clock::starting_at(nodewright_core::time::Timestamp(0)),
        );
        let n1 = r#"karpenter_nodes_allocatable{"#;
        let has_n1 = |m: &Metrics| {
            m.encode()
                .lines()
                .any(|l| l.starts_with(n1) && l.contains(r#"node_name="n1""#))
        };
        apply(&mut s, Kind::Node, node_json(0, 0, 0, 4));
        observed.tick(&s, &m);
        apply(&mut s, Kind::Node, node_json(1, 0, 0, 4));
        tokio::time::advance(GAUGES_EVERY - std::time::Duration::from_secs(1)).await;
        observed.tick(&s, &m);
        assert!(!has_n1(&m), "refreshed before its period");
        tokio::time::advance(std::time::Duration::from_secs(1)).await;
        observed.tick(&s, &m);
        assert!(
            has_n1(&m),
            "not refreshed after its period of tokio's clock"
        );
    }

    #[test]
    fn a_tick_revisits_only_what_changed() {
        let mut s = ClusterState::default();
        let m = Metrics::new();
        apply(&mut s, Kind::Node, node_json(0, 0, 0, 4));
        for i in 0..50 {
            apply(&mut s, Kind::Pod, pod_json(i, Some(0), 1, 1, true, false));
        }
        set_all(&s, &m);
        let head = (s.pod_log.head(), s.node_log.head());
        // Nothing changed: nothing to revisit.
        let rows = m.state.gauge_rows().lock().unwrap();
        assert!(matches!(s.pod_log.since(rows.pods_read), Since::Keys(k) if k.is_empty()));
        drop(rows);
        apply(&mut s, Kind::Pod, pod_json(7, Some(0), 2, 1, false, false));
        match (
            s.pod_log.since(Some(head.0)),
            s.node_log.since(Some(head.1)),
        ) {
            (Since::Keys(pods), Since::Keys(nodes)) => {
                assert_eq!(pods, ["web/p7"]);
                assert_eq!(nodes, ["n0"]);
            }
            other => panic!("expected changed keys, got {other:?}"),
        }
        set_all(&s, &m);
        let usage = s.node_usage("n0").unwrap();
        assert_eq!(usage.requests.get(CPU), 49 * 500 + 1000);
        assert!(
            m.encode()
                .lines()
                .any(|l| l.starts_with("karpenter_pods_state{name=\"p7\"")
                    && l.contains("ready=\"false\""))
        );
    }
}
