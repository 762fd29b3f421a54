//! The lease's family, as client-go exports it for controller-runtime:
//! `leader_election_master_status{name}`, 1 while this replica holds the lease, so "leader
//! changed" alerts carry over.

use prometheus_client::registry::Registry;
use tokio::sync::watch;

use crate::metrics::{Gauges, Metrics, registered};

pub struct LeaderMetrics {
    leader: Gauges,
}

impl LeaderMetrics {
    pub(crate) fn register(r: &mut Registry) -> Self {
        LeaderMetrics {
            leader: registered(
                r,
                "leader_election_master_status",
                "1 while this replica holds the leader lease named by `name`, 0 while it waits as a standby.",
            ),
        }
    }

    /// Whether this replica holds the lease `name`.
    pub fn status(&self, name: &str, leader: bool) {
        self.leader
            .get_or_create(&vec![("name", name.to_owned())])
            .set(if leader { 1.0 } else { 0.0 });
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
        metrics.leader.status(&name, now);
        if leader.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::metrics::has;

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
}
