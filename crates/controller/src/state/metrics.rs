//! The families upstream derives from its cluster state: each node's resource gauges
//! (`karpenter_nodes_allocatable`, `_total_pod_requests`, `_total_pod_limits`,
//! `_total_daemon_requests`, `_total_daemon_limits`, `_system_overhead`),
//! `karpenter_cluster_utilization_percent`, `karpenter_cluster_state_node_count` and
//! `_synced`, `karpenter_pods_state`, the pod startup summary and bound histogram (and their
//! `karpenter_pods_provisioning_*` histograms, counted from when the provisioner first found
//! the pod room), and
//! `karpenter_nodepools_usage` and `_limit`. `state::gauges` computes the rows; the
//! per-object families are replaced under the shared snapshot lock, so a scrape never sees a
//! half-replaced set.
//!
//! The six node resource families keep no series: they are views ([`NodeView`]) of the
//! node rows the gauge tracker publishes, shared with it, written out at a scrape, rather
//! than a resource name, a gauge and a map entry for each of some twenty thousand series at
//! 1,341 Nodes (about 1 MiB).

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, LazyLock, Mutex};

use nodewright_core::labels;
use nodewright_core::model::Shared;

use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, LabelSetEncoder, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::metrics::summary::Summary;
use crate::metrics::{
    Gauges, Labels, Snapshot, duration_histogram, register, registered, resource_label,
};

/// A node's dimensions ([`node_dimensions`]). Most of the values are one instance type's,
/// held alike by many nodes, so the rows share them.
pub type NodeDims = Vec<(&'static str, Arc<str>)>;

/// A row's amounts by resource name, sorted by name; the names are shared as the dimensions
/// are.
pub type Amounts = Vec<(Arc<str>, f64)>;

/// One node's resource gauges (`karpenter_nodes_*`). CPU is in cores; memory and storage in
/// bytes; pods and extended resources as counts. Resource names are normalised the way
/// upstream does (lowercase, `-` to `_`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeGauge {
    /// The node's label set but `resource_type`: [`node_dimensions`], sorted by key; shared
    /// by all its series.
    pub labels: Arc<NodeDims>,
    pub allocatable: Amounts,
    pub pod_requests: Amounts,
    pub pod_limits: Amounts,
    pub daemon_requests: Amounts,
    pub daemon_limits: Amounts,
    /// Capacity less allocatable.
    pub system_overhead: Amounts,
}

/// One pod's row in `karpenter_pods_state`: 64 bytes (80 with its `Arc`'s counts) where a
/// copy of each value was some 220, at 20,000 pods about 2.7 MiB. The pod's key is the index's own copy, and every other value is
/// one that many pods' rows hold alike (the owner, the phase, and the node's part, one for
/// every pod on the node), so the rows share them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PodGauge {
    /// `namespace/name`, as the index keys the pod.
    pub key: Arc<str>,
    pub owner: Arc<str>,
    pub node: Arc<PodNode>,
    pub phase: Arc<str>,
    pub scheduled: bool,
    pub ready: bool,
}

impl PodGauge {
    /// The namespace and the name, from the key.
    pub fn namespace_and_name(&self) -> (&str, &str) {
        self.key.split_once('/').unwrap_or(("", &self.key))
    }
}

/// What a pod's row says of its node: the node's name and the labels the row carries, empty
/// when the pod is not bound or the node has no such label.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PodNode {
    pub name: Arc<str>,
    pub nodepool: Arc<str>,
    pub zone: Arc<str>,
    pub arch: Arc<str>,
    pub instance_type: Arc<str>,
    pub capacity_type: Arc<str>,
}

/// The labels of one node's resource series, borrowed for a scrape: the node's dimensions,
/// some forty labels that its two dozen series share, and the resource, written in its sorted
/// place.
struct NodeSeries<'a> {
    dims: &'a NodeDims,
    resource: &'a str,
}

impl EncodeLabelSet for NodeSeries<'_> {
    fn encode(&self, encoder: &mut LabelSetEncoder<'_>) -> Result<(), std::fmt::Error> {
        let at = self.dims.partition_point(|(k, _)| *k < "resource_type");
        let (before, after) = self.dims.split_at(at);
        before.encode(encoder)?;
        [("resource_type", self.resource)].encode(encoder)?;
        after.encode(encoder)
    }
}

/// The node rows whose resource gauges are served, by their dimensions (which name the
/// node); shared by the six families that read them.
#[derive(Clone, Debug, Default)]
struct ServedNodes(Arc<Mutex<BTreeMap<Arc<NodeDims>, Arc<NodeGauge>>>>);

impl ServedNodes {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<Arc<NodeDims>, Arc<NodeGauge>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The six `karpenter_nodes_*` resource amounts of a row, in the families' order.
fn resource_rows(node: &NodeGauge) -> [&Amounts; 6] {
    [
        &node.allocatable,
        &node.pod_requests,
        &node.pod_limits,
        &node.daemon_requests,
        &node.daemon_limits,
        &node.system_overhead,
    ]
}

/// One `karpenter_nodes_*` resource family, written at a scrape from the served rows: the
/// amounts [`resource_rows`] puts at `field`, one series per node and resource.
#[derive(Clone, Debug)]
struct NodeView {
    served: ServedNodes,
    field: usize,
}

impl EncodeMetric for NodeView {
    fn encode(&self, mut encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        let served = self.served.lock();
        for node in served.values() {
            let amounts = resource_rows(node)[self.field];
            let resources: Vec<String> = amounts.iter().map(|(r, _)| resource_label(r)).collect();
            for (i, (_, value)) in amounts.iter().enumerate() {
                // Two names spelt alike were one series, the last one set: so they stay.
                if resources[i + 1..].contains(&resources[i]) {
                    continue;
                }
                let labels = NodeSeries {
                    dims: &node.labels,
                    resource: &resources[i],
                };
                encoder.encode_family(&labels)?.encode_gauge(value)?;
            }
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Gauge
    }
}

/// The labels of one pod's `karpenter_pods_state` series, read from the row the gauge
/// tracker keeps: one pod per series, so the series shares the row instead of copying its
/// dozen strings into a label list of its own.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct PodSeries(Arc<PodGauge>);

impl EncodeLabelSet for PodSeries {
    fn encode(&self, encoder: &mut LabelSetEncoder<'_>) -> Result<(), std::fmt::Error> {
        let p = &*self.0;
        let n = &*p.node;
        let (namespace, name) = p.namespace_and_name();
        let flag = |b: bool| if b { "true" } else { "false" };
        [
            ("name", name),
            ("namespace", namespace),
            ("owner", &*p.owner),
            ("node", &*n.name),
            ("scheduled", flag(p.scheduled)),
            ("nodepool", &*n.nodepool),
            ("zone", &*n.zone),
            ("arch", &*n.arch),
            ("capacity_type", &*n.capacity_type),
            ("instance_type", &*n.instance_type),
            ("phase", &*p.phase),
            ("ready", flag(p.ready)),
            ("managed", flag(!n.nodepool.is_empty())),
        ]
        .encode(encoder)
    }
}

pub struct StateMetrics {
    /// What the `karpenter_nodes_*` resource families read.
    nodes: ServedNodes,
    cluster_utilization: Gauges,
    cluster_node_count: Gauge<f64, AtomicU64>,
    cluster_synced: Gauge<f64, AtomicU64>,
    pods_state: Family<PodSeries, Gauge<f64, AtomicU64>>,
    pods_startup: Summary,
    pods_bound: Histogram,
    provisioning_bound: Histogram,
    provisioning_startup: Histogram,
    nodepools_usage: Gauges,
    nodepools_limit: Gauges,
    /// The gauge rows last published from the index, so a tick updates only what changed.
    rows: Mutex<super::gauges::Published>,
    snapshot: Snapshot,
}

impl StateMetrics {
    pub(crate) fn register(r: &mut Registry, snapshot: &Snapshot) -> Self {
        let cluster_node_count = registered(
            r,
            "karpenter_cluster_state_node_count",
            "Nodes the in-memory cluster state holds.",
        );
        let cluster_synced = registered(
            r,
            "karpenter_cluster_state_synced",
            "1 while the in-memory cluster state holds every NodeClaim and Node the API server has, 0 otherwise.",
        );
        let pods_bound = register(
            r,
            "karpenter_pods_bound_duration_seconds",
            "Seconds from a pod's creation to its binding to a node.",
            duration_histogram(),
        );
        let provisioning_bound = register(
            r,
            "karpenter_pods_provisioning_bound_duration_seconds",
            "Seconds from this controller first deciding a pod can be placed to the pod's binding; measured from that in-memory moment, not the pod's creation.",
            duration_histogram(),
        );
        let provisioning_startup = register(
            r,
            "karpenter_pods_provisioning_startup_duration_seconds",
            "Seconds from this controller first deciding a pod can be placed until the pod runs; measured from that in-memory moment, not the pod's creation.",
            duration_histogram(),
        );
        let nodes = register_node_views(r);
        let pods_state = registered(
            r,
            "karpenter_pods_state",
            "One series per pod, valued 1, whose labels say where it is: name, namespace, owner, node, NodePool, zone, architecture, capacity type, instance type and phase.",
        );
        let mut gauges = |name: &str, help: &str| -> Gauges { registered(r, name, help) };
        StateMetrics {
            nodes,
            cluster_utilization: gauges(
                "karpenter_cluster_utilization_percent",
                "Pods' requests as a percentage of the allocatable of every node, by resource.",
            ),
            pods_state,
            nodepools_usage: gauges(
                "karpenter_nodepools_usage",
                "The resources a NodePool's NodeClaims hold, the quantity its limits are checked against, by NodePool and resource.",
            ),
            nodepools_limit: gauges(
                "karpenter_nodepools_limit",
                "A NodePool's spec.limits, by NodePool and resource.",
            ),
            pods_startup: Summary::new(
                "karpenter_pods_startup_duration_seconds",
                "Seconds from a pod's creation until it is running.",
                None,
            ),
            cluster_node_count,
            cluster_synced,
            pods_bound,
            provisioning_bound,
            provisioning_startup,
            rows: Mutex::default(),
            snapshot: snapshot.clone(),
        }
    }

    /// The summary, which the registry cannot encode.
    pub(crate) fn encode_summaries(&self, out: &mut String) {
        self.pods_startup.encode(out);
    }

    /// The gauge rows last published by `state::gauges::set_all`.
    pub(crate) fn gauge_rows(&self) -> &Mutex<super::gauges::Published> {
        &self.rows
    }

    pub fn pod_startup(&self, seconds: f64) {
        self.pods_startup.observe("", seconds);
    }

    pub fn pod_bound(&self, seconds: f64) {
        self.pods_bound.observe(seconds);
    }

    /// From when the provisioner first found a pod room until it was bound.
    pub fn pod_provisioning_bound(&self, seconds: f64) {
        self.provisioning_bound.observe(seconds);
    }

    /// From when the provisioner first found a pod room until it was Ready.
    pub fn pod_provisioning_startup(&self, seconds: f64) {
        self.provisioning_startup.observe(seconds);
    }

    pub fn cluster_state(&self, synced: bool, node_count: usize) {
        self.cluster_synced.set(if synced { 1.0 } else { 0.0 });
        self.cluster_node_count.set(node_count as f64);
    }

    pub fn nodepool_usage(&self, nodepool: &str, resource_type: &str, value: f64) {
        let labels = nodepool_labels(nodepool, resource_type);
        self.nodepools_usage.get_or_create(&labels).set(value);
    }

    pub fn nodepool_limit(&self, nodepool: &str, resource_type: &str, value: f64) {
        let labels = nodepool_labels(nodepool, resource_type);
        self.nodepools_limit.get_or_create(&labels).set(value);
    }

    /// Replaces every `karpenter_nodes_*` resource gauge and the cluster utilisation with
    /// the given nodes, so deleted nodes disappear from the scrape.
    pub fn set_nodes(&self, nodes: &[Arc<NodeGauge>]) {
        let _guard = self.snapshot.hold();
        self.nodes.lock().clear();
        self.cluster_utilization.clear();
        let mut allocatable_total: BTreeMap<String, f64> = BTreeMap::new();
        let mut requested_total: BTreeMap<String, f64> = BTreeMap::new();
        for node in nodes {
            self.add_node(node);
            for (resource, value) in &node.allocatable {
                *allocatable_total
                    .entry(resource_label(resource))
                    .or_default() += value;
            }
            for (resource, value) in &node.pod_requests {
                *requested_total.entry(resource_label(resource)).or_default() += value;
            }
        }
        for (resource, allocatable) in allocatable_total {
            if allocatable == 0.0 {
                continue;
            }
            let used = requested_total.get(&resource).copied().unwrap_or(0.0);
            self.cluster_utilization
                .get_or_create(&vec![("resource_type", resource)])
                .set(100.0 * used / allocatable);
        }
    }

    fn add_node(&self, node: &Arc<NodeGauge>) {
        self.nodes.lock().insert(node.labels.clone(), node.clone());
    }

    /// Replaces `karpenter_pods_state` with one series (value 1) per given pod.
    pub fn set_pods(&self, pods: &[Arc<PodGauge>]) {
        let _guard = self.snapshot.hold();
        self.pods_state.clear();
        for pod in pods {
            self.pods_state
                .get_or_create(&PodSeries(pod.clone()))
                .set(1.0);
        }
    }

    /// Replaces one pod's `karpenter_pods_state` series: `old` (as last set) goes, `new`
    /// comes; either may be absent (a pod added or deleted).
    pub fn replace_pod(&self, old: Option<&Arc<PodGauge>>, new: Option<&Arc<PodGauge>>) {
        let _guard = self.snapshot.hold();
        if let Some(old) = old {
            self.pods_state.remove(&PodSeries(old.clone()));
        }
        if let Some(new) = new {
            self.pods_state
                .get_or_create(&PodSeries(new.clone()))
                .set(1.0);
        }
    }

    /// Replaces one node's `karpenter_nodes_*` resource series, as
    /// [`StateMetrics::replace_pod`] does for a pod. The cluster utilisation is set apart
    /// ([`StateMetrics::set_utilization`]).
    pub fn replace_node(&self, old: Option<&Arc<NodeGauge>>, new: Option<&Arc<NodeGauge>>) {
        let _guard = self.snapshot.hold();
        if let Some(old) = old {
            self.nodes.lock().remove(&old.labels);
        }
        if let Some(new) = new {
            self.add_node(new);
        }
    }

    /// Replaces `karpenter_cluster_utilization_percent` with the given percentages by
    /// resource name.
    pub fn set_utilization(&self, percent: &BTreeMap<String, f64>) {
        let _guard = self.snapshot.hold();
        self.cluster_utilization.clear();
        for (resource, value) in percent {
            self.cluster_utilization
                .get_or_create(&vec![("resource_type", resource_label(resource))])
                .set(*value);
        }
    }
}

fn nodepool_labels(nodepool: &str, resource_type: &str) -> Labels {
    vec![
        ("resource_type", resource_label(resource_type)),
        ("nodepool", nodepool.to_owned()),
    ]
}

/// Labels nodewright lets requirements and selectors name that the AWS provider's v1.14.1
/// does not register as well-known (its `pkg/apis/v1/labels.go`), so its node gauges carry
/// no dimension for them: the node class label, and `nitro-sandbox`, which that release does
/// not set at all.
const NOT_WELL_KNOWN_UPSTREAM: [&str; 2] = [labels::aws::EC2NODECLASS, labels::aws::NITRO_SANDBOX];

/// The well-known label keys upstream turns into node dimensions, each with its dimension:
/// core's and the AWS provider's well-known labels, named by the part after the `/`,
/// lowercased, `-` to `_` (`node.kubernetes.io/instance-type` is `instance_type`), sorted by
/// dimension. Built once; the names live as long as the process, as the families do.
fn well_known_dimensions() -> &'static [(&'static str, &'static str)] {
    static DIMS: LazyLock<Vec<(&'static str, &'static str)>> = LazyLock::new(|| {
        let mut dims: Vec<(&'static str, &'static str)> = labels::WELL_KNOWN
            .iter()
            .chain(labels::aws::WELL_KNOWN)
            .filter(|key| !NOT_WELL_KNOWN_UPSTREAM.contains(key))
            .filter_map(|key| {
                let (_, name) = key.split_once('/')?;
                let dim: &'static str = resource_label(name).leak();
                Some((*key, dim))
            })
            .collect();
        dims.sort_by_key(|(_, d)| *d);
        dims
    });
    &DIMS
}

/// A node's dimensions on every `karpenter_nodes_*` family but `resource_type`, as upstream's
/// node metrics controller sets them: `node_name`, `phase` (the Node's `status.phase`, empty
/// on most nodes), `managed` (Karpenter's: it has a NodePool) and one per well-known label
/// with the node's value (of `l`, its labels), empty when it has none. Sorted by key, as
/// Prometheus's Go client writes them.
pub fn node_dimensions(
    node: &k8s_openapi::api::core::v1::Node,
    l: Option<&BTreeMap<String, String>>,
    texts: &mut Shared<str>,
) -> NodeDims {
    let mut text = |t: &str| texts.text(t);
    let mut label = |k: &str| text(l.and_then(|l| l.get(k)).map_or("", |v| v));
    let phase = node.status.as_ref().and_then(|s| s.phase.as_deref());
    // Sized for all of them at once: collected, then pushed to, the list doubled its
    // capacity and every published row held the spare half (1.3 MiB at 1,341 Nodes).
    let wells = well_known_dimensions();
    let mut out: NodeDims = Vec::with_capacity(wells.len() + 3);
    out.extend(wells.iter().map(|(key, dim)| (*dim, label(key))));
    let managed = !label(labels::NODEPOOL).is_empty();
    out.push(("managed", text(if managed { "true" } else { "false" })));
    out.push((
        "node_name",
        text(node.metadata.name.as_deref().unwrap_or_default()),
    ));
    out.push(("phase", text(phase.unwrap_or_default())));
    out.sort_by_key(|(k, _)| *k);
    out
}

/// Registers the six `karpenter_nodes_*` resource families, in [`resource_rows`]' order, as
/// views of the rows the returned [`ServedNodes`] will hold.
fn register_node_views(r: &mut Registry) -> ServedNodes {
    let served = ServedNodes::default();
    let families = [
        (
            "karpenter_nodes_allocatable",
            "What each node offers to pods (its allocatable), by resource.",
        ),
        (
            "karpenter_nodes_total_pod_requests",
            "The sum of the requests of the pods bound to each node, DaemonSet pods included, by resource.",
        ),
        (
            "karpenter_nodes_total_pod_limits",
            "The sum of the limits of the pods bound to each node, DaemonSet pods included, by resource.",
        ),
        (
            "karpenter_nodes_total_daemon_requests",
            "The sum of the requests of the DaemonSet pods bound to each node, by resource.",
        ),
        (
            "karpenter_nodes_total_daemon_limits",
            "The sum of the limits of the DaemonSet pods bound to each node, by resource.",
        ),
        (
            "karpenter_nodes_system_overhead",
            "What each node keeps back for the system and kubelet: its capacity less its allocatable, by resource.",
        ),
    ];
    for (field, (name, help)) in families.into_iter().enumerate() {
        let view = NodeView {
            served: served.clone(),
            field,
        };
        register(r, name, help, view);
    }
    served
}

#[cfg(test)]
pub(crate) mod tests;
