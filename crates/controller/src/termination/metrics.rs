//! Node termination's families: `karpenter_nodes_terminated_total{nodepool, zone}`,
//! `karpenter_nodes_drained_total{nodepool}`, `karpenter_pods_drained_total{reason}`,
//! `karpenter_pods_eviction_requests_total{code}` (by the eviction API's answer),
//! `karpenter_nodes_lifetime_duration_seconds{nodepool}`, and the summary
//! `karpenter_nodes_termination_duration_seconds{nodepool}` (deletion request to finalizer
//! removed).

use prometheus_client::registry::Registry;

use crate::metrics::{Counters, Histograms, durations, register, registered, summary::Summary};

pub struct TerminationMetrics {
    nodes_terminated: Counters,
    pods_drained: Counters,
    eviction_requests: Counters,
    nodes_lifetime: Histograms,
    nodes_drained: Counters,
    termination_duration: Summary,
}

impl TerminationMetrics {
    pub(crate) fn register(r: &mut Registry) -> Self {
        TerminationMetrics {
            nodes_terminated: registered(
                r,
                "karpenter_nodes_terminated",
                "Nodes this controller has finished terminating, by NodePool and zone.",
            ),
            pods_drained: registered(
                r,
                "karpenter_pods_drained",
                "Pods evicted or deleted while their node drained, by the reason the node was being terminated.",
            ),
            eviction_requests: registered(
                r,
                "karpenter_pods_eviction_requests",
                "Eviction requests sent to the API server, by the HTTP status code it answered with.",
            ),
            nodes_lifetime: register(
                r,
                "karpenter_nodes_lifetime_duration_seconds",
                "How long each terminated node lived, from its creation to the end of its termination.",
                durations(),
            ),
            nodes_drained: registered(
                r,
                "karpenter_nodes_drained",
                "Nodes whose drain finished, by NodePool.",
            ),
            termination_duration: Summary::new(
                "karpenter_nodes_termination_duration_seconds",
                "Seconds from a Node's deletion timestamp to the removal of this controller's finalizer.",
                Some("nodepool"),
            ),
        }
    }

    /// The summary, which the registry cannot encode.
    pub(crate) fn encode_summaries(&self, out: &mut String) {
        self.termination_duration.encode(out);
    }

    pub fn node_terminated(&self, nodepool: &str, zone: &str) {
        self.nodes_terminated
            .get_or_create(&vec![
                ("nodepool", nodepool.to_owned()),
                ("zone", zone.to_owned()),
            ])
            .inc();
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

    pub fn node_termination_duration(&self, nodepool: &str, seconds: f64) {
        self.termination_duration.observe(nodepool, seconds);
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
}

#[cfg(test)]
mod tests {
    use crate::metrics::{Metrics, has};

    #[test]
    fn terminations_carry_upstream_labels() {
        let m = Metrics::new();
        let t = &m.termination;
        t.node_terminated("default", "us-east-1b");
        t.pods_drained("drifted");
        t.eviction_request(429);
        t.node_drained("default");
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
            r#"karpenter_nodes_drained_total{nodepool="default"} 1"#
        ));
    }
}
