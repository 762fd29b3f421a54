//! What a run produced: the timeline, samples over time and a summary, rendered as text, JSON
//! or an SVG chart.

mod chart;
mod json;
mod text;

use std::time::Duration;

pub use chart::svg;
pub use json::to_json;
pub use text::{summary_text, timeline_text};

/// `mm:ss` (or `h:mm:ss`) since the start of the run.
pub fn clock(d: Duration) -> String {
    let s = d.as_secs();
    let ms = d.subsec_millis();
    let base = if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
    } else {
        format!("{:02}:{:02}", s / 60, s % 60)
    };
    if ms == 0 {
        base
    } else {
        format!("{base}.{ms:03}")
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct TimelineEvent {
    pub at: Duration,
    /// `apply`, `scale`, `launch`, `launched`, `ready`, `disruption-planned`, `disrupted`, ...
    pub kind: String,
    pub message: String,
}

/// The cluster at one instant (recorded whenever something changed).
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub at: Duration,
    /// Launched instances (what is billed).
    pub nodes: usize,
    pub ready_nodes: usize,
    /// Workload pods (daemons excluded).
    pub pods: usize,
    pub pending_pods: usize,
    pub price_per_hour: f64,
    pub cpu_requested_milli: i64,
    pub cpu_allocatable_milli: i64,
}

impl Sample {
    pub fn same_state(&self, o: &Sample) -> bool {
        self.nodes == o.nodes
            && self.ready_nodes == o.ready_nodes
            && self.pods == o.pods
            && self.pending_pods == o.pending_pods
            && self.price_per_hour == o.price_per_hour
            && self.cpu_requested_milli == o.cpu_requested_milli
            && self.cpu_allocatable_milli == o.cpu_allocatable_milli
    }

    pub fn utilisation(&self) -> Option<f64> {
        (self.cpu_allocatable_milli > 0)
            .then(|| self.cpu_requested_milli as f64 / self.cpu_allocatable_milli as f64)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub nodes_launched: usize,
    pub launch_failures: usize,
    pub max_nodes: usize,
    pub nodes_at_end: usize,
    pub pods_at_end: usize,
    pub pending_at_end: usize,
    pub nodes_disrupted: usize,
    pub disruption_commands: usize,
    pub rejected_validations: usize,
    pub savings_per_hour: f64,
    pub interruptions: usize,
    pub total_cost_usd: f64,
    pub average_per_hour: f64,
    pub final_per_hour: f64,
    /// CPU requested over allocatable on Ready nodes, time-weighted while any node was Ready.
    pub average_cpu_utilisation: Option<f64>,
    pub final_cpu_utilisation: Option<f64>,
    /// The running pods placed afresh by the provisioner: its cost and lower bound, $/h.
    pub fresh_plan_per_hour: Option<f64>,
    pub lower_bound_per_hour: Option<f64>,
    /// Launches for pods a consolidation had moved within the last three minutes
    /// (`consolidation-churn` timeline lines): commands that disrupted pods for nothing.
    pub consolidation_churn: usize,
}

impl Summary {
    #[allow(clippy::too_many_arguments)]
    pub fn from_run(
        samples: &[Sample],
        total_cost_usd: f64,
        nodes_launched: usize,
        launch_failures: usize,
        nodes_disrupted: usize,
        disruption_commands: usize,
        rejected_validations: usize,
        savings_per_hour: f64,
        interruptions: usize,
        max_nodes: usize,
        bound: Option<(f64, f64)>,
    ) -> Summary {
        let last = samples.last();
        let span = last.map_or(0.0, |l| l.at.as_secs_f64());
        let mut weighted = 0.0;
        let mut ready_time = 0.0;
        for w in samples.windows(2) {
            let dt = (w[1].at - w[0].at).as_secs_f64();
            if let Some(u) = w[0].utilisation() {
                weighted += u * dt;
                ready_time += dt;
            }
        }
        Summary {
            nodes_launched,
            launch_failures,
            max_nodes,
            nodes_at_end: last.map_or(0, |l| l.nodes),
            pods_at_end: last.map_or(0, |l| l.pods),
            pending_at_end: last.map_or(0, |l| l.pending_pods),
            nodes_disrupted,
            disruption_commands,
            rejected_validations,
            savings_per_hour,
            interruptions,
            total_cost_usd,
            average_per_hour: if span > 0.0 {
                total_cost_usd / (span / 3600.0)
            } else {
                0.0
            },
            final_per_hour: last.map_or(0.0, |l| l.price_per_hour),
            average_cpu_utilisation: (ready_time > 0.0).then(|| weighted / ready_time),
            final_cpu_utilisation: last.and_then(Sample::utilisation),
            fresh_plan_per_hour: bound.map(|b| b.0),
            lower_bound_per_hour: bound.map(|b| b.1),
            consolidation_churn: 0,
        }
    }

    /// How far the final cluster's price is above the lower bound, as a fraction.
    pub fn gap_to_bound(&self) -> Option<f64> {
        self.lower_bound_per_hour
            .filter(|b| *b > 0.0)
            .map(|b| (self.final_per_hour - b) / b)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct RunReport {
    pub name: String,
    pub seed: u64,
    pub duration: Duration,
    /// Where spot prices come from; every rendering repeats it.
    pub spot_price_note: String,
    pub timeline: Vec<TimelineEvent>,
    pub samples: Vec<Sample>,
    pub summary: Summary,
    /// Invariant violations (empty in a correct run).
    pub violations: Vec<String>,
    /// How much deciding the run took (not rendered: it depends on the engine, not the
    /// cluster).
    pub work: Work,
}

/// Counts of the decisions a run made and skipped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Work {
    /// Instants the virtual clock stopped at.
    pub steps: usize,
    pub solves: usize,
    /// Batches whose pending pods and cluster were unchanged since the last solve.
    pub solves_skipped: usize,
    pub plans: usize,
    /// Disruption rounds skipped because the cluster was consolidated and unchanged.
    pub plans_skipped: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_read_like_a_stopwatch() {
        assert_eq!(clock(Duration::from_secs(0)), "00:00");
        assert_eq!(clock(Duration::from_secs(75)), "01:15");
        assert_eq!(clock(Duration::from_millis(3_500)), "00:03.500");
        assert_eq!(clock(Duration::from_secs(3_725)), "1:02:05");
    }
}
