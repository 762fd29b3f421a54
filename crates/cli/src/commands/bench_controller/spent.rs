//! What the controller spent over a phase: reconcile time per controller from its metrics,
//! wall and CPU time, and the bytes the index keeps per object.

use super::*;

/// Per controller, the sum (seconds) and count of `controller_runtime_reconcile_time_seconds`.
pub(super) type Reconciled = BTreeMap<String, (f64, u64)>;

/// The value of the label `key` in a sample's `labels` (`a="x",b="y"`).
pub(super) fn label(labels: &str, key: &str) -> String {
    labels
        .split(',')
        .find_map(|kv| kv.strip_prefix(&format!("{key}=\"")))
        .map(|v| v.trim_end_matches('"').to_string())
        .unwrap_or_default()
}

/// The samples of `family` (`name{labels} value`) in the metrics text, as (labels, value).
pub(super) fn samples<'a>(
    text: &'a str,
    family: &'a str,
) -> impl Iterator<Item = (&'a str, &'a str)> {
    text.lines().filter_map(move |line| {
        line.strip_prefix(family)?
            .strip_prefix('{')?
            .rsplit_once("} ")
    })
}

/// The wall time of every pass of every loop, as the controller measures it for
/// controller-runtime's dashboard.
pub(super) fn reconcile_times(metrics: &Metrics) -> Reconciled {
    const FAMILY: &str = "controller_runtime_reconcile_time_seconds";
    let text = metrics.encode();
    let mut out = Reconciled::new();
    for (labels, v) in samples(&text, &format!("{FAMILY}_sum")) {
        out.entry(label(labels, "controller")).or_default().0 += v.parse::<f64>().unwrap_or(0.0);
    }
    for (labels, v) in samples(&text, &format!("{FAMILY}_count")) {
        out.entry(label(labels, "controller")).or_default().1 += v.parse::<u64>().unwrap_or(0);
    }
    out
}

/// A phase's cost from its start: wall time, the process's CPU time, the loops' passes.
pub(super) struct Cost {
    pub(super) wall: Instant,
    pub(super) cpu: Duration,
    pub(super) reconciled: Reconciled,
}

pub(super) struct Spent {
    pub(super) wall: Duration,
    pub(super) cpu: Duration,
    pub(super) reconciled: Reconciled,
}

impl Cost {
    pub(super) fn start(metrics: &Metrics) -> Cost {
        Cost {
            wall: Instant::now(),
            cpu: cpu_time("self"),
            reconciled: reconcile_times(metrics),
        }
    }

    pub(super) fn stop(self, metrics: &Metrics) -> Spent {
        let reconciled = reconcile_times(metrics)
            .into_iter()
            .map(|(c, (s, n))| {
                let (s0, n0) = self.reconciled.get(&c).copied().unwrap_or_default();
                (c, (s - s0, n - n0))
            })
            .filter(|(_, (_, n))| *n > 0)
            .collect();
        Spent {
            wall: self.wall.elapsed(),
            cpu: cpu_time("self").saturating_sub(self.cpu),
            reconciled,
        }
    }
}

impl Spent {
    /// Wall and CPU time, then each loop's reconcile time, busiest first. A pass that waits
    /// (an API round trip, a cloud call) goes on counting while the other loops run on the
    /// one thread, so the loops' times overlap and may add up to more than the wall time.
    pub(super) fn print(&self) {
        println!(
            "  wall {:.2} s, cpu {:.2} s; reconcile time by controller (wall, overlapping):",
            self.wall.as_secs_f64(),
            self.cpu.as_secs_f64()
        );
        let mut by_time: Vec<_> = self.reconciled.iter().collect();
        by_time.sort_by(|a, b| b.1.0.total_cmp(&a.1.0));
        for (c, (s, n)) in by_time {
            println!("    {c:<36} {s:>9.3} s over {n} pass(es)");
        }
    }
}

/// RSS growth per object when `objects` are applied to an empty index; a rough figure (the
/// allocator may reuse freed memory). The objects are made as the index takes them, so the
/// growth counts what the index keeps of each (made beforehand, the parts moved into the
/// index were not counted) and no second copy of them all is held.
pub(super) fn state_bytes_per_object(objects: impl IntoIterator<Item = Object>) -> f64 {
    let before = memory("self").0;
    let mut s = ClusterState::default();
    let mut n = 0usize;
    for o in objects {
        s.apply(WatchEvent::Apply(o));
        n += 1;
    }
    let after = memory("self").0;
    drop(s);
    after.saturating_sub(before) as f64 / n.max(1) as f64
}
