//! How much disrupting a pod or a node costs, as Karpenter ranks candidates.
//!
//! `eviction_cost(p) = clamp(1 + deletion_cost / 2^27 + priority / 2^25, -10, 10)`;
//! a node's reschedule cost is `1 + Σ max(0, eviction_cost)`, so an empty node costs exactly 1.

use std::time::Duration;

use crate::model::Pod;

pub(crate) const POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// The cost of evicting one pod. An unparsable deletion-cost annotation is ignored.
pub(crate) fn eviction_cost(pod: &Pod) -> f64 {
    let deletion_cost = pod
        .annotations
        .get(POD_DELETION_COST)
        .and_then(|v| v.trim().parse::<i32>().ok())
        .unwrap_or(0);
    let cost =
        1.0 + f64::from(deletion_cost) / 2f64.powi(27) + f64::from(pod.priority) / 2f64.powi(25);
    cost.clamp(-10.0, 10.0)
}

/// The share of a node's life still ahead: `(expireAfter − age) / expireAfter` in [0, 1];
/// 1 when the node never expires.
pub(crate) fn lifetime_remaining(expire_after: Option<Duration>, age: Duration) -> f64 {
    match expire_after {
        None => 1.0,
        Some(e) if e.is_zero() => 0.0,
        Some(e) => ((e.as_secs_f64() - age.as_secs_f64()) / e.as_secs_f64()).clamp(0.0, 1.0),
    }
}

/// `1 + Σ max(0, eviction_cost)` over the pods that would have to move.
#[cfg(test)]
pub(crate) fn reschedule_cost<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> f64 {
    1.0 + pods
        .into_iter()
        .map(|p| eviction_cost(p).max(0.0))
        .sum::<f64>()
}

/// [`reschedule_cost`] from the pods' eviction costs, in the same order.
pub(crate) fn reschedule_cost_of(eviction_costs: &[f64]) -> f64 {
    1.0 + eviction_costs.iter().map(|c| c.max(0.0)).sum::<f64>()
}

/// [`disruption_cost`] from the pods' eviction costs, in the same order.
pub(crate) fn disruption_cost_of(eviction_costs: &[f64], lifetime_remaining: f64) -> f64 {
    eviction_costs.iter().copied().sum::<f64>() * lifetime_remaining
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_formula() {
        let mut p = Pod::default();
        assert_eq!(eviction_cost(&p), 1.0);
        p.priority = 1 << 25;
        assert_eq!(eviction_cost(&p), 2.0);
        p.priority = i32::MAX;
        assert_eq!(eviction_cost(&p), 10.0);
        p.priority = 0;
        p.annotations
            .insert(POD_DELETION_COST.into(), "-1342177280".into());
        assert_eq!(eviction_cost(&p), -9.0);
        p.annotations
            .insert(POD_DELETION_COST.into(), "garbage".into());
        assert_eq!(eviction_cost(&p), 1.0);
        assert_eq!(reschedule_cost([]), 1.0);
        assert_eq!(
            lifetime_remaining(Some(Duration::from_secs(100)), Duration::from_secs(25)),
            0.75
        );
        assert_eq!(lifetime_remaining(None, Duration::from_secs(25)), 1.0);
    }
}
