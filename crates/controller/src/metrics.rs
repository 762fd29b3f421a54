//! Prometheus metrics under Karpenter's names, types and label keys, so existing dashboards
//! and alerts keep working. Every family lives in one explicit registry owned by [`Metrics`];
//! nothing is registered globally. Each loop keeps its families, and the methods that record
//! them, beside it (`termination/metrics.rs`, `state/metrics.rs`, ...); [`Metrics`] holds one
//! part per loop (`metrics.termination.node_terminated(..)`) and the one family many loops
//! count in, `karpenter_nodeclaims_disrupted_total`.
//!
//! prometheus-client appends `_total` to counters when encoding, so counters are registered
//! without the suffix. It has no summary type: the two upstream summaries
//! (`karpenter_pods_startup_duration_seconds`, `karpenter_nodes_termination_duration_seconds`)
//! are [`summary::Summary`]s, encoded after the registry. Every registered family is encoded,
//! its `# HELP` and `# TYPE` even before it has a series (OpenMetrics allows a family with no
//! samples), so a scrape names every family the controller exports and its type.

use std::sync::{Arc, Mutex, MutexGuard};

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, LabelSetEncoder, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

pub mod loops;
pub mod summary;
pub use loops::{Reconciled, Reconciler};

/// A label set: keys are fixed per family, values come from the call.
pub(crate) type Labels = Vec<(&'static str, String)>;
pub(crate) type Counters = Family<Labels, Counter>;
pub(crate) type Gauges = Family<Labels, Gauge<f64, std::sync::atomic::AtomicU64>>;
pub(crate) type Histograms = Family<Labels, Histogram, fn() -> Histogram>;

/// A label set built once and shared by every series that carries it, in one family or
/// several: a pointer each instead of a copy of its strings each. Encoded as `L` is.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub(crate) struct Shared<L>(pub(crate) Arc<L>);

impl<L: EncodeLabelSet> EncodeLabelSet for Shared<L> {
    fn encode(&self, encoder: &mut LabelSetEncoder<'_>) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }
}

/// Gauges whose series share their label sets.
pub(crate) type SharedGauges<L> = Family<Shared<L>, Gauge<f64, std::sync::atomic::AtomicU64>>;

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

/// Registers `metric` so that its descriptor is always encoded; hands back the caller's
/// handle on it.
pub(crate) fn register<M>(r: &mut Registry, name: &str, help: &str, metric: M) -> M
where
    M: EncodeMetric + Clone + std::fmt::Debug + Send + Sync + 'static,
{
    r.register(name, help, Described(metric.clone()));
    metric
}

/// Registers a new, empty family (or counter, or gauge).
pub(crate) fn registered<M>(r: &mut Registry, name: &str, help: &str) -> M
where
    M: EncodeMetric + Clone + Default + std::fmt::Debug + Send + Sync + 'static,
{
    register(r, name, help, M::default())
}

pub(crate) fn duration_histogram() -> Histogram {
    Histogram::new(DURATION_BUCKETS)
}

/// A family of [`duration_histogram`]s.
pub(crate) fn durations() -> Histograms {
    Family::new_with_constructor(duration_histogram)
}

/// Upstream's resource label spelling: lowercase with `-` as `_`.
pub(crate) fn resource_label(resource: &str) -> String {
    resource.to_lowercase().replace('-', "_")
}

/// Serialises the clear-then-fill of snapshot gauges against each other and against
/// encoding, so a scrape never sees a half-replaced set. Shared by the parts that replace
/// families as a whole.
#[derive(Clone, Default)]
pub(crate) struct Snapshot(Arc<Mutex<()>>);

impl Snapshot {
    pub(crate) fn hold(&self) -> MutexGuard<'_, ()> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Every metric family the controller exports, one part per loop.
pub struct Metrics {
    registry: Registry,
    snapshot: Snapshot,
    nodeclaims_disrupted: Counters,
    pub provisioner: crate::provisioner::metrics::ProvisionerMetrics,
    pub lifecycle: crate::lifecycle::metrics::LifecycleMetrics,
    pub termination: crate::termination::metrics::TerminationMetrics,
    pub disruption: crate::disruption::metrics::DisruptionMetrics,
    pub interruption: crate::interruption::metrics::InterruptionMetrics,
    pub state: crate::state::metrics::StateMetrics,
    pub(crate) ages: crate::state::ages::AgeMetrics,
    pub(crate) conditions: crate::state::conditions::ConditionMetrics,
    pub cloud: crate::metered::metrics::CloudMetrics,
    pub offerings: crate::cloud_metrics::metrics::OfferingMetrics,
    pub repair: crate::repair::metrics::RepairMetrics,
    pub zonal_shift: crate::zonalshift::metrics::ZonalShiftMetrics,
    pub leader: crate::leader::metrics::LeaderMetrics,
    pub events: crate::events::EventMetrics,
    pub faults: crate::faults::metrics::FaultMetrics,
    loops: loops::LoopMetrics,
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
        let r = &mut registry;
        let snapshot = Snapshot::default();
        let nodeclaims_disrupted = registered(
            r,
            "karpenter_nodeclaims_disrupted",
            "NodeClaims a disruption removed, by reason, NodePool, capacity type, consolidation policy and termination mode.",
        );
        Metrics {
            nodeclaims_disrupted,
            provisioner: crate::provisioner::metrics::ProvisionerMetrics::register(r, &snapshot),
            lifecycle: crate::lifecycle::metrics::LifecycleMetrics::register(r),
            termination: crate::termination::metrics::TerminationMetrics::register(r),
            disruption: crate::disruption::metrics::DisruptionMetrics::register(r, &snapshot),
            interruption: crate::interruption::metrics::InterruptionMetrics::register(r),
            state: crate::state::metrics::StateMetrics::register(r, &snapshot),
            ages: crate::state::ages::AgeMetrics::register(r),
            conditions: crate::state::conditions::ConditionMetrics::register(r),
            cloud: crate::metered::metrics::CloudMetrics::register(r),
            offerings: crate::cloud_metrics::metrics::OfferingMetrics::register(r, &snapshot),
            repair: crate::repair::metrics::RepairMetrics::register(r),
            zonal_shift: crate::zonalshift::metrics::ZonalShiftMetrics::register(r),
            leader: crate::leader::metrics::LeaderMetrics::register(r),
            events: crate::events::EventMetrics::register(r),
            faults: crate::faults::metrics::FaultMetrics::register(r),
            loops: loops::LoopMetrics::register(r),
            registry: with_build_info(registry),
            snapshot,
        }
    }

    /// The OpenMetrics text served on `GET /metrics`.
    pub fn encode(&self) -> String {
        self.loops.refresh();
        self.provisioner.refresh();
        let _guard = self.snapshot.hold();
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        // The summaries go before the end marker.
        let eof = out.rfind("# EOF").unwrap_or(out.len());
        let tail = out.split_off(eof);
        self.state.encode_summaries(&mut out);
        self.termination.encode_summaries(&mut out);
        out.push_str(&tail);
        out
    }

    /// A NodeClaim disrupted by any loop (disruption, interruption, expiry, repair, ...).
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
}

/// `registry` with `karpenter_build_info` registered last, set once.
fn with_build_info(mut registry: Registry) -> Registry {
    let build_info: Gauges = registered(
        &mut registry,
        "karpenter_build_info",
        "Always 1; its labels name the version, commit and toolchain this controller was built from.",
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
    registry
}

/// Go's spelling of the architecture, as upstream's `goarch` label carries it.
fn arch_label() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// The sample lines (not comments) of the encoded text; for the parts' tests.
#[cfg(test)]
pub(crate) fn samples(m: &Metrics) -> Vec<String> {
    m.encode()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

/// Whether the encoded text has the sample `line`; for the parts' tests.
#[cfg(test)]
pub(crate) fn has(m: &Metrics, line: &str) -> bool {
    samples(m).iter().any(|l| l == line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disruptions_and_build_info_carry_upstream_labels() {
        let m = Metrics::new();
        m.nodeclaim_disrupted_with_mode(
            "underutilized",
            "default",
            "spot",
            "WhenEmptyOrUnderutilized",
            "graceful",
        );
        assert!(has(
            &m,
            r#"karpenter_nodeclaims_disrupted_total{reason="underutilized",nodepool="default",capacity_type="spot",consolidation_policy="WhenEmptyOrUnderutilized",termination_mode="graceful"} 1"#
        ));
        let s = samples(&m);
        assert!(
            s.iter()
                .any(|l| l.starts_with("karpenter_build_info{version=") && l.ends_with(" 1.0")),
            "{s:?}"
        );
    }

    #[test]
    fn types_are_declared_as_upstream() {
        // Families without series are not encoded, so give each one a sample.
        let m = Metrics::new();
        m.provisioner.nodeclaim_created("provisioned", "a", false);
        m.state
            .set_nodes(&[Arc::new(crate::state::metrics::tests::node("n", 1.0, 0.5))]);
        m.state.set_pods(&[Default::default()]);
        m.provisioner.scheduling_duration(1.0);
        m.disruption.evaluation("empty", "empty", 1.0);
        m.cloud.call("", "Get", "sim", 0.1, Some("NotFound"));
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
}
