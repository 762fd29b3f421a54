//! `consolidateAfter`: how long a node must go without a pod event before the graceful methods
//! may take it, and the nodes still inside that wait, which consolidation's simulations keep
//! the moving pods off.

use super::*;

/// Karpenter's `IsUnderConsolidateAfter`: the claim is initialized, its NodePool has a
/// non-zero `consolidateAfter`, and less than that has passed since the claim's last pod event
/// (or its initialization).
pub(crate) fn under_consolidate_after(pool: &NodePool, claim: &NodeClaim, now: Timestamp) -> bool {
    let Some(after) = pool.disruption.consolidate_after else {
        return false;
    };
    if after.is_zero() || !claim.initialized {
        return false;
    }
    now.since(quiet_since(claim)) < after
}

/// Upstream's NodeClaim `Consolidatable` condition, by the rule the disruption round applies
/// to candidates: the claim is initialized, its NodePool consolidates (not static,
/// `consolidateAfter` not `Never`) and `consolidateAfter` has passed since its last pod event
/// (or its initialization).
pub fn consolidatable(pool: &NodePool, claim: &NodeClaim, now: Timestamp) -> bool {
    claim.initialized && consolidate_after_blocker(pool, claim, now).is_none()
}

/// What `consolidateAfter` counts from: the claim's last pod event, else its initialization.
pub(super) fn quiet_since(claim: &NodeClaim) -> Timestamp {
    claim
        .last_pod_event_time
        .or(claim.initialized_at)
        .unwrap_or(claim.creation_timestamp)
}

/// The nodes a consolidation's simulation keeps moving pods off: those whose claim is
/// [`under_consolidate_after`]. None of them is a consolidation candidate.
pub fn closed_nodes(snapshot: &Snapshot) -> BTreeSet<String> {
    closed_node_names(snapshot)
        .into_iter()
        .map(str::to_string)
        .collect()
}

/// [`closed_nodes`], borrowed from the snapshot, for lookups only.
pub(crate) fn closed_node_names(snapshot: &Snapshot) -> FastSet<&str> {
    let pools: FastMap<&str, &NodePool> = snapshot
        .nodepools
        .iter()
        .map(|p| (p.name.as_str(), p))
        .collect();
    snapshot
        .node_claims
        .iter()
        .filter_map(|c| {
            let node = c.node_name.as_deref()?;
            let pool = pools.get(c.nodepool.as_str())?;
            under_consolidate_after(pool, c, snapshot.now).then_some(node)
        })
        .collect()
}

/// Graceful methods only: the NodePool is static (upstream ignores its disruption settings),
/// consolidation is off for it, or `consolidateAfter` has not elapsed since the claim's last
/// pod event.
pub(super) fn consolidate_after_blocker(
    pool: &NodePool,
    claim: &NodeClaim,
    now: Timestamp,
) -> Option<Blocker> {
    if pool.replicas.is_some() {
        return Some(Blocker::StaticNodePool {
            nodepool: pool.name.clone(),
        });
    }
    match pool.disruption.consolidate_after {
        None => Some(Blocker::ConsolidationDisabled {
            nodepool: pool.name.clone(),
        }),
        Some(after) if !after.is_zero() => {
            let elapsed = now.since(quiet_since(claim));
            (elapsed < after).then(|| Blocker::ConsolidateAfter {
                remaining: after - elapsed,
            })
        }
        Some(_) => None,
    }
}
