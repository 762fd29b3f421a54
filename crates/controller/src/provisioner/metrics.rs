//! The provisioner's own scheduler metrics:
//! - `karpenter_scheduler_unfinished_work_seconds{controller, scheduling_id}`: how long the
//!   running scheduling simulation has been going, read at every scrape; the series goes when
//!   the simulation ends, as upstream's does;
//! - `karpenter_scheduler_ignored_pods_count`: the pending pods the last pass left out because
//!   they do not read as pods the scheduler can place (an unsupported operator, a bad value),
//!   upstream's pods that fail pre-validation.

use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::metrics::{Gauges, Labels, Metrics, register};

pub(crate) struct SchedulerMetrics {
    unfinished: Gauges,
    ignored: Gauge<f64, AtomicU64>,
    /// The running simulation's scheduling id and when it began.
    running: Mutex<Option<(String, Instant)>>,
}

impl SchedulerMetrics {
    pub(crate) fn register(r: &mut Registry) -> Self {
        let unfinished = Gauges::default();
        register(
            r,
            "karpenter_scheduler_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been considered in the scheduling simulation duration.",
            unfinished.clone(),
        );
        let ignored = Gauge::<f64, AtomicU64>::default();
        register(
            r,
            "karpenter_scheduler_ignored_pods_count",
            "Number of pods ignored during scheduling by Karpenter",
            ignored.clone(),
        );
        SchedulerMetrics {
            unfinished,
            ignored,
            running: Mutex::new(None),
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
}

/// The pending pods the last provisioning pass could not read.
pub fn ignored_pods(metrics: &Metrics, n: usize) {
    metrics.scheduler.ignored.set(n as f64);
}

fn labels(scheduling_id: &str) -> Labels {
    vec![
        ("controller", "provisioner".to_owned()),
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
        let m = &metrics.scheduler;
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
        let m = &self.metrics.scheduler;
        *m.running.lock().unwrap_or_else(|e| e.into_inner()) = None;
        m.unfinished.remove(&labels(&self.id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
