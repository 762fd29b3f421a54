//! What the drain makes of each pod on the node: whether it waits for the pod, in which of
//! upstream's priority groups it evicts it, whether `do-not-disrupt` holds it, and the grace
//! period left to it when the node's termination deadline comes first.

use std::time::Duration;

use k8s_openapi::api::core::v1::Toleration;
use nodewright_core::taints::DISRUPTED_TAINT;
use nodewright_core::time::{Timestamp, parse_go_duration};

use crate::state::PodRecord;

/// Pods stuck terminating longer than this are no longer waited for.
const STUCK_TERMINATING: Duration = Duration::from_secs(60);

/// A pod's own grace period when its spec does not say (the API server's default).
const DEFAULT_POD_GRACE_SECONDS: i64 = 30;

/// The grace period to delete `p` with at `now`, when the node's `deadline` no longer leaves
/// room for the pod's own: the time left until the deadline, at least 1 s. `None` while the
/// pod's own grace period still ends before the deadline.
pub fn forced_grace(p: &PodRecord, now: Timestamp, deadline: Timestamp) -> Option<i64> {
    let own = p.shape.grace_seconds.unwrap_or(DEFAULT_POD_GRACE_SECONDS);
    let left = if deadline > now {
        i64::try_from(deadline.since(now).as_secs()).unwrap_or(i64::MAX)
    } else {
        0
    };
    (left <= own).then_some(left.max(1))
}

fn is_critical(p: &PodRecord) -> bool {
    matches!(
        p.shape.priority_class_name.as_deref(),
        Some("system-cluster-critical" | "system-node-critical")
    )
}

/// Whether one of a pod's `tolerations` lets it stay on a node tainted
/// `karpenter.sh/disrupted:NoSchedule` (the index records the answer, [`PodRecord`]).
pub fn tolerates_disrupted(tolerations: &[Toleration]) -> bool {
    tolerations.iter().any(|t| {
        let key_ok = t
            .key
            .as_deref()
            .is_none_or(|k| k.is_empty() || k == DISRUPTED_TAINT);
        let op_exists = t.operator.as_deref() == Some("Exists");
        let effect_ok = t
            .effect
            .as_deref()
            .is_none_or(|e| e.is_empty() || e == "NoSchedule");
        key_ok && effect_ok && (op_exists || t.key.as_deref() == Some(DISRUPTED_TAINT))
    })
}

/// A pod with an active `karpenter.sh/do-not-disrupt` (`"true"`, or a duration the pod has not
/// yet run since it started): upstream's drain waits for it but never evicts it, so only the
/// node's termination deadline, when it has one, removes it.
pub(super) fn do_not_disrupt(p: &PodRecord, now: Timestamp) -> bool {
    let Some(value) = p.shape.do_not_disrupt.as_deref() else {
        return false;
    };
    if value == "true" {
        return true;
    }
    let Some(d) = parse_go_duration(value).filter(|d| !d.is_zero()) else {
        return false;
    };
    p.started.or(p.created).is_some_and(|t| t.plus(d) > now)
}

/// Upstream's drain priority: non-critical non-daemonset, non-critical daemonset, critical
/// non-daemonset, critical daemonset.
pub fn drain_group(p: &PodRecord) -> u8 {
    match (is_critical(p), p.owned_by("DaemonSet")) {
        (false, false) => 0,
        (false, true) => 1,
        (true, false) => 2,
        (true, true) => 3,
    }
}

/// Pods the drain must see gone: not terminal, not tolerating the disrupted taint, not mirror
/// pods, not stuck terminating.
pub fn waits_for(p: &PodRecord, now: Timestamp) -> bool {
    if p.finished() || p.shape.tolerates_disrupted || p.owned_by("Node") || p.shape.mirror {
        return false;
    }
    match p.deleted {
        Some(t) => now.since(t) < STUCK_TERMINATING,
        None => true,
    }
}
