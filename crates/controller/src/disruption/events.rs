//! The disruption loop's events, with upstream's reasons and messages: a command's steps,
//! what blocks a node or a NodePool from being disrupted, the consolidation moves found,
//! approved and rejected, and what a pod's `do-not-disrupt` duration means.

use std::time::Duration;

use nodewright_core::disruption::Command;
use nodewright_core::disruption::{BALANCED_THRESHOLD, BalancedScore};

use crate::events::{DEFAULT_DEDUPE_TIMEOUT, Event, EventType, ObjectRef, title};

/// Disruption: a replacement for a disrupted node is being launched.
pub fn disruption_launching(nodeclaim: ObjectRef, reason: &str) -> Event {
    Event::new(
        nodeclaim,
        EventType::Normal,
        "DisruptionLaunching",
        format!("Launching NodeClaim: {}", title(reason)),
    )
    .dedupe_on(&[reason], DEFAULT_DEDUPE_TIMEOUT)
}

pub fn disruption_waiting_readiness(nodeclaim: ObjectRef) -> Event {
    Event::new(
        nodeclaim,
        EventType::Normal,
        "DisruptionWaitingReadiness",
        "Waiting on readiness to continue disruption",
    )
    .dedupe_object()
}

/// Sent for the Node and for its NodeClaim.
pub fn disruption_terminating(object: ObjectRef, reason: &str) -> Event {
    Event::new(
        object,
        EventType::Normal,
        "DisruptionTerminating",
        format!("Disrupting Node: {}", title(reason)),
    )
    .dedupe_on(&[reason], DEFAULT_DEDUPE_TIMEOUT)
}

/// Why a node (or claim) cannot be disrupted right now.
pub fn disruption_blocked(object: ObjectRef, reason: &str) -> Event {
    Event::new(object, EventType::Normal, "DisruptionBlocked", reason).dedupe_object()
}

/// Whether a node blocked for the verdict `code` gets a `DisruptionBlocked` event. Not when
/// the block is `karpenter.sh/do-not-disrupt` on the node or on one of its pods: that is a
/// user's deliberate choice, not a problem to point out, and upstream stays silent about it
/// (the node is still left alone, and its verdict still logged).
pub fn announces_block(code: &str) -> bool {
    !matches!(code, "node-do-not-disrupt" | "pod-do-not-disrupt")
}

pub fn nodepool_blocked(nodepool: ObjectRef) -> Event {
    Event::new(
        nodepool,
        EventType::Normal,
        "DisruptionBlocked",
        "No allowed disruptions due to blocking budget",
    )
    // A budget can change every minute.
    .dedupe_on(&[], Duration::from_secs(60))
}

pub fn nodepool_blocked_for_reason(nodepool: ObjectRef, reason: &str) -> Event {
    Event::new(
        nodepool,
        EventType::Normal,
        "DisruptionBlocked",
        format!("No allowed disruptions for disruption reason {reason} due to blocking budget"),
    )
    .dedupe_on(&[reason], Duration::from_secs(60))
}

pub fn unconsolidatable(object: ObjectRef, reason: &str) -> Event {
    Event::new(object, EventType::Normal, "Unconsolidatable", reason)
        .dedupe_on(&[], Duration::from_secs(15 * 60))
}

/// Pod annotation: a `karpenter.sh/do-not-disrupt` value that is neither "true" nor a
/// positive duration.
pub fn invalid_do_not_disrupt(pod: ObjectRef, value: &str) -> Event {
    Event::new(
        pod,
        EventType::Warning,
        "InvalidDoNotDisruptAnnotation",
        format!(
            "Invalid karpenter.sh/do-not-disrupt annotation value {value:?}, ignoring annotation. Use 'true' or a duration like '5m', '1h'"
        ),
    )
    .dedupe_on(&[value], DEFAULT_DEDUPE_TIMEOUT)
}

/// A command as one of its target nodes sees it: the whole command when it has only that
/// target, else that node's part of it.
pub fn command_for_node(c: &Command, node: &str) -> String {
    if c.targets.len() == 1 {
        return c.to_string();
    }
    format!(
        "{}: [{node}] (part of {}-node consolidation)",
        c.decision.as_str(),
        c.targets.len()
    )
}

/// A consolidation move was found for the Node or NodeClaim (`command` as
/// [`command_for_node`] gives it).
pub fn consolidation_candidate(object: ObjectRef, command: &str, savings: f64) -> Event {
    Event::new(
        object,
        EventType::Normal,
        "ConsolidationCandidate",
        format!("Consolidation candidate: {command} (savings: ${savings:.2})"),
    )
    .dedupe_on(&[command], DEFAULT_DEDUPE_TIMEOUT)
}

/// A consolidation move found for the Node or NodeClaim failed its re-check; `reason` is
/// upstream's kind of failure (`churn`, `budget`, `scheduling`).
pub fn consolidation_rejected(
    object: ObjectRef,
    command: &str,
    reason: &str,
    savings: f64,
) -> Event {
    Event::new(
        object,
        EventType::Normal,
        "ConsolidationRejected",
        format!("Consolidation rejected: {command}, reason: {reason} (savings: ${savings:.2})"),
    )
    .dedupe_on(&[command, reason], DEFAULT_DEDUPE_TIMEOUT)
}

/// A Balanced NodePool approved a move: on the Node and NodeClaim of a single-node move, on
/// the NodePool of a multi-node one.
pub fn consolidation_approved(object: ObjectRef, score: &BalancedScore) -> Event {
    Event::new(
        object,
        EventType::Normal,
        "ConsolidationApproved",
        format!(
            "Consolidation approved: score {:.2} >= threshold {BALANCED_THRESHOLD:.2} (k: {}, savings {:.1}% of the NodePool's cost, disruption {:.1}% of its disruption cost)",
            score.score,
            (1.0 / BALANCED_THRESHOLD).round(),
            score.savings_fraction * 100.0,
            score.disruption_fraction * 100.0,
        ),
    )
    .dedupe_on(&[], DEFAULT_DEDUPE_TIMEOUT)
}

/// Pod annotation: a `karpenter.sh/do-not-disrupt` duration still protects the pod until
/// `at` (RFC 3339).
pub fn do_not_disrupt_until(pod: ObjectRef, at: &str) -> Event {
    Event::new(
        pod,
        EventType::Normal,
        "DoNotDisruptUntil",
        format!("Pod will be disruptable at {at}"),
    )
    .dedupe_on(&[at], DEFAULT_DEDUPE_TIMEOUT)
}

/// Pod annotation: a `karpenter.sh/do-not-disrupt` duration has passed.
pub fn do_not_disrupt_grace_period_elapsed(pod: ObjectRef) -> Event {
    Event::new(
        pod,
        EventType::Normal,
        "DoNotDisruptGracePeriodElapsed",
        "The karpenter.sh/do-not-disrupt grace period has elapsed, pod is now disruptable",
    )
    .dedupe_object()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deliberate_do_not_disrupt_is_not_announced_as_blocked() {
        assert!(!announces_block("pod-do-not-disrupt"));
        assert!(!announces_block("node-do-not-disrupt"));
        for code in ["pdb-blocked", "multiple-pdbs", "pod-has-no-controller"] {
            assert!(announces_block(code), "{code}");
        }
    }
}
