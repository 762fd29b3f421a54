//! What protects a node through its pods: `karpenter.sh/do-not-disrupt` (its duration
//! included), a pod no controller would recreate, and PodDisruptionBudgets that allow no
//! eviction.

use super::*;

/// Pods that are still running or starting (not finished, not being deleted).
pub(super) fn is_active(p: &Pod) -> bool {
    !p.is_terminal() && !p.is_terminating()
}

/// Pods a disruption must move: active (or terminating StatefulSet pods), not daemon or mirror.
pub(crate) fn is_reschedulable(p: &Pod) -> bool {
    let sts_terminating = p.is_terminating()
        && !p.is_terminal()
        && p.owner.as_ref().is_some_and(|o| o.kind == "StatefulSet");
    (is_active(p) || sts_terminating) && !p.is_daemonset_pod() && !p.is_mirror_pod()
}

/// The instant a pod's `do-not-disrupt` protection ends: `Some(None)` forever (`"true"`),
/// `Some(Some(t))` until `t` (a duration counted from the pod's start), `None` if the
/// annotation is absent, invalid, or has lapsed.
pub fn do_not_disrupt_until(pod: &Pod, now: Timestamp) -> Option<Option<Timestamp>> {
    let value = pod.annotations.get(DO_NOT_DISRUPT)?;
    if value == "true" {
        return Some(None);
    }
    let d = parse_go_duration(value).filter(|d| !d.is_zero())?;
    let start = pod.start_time.unwrap_or(pod.creation_timestamp);
    let until = start.plus(d);
    (until > now).then_some(Some(until))
}

/// A pod's `do-not-disrupt` protection given as a duration counted from the pod's start: the
/// instant it ends, and whether that has passed by `now` (upstream tells the pod which:
/// `DoNotDisruptUntil`, `DoNotDisruptGracePeriodElapsed`). `None` for `"true"`, an invalid
/// value, no annotation, or a pod not started yet (upstream says nothing about those).
pub fn timed_do_not_disrupt(pod: &Pod, now: Timestamp) -> Option<(Timestamp, bool)> {
    let value = pod.annotations.get(DO_NOT_DISRUPT)?;
    let d = parse_go_duration(value).filter(|d| !d.is_zero())?;
    let until = pod.start_time?.plus(d);
    Some((until, until <= now))
}

/// A pod's `do-not-disrupt` value when it is neither `"true"` nor a positive duration: ignored
/// by [`do_not_disrupt_until`], and reported by upstream (`InvalidDoNotDisruptAnnotation`).
pub fn invalid_do_not_disrupt(pod: &Pod) -> Option<&str> {
    let value = pod.annotations.get(DO_NOT_DISRUPT)?;
    let valid = value == "true" || parse_go_duration(value).is_some_and(|d| !d.is_zero());
    (!valid).then_some(value.as_str())
}

/// Karpenter refuses to disrupt a node running an active pod that has no owner reference at
/// all (mirror pods excepted): evicting it would delete it for good. Daemon pods have an owner,
/// and terminal or terminating pods are filtered out before this is asked.
pub(super) fn ownerless_blocker(pod: &Pod) -> Option<Blocker> {
    (pod.is_ownerless() && !pod.is_mirror_pod())
        .then(|| Blocker::PodHasNoController { pod: pod.key() })
}

pub(super) fn pdb_blocker(pod: &Pod, pdbs: &[PodDisruptionBudget]) -> Option<Blocker> {
    let matching: Vec<&PodDisruptionBudget> = pdbs
        .iter()
        .filter(|b| b.namespace == pod.namespace)
        .filter(|b| b.selector.as_ref().is_some_and(|s| s.matches(&pod.labels)))
        .collect();
    if matching.len() > 1 {
        let mut names: Vec<String> = matching
            .iter()
            .map(|b| format!("{}/{}", b.namespace, b.name))
            .collect();
        names.sort();
        return Some(Blocker::MultiplePdbs {
            pod: pod.key(),
            pdbs: names,
        });
    }
    let b = matching.first()?;
    let unhealthy_exempt =
        b.unhealthy_pod_eviction_policy == UnhealthyPodEvictionPolicy::AlwaysAllow && !pod.ready;
    (b.disruptions_allowed <= 0 && !unhealthy_exempt).then(|| Blocker::PdbAllowsNoEviction {
        pdb: format!("{}/{}", b.namespace, b.name),
        pod: pod.key(),
    })
}

/// The blocker of the first blocked pod by key (the earliest on equal keys): keys are built
/// only for blocked pods, not to sort every pod of every node.
pub(super) fn pod_blocker(
    pods: &[&Pod],
    pdbs: &[PodDisruptionBudget],
    now: Timestamp,
) -> Option<Blocker> {
    let mut first: Option<(String, Blocker)> = None;
    for p in pods.iter().filter(|p| is_active(p)) {
        let b = do_not_disrupt_until(p, now)
            .map(|until| Blocker::PodDoNotDisrupt {
                pod: p.key(),
                until,
            })
            .or_else(|| ownerless_blocker(p))
            .or_else(|| {
                if is_reschedulable(p) {
                    pdb_blocker(p, pdbs)
                } else {
                    None
                }
            });
        if let Some(b) = b {
            let k = p.key();
            if first.as_ref().is_none_or(|(f, _)| k < *f) {
                first = Some((k, b));
            }
        }
    }
    first.map(|(_, b)| b)
}
