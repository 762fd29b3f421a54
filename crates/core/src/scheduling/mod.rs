//! The scheduling engine: given a snapshot, decide where every pending pod goes and which new
//! NodeClaims to launch, as Karpenter would, and say why for every pod that cannot be placed.
//!
//! Offers: [`solve`] (and [`solve_with`], which says how the compile runs) returning a
//! [`Plan`]; [`explain`] for one pod; [`launch`] to apply a plan to a snapshot; the
//! [`NodeCache`] a caller keeps between compiles of one cluster; and the matching rules the
//! simulator's kube-scheduler model shares with the engine ([`term_selects`],
//! [`ports_conflict`], [`pending_by_zone`]).
//!
//! Not offered: the pipeline itself, which stays private so it can change. `setup` compiles
//! the snapshot (interned labels, ranked instance types, pod classes, topology groups),
//! `engine` places classes in queue order, `bound` computes an LP lower bound on the cost of
//! the new capacity; disruption planning reaches them inside the crate.

pub(crate) mod bitset;
pub(crate) mod bound;
pub(crate) mod compile;
mod effective_zone;
pub(crate) mod engine;
pub mod explain;
pub(crate) mod intern;
mod launch;
mod node_cache;
mod plan;
mod pool_cache;
pub(crate) mod prepared;
pub(crate) mod reqs;
pub(crate) mod setup;
pub(crate) mod solver;
pub(crate) mod topology;

pub use effective_zone::pending_by_zone;
pub use engine::Options;
pub use intern::FastMap;
pub use launch::launch;
pub use node_cache::NodeCache;
pub use plan::{InstanceOption, NewClaim, Placement, Plan, Target, Unplaced};
pub use setup::term_selects;
pub use solver::ports_conflict;

use crate::model::Snapshot;

/// How a compile of a snapshot runs ([`solve_with`], [`prepared::Prepared::new_with`]).
/// Neither field changes what is compiled or any answer drawn from it, only how long it takes.
#[derive(Debug, Default)]
pub struct Compile<'c> {
    /// Nodes compiled by earlier compiles of the same cluster, for a caller that compiles one
    /// cluster over and over as it changes (see [`NodeCache`]).
    pub(crate) cache: Option<&'c mut NodeCache>,
    /// Keep the compile on the calling thread. A compile of a large cluster otherwise moves
    /// parts of its work onto threads of its own; a caller that runs the compile beside work of
    /// its own, which already shares the cores with it, sets this: another thread would only
    /// compete for them, and cost a thread start besides.
    pub(crate) one_thread: bool,
}

impl<'c> Compile<'c> {
    /// A compile with nodes taken from `cache`, free to use threads.
    pub fn cached(cache: &'c mut NodeCache) -> Self {
        Compile {
            cache: Some(cache),
            one_thread: false,
        }
    }
}

/// Plans the snapshot's pending pods.
pub fn solve(snapshot: &Snapshot, options: &Options) -> Plan {
    solve_with(snapshot, options, Compile::default())
}

/// [`solve`], its snapshot compiled as `compile` says (the plan is the same).
pub fn solve_with(snapshot: &Snapshot, options: &Options, compile: Compile<'_>) -> Plan {
    let order = if options.emptiest_first {
        setup::kube_queue_cmp
    } else {
        setup::karpenter_queue_cmp
    };
    let mut world = setup::build_ordered(snapshot, compile, !options.closed.is_empty(), order);
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
