//! Prometheus metrics under Karpenter's names, types and label keys, so existing dashboards
//! and alerts keep working. Every family lives in one explicit registry owned by [`Metrics`];
//! nothing is registered globally.
//!
//! prometheus-client appends `_total` to counters when encoding, so counters are registered
//! without the suffix. It has no summary type: the two upstream summaries
//! (`karpenter_pods_startup_duration_seconds`, `karpenter_nodes_termination_duration_seconds`)
//! are [`summary::Summary`]s, encoded after the registry. Every registered family is encoded,
//! its `# HELP` and `# TYPE` even before it has a series (OpenMetrics allows a family with no
//! samples), so a scrape names every family the controller exports and its type.

use std::collections::BTreeMap;
use std::sync::Mutex;

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

mod faults;
pub mod loops;
pub mod offerings;
pub mod operations;
mod provider;
mod repair;
pub mod summary;
mod zonal_shift;
pub use loops::{Reconciled, Reconciler};
pub use offerings::OfferingRows;

/// A label set: keys are fixed per family, values come from the call.
pub(crate) type Labels = Vec<(&'static str, String)>;
type Counters = Family<Labels, Counter>;
pub(crate) type Gauges = Family<Labels, Gauge<f64, std::sync::atomic::AtomicU64>>;
type Histograms = Family<Labels, Histogram, fn() -> Histogram>;

/// Seconds, from 5 ms to an hour: covers a scheduling pass as well as a drain.
const DURATION_BUCKETS: [f64; 27] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 45.0, 60.0, 90.0,
    120.0, 180.0, 240.0, 300.0, 450.0, 600.0, 900.0, 1200.0, 1800.0, 2700.0, 3600.0,
];

/// A family encoded even while it has no series.
#[derive(Debug)]
struct Described<M>(M);

impl<M: EncodeMetric> EncodeMetric for Described<M> {
    fn encode(&self, encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }

    fn metric_type(&self) -> MetricType {
        self.0.metric_type()
    }

    fn is_empty(&self) -> bool {
        false
    }
}

/// Registers `metric` so that its descriptor is always encoded.
pub(crate) fn register<M>(r: &mut Registry, name: &str, help: &str, metric: M)
where
    M: EncodeMetric + std::fmt::Debug + Send + Sync + 'static,
{
    r.register(name, help, Described(metric));
}

fn duration_histogram() -> Histogram {
    Histogram::new(DURATION_BUCKETS)
}

/// The controller label upstream puts on scheduler metrics.
const PROVISIONER: &str = "provisioner";

/// One node's resource gauges (`karpenter_nodes_*`). CPU is in cores; memory and storage in
/// bytes; pods and extended resources as counts. Resource names are normalised the way
/// upstream does (lowercase, `-` to `_`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeGauge {
    pub node_name: String,
    pub nodepool: String,
    pub zone: String,
    pub instance_type: String,
    pub capacity_type: String,
    pub arch: String,
    pub allocatable: BTreeMap<String, f64>,
    pub pod_requests: BTreeMap<String, f64>,
    pub pod_limits: BTreeMap<String, f64>,
    pub daemon_requests: BTreeMap<String, f64>,
    pub daemon_limits: BTreeMap<String, f64>,
    /// Capacity less allocatable.
    pub system_overhead: BTreeMap<String, f64>,
}

/// One pod's row in `karpenter_pods_state`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodGauge {
    pub name: String,
    pub namespace: String,
    pub owner: String,
    pub node: String,
    pub nodepool: String,
    pub zone: String,
    pub arch: String,
    pub instance_type: String,
    pub capacity_type: String,
    pub phase: String,
    pub scheduled: bool,
    pub ready: bool,
}

/// Every metric family the controller exports.
pub struct Metrics {
    registry: Registry,
    nodeclaims_created: Counters,
    nodeclaims_terminated: Counters,
    nodeclaims_disrupted: Counters,
    nodes_created: Counters,
    nodes_terminated: Counters,
    nodes_allocatable: Gauges,
    nodes_pod_requests: Gauges,
    nodes_pod_limits: Gauges,
    nodes_daemon_requests: Gauges,
    nodes_daemon_limits: Gauges,
    nodes_system_overhead: Gauges,
    cluster_utilization: Gauges,
    cluster_node_count: Gauge<f64, std::sync::atomic::AtomicU64>,
    cluster_synced: Gauge<f64, std::sync::atomic::AtomicU64>,
    pods_state: Gauges,
    pods_startup: summary::Summary,
    pods_drained: Counters,
    eviction_requests: Counters,
    scheduling_duration: Histograms,
    queue_depth: Gauges,
    unschedulable_pods: Gauges,
    disruption_evaluation: Histograms,
    disruption_decisions: Counters,
    disruption_decisions_by_nodepool: Counters,
    disruption_eligible_nodes: Gauges,
    disruption_failed_validations: Counters,
    nodepools_usage: Gauges,
    nodepools_limit: Gauges,
    cloudprovider_duration: Histograms,
    cloudprovider_errors: Counters,
    nodeclaims_termination_duration: Histograms,
    nodes_termination_duration: summary::Summary,
    nodes_lifetime: Histograms,
    nodes_drained: Counters,
    pods_bound_duration: Histogram,
    nodepools_allowed_disruptions: Gauges,
    consolidation_timeouts: Counters,
    disruption_queue_failures: Counters,
    nodeclaims_instance_termination_duration: Histograms,
    pods_scheduling_decision_duration: Histogram,
    interruption: InterruptionMetrics,
    offerings: offerings::OfferingMetrics,
    provider: provider::ProviderMetrics,
    events: EventMetrics,
    zonal_shift: zonal_shift::ZonalShiftMetrics,
    repair: repair::RepairMetrics,
    faults: faults::FaultMetrics,
    operations: operations::OperationMetrics,
    loops: loops::LoopMetrics,
    /// The cluster-state metrics loop's clocks (`crate::state::ages`).
    pub(crate) ages: crate::state::ages::AgeMetrics,
    /// The provisioner's running simulation (`crate::provisioner::metrics`).
    pub(crate) scheduler: crate::provisioner::metrics::SchedulerMetrics,
    pub(crate) disruption: crate::disruption::metrics::DisruptionMetrics,
    /// The gauge rows last published from the index, so a tick updates only what changed.
    gauge_rows: Mutex<crate::state::gauges::Published>,
    /// Serialises the clear-then-fill of snapshot gauges against each other and against
    /// encoding, so a scrape never sees a half-replaced set.
    snapshot: Mutex<()>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Creates and registers every family.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let counters = |r: &mut Registry, name: &str, help: &str| {
            let f = Counters::default();
            register(r, name, help, f.clone());
            f
        };
        let gauges = |r: &mut Registry, name: &str, help: &str| {
            let f = Gauges::default();
            register(r, name, help, f.clone());
            f
        };
        let histograms = |r: &mut Registry, name: &str, help: &str| {
            let f: Histograms = Family::new_with_constructor(duration_histogram);
            register(r, name, help, f.clone());
            f
        };
        let r = &mut registry;
        let nodeclaims_created = counters(
            r,
            "karpenter_nodeclaims_created",
            "Number of nodeclaims created in total by Karpenter. Labeled by reason the nodeclaim was created and the owning nodepool.",
        );
        let nodeclaims_terminated = counters(
            r,
            "karpenter_nodeclaims_terminated",
            "Number of nodeclaims terminated in total by Karpenter. Labeled by the owning nodepool.",
        );
        let nodeclaims_disrupted = counters(
            r,
            "karpenter_nodeclaims_disrupted",
            "Number of nodeclaims disrupted in total by Karpenter. Labeled by reason the nodeclaim was disrupted and the owning nodepool.",
        );
        let nodes_created = counters(
            r,
            "karpenter_nodes_created",
            "Number of nodes created in total by Karpenter. Labeled by owning nodepool.",
        );
        let nodes_terminated = counters(
            r,
            "karpenter_nodes_terminated",
            "Number of nodes terminated in total by Karpenter. Labeled by owning nodepool.",
        );
        let nodes_allocatable = gauges(
            r,
            "karpenter_nodes_allocatable",
            "Node allocatable are the resources allocatable by nodes.",
        );
        let nodes_pod_requests = gauges(
            r,
            "karpenter_nodes_total_pod_requests",
            "Node total pod requests are the resources requested by pods bound to nodes, including DaemonSet pods.",
        );
        let nodes_pod_limits = gauges(
            r,
            "karpenter_nodes_total_pod_limits",
            "Node total pod limits are the resources specified by pod limits, including DaemonSet pods.",
        );
        let nodes_daemon_requests = gauges(
            r,
            "karpenter_nodes_total_daemon_requests",
            "Node total daemon requests are the resource requested by DaemonSet pods bound to nodes.",
        );
        let nodes_daemon_limits = gauges(
            r,
            "karpenter_nodes_total_daemon_limits",
            "Node total daemon limits are the resources specified by DaemonSet pod limits.",
        );
        let nodes_system_overhead = gauges(
            r,
            "karpenter_nodes_system_overhead",
            "Node system daemon overhead are the resources reserved for system overhead, the difference between the node's capacity and allocatable values are reported by the status.",
        );
        let cluster_utilization = gauges(
            r,
            "karpenter_cluster_utilization_percent",
            "Utilization of allocatable resources by pod requests",
        );
        let cluster_node_count = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
        register(
            r,
            "karpenter_cluster_state_node_count",
            "Current count of nodes in cluster state",
            cluster_node_count.clone(),
        );
        let cluster_synced = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
        register(
            r,
            "karpenter_cluster_state_synced",
            "Returns 1 if cluster state is synced and 0 otherwise. Synced checks that nodeclaims and nodes that are stored in the APIServer have the same representation as Karpenter's cluster state",
            cluster_synced.clone(),
        );
        let pods_state = gauges(
            r,
            "karpenter_pods_state",
            "Pod state is the current state of pods. This metric can be used several ways as it is labeled by the pod name, namespace, owner, node, nodepool name, zone, architecture, capacity type, instance type and pod phase.",
        );
        let pods_startup = summary::Summary::new(
            "karpenter_pods_startup_duration_seconds",
            "The time from pod creation until the pod is running.",
            None,
        );
        let pods_drained = counters(
            r,
            "karpenter_pods_drained",
            "Number of pods drained during node termination by Karpenter. Labeled by the reason the node was terminated.",
        );
        let eviction_requests = counters(
            r,
            "karpenter_pods_eviction_requests",
            "The number of eviction requests made by Karpenter. Labeled by the response code.",
        );
        let scheduling_duration = histograms(
            r,
            "karpenter_scheduler_scheduling_duration_seconds",
            "Duration of scheduling simulations used for deprovisioning and provisioning in seconds.",
        );
        let queue_depth = gauges(
            r,
            "karpenter_scheduler_queue_depth",
            "The number of pods currently waiting to be scheduled.",
        );
        let unschedulable_pods = gauges(
            r,
            "karpenter_scheduler_unschedulable_pods_count",
            "The number of unschedulable Pods.",
        );
        let disruption_evaluation = histograms(
            r,
            "karpenter_voluntary_disruption_decision_evaluation_duration_seconds",
            "Duration of the disruption decision evaluation process in seconds. Labeled by method and consolidation type.",
        );
        let disruption_decisions = counters(
            r,
            "karpenter_voluntary_disruption_decisions",
            "Number of disruption decisions performed. Labeled by disruption decision, reason, and consolidation type.",
        );
        let disruption_decisions_by_nodepool = counters(
            r,
            "karpenter_voluntary_disruption_decisions_by_nodepool",
            "Number of disruption decisions performed per nodepool. Labeled by nodepool, disruption decision, reason, and consolidation type.",
        );
        let disruption_eligible_nodes = gauges(
            r,
            "karpenter_voluntary_disruption_eligible_nodes",
            "Number of nodes eligible for disruption by Karpenter. Labeled by disruption reason.",
        );
        let disruption_failed_validations = counters(
            r,
            "karpenter_voluntary_disruption_failed_validations",
            "Number of candidates that were selected for disruption but failed validation.",
        );
        let nodepools_usage = gauges(
            r,
            "karpenter_nodepools_usage",
            "The amount of resources that have been provisioned for a nodepool. Labeled by nodepool name and resource type.",
        );
        let nodepools_limit = gauges(
            r,
            "karpenter_nodepools_limit",
            "Limits specified on the nodepool that restrict the quantity of resources provisioned. Labeled by nodepool name and resource type.",
        );
        let cloudprovider_duration = histograms(
            r,
            "karpenter_cloudprovider_duration_seconds",
            "Duration of cloud provider method calls. Labeled by the controller, method name and provider.",
        );
        let cloudprovider_errors = counters(
            r,
            "karpenter_cloudprovider_errors",
            "Total number of errors returned from CloudProvider calls.",
        );
        let nodeclaims_termination_duration = histograms(
            r,
            "karpenter_nodeclaims_termination_duration_seconds",
            "Duration of NodeClaim termination in seconds.",
        );
        let nodes_termination_duration = summary::Summary::new(
            "karpenter_nodes_termination_duration_seconds",
            "The time taken between a node's deletion request and the removal of its finalizer",
            Some("nodepool"),
        );
        let nodes_lifetime = histograms(
            r,
            "karpenter_nodes_lifetime_duration_seconds",
            "The lifetime duration of the nodes since creation.",
        );
        let nodes_drained = counters(
            r,
            "karpenter_nodes_drained",
            "The total number of nodes drained by Karpenter",
        );
        let pods_bound_duration = duration_histogram();
        register(
            r,
            "karpenter_pods_bound_duration_seconds",
            "The time from pod creation until the pod is bound.",
            pods_bound_duration.clone(),
        );
        let nodepools_allowed_disruptions = gauges(
            r,
            "karpenter_nodepools_allowed_disruptions",
            "The number of nodes for a given NodePool that can be concurrently disrupting at a point in time. Labeled by NodePool. Note that allowed disruptions can change very rapidly, as new nodes may be created and others may be deleted at any point.",
        );
        let consolidation_timeouts = counters(
            r,
            "karpenter_voluntary_disruption_consolidation_timeouts",
            "Number of times the Consolidation algorithm has reached a timeout. Labeled by consolidation type.",
        );
        let disruption_queue_failures = counters(
            r,
            "karpenter_voluntary_disruption_queue_failures",
            "The number of times that an enqueued disruption decision failed. Labeled by disruption method.",
        );
        let nodeclaims_instance_termination_duration = histograms(
            r,
            "karpenter_nodeclaims_instance_termination_duration_seconds",
            "Duration of CloudProvider Instance termination in seconds.",
        );
        let pods_scheduling_decision_duration = duration_histogram();
        register(
            r,
            "karpenter_pods_scheduling_decision_duration_seconds",
            "The time it takes for Karpenter to first try to schedule a pod after it's been seen.",
            pods_scheduling_decision_duration.clone(),
        );
        let interruption = InterruptionMetrics::register(r);
        let events = EventMetrics::register(r);
        let zonal_shift = zonal_shift::ZonalShiftMetrics::register(r);
        let repair = repair::RepairMetrics::register(r);
        let faults = faults::FaultMetrics::register(r);
        let offerings = offerings::OfferingMetrics::register(r);
        let provider = provider::ProviderMetrics::register(r);
        let operations = operations::OperationMetrics::register(r);
        let loops = loops::LoopMetrics::register(r);
        let ages = crate::state::ages::AgeMetrics::register(r);
        let scheduler = crate::provisioner::metrics::SchedulerMetrics::register(r);
        let disruption = crate::disruption::metrics::DisruptionMetrics::register(r);
        let build_info = Gauges::default();
        register(
            r,
            "karpenter_build_info",
            "A metric with a constant '1' value labeled by version from which karpenter was built.",
            build_info.clone(),
        );
        build_info
            .get_or_create(&vec![
                ("version", env!("CARGO_PKG_VERSION").to_owned()),
                ("goversion", String::new()),
                ("goarch", arch_label().to_owned()),
                (
                    "commit",
                    option_env!("NODEWRIGHT_COMMIT").unwrap_or("").to_owned(),
                ),
            ])
            .set(1.0);
        Metrics {
            registry,
            nodeclaims_termination_duration,
            nodes_termination_duration,
            nodes_lifetime,
            nodes_drained,
            pods_bound_duration,
            nodepools_allowed_disruptions,
            consolidation_timeouts,
            disruption_queue_failures,
            nodeclaims_instance_termination_duration,
            pods_scheduling_decision_duration,
            interruption,
            events,
            zonal_shift,
            repair,
            faults,
            offerings,
            provider,
            operations,
            loops,
            ages,
            scheduler,
            disruption,
            gauge_rows: Mutex::default(),
            nodeclaims_created,
            nodeclaims_terminated,
            nodeclaims_disrupted,
            nodes_created,
            nodes_terminated,
            nodes_allocatable,
            nodes_pod_requests,
            nodes_pod_limits,
            nodes_daemon_requests,
            nodes_daemon_limits,
            nodes_system_overhead,
            cluster_utilization,
            cluster_node_count,
            cluster_synced,
            pods_state,
            pods_startup,
            pods_drained,
            eviction_requests,
            scheduling_duration,
            queue_depth,
            unschedulable_pods,
            disruption_evaluation,
            disruption_decisions,
            disruption_decisions_by_nodepool,
            disruption_eligible_nodes,
            disruption_failed_validations,
            nodepools_usage,
            nodepools_limit,
            cloudprovider_duration,
            cloudprovider_errors,
            snapshot: Mutex::new(()),
        }
    }

    /// The OpenMetrics text served on `GET /metrics`.
    pub fn encode(&self) -> String {
        self.loops.refresh();
        self.scheduler.refresh();
        let _guard = self.snapshot.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        // The summaries go before the end marker.
        let eof = out.rfind("# EOF").unwrap_or(out.len());
        let tail = out.split_off(eof);
        self.pods_startup.encode(&mut out);
        self.nodes_termination_duration.encode(&mut out);
        out.push_str(&tail);
        out
    }

    pub fn nodeclaim_created(&self, reason: &str, nodepool: &str) {
        self.nodeclaim_created_with(reason, nodepool, false);
    }

    /// As [`Metrics::nodeclaim_created`], saying whether minValues had to be relaxed.
    pub fn nodeclaim_created_with(&self, reason: &str, nodepool: &str, min_values_relaxed: bool) {
        self.nodeclaims_created
            .get_or_create(&vec![
                ("reason", reason.to_owned()),
                ("nodepool", nodepool.to_owned()),
                ("min_values_relaxed", min_values_relaxed.to_string()),
            ])
            .inc();
    }

    pub fn nodeclaim_terminated(&self, nodepool: &str, capacity_type: &str, zone: &str) {
        self.nodeclaims_terminated
            .get_or_create(&vec![
                ("nodepool", nodepool.to_owned()),
                ("capacity_type", capacity_type.to_owned()),
                ("zone", zone.to_owned()),
            ])
            .inc();
    }

    /// A voluntary, graceful disruption; see [`Metrics::nodeclaim_disrupted_with_mode`].
    pub fn nodeclaim_disrupted(
        &self,
        reason: &str,
        nodepool: &str,
        capacity_type: &str,
        consolidation_policy: &str,
    ) {
        self.nodeclaim_disrupted_with_mode(
            reason,
            nodepool,
            capacity_type,
            consolidation_policy,
            "graceful",
        );
    }

    pub fn nodeclaim_disrupted_with_mode(
        &self,
        reason: &str,
        nodepool: &str,
        capacity_type: &str,
        consolidation_policy: &str,
        termination_mode: &str,
    ) {
        self.nodeclaims_disrupted
            .get_or_create(&vec![
                ("reason", reason.to_owned()),
                ("nodepool", nodepool.to_owned()),
                ("capacity_type", capacity_type.to_owned()),
                ("consolidation_policy", consolidation_policy.to_owned()),
                ("termination_mode", termination_mode.to_owned()),
            ])
            .inc();
    }

    pub fn node_created(&self, nodepool: &str, zone: &str) {
        self.nodes_created
            .get_or_create(&vec![
                ("nodepool", nodepool.to_owned()),
                ("zone", zone.to_owned()),
            ])
            .inc();
    }

    pub fn node_terminated(&self, nodepool: &str, zone: &str) {
        self.nodes_terminated
            .get_or_create(&vec![
                ("nodepool", nodepool.to_owned()),
                ("zone", zone.to_owned()),
            ])
            .inc();
    }

    pub fn pod_startup(&self, seconds: f64) {
        self.pods_startup.observe("", seconds);
    }

    pub fn pods_drained(&self, reason: &str) {
        self.pods_drained
            .get_or_create(&vec![("reason", reason.to_owned())])
            .inc();
    }

    /// One eviction request answered with HTTP `code`.
    pub fn eviction_request(&self, code: u16) {
        self.eviction_requests
            .get_or_create(&vec![("code", code.to_string())])
            .inc();
    }

    pub fn scheduling_duration(&self, seconds: f64) {
        self.scheduling_duration
            .get_or_create(&vec![("controller", PROVISIONER.to_owned())])
            .observe(seconds);
    }

    pub fn queue_depth(&self, pending: usize) {
        self.queue_depth_for("", pending);
    }

    /// The depth of one scheduling run's queue; earlier runs' series are dropped so the
    /// family holds the current run only.
    pub fn queue_depth_for(&self, scheduling_id: &str, pending: usize) {
        let _guard = self.snapshot.lock().unwrap_or_else(|e| e.into_inner());
        self.queue_depth.clear();
        self.queue_depth
            .get_or_create(&vec![
                ("controller", PROVISIONER.to_owned()),
                ("scheduling_id", scheduling_id.to_owned()),
            ])
            .set(pending as f64);
    }

    pub fn unschedulable_pods(&self, n: usize) {
        self.unschedulable_pods
            .get_or_create(&vec![("controller", PROVISIONER.to_owned())])
            .set(n as f64);
    }

    /// One executed disruption decision (`delete` or `replace`); counted both overall and
    /// per NodePool.
    pub fn disruption_decision(
        &self,
        decision: &str,
        reason: &str,
        consolidation_type: &str,
        nodepool: &str,
    ) {
        self.disruption_decisions
            .get_or_create(&vec![
                ("decision", decision.to_owned()),
                ("reason", reason.to_owned()),
                ("consolidation_type", consolidation_type.to_owned()),
            ])
            .inc();
        self.disruption_decisions_by_nodepool
            .get_or_create(&vec![
                ("nodepool", nodepool.to_owned()),
                ("decision", decision.to_owned()),
                ("reason", reason.to_owned()),
                ("consolidation_type", consolidation_type.to_owned()),
            ])
            .inc();
    }

    pub fn disruption_evaluation(&self, reason: &str, consolidation_type: &str, seconds: f64) {
        self.disruption_evaluation
            .get_or_create(&vec![
                ("reason", reason.to_owned()),
                ("consolidation_type", consolidation_type.to_owned()),
            ])
            .observe(seconds);
    }

    pub fn disruption_failed_validation(&self, consolidation_type: &str) {
        self.disruption_failed_validations
            .get_or_create(&vec![("consolidation_type", consolidation_type.to_owned())])
            .inc();
    }

    pub fn eligible_nodes(&self, reason: &str, n: usize) {
        self.disruption_eligible_nodes
            .get_or_create(&vec![("reason", reason.to_owned())])
            .set(n as f64);
    }

    pub fn cluster_state(&self, synced: bool, node_count: usize) {
        self.cluster_synced.set(if synced { 1.0 } else { 0.0 });
        self.cluster_node_count.set(node_count as f64);
    }

    pub fn nodepool_usage(&self, nodepool: &str, resource_type: &str, value: f64) {
        self.nodepools_usage
            .get_or_create(&vec![
                ("resource_type", resource_label(resource_type)),
                ("nodepool", nodepool.to_owned()),
            ])
            .set(value);
    }

    pub fn nodepool_limit(&self, nodepool: &str, resource_type: &str, value: f64) {
        self.nodepools_limit
            .get_or_create(&vec![
                ("resource_type", resource_label(resource_type)),
                ("nodepool", nodepool.to_owned()),
            ])
            .set(value);
    }

    /// Replaces every `karpenter_nodes_*` resource gauge and the cluster utilisation with
    /// the given nodes, so deleted nodes disappear from the scrape.
    pub fn set_nodes(&self, nodes: &[NodeGauge]) {
        let _guard = self.snapshot.lock().unwrap_or_else(|e| e.into_inner());
        for family in [
            &self.nodes_allocatable,
            &self.nodes_pod_requests,
            &self.nodes_pod_limits,
            &self.nodes_daemon_requests,
            &self.nodes_daemon_limits,
            &self.nodes_system_overhead,
            &self.cluster_utilization,
        ] {
            family.clear();
        }
        let mut allocatable_total: BTreeMap<String, f64> = BTreeMap::new();
        let mut requested_total: BTreeMap<String, f64> = BTreeMap::new();
        for node in nodes {
            for (family, values) in [
                (&self.nodes_allocatable, &node.allocatable),
                (&self.nodes_pod_requests, &node.pod_requests),
                (&self.nodes_pod_limits, &node.pod_limits),
                (&self.nodes_daemon_requests, &node.daemon_requests),
                (&self.nodes_daemon_limits, &node.daemon_limits),
                (&self.nodes_system_overhead, &node.system_overhead),
            ] {
                for (resource, value) in values {
                    family
                        .get_or_create(&node_labels(node, resource))
                        .set(*value);
                }
            }
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

    /// Replaces `karpenter_pods_state` with one series (value 1) per given pod.
    pub fn set_pods(&self, pods: &[PodGauge]) {
        let _guard = self.snapshot.lock().unwrap_or_else(|e| e.into_inner());
        self.pods_state.clear();
        for pod in pods {
            self.pods_state.get_or_create(&pod_labels(pod)).set(1.0);
        }
    }

    /// Replaces one pod's `karpenter_pods_state` series: `old` (as last set) goes, `new`
    /// comes; either may be absent (a pod added or deleted).
    pub fn replace_pod(&self, old: Option<&PodGauge>, new: Option<&PodGauge>) {
        let _guard = self.snapshot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = old {
            self.pods_state.remove(&pod_labels(old));
        }
        if let Some(new) = new {
            self.pods_state.get_or_create(&pod_labels(new)).set(1.0);
        }
    }

    /// Replaces one node's `karpenter_nodes_*` resource series, as [`Metrics::replace_pod`]
    /// does for a pod. The cluster utilisation is set apart ([`Metrics::set_utilization`]).
    pub fn replace_node(&self, old: Option<&NodeGauge>, new: Option<&NodeGauge>) {
        let _guard = self.snapshot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = old {
            for (family, values) in [
                (&self.nodes_allocatable, &old.allocatable),
                (&self.nodes_pod_requests, &old.pod_requests),
                (&self.nodes_pod_limits, &old.pod_limits),
                (&self.nodes_daemon_requests, &old.daemon_requests),
                (&self.nodes_daemon_limits, &old.daemon_limits),
                (&self.nodes_system_overhead, &old.system_overhead),
            ] {
                for resource in values.keys() {
                    family.remove(&node_labels(old, resource));
                }
            }
        }
        if let Some(new) = new {
            for (family, values) in [
                (&self.nodes_allocatable, &new.allocatable),
                (&self.nodes_pod_requests, &new.pod_requests),
                (&self.nodes_pod_limits, &new.pod_limits),
                (&self.nodes_daemon_requests, &new.daemon_requests),
                (&self.nodes_daemon_limits, &new.daemon_limits),
                (&self.nodes_system_overhead, &new.system_overhead),
            ] {
                for (resource, value) in values {
                    family
                        .get_or_create(&node_labels(new, resource))
                        .set(*value);
                }
            }
        }
    }

    /// Replaces `karpenter_cluster_utilization_percent` with the given percentages by
    /// resource name.
    pub fn set_utilization(&self, percent: &BTreeMap<String, f64>) {
        let _guard = self.snapshot.lock().unwrap_or_else(|e| e.into_inner());
        self.cluster_utilization.clear();
        for (resource, value) in percent {
            self.cluster_utilization
                .get_or_create(&vec![("resource_type", resource_label(resource))])
                .set(*value);
        }
    }

    /// The gauge rows last published by `state::gauges::set_all`.
    pub(crate) fn gauge_rows(&self) -> &Mutex<crate::state::gauges::Published> {
        &self.gauge_rows
    }

    /// One call into the cloud provider; `error` names the failure kind when it failed.
    pub fn cloudprovider_call(
        &self,
        method: &str,
        provider: &str,
        seconds: f64,
        error: Option<&str>,
    ) {
        self.cloudprovider_call_from("", method, provider, seconds, error);
    }

    /// As [`Metrics::cloudprovider_call`], naming the calling controller.
    pub fn cloudprovider_call_from(
        &self,
        controller: &str,
        method: &str,
        provider: &str,
        seconds: f64,
        error: Option<&str>,
    ) {
        let mut labels = vec![
            ("controller", controller.to_owned()),
            ("method", method.to_owned()),
            ("provider", provider.to_owned()),
        ];
        self.cloudprovider_duration
            .get_or_create(&labels)
            .observe(seconds);
        if let Some(error) = error {
            labels.push(("error", error.to_owned()));
            self.cloudprovider_errors.get_or_create(&labels).inc();
        }
    }
}

impl Metrics {
    pub fn nodeclaim_termination_duration(&self, nodepool: &str, seconds: f64) {
        self.nodeclaims_termination_duration
            .get_or_create(&vec![("nodepool", nodepool.to_owned())])
            .observe(seconds);
    }

    pub fn node_termination_duration(&self, nodepool: &str, seconds: f64) {
        self.nodes_termination_duration.observe(nodepool, seconds);
    }

    pub fn node_lifetime(&self, nodepool: &str, seconds: f64) {
        self.nodes_lifetime
            .get_or_create(&vec![("nodepool", nodepool.to_owned())])
            .observe(seconds);
    }

    pub fn node_drained(&self, nodepool: &str) {
        self.nodes_drained
            .get_or_create(&vec![("nodepool", nodepool.to_owned())])
            .inc();
    }

    pub fn pod_bound(&self, seconds: f64) {
        self.pods_bound_duration.observe(seconds);
    }

    /// From the terminate call to the cloud reporting the instance gone.
    pub fn nodeclaim_instance_termination_duration(&self, nodepool: &str, seconds: f64) {
        self.nodeclaims_instance_termination_duration
            .get_or_create(&vec![("nodepool", nodepool.to_owned())])
            .observe(seconds);
    }

    /// From the provisioner first seeing a pending pod to its first scheduling decision.
    pub fn pod_scheduling_decision(&self, seconds: f64) {
        self.pods_scheduling_decision_duration.observe(seconds);
    }

    pub fn allowed_disruptions(&self, nodepool: &str, reason: &str, n: usize) {
        self.nodepools_allowed_disruptions
            .get_or_create(&vec![
                ("nodepool", nodepool.to_owned()),
                ("reason", reason.to_owned()),
            ])
            .set(n as f64);
    }

    /// Replaces `karpenter_nodepools_allowed_disruptions` with one series per
    /// `(nodepool, reason, allowed)`, so a deleted NodePool's series go away.
    pub fn set_allowed_disruptions(&self, rows: &[(String, &str, u32)]) {
        let _guard = self.snapshot.lock().unwrap_or_else(|e| e.into_inner());
        self.nodepools_allowed_disruptions.clear();
        for (nodepool, reason, n) in rows {
            self.nodepools_allowed_disruptions
                .get_or_create(&vec![
                    ("nodepool", nodepool.clone()),
                    ("reason", (*reason).to_owned()),
                ])
                .set(f64::from(*n));
        }
    }

    /// A started disruption command that failed (a replacement went away, or it timed out)
    /// and was rolled back.
    pub fn disruption_queue_failure(&self, decision: &str, reason: &str, consolidation_type: &str) {
        self.disruption_queue_failures
            .get_or_create(&vec![
                ("decision", decision.to_owned()),
                ("reason", reason.to_owned()),
                ("consolidation_type", consolidation_type.to_owned()),
            ])
            .inc();
    }

    pub fn consolidation_timeout(&self, consolidation_type: &str) {
        self.consolidation_timeouts
            .get_or_create(&vec![("consolidation_type", consolidation_type.to_owned())])
            .inc();
    }
}

/// The interruption queue's families (`karpenter_interruption_*`), the instance-status
/// poller's, and the provider's launch failures.
struct InterruptionMetrics {
    received: Counters,
    deleted: Counter,
    queue_duration: Histogram,
    status_unhealthy: Counters,
    launch_failures: Counters,
}

impl InterruptionMetrics {
    fn register(r: &mut Registry) -> Self {
        let received = Counters::default();
        register(
            r,
            "karpenter_interruption_received_messages",
            "Count of messages received from the interruption queue. Broken down by message type.",
            received.clone(),
        );
        let deleted = Counter::default();
        register(
            r,
            "karpenter_interruption_deleted_messages",
            "Count of messages deleted from the interruption queue.",
            deleted.clone(),
        );
        let queue_duration = duration_histogram();
        register(
            r,
            "karpenter_interruption_message_queue_duration_seconds",
            "Time from an interruption event being emitted until the controller handles it.",
            queue_duration.clone(),
        );
        let status_unhealthy = Counters::default();
        register(
            r,
            "karpenter_interruption_instance_status_unhealthy",
            "Instances found failing an EC2 status check or with a scheduled event, by category.",
            status_unhealthy.clone(),
        );
        let launch_failures = Counters::default();
        register(
            r,
            "karpenter_cloudprovider_instance_launch_failures",
            "Errors the cloud returned for launch attempts, by zone, zone id, capacity type and error code.",
            launch_failures.clone(),
        );
        InterruptionMetrics {
            received,
            deleted,
            queue_duration,
            status_unhealthy,
            launch_failures,
        }
    }
}

impl Metrics {
    /// A message read from the interruption queue, by kind (`no_op` included).
    pub fn interruption_received(&self, message_type: &str) {
        self.interruption
            .received
            .get_or_create(&vec![("message_type", message_type.to_owned())])
            .inc();
    }

    /// A message deleted from the interruption queue after it was handled.
    pub fn interruption_deleted(&self) {
        self.interruption.deleted.inc();
    }

    /// How long the message's event waited between being emitted and being handled.
    pub fn interruption_queue_duration(&self, seconds: f64) {
        self.interruption.queue_duration.observe(seconds);
    }

    /// An instance newly found unhealthy in `category` (`InstanceStatus`, `SystemStatus`,
    /// `EventStatus`).
    pub fn instance_status_unhealthy(&self, category: &str) {
        self.interruption
            .status_unhealthy
            .get_or_create(&vec![("category", category.to_owned())])
            .inc();
    }

    /// One error the cloud returned for a launch attempt.
    pub fn launch_failure(&self, zone: &str, zone_id: &str, capacity_type: &str, reason: &str) {
        self.interruption
            .launch_failures
            .get_or_create(&vec![
                ("zone", zone.to_owned()),
                ("zone_id", zone_id.to_owned()),
                ("capacity_type", capacity_type.to_owned()),
                ("reason", reason.to_owned()),
            ])
            .inc();
    }
}

/// Kubernetes events the writer could not take. Upstream has no such family (client-go drops
/// silently), so it carries the project's own prefix.
struct EventMetrics {
    dropped: Counters,
}

impl EventMetrics {
    fn register(r: &mut Registry) -> Self {
        let dropped = Counters::default();
        register(
            r,
            "nodewright_events_dropped",
            "Number of Kubernetes events dropped because the event writer's queue was full. Labeled by event reason.",
            dropped.clone(),
        );
        EventMetrics { dropped }
    }
}

impl Metrics {
    /// An event dropped on a full writer queue.
    pub fn event_dropped(&self, reason: &str) {
        self.events
            .dropped
            .get_or_create(&vec![("reason", reason.to_owned())])
            .inc();
    }
}

/// Go's spelling of the architecture, as upstream's `goarch` label carries it.
fn arch_label() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// Upstream's resource label spelling: lowercase with `-` as `_`.
fn resource_label(resource: &str) -> String {
    resource.to_lowercase().replace('-', "_")
}

fn pod_labels(pod: &PodGauge) -> Labels {
    vec![
        ("name", pod.name.clone()),
        ("namespace", pod.namespace.clone()),
        ("owner", pod.owner.clone()),
        ("node", pod.node.clone()),
        ("scheduled", pod.scheduled.to_string()),
        ("nodepool", pod.nodepool.clone()),
        ("zone", pod.zone.clone()),
        ("arch", pod.arch.clone()),
        ("capacity_type", pod.capacity_type.clone()),
        ("instance_type", pod.instance_type.clone()),
        ("phase", pod.phase.clone()),
        ("ready", pod.ready.to_string()),
        ("managed", (!pod.nodepool.is_empty()).to_string()),
    ]
}

fn node_labels(node: &NodeGauge, resource: &str) -> Labels {
    vec![
        ("node_name", node.node_name.clone()),
        ("nodepool", node.nodepool.clone()),
        ("zone", node.zone.clone()),
        ("instance_type", node.instance_type.clone()),
        ("capacity_type", node.capacity_type.clone()),
        ("arch", node.arch.clone()),
        ("managed", (!node.nodepool.is_empty()).to_string()),
        ("resource_type", resource_label(resource)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sample lines (not comments) of the encoded text.
    fn samples(m: &Metrics) -> Vec<String> {
        m.encode()
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(str::to_owned)
            .collect()
    }

    fn has(m: &Metrics, line: &str) -> bool {
        samples(m).iter().any(|l| l == line)
    }

    #[test]
    fn counters_carry_upstream_names_and_labels() {
        let m = Metrics::new();
        m.nodeclaim_created("provisioned", "default");
        m.nodeclaim_created("provisioned", "default");
        m.nodeclaim_terminated("default", "spot", "us-east-1a");
        m.nodeclaim_disrupted(
            "underutilized",
            "default",
            "spot",
            "WhenEmptyOrUnderutilized",
        );
        m.node_created("default", "us-east-1a");
        m.node_terminated("default", "us-east-1b");
        m.pods_drained("drifted");
        m.eviction_request(429);
        m.disruption_failed_validation("single");
        assert!(has(
            &m,
            r#"karpenter_nodeclaims_created_total{reason="provisioned",nodepool="default",min_values_relaxed="false"} 2"#
        ));
        assert!(has(
            &m,
            r#"karpenter_nodeclaims_terminated_total{nodepool="default",capacity_type="spot",zone="us-east-1a"} 1"#
        ));
        assert!(has(
            &m,
            r#"karpenter_nodeclaims_disrupted_total{reason="underutilized",nodepool="default",capacity_type="spot",consolidation_policy="WhenEmptyOrUnderutilized",termination_mode="graceful"} 1"#
        ));
        assert!(has(
            &m,
            r#"karpenter_nodes_created_total{nodepool="default",zone="us-east-1a"} 1"#
        ));
        assert!(has(
            &m,
            r#"karpenter_nodes_terminated_total{nodepool="default",zone="us-east-1b"} 1"#
        ));
        assert!(has(
            &m,
            r#"karpenter_pods_drained_total{reason="drifted"} 1"#
        ));
        assert!(has(
            &m,
            r#"karpenter_pods_eviction_requests_total{code="429"} 1"#
        ));
        assert!(has(
            &m,
            r#"karpenter_voluntary_disruption_failed_validations_total{consolidation_type="single"} 1"#
        ));
    }

    #[test]
    fn types_are_declared_as_upstream() {
        // Families without series are not encoded, so give each one a sample.
        let m = Metrics::new();
        m.nodeclaim_created("provisioned", "a");
        m.set_nodes(&[node("n", 1.0, 0.5)]);
        m.set_pods(&[PodGauge::default()]);
        m.scheduling_duration(1.0);
        m.disruption_evaluation("empty", "empty", 1.0);
        m.cloudprovider_call("Get", "sim", 0.1, Some("NotFound"));
        let text = m.encode();
        for (name, kind) in [
            ("karpenter_nodeclaims_created", "counter"),
            ("karpenter_nodes_allocatable", "gauge"),
            ("karpenter_pods_state", "gauge"),
            (
                "karpenter_scheduler_scheduling_duration_seconds",
                "histogram",
            ),
            (
                "karpenter_voluntary_disruption_decision_evaluation_duration_seconds",
                "histogram",
            ),
            ("karpenter_cloudprovider_duration_seconds", "histogram"),
            ("karpenter_cloudprovider_errors", "counter"),
            ("karpenter_cluster_state_synced", "gauge"),
        ] {
            let line = format!("# TYPE {name} {kind}");
            assert!(text.lines().any(|l| l == line), "missing {line}");
        }
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn disruption_decisions_count_overall_and_per_nodepool() {
        let m = Metrics::new();
        m.disruption_decision("replace", "underutilized", "single", "a");
        m.disruption_decision("delete", "empty", "empty", "b");
        m.disruption_evaluation("underutilized", "multi", 0.3);
        m.eligible_nodes("drifted", 4);
        assert!(has(
            &m,
            r#"karpenter_voluntary_disruption_decisions_total{decision="replace",reason="underutilized",consolidation_type="single"} 1"#
        ));
        assert!(has(
            &m,
            r#"karpenter_voluntary_disruption_decisions_by_nodepool_total{nodepool="b",decision="delete",reason="empty",consolidation_type="empty"} 1"#
        ));
        assert!(has(
            &m,
            r#"karpenter_voluntary_disruption_decision_evaluation_duration_seconds_count{reason="underutilized",consolidation_type="multi"} 1"#
        ));
        assert!(has(
            &m,
            r#"karpenter_voluntary_disruption_decision_evaluation_duration_seconds_bucket{le="0.5",reason="underutilized",consolidation_type="multi"} 1"#
        ));
        assert!(has(
            &m,
            r#"karpenter_voluntary_disruption_eligible_nodes{reason="drifted"} 4.0"#
        ));
    }

    #[test]
    fn histograms_accumulate_count_and_sum() {
        let m = Metrics::new();
        m.scheduling_duration(0.2);
        m.scheduling_duration(0.3);
        m.pod_startup(42.0);
        assert!(has(
            &m,
            r#"karpenter_scheduler_scheduling_duration_seconds_count{controller="provisioner"} 2"#
        ));
        assert!(has(
            &m,
            r#"karpenter_scheduler_scheduling_duration_seconds_sum{controller="provisioner"} 0.5"#
        ));
        assert!(has(&m, "karpenter_pods_startup_duration_seconds_count 1"));
        assert!(has(&m, "karpenter_pods_startup_duration_seconds_sum 42.0"));
    }

    #[test]
    fn gauges_hold_the_latest_value() {
        let m = Metrics::new();
        m.queue_depth(7);
        m.queue_depth(3);
        m.unschedulable_pods(2);
        m.cluster_state(true, 12);
        m.nodepool_usage("default", "cpu", 16.0);
        m.nodepool_limit("default", "ephemeral-storage", 1e12);
        assert!(has(
            &m,
            r#"karpenter_scheduler_queue_depth{controller="provisioner",scheduling_id=""} 3.0"#
        ));
        assert!(has(
            &m,
            r#"karpenter_scheduler_unschedulable_pods_count{controller="provisioner"} 2.0"#
        ));
        assert!(has(&m, "karpenter_cluster_state_synced 1.0"));
        assert!(has(&m, "karpenter_cluster_state_node_count 12.0"));
        assert!(has(
            &m,
            r#"karpenter_nodepools_usage{resource_type="cpu",nodepool="default"} 16.0"#
        ));
        assert!(has(
            &m,
            r#"karpenter_nodepools_limit{resource_type="ephemeral_storage",nodepool="default"} 1000000000000.0"#
        ));
        m.cluster_state(false, 0);
        assert!(has(&m, "karpenter_cluster_state_synced 0.0"));
    }

    fn node(name: &str, cpu: f64, requested: f64) -> NodeGauge {
        NodeGauge {
            node_name: name.into(),
            nodepool: "default".into(),
            zone: "us-east-1a".into(),
            instance_type: "m5.large".into(),
            capacity_type: "on-demand".into(),
            arch: "amd64".into(),
            allocatable: BTreeMap::from([("cpu".into(), cpu)]),
            pod_requests: BTreeMap::from([("cpu".into(), requested)]),
            ..NodeGauge::default()
        }
    }

    #[test]
    fn set_nodes_replaces_the_previous_set_and_computes_utilisation() {
        let m = Metrics::new();
        m.set_nodes(&[node("a", 2.0, 1.0), node("b", 2.0, 0.0)]);
        assert!(has(
            &m,
            r#"karpenter_nodes_allocatable{node_name="a",nodepool="default",zone="us-east-1a",instance_type="m5.large",capacity_type="on-demand",arch="amd64",managed="true",resource_type="cpu"} 2.0"#
        ));
        assert!(has(
            &m,
            r#"karpenter_cluster_utilization_percent{resource_type="cpu"} 25.0"#
        ));
        m.set_nodes(&[node("b", 2.0, 2.0)]);
        let s = samples(&m);
        assert!(!s.iter().any(|l| l.contains(r#"node_name="a""#)), "{s:?}");
        assert!(has(
            &m,
            r#"karpenter_nodes_total_pod_requests{node_name="b",nodepool="default",zone="us-east-1a",instance_type="m5.large",capacity_type="on-demand",arch="amd64",managed="true",resource_type="cpu"} 2.0"#
        ));
        assert!(has(
            &m,
            r#"karpenter_cluster_utilization_percent{resource_type="cpu"} 100.0"#
        ));
    }

    #[test]
    fn set_pods_replaces_the_previous_set() {
        let m = Metrics::new();
        let pod = |name: &str| PodGauge {
            name: name.into(),
            namespace: "web".into(),
            owner: "ReplicaSet/web-1".into(),
            node: "n1".into(),
            nodepool: "default".into(),
            phase: "Running".into(),
            scheduled: true,
            ready: true,
            ..PodGauge::default()
        };
        m.set_pods(&[pod("p1"), pod("p2")]);
        assert_eq!(
            samples(&m)
                .iter()
                .filter(|l| l.starts_with("karpenter_pods_state{"))
                .count(),
            2
        );
        m.set_pods(&[pod("p2")]);
        let rows: Vec<String> = samples(&m)
            .into_iter()
            .filter(|l| l.starts_with("karpenter_pods_state{"))
            .collect();
        assert_eq!(
            rows,
            vec![
                r#"karpenter_pods_state{name="p2",namespace="web",owner="ReplicaSet/web-1",node="n1",scheduled="true",nodepool="default",zone="",arch="",capacity_type="",instance_type="",phase="Running",ready="true",managed="true"} 1.0"#
            ]
        );
    }

    #[test]
    fn build_info_and_lifecycle_extras() {
        let m = Metrics::new();
        m.nodeclaim_termination_duration("default", 12.0);
        m.node_drained("default");
        m.allowed_disruptions("default", "underutilized", 3);
        m.consolidation_timeout("multi");
        let s = samples(&m);
        assert!(
            s.iter()
                .any(|l| l.starts_with("karpenter_build_info{version=") && l.ends_with(" 1.0")),
            "{s:?}"
        );
        assert!(has(
            &m,
            r#"karpenter_nodeclaims_termination_duration_seconds_count{nodepool="default"} 1"#
        ));
        assert!(has(
            &m,
            r#"karpenter_nodes_drained_total{nodepool="default"} 1"#
        ));
        assert!(has(
            &m,
            r#"karpenter_nodepools_allowed_disruptions{nodepool="default",reason="underutilized"} 3.0"#
        ));
        assert!(has(
            &m,
            r#"karpenter_voluntary_disruption_consolidation_timeouts_total{consolidation_type="multi"} 1"#
        ));
    }

    #[test]
    fn cloudprovider_errors_are_counted_only_on_failure() {
        let m = Metrics::new();
        m.cloudprovider_call("Create", "sim", 0.1, None);
        m.cloudprovider_call("Create", "sim", 0.2, Some("InsufficientCapacityError"));
        assert!(has(
            &m,
            r#"karpenter_cloudprovider_duration_seconds_count{controller="",method="Create",provider="sim"} 2"#
        ));
        assert!(has(
            &m,
            r#"karpenter_cloudprovider_errors_total{controller="",method="Create",provider="sim",error="InsufficientCapacityError"} 1"#
        ));
    }
}
