//! controller-runtime's `controller_runtime_*` and client-go's `workqueue_*` families for
//! each of the controller's loops, which upstream's performance dashboard reads. A loop is
//! one controller with one worker: each pass is a reconcile, and the pass the loop is about
//! to run (or running) is its queue's one item. Every loop's pass goes through
//! [`Reconciler::pass`], so the families mean the same for all of them:
//!
//! - `controller_runtime_reconcile_total{controller,result}`: passes by `success` or `error`
//!   (a loop has no requeue of its own: its next pass comes on its schedule);
//!   `controller_runtime_reconcile_errors_total{controller}` the failed ones;
//!   `controller_runtime_reconcile_time_seconds{controller}` how long each took;
//!   `controller_runtime_reconcile_panics_total{controller}` the passes that panicked (the
//!   supervisor starts the loop again, as controller-runtime recovers the reconcile).
//! - `controller_runtime_max_concurrent_reconciles{controller}` is 1, and
//!   `controller_runtime_active_workers{controller}` 1 while a pass runs.
//! - `workqueue_adds_total{name,controller}` counts passes begun, `workqueue_depth` is 0 (a
//!   pass is taken the moment it is due), `workqueue_queue_duration_seconds` is that wait,
//!   `workqueue_work_duration_seconds` the pass, `workqueue_retries_total` the passes run
//!   again after a failure, and `workqueue_unfinished_work_seconds` and
//!   `workqueue_longest_running_processor_seconds` how long the running pass has been going.
//!
//! Series are created with the loop (counts at 0), as controller-runtime does when a
//! controller starts, so a dashboard sees every loop before its first pass.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::{Counters, Gauges, Histograms, Metrics, register, registered};

/// controller-runtime's reconcile-time buckets, in seconds.
const RECONCILE_BUCKETS: [f64; 40] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

fn reconcile_histogram() -> Histogram {
    Histogram::new(RECONCILE_BUCKETS)
}

/// client-go's workqueue latency buckets: 10 ns to 1000 s, by tens.
fn workqueue_histogram() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        1e-8, 10.0, 12,
    ))
}

pub(super) struct LoopMetrics {
    reconcile_total: Counters,
    reconcile_errors: Counters,
    reconcile_panics: Counters,
    reconcile_time: Histograms,
    max_concurrent: Gauges,
    active_workers: Gauges,
    depth: Gauges,
    adds: Counters,
    queue_duration: Histograms,
    work_duration: Histograms,
    retries: Counters,
    unfinished: Gauges,
    longest: Gauges,
    /// When each loop's running pass began; read at every scrape.
    running: Mutex<BTreeMap<&'static str, Instant>>,
}

impl LoopMetrics {
    pub(super) fn register(r: &mut Registry) -> Self {
        let mut counters = |name: &str, help: &str| -> Counters { registered(r, name, help) };
        let reconcile_total = counters(
            "controller_runtime_reconcile",
            "Passes each of the controller's loops has run, by loop and result.",
        );
        let reconcile_errors = counters(
            "controller_runtime_reconcile_errors",
            "Passes of each loop that ended in an error, by loop.",
        );
        let reconcile_panics = counters(
            "controller_runtime_reconcile_panics",
            "Passes of each loop that panicked (the supervisor restarts the loop), by loop.",
        );
        let adds = counters("workqueue_adds", "Items put on each loop's queue, by loop.");
        let retries = counters(
            "workqueue_retries",
            "Items put back on each loop's queue to be retried, by loop.",
        );
        let mut gauges = |name: &str, help: &str| -> Gauges { registered(r, name, help) };
        let max_concurrent = gauges(
            "controller_runtime_max_concurrent_reconciles",
            "How many passes each loop may run at once, by loop.",
        );
        let active_workers = gauges(
            "controller_runtime_active_workers",
            "Passes each loop is running now, by loop.",
        );
        let depth = gauges("workqueue_depth", "Current depth of workqueue");
        let unfinished = gauges(
            "workqueue_unfinished_work_seconds",
            "Seconds spent so far on the passes each loop has not finished; a value that keeps growing points at a stuck pass.",
        );
        let longest = gauges(
            "workqueue_longest_running_processor_seconds",
            "Seconds the oldest unfinished pass of each loop has run.",
        );
        let reconcile_time = register(
            r,
            "controller_runtime_reconcile_time_seconds",
            "Seconds each pass of each loop took, by loop.",
            Family::new_with_constructor(reconcile_histogram as fn() -> Histogram),
        );
        let mut latencies = |name: &str, help: &str| -> Histograms {
            register(
                r,
                name,
                help,
                Family::new_with_constructor(workqueue_histogram),
            )
        };
        let queue_duration = latencies(
            "workqueue_queue_duration_seconds",
            "Seconds an item waited on a loop's queue before a pass took it, by loop.",
        );
        let work_duration = latencies(
            "workqueue_work_duration_seconds",
            "Seconds a loop took to handle one item from its queue, by loop.",
        );
        LoopMetrics {
            reconcile_total,
            reconcile_errors,
            reconcile_panics,
            reconcile_time,
            max_concurrent,
            active_workers,
            depth,
            adds,
            queue_duration,
            work_duration,
            retries,
            unfinished,
            longest,
            running: Mutex::default(),
        }
    }

    /// Sets the running passes' unfinished-work gauges; called before every scrape.
    pub(super) fn refresh(&self) {
        let running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        for (controller, began) in running.iter() {
            let seconds = now.duration_since(*began).as_secs_f64();
            let labels = queue_labels(controller);
            self.unfinished.get_or_create(&labels).set(seconds);
            self.longest.get_or_create(&labels).set(seconds);
        }
    }
}

fn controller_label(controller: &'static str) -> super::Labels {
    vec![("controller", controller.to_owned())]
}

/// client-go names a controller's queue after the controller.
fn queue_labels(controller: &'static str) -> super::Labels {
    vec![
        ("name", controller.to_owned()),
        ("controller", controller.to_owned()),
    ]
}

/// Whether a pass failed, for the `result` label and the retry count.
pub trait Reconciled {
    fn failed(&self) -> bool;
}

impl Reconciled for () {
    fn failed(&self) -> bool {
        false
    }
}

impl<T, E> Reconciled for Result<T, E> {
    fn failed(&self) -> bool {
        self.is_err()
    }
}

/// A pass over many objects failed when any object's reconcile did.
impl<K, T, E> Reconciled for BTreeMap<K, Result<T, E>> {
    fn failed(&self) -> bool {
        self.values().any(Result::is_err)
    }
}

/// One loop's handle on its `controller_runtime_*` and `workqueue_*` series.
#[derive(Clone)]
pub struct Reconciler {
    controller: &'static str,
    metrics: Arc<Metrics>,
}

impl Reconciler {
    /// The loop `controller`, its series created at zero.
    pub fn new(metrics: Arc<Metrics>, controller: &'static str) -> Self {
        let m = &metrics.loops;
        let c = controller_label(controller);
        m.max_concurrent.get_or_create(&c).set(1.0);
        m.active_workers.get_or_create(&c).set(0.0);
        let _ = m.reconcile_errors.get_or_create(&c);
        let _ = m.reconcile_panics.get_or_create(&c);
        for result in ["success", "error"] {
            let _ = m
                .reconcile_total
                .get_or_create(&with_result(controller, result));
        }
        let q = queue_labels(controller);
        m.depth.get_or_create(&q).set(0.0);
        let _ = m.adds.get_or_create(&q);
        let _ = m.retries.get_or_create(&q);
        m.unfinished.get_or_create(&q).set(0.0);
        m.longest.get_or_create(&q).set(0.0);
        Reconciler {
            controller,
            metrics,
        }
    }

    /// Runs one pass, due since `due`, and records it.
    pub async fn pass<T: Reconciled>(&self, due: Instant, work: impl Future<Output = T>) -> T {
        let m = &self.metrics.loops;
        let (c, q) = (
            controller_label(self.controller),
            queue_labels(self.controller),
        );
        m.adds.get_or_create(&q).inc();
        let began = Instant::now();
        m.queue_duration
            .get_or_create(&q)
            .observe(began.duration_since(due).as_secs_f64());
        m.active_workers.get_or_create(&c).set(1.0);
        lock(&m.running).insert(self.controller, began);
        let running = Running(self);
        let out = work.await;
        std::mem::forget(running);
        lock(&m.running).remove(self.controller);
        let seconds = began.elapsed().as_secs_f64();
        m.active_workers.get_or_create(&c).set(0.0);
        m.unfinished.get_or_create(&q).set(0.0);
        m.longest.get_or_create(&q).set(0.0);
        m.work_duration.get_or_create(&q).observe(seconds);
        m.reconcile_time.get_or_create(&c).observe(seconds);
        let result = if out.failed() { "error" } else { "success" };
        m.reconcile_total
            .get_or_create(&with_result(self.controller, result))
            .inc();
        if out.failed() {
            m.reconcile_errors.get_or_create(&c).inc();
            m.retries.get_or_create(&q).inc();
        }
        out
    }

    /// Runs one pass that is due now.
    pub async fn now<T: Reconciled>(&self, work: impl Future<Output = T>) -> T {
        self.pass(Instant::now(), work).await
    }
}

/// Alive while a pass runs: dropped by a panic in the pass, it counts the panic and marks
/// the loop idle (a pass cancelled at shutdown is not a panic).
struct Running<'a>(&'a Reconciler);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        let m = &self.0.metrics.loops;
        let controller = self.0.controller;
        lock(&m.running).remove(controller);
        m.active_workers
            .get_or_create(&controller_label(controller))
            .set(0.0);
        if std::thread::panicking() {
            m.reconcile_panics
                .get_or_create(&controller_label(controller))
                .inc();
        }
    }
}

fn with_result(controller: &'static str, result: &str) -> super::Labels {
    vec![
        ("controller", controller.to_owned()),
        ("result", result.to_owned()),
    ]
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn has(m: &Metrics, line: &str) -> bool {
        m.encode().lines().any(|l| l == line)
    }

    #[tokio::test]
    async fn a_pass_is_one_reconcile_and_one_queue_item() {
        let m = Arc::new(Metrics::new());
        let r = Reconciler::new(m.clone(), "nodeclaim.lifecycle");
        for line in [
            r#"controller_runtime_max_concurrent_reconciles{controller="nodeclaim.lifecycle"} 1.0"#,
            r#"controller_runtime_reconcile_total{controller="nodeclaim.lifecycle",result="error"} 0"#,
            r#"workqueue_adds_total{name="nodeclaim.lifecycle",controller="nodeclaim.lifecycle"} 0"#,
        ] {
            assert!(has(&m, line), "{line} not in\n{}", m.encode());
        }
        let inside = r
            .now(async {
                let text = m.encode();
                assert!(text.contains(
                    r#"controller_runtime_active_workers{controller="nodeclaim.lifecycle"} 1.0"#
                ));
                Ok::<_, ()>(())
            })
            .await;
        assert!(inside.is_ok());
        r.now(async { Err::<(), _>("conflict") }).await.unwrap_err();
        r.now(async {}).await;
        for line in [
            r#"controller_runtime_reconcile_total{controller="nodeclaim.lifecycle",result="success"} 2"#,
            r#"controller_runtime_reconcile_total{controller="nodeclaim.lifecycle",result="error"} 1"#,
            r#"controller_runtime_reconcile_errors_total{controller="nodeclaim.lifecycle"} 1"#,
            r#"controller_runtime_reconcile_time_seconds_count{controller="nodeclaim.lifecycle"} 3"#,
            r#"controller_runtime_active_workers{controller="nodeclaim.lifecycle"} 0.0"#,
            r#"workqueue_adds_total{name="nodeclaim.lifecycle",controller="nodeclaim.lifecycle"} 3"#,
            r#"workqueue_retries_total{name="nodeclaim.lifecycle",controller="nodeclaim.lifecycle"} 1"#,
            r#"workqueue_work_duration_seconds_count{name="nodeclaim.lifecycle",controller="nodeclaim.lifecycle"} 3"#,
            r#"workqueue_queue_duration_seconds_count{name="nodeclaim.lifecycle",controller="nodeclaim.lifecycle"} 3"#,
        ] {
            assert!(has(&m, line), "{line} not in\n{}", m.encode());
        }
    }

    #[tokio::test]
    async fn a_panicking_pass_is_counted() {
        let m = Arc::new(Metrics::new());
        let r = Reconciler::new(m.clone(), "status");
        let task = tokio::spawn({
            let r = r.clone();
            async move {
                r.now(async {
                    let fail = true;
                    if fail {
                        panic!("boom");
                    }
                })
                .await
            }
        });
        assert!(task.await.unwrap_err().is_panic());
        for line in [
            r#"controller_runtime_reconcile_panics_total{controller="status"} 1"#,
            r#"controller_runtime_active_workers{controller="status"} 0.0"#,
        ] {
            assert!(has(&m, line), "{line} not in\n{}", m.encode());
        }
    }

    #[tokio::test]
    async fn a_running_pass_shows_as_unfinished_work() {
        let m = Arc::new(Metrics::new());
        let r = Reconciler::new(m.clone(), "disruption");
        r.now(async {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            let text = m.encode();
            let line = text
                .lines()
                .find(|l| l.starts_with("workqueue_unfinished_work_seconds{"))
                .unwrap()
                .to_owned();
            let v: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
            assert!(v >= 0.02, "{line}");
        })
        .await;
        assert!(has(
            &m,
            r#"workqueue_longest_running_processor_seconds{name="disruption",controller="disruption"} 0.0"#
        ));
    }
}
