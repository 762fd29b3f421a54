//! Two families the dashboards and alerts need beyond upstream's `karpenter_*` set:
//! client-go's `leader_election_master_status{name}` (1 while this replica holds the lease,
//! the series controller-runtime exports for Karpenter, so "leader changed" alerts carry
//! over), and `nodewright_consolidation_savings_dollars_per_hour_total{nodepool,
//! consolidation_type}`, the hourly price removed by each consolidation command started:
//! its targets' prices minus its replacements'. Upstream has no savings family, hence the
//! project's own prefix.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use tokio::sync::watch;

use super::{Gauges, Labels, Metrics};

type FloatCounters = Family<Labels, Counter<f64, std::sync::atomic::AtomicU64>>;

pub(super) struct OperationMetrics {
    leader: Gauges,
    savings: FloatCounters,
}

impl OperationMetrics {
    pub(super) fn register(r: &mut Registry) -> Self {
        let leader = Gauges::default();
        super::register(
            r,
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease.",
            leader.clone(),
        );
        let savings = FloatCounters::default();
        super::register(
            r,
            "nodewright_consolidation_savings_dollars_per_hour",
            "Hourly price removed by the consolidation commands started: their targets' prices minus their replacements'. Labeled by nodepool and consolidation type.",
            savings.clone(),
        );
        OperationMetrics { leader, savings }
    }
}

impl Metrics {
    /// Whether this replica holds the lease `name`.
    pub fn leader_status(&self, name: &str, leader: bool) {
        self.operations
            .leader
            .get_or_create(&vec![("name", name.to_owned())])
            .set(if leader { 1.0 } else { 0.0 });
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
            self.operations
                .savings
                .get_or_create(&vec![
                    ("nodepool", nodepool.to_owned()),
                    ("consolidation_type", consolidation_type.to_owned()),
                ])
                .inc_by(dollars_per_hour);
        }
    }
}

/// Keeps `leader_election_master_status{name}` equal to the lease watch until the watch's
/// sender goes (with election off the watch is a constant `true`).
pub async fn follow_leader(
    mut leader: watch::Receiver<bool>,
    metrics: std::sync::Arc<Metrics>,
    name: String,
) {
    loop {
        let now = *leader.borrow_and_update();
        metrics.leader_status(&name, now);
        if leader.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn has(m: &Metrics, line: &str) -> bool {
        m.encode().lines().any(|l| l == line)
    }

    #[tokio::test]
    async fn the_leader_gauge_follows_the_lease() {
        let m = Arc::new(Metrics::new());
        let (tx, rx) = watch::channel(false);
        let task = tokio::spawn(follow_leader(
            rx,
            m.clone(),
            "karpenter-leader-election".into(),
        ));
        let line = |v: &str| {
            format!(r#"leader_election_master_status{{name="karpenter-leader-election"}} {v}"#)
        };
        for (value, text) in [(true, "1.0"), (false, "0.0")] {
            tx.send(value).unwrap();
            for _ in 0..100 {
                if has(&m, &line(text)) {
                    break;
                }
                tokio::task::yield_now().await;
            }
            assert!(has(&m, &line(text)), "{}", m.encode());
        }
        drop(tx);
        task.await.unwrap();
    }

    #[test]
    fn only_savings_add_up() {
        let m = Metrics::new();
        m.consolidation_savings("default", "single", 0.25);
        m.consolidation_savings("default", "single", 0.5);
        m.consolidation_savings("default", "single", -0.1);
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
