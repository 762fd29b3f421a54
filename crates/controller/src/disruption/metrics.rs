//! Voluntary disruption's families, upstream's `karpenter_voluntary_disruption_*`:
//! `_decision_evaluation_duration_seconds{reason, consolidation_type}` for each method's
//! search, `_decisions_total` (and `_by_nodepool_total`) for each command executed,
//! `_eligible_nodes{reason}`, `_failed_validations_total`, `_queue_failures_total` (a
//! started command rolled back) and `_consolidation_timeouts_total`; the budgets'
//! `karpenter_nodepools_allowed_disruptions{nodepool, reason}` and
//! `_nodes_consuming_budgets{nodepool, reason}`; the consolidation moves weighed,
//! `karpenter_consolidation_moves_total{decision, nodepool, policy}` (decision `approved` or
//! `rejected`) and, for Balanced NodePools, their `karpenter_consolidation_score`; and
//! `karpenter_pods_disruption_initiated_total{reason, nodepool, capacity_type,
//! consolidation_policy, termination_mode}`, the pods a command is about to move, counted when
//! it deletes each target's NodeClaim, as upstream's queue counts them.
//!
//! Beyond upstream, `nodewright_consolidation_savings_dollars_per_hour_total{nodepool,
//! consolidation_type}` is the hourly price removed by each consolidation command started:
//! its targets' prices minus its replacements'.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::metrics::{
    Counters, Gauges, Histograms, Labels, Snapshot, durations, register, registered,
};

type FloatCounters = Family<Labels, Counter<f64, std::sync::atomic::AtomicU64>>;

pub struct DisruptionMetrics {
    evaluation: Histograms,
    decisions: Counters,
    decisions_by_nodepool: Counters,
    eligible_nodes: Gauges,
    failed_validations: Counters,
    allowed: Gauges,
    consuming: Gauges,
    moves: Counters,
    scores: Histograms,
    consolidation_timeouts: Counters,
    queue_failures: Counters,
    pods_initiated: Counters,
    savings: FloatCounters,
    snapshot: Snapshot,
}

impl DisruptionMetrics {
    pub(crate) fn register(r: &mut Registry, snapshot: &Snapshot) -> Self {
        DisruptionMetrics {
            evaluation: register(
                r,
                "karpenter_voluntary_disruption_decision_evaluation_duration_seconds",
                "Seconds one disruption method spent deciding in a round, by method and consolidation type.",
                durations(),
            ),
            decisions: registered(
                r,
                "karpenter_voluntary_disruption_decisions",
                "Disruption commands started, by decision (delete or replace), reason and consolidation type.",
            ),
            decisions_by_nodepool: registered(
                r,
                "karpenter_voluntary_disruption_decisions_by_nodepool",
                "Disruption commands started, counted once for each NodePool among their targets, with decision, reason and consolidation type.",
            ),
            eligible_nodes: registered(
                r,
                "karpenter_voluntary_disruption_eligible_nodes",
                "Nodes the last disruption round could have acted on, by reason.",
            ),
            failed_validations: registered(
                r,
                "karpenter_voluntary_disruption_failed_validations",
                "Disruption commands dropped because the cluster changed before they were re-checked, by consolidation type.",
            ),
            allowed: registered(
                r,
                "karpenter_nodepools_allowed_disruptions",
                "How many of a NodePool's nodes its active budgets let be disrupting at once, by NodePool and reason (2147483647 without a bound); it moves as nodes come and go.",
            ),
            consuming: registered(
                r,
                "karpenter_nodepools_nodes_consuming_budgets",
                "A NodePool's nodes being disrupted now, which count against its budgets, by NodePool and reason.",
            ),
            moves: registered(
                r,
                "karpenter_consolidation_moves",
                "Moves weighed by balanced consolidation, by decision, NodePool and policy.",
            ),
            scores: register(
                r,
                "karpenter_consolidation_score",
                "The score balanced consolidation gave the moves it weighed, by decision, NodePool and policy.",
                Family::new_with_constructor(score_histogram),
            ),
            consolidation_timeouts: registered(
                r,
                "karpenter_voluntary_disruption_consolidation_timeouts",
                "Consolidation searches cut short by their time limit, by consolidation type.",
            ),
            queue_failures: registered(
                r,
                "karpenter_voluntary_disruption_queue_failures",
                "Disruption commands that failed after they started (a replacement that never became ready, a deleted target), by decision, reason and consolidation type.",
            ),
            pods_initiated: registered(
                r,
                "karpenter_pods_disruption_initiated",
                "Pods on nodes a disruption command started to remove, by reason, NodePool, capacity type, consolidation policy and termination mode.",
            ),
            savings: registered(
                r,
                "nodewright_consolidation_savings_dollars_per_hour",
                "Hourly price removed by the consolidation commands started: their targets' prices minus their replacements'. Labeled by nodepool and consolidation type.",
            ),
            snapshot: snapshot.clone(),
        }
    }

    /// One executed disruption decision (`delete` or `replace`); counted both overall and
    /// per NodePool.
    pub fn decision(&self, decision: &str, reason: &str, consolidation_type: &str, nodepool: &str) {
        let labels = decision_labels(decision, reason, consolidation_type);
        self.decisions.get_or_create(&labels).inc();
        let mut by_nodepool = vec![("nodepool", nodepool.to_owned())];
        by_nodepool.extend(labels);
        self.decisions_by_nodepool.get_or_create(&by_nodepool).inc();
    }

    pub fn evaluation(&self, reason: &str, consolidation_type: &str, seconds: f64) {
        self.evaluation
            .get_or_create(&vec![
                ("reason", reason.to_owned()),
                ("consolidation_type", consolidation_type.to_owned()),
            ])
            .observe(seconds);
    }

    pub fn failed_validation(&self, consolidation_type: &str) {
        self.failed_validations
            .get_or_create(&vec![("consolidation_type", consolidation_type.to_owned())])
            .inc();
    }

    pub fn eligible_nodes(&self, reason: &str, n: usize) {
        self.eligible_nodes
            .get_or_create(&vec![("reason", reason.to_owned())])
            .set(n as f64);
    }

    /// Replaces `karpenter_nodepools_allowed_disruptions` and `_nodes_consuming_budgets`
    /// with one series per NodePool and reason, so a deleted NodePool's series go away.
    pub fn set_budgets(&self, rows: &[BudgetRow]) {
        let _guard = self.snapshot.hold();
        self.allowed.clear();
        self.consuming.clear();
        for row in rows {
            let labels = vec![
                ("nodepool", row.nodepool.clone()),
                ("reason", row.reason.to_owned()),
            ];
            self.allowed
                .get_or_create(&labels)
                .set(f64::from(row.allowed));
            self.consuming
                .get_or_create(&labels)
                .set(f64::from(row.consuming));
        }
    }

    /// A consolidation move weighed: counted by whether it was approved, with the Balanced
    /// policy's score when its NodePool uses that policy.
    pub fn consolidation_move(
        &self,
        approved: bool,
        nodepool: &str,
        policy: &str,
        score: Option<f64>,
    ) {
        let labels = vec![
            (
                "decision",
                if approved { "approved" } else { "rejected" }.to_owned(),
            ),
            ("nodepool", nodepool.to_owned()),
            ("policy", policy.to_owned()),
        ];
        self.moves.get_or_create(&labels).inc();
        if let Some(score) = score {
            self.scores.get_or_create(&labels).observe(score);
        }
    }

    /// A started disruption command that failed (a replacement went away, or it timed out)
    /// and was rolled back.
    pub fn queue_failure(&self, decision: &str, reason: &str, consolidation_type: &str) {
        let labels = decision_labels(decision, reason, consolidation_type);
        self.queue_failures.get_or_create(&labels).inc();
    }

    pub fn consolidation_timeout(&self, consolidation_type: &str) {
        self.consolidation_timeouts
            .get_or_create(&vec![("consolidation_type", consolidation_type.to_owned())])
            .inc();
    }

    /// Counts `pods` pods whose disruption `d` initiated.
    pub fn pods_initiated(&self, d: &Disrupted<'_>, pods: usize) {
        self.pods_initiated
            .get_or_create(&vec![
                ("reason", d.reason.to_owned()),
                ("nodepool", d.nodepool.to_owned()),
                ("capacity_type", d.capacity_type.to_owned()),
                ("consolidation_policy", d.consolidation_policy.to_owned()),
                ("termination_mode", d.termination_mode.to_owned()),
            ])
            .inc_by(pods as u64);
    }

    /// A consolidation command started that saves `dollars_per_hour` (ignored unless
    /// positive: a counter only grows, and a command that costs more is not a saving).
    pub fn consolidation_savings(
        &self,
        nodepool: &str,
        consolidation_type: &str,
        dollars_per_hour: f64,
    ) {
        if dollars_per_hour > 0.0 {
            self.savings
                .get_or_create(&vec![
                    ("nodepool", nodepool.to_owned()),
                    ("consolidation_type", consolidation_type.to_owned()),
                ])
                .inc_by(dollars_per_hour);
        }
    }
}

/// Upstream's buckets for the Balanced score, around its threshold of 0.5.
fn score_histogram() -> Histogram {
    Histogram::new([0.1, 0.25, 0.33, 0.5, 1.0, 2.0, 5.0, 10.0])
}

/// One NodePool's budget for one reason: what its budgets allow against its `nodes`, and the
/// nodes already disrupting that consume it.
#[derive(Clone, Debug, PartialEq)]
pub struct BudgetRow {
    pub nodepool: String,
    pub reason: &'static str,
    pub allowed: u32,
    pub nodes: u32,
    pub consuming: u32,
}

fn decision_labels(decision: &str, reason: &str, consolidation_type: &str) -> Labels {
    vec![
        ("decision", decision.to_owned()),
        ("reason", reason.to_owned()),
        ("consolidation_type", consolidation_type.to_owned()),
    ]
}

/// What a deleted target's pods are labelled with.
pub struct Disrupted<'a> {
    pub reason: &'a str,
    pub nodepool: &'a str,
    pub capacity_type: &'a str,
    pub consolidation_policy: &'a str,
    pub termination_mode: &'a str,
}

#[cfg(test)]
mod tests {
    use super::BudgetRow;
    use crate::metrics::{Metrics, has};

    #[test]
    fn decisions_count_overall_and_per_nodepool() {
        let m = Metrics::new();
        let d = &m.disruption;
        d.decision("replace", "underutilized", "single", "a");
        d.decision("delete", "empty", "empty", "b");
        d.evaluation("underutilized", "multi", 0.3);
        d.eligible_nodes("drifted", 4);
        d.failed_validation("single");
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
        assert!(has(
            &m,
            r#"karpenter_voluntary_disruption_failed_validations_total{consolidation_type="single"} 1"#
        ));
    }

    #[test]
    fn budgets_and_timeouts_carry_upstream_labels() {
        let m = Metrics::new();
        let d = &m.disruption;
        d.set_budgets(&[BudgetRow {
            nodepool: "default".into(),
            reason: "underutilized",
            allowed: 3,
            nodes: 5,
            consuming: 2,
        }]);
        d.consolidation_timeout("multi");
        assert!(has(
            &m,
            r#"karpenter_nodepools_allowed_disruptions{nodepool="default",reason="underutilized"} 3.0"#
        ));
        assert!(has(
            &m,
            r#"karpenter_nodepools_nodes_consuming_budgets{nodepool="default",reason="underutilized"} 2.0"#
        ));
        assert!(has(
            &m,
            r#"karpenter_voluntary_disruption_consolidation_timeouts_total{consolidation_type="multi"} 1"#
        ));
    }

    #[test]
    fn only_savings_add_up() {
        let m = Metrics::new();
        m.disruption
            .consolidation_savings("default", "single", 0.25);
        m.disruption.consolidation_savings("default", "single", 0.5);
        m.disruption
            .consolidation_savings("default", "single", -0.1);
        assert!(
            has(
                &m,
                r#"nodewright_consolidation_savings_dollars_per_hour_total{nodepool="default",consolidation_type="single"} 0.75"#
            ),
            "{}",
            m.encode()
        );
    }
}
