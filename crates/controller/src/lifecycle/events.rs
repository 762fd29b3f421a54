//! The NodeClaim lifecycle's events, with upstream's reasons and messages: condition changes,
//! launches the cloud refused, and registration checks that fail.

use crate::events::{DEFAULT_DEDUPE_TIMEOUT, Event, EventType, ObjectRef, truncate};

/// A status condition of `object` changed status (`from` is `Unknown` when it was absent).
/// Upstream's status controller reports every such change with the condition type as the
/// reason; on a NodeClaim these are the `Launched`, `Registered`, `Initialized` and `Ready`
/// events `kubectl describe` shows.
///
/// De-duplicated on the transition itself (object, from, to and the condition's reason), not
/// on the object alone: a condition that flaps publishes each direction at most once per two
/// minutes, while a change after a change (Ready lost, then regained) is always published.
pub fn condition_transitioned(
    object: ObjectRef,
    type_: &str,
    from: &str,
    to: &str,
    reason: &str,
    message: &str,
) -> Event {
    let mut text = format!(
        "Status condition transitioned, Type: {type_}, Status: {from} -> {to}, Reason: {reason}"
    );
    if !message.is_empty() {
        text.push_str(", Message: ");
        text.push_str(message);
    }
    Event::new(object, EventType::Normal, type_, text)
        .dedupe_on(&[from, to, reason], DEFAULT_DEDUPE_TIMEOUT)
}

/// Lifecycle: the launch failed for want of capacity.
pub fn insufficient_capacity(nodeclaim: ObjectRef, error: &str) -> Event {
    let msg = format!("NodeClaim {} event: {}", nodeclaim.name, truncate(error));
    Event::new(
        nodeclaim,
        EventType::Warning,
        "InsufficientCapacityError",
        msg,
    )
    .dedupe_object()
}

pub fn nodeclass_not_ready(nodeclaim: ObjectRef, error: &str) -> Event {
    let msg = format!("NodeClaim {} event: {}", nodeclaim.name, truncate(error));
    Event::new(nodeclaim, EventType::Warning, "NodeClassNotReady", msg).dedupe_object()
}

pub fn unregistered_taint_missing(node: ObjectRef) -> Event {
    Event::new(
        node,
        EventType::Warning,
        "UnregisteredTaintMissing",
        "Missing karpenter.sh/unregistered taint which prevents registration related race conditions on Karpenter managed nodes",
    )
    .dedupe_object()
}

pub fn failed_consistency_check(nodeclaim: ObjectRef, message: &str) -> Event {
    Event::new(
        nodeclaim,
        EventType::Warning,
        "FailedConsistencyCheck",
        message,
    )
    // Another failed check on the same claim is news.
    .dedupe_on(&[message], DEFAULT_DEDUPE_TIMEOUT)
}
