//! NodeClaim and NodePool status conditions: upstream's types and reasons, and the one rule for
//! setting them (the transition time moves only when the status changes).

use nodewright_api::v1::shared::Condition;
use nodewright_core::time::Timestamp;

use crate::clock::rfc3339;

pub const LAUNCHED: &str = "Launched";
pub const REGISTERED: &str = "Registered";
pub const INITIALIZED: &str = "Initialized";
pub const READY: &str = "Ready";
pub const DRIFTED: &str = "Drifted";
pub const CONSOLIDATABLE: &str = "Consolidatable";
pub const DISRUPTION_REASON: &str = "DisruptionReason";
pub const INSTANCE_TERMINATING: &str = "InstanceTerminating";
pub const DRAINED: &str = "Drained";
pub const VOLUMES_DETACHED: &str = "VolumesDetached";
pub const VALIDATION_SUCCEEDED: &str = "ValidationSucceeded";
pub const NODE_CLASS_READY: &str = "NodeClassReady";
pub const NODE_REGISTRATION_HEALTHY: &str = "NodeRegistrationHealthy";

pub fn find<'a>(conds: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conds.iter().find(|c| c.type_ == type_)
}

pub fn is_true(conds: &[Condition], type_: &str) -> bool {
    find(conds, type_).is_some_and(|c| c.status == "True")
}

/// Sets `type_` to `status` with `reason`/`message`; returns whether anything changed.
pub fn set(
    conds: &mut Vec<Condition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> bool {
    let reason = Some(reason.to_string()).filter(|r| !r.is_empty());
    let message = Some(message.to_string()).filter(|m| !m.is_empty());
    if let Some(c) = conds.iter_mut().find(|c| c.type_ == type_) {
        if c.status == status && c.reason == reason && c.message == message {
            return false;
        }
        if c.status != status {
            c.last_transition_time = Some(rfc3339(now));
        }
        c.status = status.to_string();
        c.reason = reason;
        c.message = message;
        return true;
    }
    conds.push(Condition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason,
        message,
        last_transition_time: Some(rfc3339(now)),
        observed_generation: None,
        extra: Default::default(),
    });
    true
}

pub fn remove(conds: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conds.len();
    conds.retain(|c| c.type_ != type_);
    before != conds.len()
}

/// `Ready` summarises the lifecycle conditions, as upstream's root condition does.
pub fn set_ready(conds: &mut Vec<Condition>, now: Timestamp) -> bool {
    let missing: Vec<&str> = [LAUNCHED, REGISTERED, INITIALIZED]
        .into_iter()
        .filter(|t| !is_true(conds, t))
        .collect();
    if missing.is_empty() {
        set(conds, READY, "True", READY, "", now)
    } else {
        let first = missing[0];
        set(
            conds,
            READY,
            "Unknown",
            &format!("{first}NotTrue"),
            &format!("{first} is not true"),
            now,
        )
    }
}

/// The conditions of `after` whose status differs from `before`'s, each with the status it
/// had (`Unknown` when it was absent), in `after`'s order. A condition that only changed its
/// reason or message is not a transition.
pub fn transitions<'a>(
    before: &[Condition],
    after: &'a [Condition],
) -> Vec<(&'a Condition, String)> {
    after
        .iter()
        .filter_map(|c| {
            let was = find(before, &c.type_).map_or("Unknown", |b| b.status.as_str());
            (was != c.status).then(|| (c, was.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transitions_are_status_changes_with_absent_as_unknown() {
        let now = Timestamp(0);
        let mut before = Vec::new();
        set(&mut before, LAUNCHED, "True", LAUNCHED, "", now);
        set(&mut before, REGISTERED, "Unknown", "NodeNotFound", "", now);
        let mut after = before.clone();
        set(&mut after, REGISTERED, "True", REGISTERED, "", now);
        set(&mut after, INITIALIZED, "Unknown", "NodeNotReady", "x", now);
        set(&mut after, READY, "False", "Broken", "", now);
        set(&mut after, LAUNCHED, "True", LAUNCHED, "reworded", now);
        let t: Vec<(String, String, String)> = transitions(&before, &after)
            .into_iter()
            .map(|(c, was)| (c.type_.clone(), was, c.status.clone()))
            .collect();
        assert_eq!(
            t,
            vec![
                (REGISTERED.into(), "Unknown".into(), "True".into()),
                (READY.into(), "Unknown".into(), "False".into())
            ]
        );
    }
}
