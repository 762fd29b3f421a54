//! Static capacity (upstream's `StaticCapacity` gate): a NodePool with `spec.replicas` keeps
//! that many NodeClaims, whatever the pods need. The provisioner and consolidation leave such
//! pools alone; this decides, for each, how many claims to create and which to delete, as
//! upstream's static provisioning and deprovisioning controllers do:
//!
//! - the target is `replicas`, capped by the pool's `limits.nodes`;
//! - claims being deleted no longer count;
//! - extra claims go in this order: not yet launched, then empty (no pods but daemon pods),
//!   then those with the fewest pods; nodes running a `do-not-disrupt` pod go last; ties by
//!   name;
//! - a drifted claim is replaced one for one (upstream's StaticDrift), as far as the pool's
//!   budgets for `Drifted` allow, longest drifted first: a new claim is made naming it in
//!   [`REPLACES`], and it is deleted once that claim is initialized. Until then the pair
//!   counts as one claim.
//!
//! Offers the decision only; creating and deleting the claims is the shells'.

use std::collections::BTreeMap;

use crate::disruption::budgets::allowed_disruptions;
use crate::disruption::candidates::do_not_disrupt_until;
use crate::labels;
use crate::model::{DisruptionReason, InstanceType, NodeClaim, NodePool, Snapshot};
use crate::resources::NODES;

/// The annotation a static claim made to replace a drifted one carries: the drifted claim's
/// name.
pub const REPLACES: &str = "nodewright.io/replaces";

/// What one static NodePool needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scale {
    /// The static NodePool.
    pub nodepool: String,
    /// NodeClaims to create.
    pub create: usize,
    /// NodeClaims to delete, in the order to delete them.
    pub delete: Vec<String>,
    /// Drifted claims to make a replacement for (one each, annotated [`REPLACES`]).
    pub replace: Vec<String>,
    /// Drifted claims whose replacement is initialized: delete them.
    pub replaced: Vec<String>,
}

/// The claims each static NodePool of `s` must gain or lose; pools already at their target
/// are left out.
pub fn plan(s: &Snapshot) -> Vec<Scale> {
    s.nodepools
        .iter()
        .filter_map(|p| scale(s, p))
        .filter(|sc| {
            sc.create > 0
                || !sc.delete.is_empty()
                || !sc.replace.is_empty()
                || !sc.replaced.is_empty()
        })
        .collect()
}

fn scale(s: &Snapshot, pool: &NodePool) -> Option<Scale> {
    let replicas = usize::try_from(pool.replicas?).unwrap_or(0);
    let target = if pool.limits.contains(NODES) {
        replicas.min(usize::try_from(pool.limits.get(NODES)).unwrap_or(0))
    } else {
        replicas
    };
    let live: Vec<&NodeClaim> = s
        .node_claims
        .iter()
        .filter(|c| c.nodepool == pool.name && c.deletion_timestamp.is_none())
        .map(|c| &**c)
        .collect();
    let live_name = |name: &str| live.iter().any(|c| c.name == name);
    // Replacements in progress: (replacement, the drifted claim it stands in for).
    let pairs: Vec<(&NodeClaim, &str)> = live
        .iter()
        .filter_map(|c| Some((*c, c.annotations.get(REPLACES)?.as_str())))
        .filter(|(_, old)| live_name(old))
        .collect();
    let mut sc = Scale {
        nodepool: pool.name.clone(),
        ..Scale::default()
    };
    sc.replaced = pairs
        .iter()
        .filter(|(new, _)| new.initialized)
        .map(|(_, old)| old.to_string())
        .collect();
    // A pair is one claim until the drifted one goes.
    let counted: Vec<&NodeClaim> = live
        .iter()
        .copied()
        .filter(|c| !pairs.iter().any(|(new, _)| new.name == c.name))
        .collect();
    let count = counted.len();
    if count < target {
        sc.create = target - count;
    } else if count > target {
        let mut ranked: Vec<(Rank, &str)> = counted
            .iter()
            .map(|c| (rank(s, c), c.name.as_str()))
            .collect();
        ranked.sort();
        sc.delete = ranked[..count - target]
            .iter()
            .map(|(_, name)| name.to_string())
            .collect();
    }
    sc.replace = drift_replacements(s, pool, &counted, &pairs, &sc.delete);
    Some(sc)
}

/// The drifted claims to replace now: not already being replaced or deleted, longest
/// drifted first, as many as the pool's `Drifted` budgets allow beside those in progress.
fn drift_replacements(
    s: &Snapshot,
    pool: &NodePool,
    counted: &[&NodeClaim],
    pairs: &[(&NodeClaim, &str)],
    deleting: &[String],
) -> Vec<String> {
    let mut drifted: Vec<&NodeClaim> = counted
        .iter()
        .copied()
        .filter(|c| c.drifted.is_some() && c.launched)
        .filter(|c| !pairs.iter().any(|(_, old)| *old == c.name))
        .filter(|c| !deleting.contains(&c.name))
        .collect();
    drifted.sort_by(|a, b| a.drifted_at.cmp(&b.drifted_at).then(a.name.cmp(&b.name)));
    let allowance = allowed_disruptions(
        pool,
        DisruptionReason::Drifted,
        counted.len() as u32,
        pairs.len() as u32,
        s.now,
    );
    drifted
        .into_iter()
        .take(allowance.allowed as usize)
        .map(|c| c.name.clone())
        .collect()
}

/// Which extra claim goes first: lower ranks first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Rank {
    protected: bool,
    launched: bool,
    pods: usize,
}

fn rank(s: &Snapshot, c: &NodeClaim) -> Rank {
    let pods: Vec<_> = c
        .node_name
        .as_deref()
        .map(|node| {
            s.pods
                .iter()
                .filter(|p| p.node_name.as_deref() == Some(node))
                .filter(|p| !p.is_daemonset_pod() && !p.is_terminal())
                .collect()
        })
        .unwrap_or_default();
    Rank {
        protected: pods
            .iter()
            .any(|p| do_not_disrupt_until(p, s.now).is_some()),
        launched: c.launched,
        pods: pods.len(),
    }
}

/// The instance types a static claim of `pool` may be, cheapest available offering first
/// (ties by name): those the pool's requirements admit with an available offering in a zone
/// and capacity type they admit.
pub fn instance_types(pool: &NodePool, types: &[InstanceType]) -> Vec<String> {
    let reqs = &pool.template.requirements;
    let admits = |key: &str, v: &str| {
        reqs.iter()
            .filter(|r| r.key == key)
            .all(|r| r.admits(Some(v)))
    };
    let mut priced: BTreeMap<(u64, String), ()> = BTreeMap::new();
    for it in types.iter().filter(|it| it.compatible_with(reqs)) {
        let cheapest = it
            .offerings
            .iter()
            .filter(|o| o.available)
            .filter(|o| {
                admits(labels::ZONE, &o.zone)
                    && admits(labels::CAPACITY_TYPE, o.capacity_type.as_str())
            })
            .map(|o| o.price)
            .min_by(f64::total_cmp);
        if let Some(price) = cheapest {
            // Prices are non-negative, so their bits sort as the numbers do.
            priced.insert((price.to_bits(), it.name.clone()), ());
        }
    }
    priced.into_keys().map(|(_, name)| name).collect()
}

#[cfg(test)]
mod tests;
