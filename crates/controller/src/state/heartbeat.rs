//! Telling a Node's heartbeat from a change: the kubelet (or the sim cloud's node agent)
//! rewrites every Node's status about every 10 s only to move its conditions'
//! `lastHeartbeatTime`, and each such write is a watch event with a new `resourceVersion`. No
//! loop reads either, so the index takes the new copy (its `resourceVersion` is what the
//! lifecycle's patches are conditioned on) without counting it as a change: the disruption
//! planner's "nothing changed since the last round" and the change logs' readers stay still.

use k8s_openapi::api::core::v1::Node;

/// Whether `new` differs from `old` only in what a heartbeat moves: `resourceVersion`,
/// `managedFields` and the conditions' `lastHeartbeatTime`. `old` is the copy being replaced:
/// it takes those fields from `new` before the two are compared.
pub fn only_heartbeat(mut old: Node, new: &Node) -> bool {
    old.metadata
        .resource_version
        .clone_from(&new.metadata.resource_version);
    old.metadata
        .managed_fields
        .clone_from(&new.metadata.managed_fields);
    let new_conditions = new.status.as_ref().and_then(|s| s.conditions.as_deref());
    if let (Some(conditions), Some(new_conditions)) = (
        old.status.as_mut().and_then(|s| s.conditions.as_mut()),
        new_conditions,
    ) {
        // A heartbeat rewrites the conditions in place; any other difference (one added,
        // dropped or reordered) stays a difference.
        for (c, n) in conditions.iter_mut().zip(new_conditions) {
            if c.type_ == n.type_ {
                c.last_heartbeat_time.clone_from(&n.last_heartbeat_time);
            }
        }
    }
    old == *new
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodewright_testkit::json::merge;
    use nodewright_testkit::k8s;
    use serde_json::json;

    fn node(version: &str, heartbeat: &str, ready: &str) -> Node {
        let extra = json!({
            "metadata": {"resourceVersion": version, "labels": {"a": "b"}},
            "status": {
                "allocatable": {"cpu": "2"},
                "conditions": [
                    {"type": "MemoryPressure", "status": "False", "lastHeartbeatTime": heartbeat,
                     "lastTransitionTime": "2026-01-01T00:00:00Z"},
                    {"type": "Ready", "status": ready, "lastHeartbeatTime": heartbeat,
                     "lastTransitionTime": "2026-01-01T00:00:00Z"}
                ]
            }
        });
        serde_json::from_value(merge(k8s::node("n1", "aws:///z/i-1"), extra)).unwrap()
    }

    #[test]
    fn a_heartbeat_is_not_a_change() {
        let old = node("1", "2026-01-01T00:00:10Z", "True");
        let new = node("2", "2026-01-01T00:00:20Z", "True");
        assert!(only_heartbeat(old, &new));
    }

    #[test]
    fn a_condition_label_or_capacity_that_moves_is_a_change() {
        let old = || node("1", "2026-01-01T00:00:10Z", "True");
        let new = node("2", "2026-01-01T00:00:20Z", "False");
        assert!(!only_heartbeat(old(), &new));
        let mut relabelled = node("2", "2026-01-01T00:00:20Z", "True");
        relabelled
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .insert("c".into(), "d".into());
        assert!(!only_heartbeat(old(), &relabelled));
        let mut grown = node("2", "2026-01-01T00:00:20Z", "True");
        grown.status.as_mut().unwrap().allocatable = None;
        assert!(!only_heartbeat(old(), &grown));
        let mut fewer = node("2", "2026-01-01T00:00:20Z", "True");
        fewer
            .status
            .as_mut()
            .unwrap()
            .conditions
            .as_mut()
            .unwrap()
            .pop();
        assert!(!only_heartbeat(old(), &fewer));
    }
}
