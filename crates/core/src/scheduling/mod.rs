//! The scheduling engine: given a snapshot, decide where every pending pod goes and which new
//! NodeClaims to launch, as Karpenter would, and say why for every pod that cannot be placed.
//!
//! Pipeline: [`setup`] compiles the snapshot (interned labels, ranked instance types, pod classes,
//! topology groups); [`engine`] places classes in queue order; [`bound`] computes an LP lower
//! bound on the cost of the new capacity.

pub mod bitset;
pub mod bound;
pub mod compile;
pub mod engine;
pub mod explain;
pub mod intern;
pub mod launch;
pub mod node_cache;
pub mod plan;
pub mod pool_cache;
pub mod prepared;
pub mod reqs;
pub mod setup;
pub mod solver;
pub mod split;
pub mod topology;

pub use engine::Options;
pub use plan::{InstanceOption, NewClaim, Placement, Plan, Target, Unplaced};

use crate::model::Snapshot;

/// Plans the snapshot's pending pods.
pub fn solve(snapshot: &Snapshot, options: &Options) -> Plan {
    solve_with(snapshot, options, None)
}

/// [`solve`], with nodes compiled by earlier solves taken from `cache` (the plan is the same):
/// for callers that solve one cluster over and over as it changes.
pub fn solve_with(
    snapshot: &Snapshot,
    options: &Options,
    cache: Option<&mut node_cache::NodeCache>,
) -> Plan {
    let order = if options.emptiest_first {
        setup::kube_queue_cmp
    } else {
        setup::karpenter_queue_cmp
    };
    let mut world = setup::build_ordered(snapshot, cache, !options.closed.is_empty(), order);
    let mut engine = engine::Engine::new(&mut world, options.clone());
    let unplaced = engine.run();
    if options.repack {
        engine.repack();
    }
    let mut plan = engine.finish(snapshot, unplaced);
    plan.lower_bound = bound::lower_bound(&world, snapshot, &plan);
    plan
}

#[cfg(test)]
mod tests;
