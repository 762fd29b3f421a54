//! The provisioner's families:
//! - `karpenter_nodeclaims_created_total{reason, nodepool, min_values_relaxed}`: the claims
//!   it launched;
//! - `karpenter_scheduler_scheduling_duration_seconds`, `_queue_depth` and
//!   `_unschedulable_pods_count`: each pass's simulation, its pending pods and those left
//!   unplaced; `karpenter_pods_scheduling_decision_duration_seconds`: from first seeing a
//!   pending pod to its first decision;
//! - `karpenter_scheduler_unfinished_work_seconds{controller, scheduling_id}`: how long the
//!   running scheduling simulation has been going, read at every scrape; the series goes when
//!   the simulation ends, as upstream's does;
//! - `karpenter_scheduler_pending_pods_by_effective_zone_count{controller, zone}`: the last
//!   pass's pending pods by the zone they can go to (`core::scheduling::effective_zone`: a
//!   zone, `flexible` or `none`), replaced as a whole each pass;
//! - `karpenter_scheduler_ignored_pods_count`: the pending pods the last pass left out because
//!   they do not read as pods the scheduler can place (an unsupported operator, a bad value),
//!   upstream's pods that fail pre-validation.

use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::metrics::{
    Counters, Gauges, Histograms, Labels, Metrics, Snapshot, duration_histogram, durations,
    register, registered,
};

/// The controller label upstream puts on scheduler metrics.
const PROVISIONER: &str = "provisioner";

pub struct ProvisionerMetrics {
    nodeclaims_created: Counters,
    scheduling_duration: Histograms,
    queue_depth: Gauges,
    unschedulable_pods: Gauges,
    pending_by_zone: Gauges,
    decision_duration: Histogram,
    unfinished: Gauges,
    ignored: Gauge<f64, AtomicU64>,
    /// The running simulation's scheduling id and when it began.
    running: Mutex<Option<(String, Instant)>>,
    snapshot: Snapshot,
}

impl ProvisionerMetrics {
    pub(crate) fn register(r: &mut Registry, snapshot: &Snapshot) -> Self {
        ProvisionerMetrics {
            nodeclaims_created: registered(
                r,
                "karpenter_nodeclaims_created",
                "NodeClaims this controller has created, by why (provisioned, or a disruption's replacement), NodePool and whether minValues was relaxed.",
            ),
            scheduling_duration: register(
                r,
                "karpenter_scheduler_scheduling_duration_seconds",
                "Seconds each scheduling simulation took, for provisioning and for disruption alike, by calling loop.",
                durations(),
            ),
            queue_depth: registered(
                r,
                "karpenter_scheduler_queue_depth",
                "Pods still waiting to be placed in the scheduling simulation running now, by calling loop and simulation.",
            ),
            unschedulable_pods: registered(
                r,
                "karpenter_scheduler_unschedulable_pods_count",
                "Pods the last scheduling simulation could place nowhere, by calling loop.",
            ),
            pending_by_zone: registered(
                r,
                "karpenter_scheduler_pending_pods_by_effective_zone_count",
                "Pending pods by the zones left to them once their node affinity, their volumes' zones and their topology spreads are combined: one zone's name, 'flexible' for more than one, or 'none' for no zone at all.",
            ),
            decision_duration: register(
                r,
                "karpenter_pods_scheduling_decision_duration_seconds",
                "Seconds from this controller first seeing a pending pod to its first scheduling simulation of it.",
                duration_histogram(),
            ),
            unfinished: registered(
                r,
                "karpenter_scheduler_unfinished_work_seconds",
                "Seconds the scheduling simulation running now has taken so far, by calling loop.",
            ),
            ignored: registered(
                r,
                "karpenter_scheduler_ignored_pods_count",
                "Pending pods the provisioner left out of its simulation (invalid, or waiting on something it cannot provide).",
            ),
            running: Mutex::new(None),
            snapshot: snapshot.clone(),
        }
    }

    /// Sets the running simulation's series; called before every scrape.
    pub(crate) fn refresh(&self) {
        let running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((id, began)) = running.as_ref() {
            self.unfinished
                .get_or_create(&labels(id))
                .set(began.elapsed().as_secs_f64());
        }
    }

    /// A claim launched for `reason`, saying whether minValues had to be relaxed.
    pub fn nodeclaim_created(&self, reason: &str, nodepool: &str, min_values_relaxed: bool) {
        self.nodeclaims_created
            .get_or_create(&vec![
                ("reason", reason.to_owned()),
                ("nodepool", nodepool.to_owned()),
                ("min_values_relaxed", min_values_relaxed.to_string()),
            ])
            .inc();
    }

    pub fn scheduling_duration(&self, seconds: f64) {
        self.scheduling_duration
            .get_or_create(&vec![("controller", PROVISIONER.to_owned())])
            .observe(seconds);
    }

    /// The depth of the current run's queue; earlier runs' series are dropped so the family
    /// holds the current run only.
    pub fn queue_depth(&self, pending: usize) {
        let _guard = self.snapshot.hold();
        self.queue_depth.clear();
        self.queue_depth
            .get_or_create(&labels(""))
            .set(pending as f64);
    }

    /// The pass's pending pods by effective zone; the last pass's zones that have none now
    /// go.
    pub fn pending_by_zone(&self, counts: &std::collections::BTreeMap<String, usize>) {
        let _guard = self.snapshot.hold();
        self.pending_by_zone.clear();
        for (zone, n) in counts {
            self.pending_by_zone
                .get_or_create(&vec![
                    ("controller", PROVISIONER.to_owned()),
                    ("zone", zone.clone()),
                ])
                .set(*n as f64);
        }
    }

    pub fn unschedulable_pods(&self, n: usize) {
        self.unschedulable_pods
            .get_or_create(&vec![("controller", PROVISIONER.to_owned())])
            .set(n as f64);
    }

    /// From the provisioner first seeing a pending pod to its first scheduling decision.
    pub fn pod_scheduling_decision(&self, seconds: f64) {
        self.decision_duration.observe(seconds);
    }

    /// The pending pods the last provisioning pass could not read.
    pub fn ignored_pods(&self, n: usize) {
        self.ignored.set(n as f64);
    }
}

fn labels(scheduling_id: &str) -> Labels {
    vec![
        ("controller", PROVISIONER.to_owned()),
        ("scheduling_id", scheduling_id.to_owned()),
    ]
}

/// Alive while a simulation runs; dropping it (however the simulation ends) removes the
/// series.
pub struct Simulating<'a> {
    metrics: &'a Metrics,
    id: String,
}

impl<'a> Simulating<'a> {
    pub fn begin(metrics: &'a Metrics, scheduling_id: &str) -> Self {
        let m = &metrics.provisioner;
        *m.running.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((scheduling_id.to_owned(), Instant::now()));
        Simulating {
            metrics,
            id: scheduling_id.to_owned(),
        }
    }
}

impl Drop for Simulating<'_> {
    fn drop(&mut self) {
        let m = &self.metrics.provisioner;
        *m.running.lock().unwrap_or_else(|e| e.into_inner()) = None;
        m.unfinished.remove(&labels(&self.id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::has;

    #[test]
    fn the_provisioners_families_carry_upstream_labels() {
        let m = Metrics::new();
        let p = &m.provisioner;
        p.nodeclaim_created("provisioned", "default", false);
        p.nodeclaim_created("provisioned", "default", false);
        p.scheduling_duration(0.2);
        p.scheduling_duration(0.3);
        p.queue_depth(7);
        p.queue_depth(3);
        p.unschedulable_pods(2);
        assert!(has(
            &m,
            r#"karpenter_nodeclaims_created_total{reason="provisioned",nodepool="default",min_values_relaxed="false"} 2"#
        ));
        assert!(has(
            &m,
            r#"karpenter_scheduler_scheduling_duration_seconds_count{controller="provisioner"} 2"#
        ));
        assert!(has(
            &m,
            r#"karpenter_scheduler_scheduling_duration_seconds_sum{controller="provisioner"} 0.5"#
        ));
        assert!(has(
            &m,
            r#"karpenter_scheduler_queue_depth{controller="provisioner",scheduling_id=""} 3.0"#
        ));
        assert!(has(
            &m,
            r#"karpenter_scheduler_unschedulable_pods_count{controller="provisioner"} 2.0"#
        ));
    }

    fn unfinished(m: &Metrics) -> Vec<String> {
        m.encode()
            .lines()
            .filter(|l| l.starts_with("karpenter_scheduler_unfinished_work_seconds{"))
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn a_running_simulation_shows_until_it_ends() {
        let m = Metrics::new();
        {
            let _sim = Simulating::begin(&m, "");
            std::thread::sleep(std::time::Duration::from_millis(20));
            let rows = unfinished(&m);
            assert_eq!(rows.len(), 1, "{rows:?}");
            let v: f64 = rows[0].rsplit(' ').next().unwrap().parse().unwrap();
            assert!(v >= 0.02, "{rows:?}");
            assert!(rows[0].contains(r#"controller="provisioner",scheduling_id="""#));
        }
        assert!(unfinished(&m).is_empty());
    }
}
