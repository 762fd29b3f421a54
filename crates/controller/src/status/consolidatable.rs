//! The NodeClaim `Consolidatable` condition, as upstream's consolidation-state controller keeps
//! it: `True` once the claim is initialized and its pool's `consolidateAfter` has passed since
//! the last pod event (since initialization when no pod event was seen); absent while that
//! time has not come, before initialization, and when the pool never consolidates
//! (`consolidateAfter: Never`, or a static pool). The verdict is core's
//! [`candidates::consolidatable`], the rule the disruption round applies to its candidates,
//! so the condition dashboards read and the round cannot disagree; `nodewright explain node`
//! says what else holds a node.

use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_api::v1::shared::Condition;
use nodewright_core::disruption::candidates;
use nodewright_core::model::NodePool;
use nodewright_core::time::Timestamp;

use crate::conditions::{self as cond, CONSOLIDATABLE};
use crate::state::convert;

/// Whether `claim`, with the conditions `conds` this pass will write, is consolidatable at
/// `now` in `pool` (its NodePool as the engine sees it; `None` when that does not convert).
pub fn consolidatable(
    claim: &NodeClaim,
    conds: &[Condition],
    pool: Option<&NodePool>,
    now: Timestamp,
) -> bool {
    let Some(pool) = pool else {
        return false;
    };
    let mut claim = claim.clone();
    claim.status.get_or_insert_default().conditions = Some(conds.to_vec());
    convert::nodeclaim(&claim).is_ok_and(|c| candidates::consolidatable(pool, &c, now))
}

/// Sets or removes `Consolidatable` in `conds`; returns whether it changed.
pub fn update(
    claim: &NodeClaim,
    conds: &mut Vec<Condition>,
    pool: Option<&NodePool>,
    now: Timestamp,
) -> bool {
    if consolidatable(claim, conds, pool, now) {
        cond::set(conds, CONSOLIDATABLE, "True", CONSOLIDATABLE, "", now)
    } else {
        cond::remove(conds, CONSOLIDATABLE)
    }
}

#[cfg(test)]
mod tests {
    use nodewright_testkit::json::merge;
    use nodewright_testkit::k8s;
    use serde_json::json;

    use super::*;
    use crate::clock::rfc3339;

    fn pool(after: Option<&str>) -> NodePool {
        pool_with(after, false)
    }

    fn pool_with(after: Option<&str>, fixed: bool) -> NodePool {
        let mut v = k8s::nodepool("p");
        if let Some(a) = after {
            v["spec"]["disruption"]["consolidateAfter"] = json!(a);
        }
        if fixed {
            v["spec"]["replicas"] = json!(2);
        }
        let api: nodewright_api::v1::nodepool::NodePool = serde_json::from_value(v).unwrap();
        nodewright_api::to_core::nodepool(&api).unwrap()
    }

    fn claim(initialized_at: Option<Timestamp>, last_pod_event: Option<Timestamp>) -> NodeClaim {
        let mut conds = vec![];
        if let Some(t) = initialized_at {
            conds.push(
                json!({"type": "Initialized", "status": "True", "lastTransitionTime": rfc3339(t)}),
            );
        }
        let mut status = json!({"conditions": conds});
        if let Some(t) = last_pod_event {
            status["lastPodEventTime"] = json!(rfc3339(t));
        }
        serde_json::from_value(merge(k8s::nodeclaim("c"), json!({"status": status}))).unwrap()
    }

    fn at(s: i64) -> Timestamp {
        Timestamp(1_717_200_000_000 + s * 1000)
    }

    fn after_update(c: &NodeClaim, p: &NodePool, now: Timestamp) -> Option<String> {
        let mut conds = c
            .status
            .as_ref()
            .unwrap()
            .conditions
            .clone()
            .unwrap_or_default();
        update(c, &mut conds, Some(p), now);
        cond::find(&conds, CONSOLIDATABLE).map(|c| c.status.clone())
    }

    #[test]
    fn true_once_consolidate_after_has_passed_since_the_last_pod_event() {
        let p = pool(Some("5m"));
        let c = claim(Some(at(0)), Some(at(100)));
        assert_eq!(after_update(&c, &p, at(399)), None);
        assert_eq!(after_update(&c, &p, at(400)).as_deref(), Some("True"));
    }

    #[test]
    fn without_a_pod_event_it_counts_from_initialization() {
        let p = pool(Some("1m"));
        let c = claim(Some(at(0)), None);
        assert_eq!(after_update(&c, &p, at(59)), None);
        assert_eq!(after_update(&c, &p, at(60)).as_deref(), Some("True"));
    }

    #[test]
    fn never_uninitialized_and_fresh_events_remove_it() {
        let c = claim(Some(at(0)), None);
        assert_eq!(after_update(&c, &pool(Some("Never")), at(9999)), None);
        assert_eq!(
            after_update(&claim(None, None), &pool(Some("0s")), at(9999)),
            None
        );
        // Unset is the CRD's default, 0s.
        assert_eq!(
            after_update(&c, &pool(None), at(0)).as_deref(),
            Some("True")
        );
        // A condition already set goes when a pod event makes the node busy again.
        let mut conds = c.status.as_ref().unwrap().conditions.clone().unwrap();
        assert!(update(&c, &mut conds, Some(&pool(Some("1m"))), at(60)));
        let busy = claim(Some(at(0)), Some(at(100)));
        assert!(update(&busy, &mut conds, Some(&pool(Some("1m"))), at(120)));
        assert!(cond::find(&conds, CONSOLIDATABLE).is_none());
        // A static pool is never consolidated, so its claims never say they could be.
        assert_eq!(
            after_update(&c, &pool_with(Some("0s"), true), at(9999)),
            None
        );
    }
}
