//! The NodeClaim lifecycle's families: `karpenter_nodes_created_total{nodepool, zone}` when a
//! claim's Node registers, and, when a claim's finalizer comes off,
//! `karpenter_nodeclaims_terminated_total{nodepool, capacity_type, zone}`,
//! `karpenter_nodeclaims_termination_duration_seconds{nodepool}` (from the deletion request)
//! and `karpenter_nodeclaims_instance_termination_duration_seconds{nodepool}` (from the
//! terminate call to the cloud reporting the instance gone).

use prometheus_client::registry::Registry;

use crate::metrics::{Counters, Histograms, durations, register, registered};

pub struct LifecycleMetrics {
    nodeclaims_terminated: Counters,
    nodes_created: Counters,
    termination_duration: Histograms,
    instance_termination_duration: Histograms,
}

impl LifecycleMetrics {
    pub(crate) fn register(r: &mut Registry) -> Self {
        LifecycleMetrics {
            nodeclaims_terminated: registered(
                r,
                "karpenter_nodeclaims_terminated",
                "NodeClaims whose termination finished, by NodePool, capacity type and zone.",
            ),
            nodes_created: registered(
                r,
                "karpenter_nodes_created",
                "Nodes that registered for a NodeClaim of this controller, by NodePool and zone.",
            ),
            termination_duration: register(
                r,
                "karpenter_nodeclaims_termination_duration_seconds",
                "Seconds from a NodeClaim's deletion to the removal of its finalizer, by NodePool.",
                durations(),
            ),
            instance_termination_duration: register(
                r,
                "karpenter_nodeclaims_instance_termination_duration_seconds",
                "Seconds from asking the cloud to terminate a NodeClaim's instance until it was gone, by NodePool.",
                durations(),
            ),
        }
    }

    pub fn nodeclaim_terminated(&self, nodepool: &str, capacity_type: &str, zone: &str) {
        self.nodeclaims_terminated
            .get_or_create(&vec![
                ("nodepool", nodepool.to_owned()),
                ("capacity_type", capacity_type.to_owned()),
                ("zone", zone.to_owned()),
            ])
            .inc();
    }

    pub fn node_created(&self, nodepool: &str, zone: &str) {
        self.nodes_created
            .get_or_create(&vec![
                ("nodepool", nodepool.to_owned()),
                ("zone", zone.to_owned()),
            ])
            .inc();
    }

    pub fn nodeclaim_termination_duration(&self, nodepool: &str, seconds: f64) {
        self.termination_duration
            .get_or_create(&vec![("nodepool", nodepool.to_owned())])
            .observe(seconds);
    }

    /// From the terminate call to the cloud reporting the instance gone.
    pub fn nodeclaim_instance_termination_duration(&self, nodepool: &str, seconds: f64) {
        self.instance_termination_duration
            .get_or_create(&vec![("nodepool", nodepool.to_owned())])
            .observe(seconds);
    }
}

#[cfg(test)]
mod tests {
    use crate::metrics::{Metrics, has};

    #[test]
    fn the_lifecycles_families_carry_upstream_labels() {
        let m = Metrics::new();
        m.lifecycle
            .nodeclaim_terminated("default", "spot", "us-east-1a");
        m.lifecycle.node_created("default", "us-east-1a");
        m.lifecycle.nodeclaim_termination_duration("default", 12.0);
        assert!(has(
            &m,
            r#"karpenter_nodeclaims_terminated_total{nodepool="default",capacity_type="spot",zone="us-east-1a"} 1"#
        ));
        assert!(has(
            &m,
            r#"karpenter_nodes_created_total{nodepool="default",zone="us-east-1a"} 1"#
        ));
        assert!(has(
            &m,
            r#"karpenter_nodeclaims_termination_duration_seconds_count{nodepool="default"} 1"#
        ));
    }
}
