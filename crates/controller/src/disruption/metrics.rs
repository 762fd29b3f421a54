//! `karpenter_pods_disruption_initiated_total{reason, nodepool, capacity_type,
//! consolidation_policy, termination_mode}`: the pods a voluntary disruption is about to move,
//! counted when the command deletes each target's NodeClaim, as upstream's queue counts them.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::metrics::{Labels, Metrics, register};

pub(crate) struct DisruptionMetrics {
    pods_initiated: Family<Labels, Counter>,
}

impl DisruptionMetrics {
    pub(crate) fn register(r: &mut Registry) -> Self {
        let pods_initiated = Family::<Labels, Counter>::default();
        register(
            r,
            "karpenter_pods_disruption_initiated",
            "The number of pods whose disruption Karpenter has initiated. Labeled by the reason, the owning nodepool, its capacity type, consolidation policy and termination mode.",
            pods_initiated.clone(),
        );
        DisruptionMetrics { pods_initiated }
    }
}

/// What a deleted target's pods are labelled with.
pub struct Disrupted<'a> {
    pub reason: &'a str,
    pub nodepool: &'a str,
    pub capacity_type: &'a str,
    pub consolidation_policy: &'a str,
    pub termination_mode: &'a str,
}

/// Counts `pods` pods whose disruption `d` initiated.
pub fn pods_initiated(metrics: &Metrics, d: &Disrupted<'_>, pods: usize) {
    metrics
        .disruption
        .pods_initiated
        .get_or_create(&vec![
            ("reason", d.reason.to_owned()),
            ("nodepool", d.nodepool.to_owned()),
            ("capacity_type", d.capacity_type.to_owned()),
            ("consolidation_policy", d.consolidation_policy.to_owned()),
            ("termination_mode", d.termination_mode.to_owned()),
        ])
        .inc_by(pods as u64);
}
