//! What a row's node is doing, read from the Node and its NodeClaim: launching (a claim with
//! no Node yet), deleting, being disrupted (Karpenter's `karpenter.sh/disrupted` taint, with
//! the reason from the claim's `DisruptionReason` condition), not ready, cordoned or ready.

use std::fmt;

use k8s_openapi::api::core::v1::Node;
use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_core::taints::DISRUPTED_TAINT;

/// The claim condition the disruption controller sets while it disrupts a node; its reason
/// is the method (`Underutilized`, `Empty`, `Drifted`, `Expired`).
const DISRUPTION_REASON: &str = "DisruptionReason";

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    /// A NodeClaim whose Node has not registered.
    Launching,
    /// The Node or its claim has a deletion timestamp; the reason when a disruption did it.
    Deleting(Option<String>),
    /// Tainted `karpenter.sh/disrupted`: nothing new schedules there, pods are moving off.
    Disrupting(Option<String>),
    NotReady,
    /// `spec.unschedulable` (kubectl cordon).
    Cordoned,
    Ready,
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let with = |f: &mut fmt::Formatter<'_>, what: &str, why: &Option<String>| match why {
            Some(r) => write!(f, "{what} ({r})"),
            None => f.write_str(what),
        };
        match self {
            State::Launching => f.write_str("launching"),
            State::Deleting(why) => with(f, "deleting", why),
            State::Disrupting(why) => with(f, "disrupting", why),
            State::NotReady => f.write_str("not ready"),
            State::Cordoned => f.write_str("cordoned"),
            State::Ready => f.write_str("ready"),
        }
    }
}

/// The state of a registered Node, with its claim when it has one.
pub fn of_node(node: &Node, claim: Option<&NodeClaim>) -> State {
    let reason = claim.and_then(disruption_reason);
    let deleting = node.metadata.deletion_timestamp.is_some()
        || claim.is_some_and(|c| c.metadata.deletion_timestamp.is_some());
    if deleting {
        return State::Deleting(reason);
    }
    let spec = node.spec.as_ref();
    let disrupted = spec
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == DISRUPTED_TAINT));
    if disrupted {
        return State::Disrupting(reason);
    }
    if !node_ready(node) {
        return State::NotReady;
    }
    if spec.and_then(|s| s.unschedulable) == Some(true) {
        return State::Cordoned;
    }
    State::Ready
}

/// The state of a claim that has no Node in view.
pub fn of_claim(claim: &NodeClaim) -> State {
    if claim.metadata.deletion_timestamp.is_some() {
        State::Deleting(disruption_reason(claim))
    } else {
        State::Launching
    }
}

fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

fn disruption_reason(claim: &NodeClaim) -> Option<String> {
    claim
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == DISRUPTION_REASON && c.status == "True")
        .and_then(|c| c.reason.clone())
        .filter(|r| !r.is_empty())
}
