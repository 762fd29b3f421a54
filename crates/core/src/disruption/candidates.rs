//! Which nodes may be voluntarily disrupted, and for every other node the reason it may not.
//!
//! A candidate is a Karpenter-managed node with its NodeClaim, initialized, not already being
//! deleted, whose NodePool exists, and which nothing protects: no `karpenter.sh/do-not-disrupt`
//! on the node or on any active pod, no active pod without an owner reference (nothing would
//! recreate it), no PodDisruptionBudget that allows zero evictions for one
//! of its pods (nor a pod under two budgets), and — for the graceful methods (emptiness and
//! consolidation) — `consolidateAfter` elapsed since the last pod event.
//!
//! Offers the blockers, the `do-not-disrupt` rules and budget counts the shells show; ranking
//! candidates and choosing among them stay private to the methods. This file selects; the
//! [`blocker`]s, the pods' [`protection`], [`consolidate_after`], the per-node lookup
//! [`tables`] and the [`budget_counts`] are modules of their own.

use std::cell::OnceCell;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::cost;
use super::duration::parse_go_duration;
use super::node_memo::{NodeFacts, NodeRound};
use super::type_index::TypeIndex;
use crate::labels;
use crate::model::{
    CapacityType, InstanceType, Node, NodeClaim, NodePool, Pod, PodDisruptionBudget, Snapshot,
    UnhealthyPodEvictionPolicy,
};
use crate::scheduling::intern::{FastMap, FastSet};
use crate::time::Timestamp;

mod blocker;
mod budget_counts;
mod consolidate_after;
mod protection;
mod tables;

pub use blocker::*;
pub use budget_counts::*;
pub use consolidate_after::*;
pub use protection::*;
use tables::*;

/// The annotation, on a pod or a node, that keeps the node from voluntary disruption (a
/// duration as its value lets it lapse).
pub const DO_NOT_DISRUPT: &str = "karpenter.sh/do-not-disrupt";

/// Graceful methods (emptiness, consolidation) always respect pod-level blockers; eventual
/// methods (drift) ignore them for claims that have a termination grace period.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MethodClass {
    Graceful,
    Eventual,
}

impl Blocker {
    pub(crate) fn code(&self) -> &'static str {
        match self {
            Blocker::NotManaged => "not-managed",
            Blocker::NoNodeClaim => "no-nodeclaim",
            Blocker::NodePoolNotFound { .. } => "nodepool-not-found",
            Blocker::NotInitialized => "not-initialized",
            Blocker::Deleting => "deleting",
            Blocker::NodeDoNotDisrupt => "node-do-not-disrupt",
            Blocker::PodDoNotDisrupt { .. } => "pod-do-not-disrupt",
            Blocker::PodHasNoController { .. } => "pod-has-no-controller",
            Blocker::PdbAllowsNoEviction { .. } => "pdb-blocked",
            Blocker::MultiplePdbs { .. } => "multiple-pdbs",
            Blocker::StaticNodePool { .. } => "static-nodepool",
            Blocker::ConsolidationDisabled { .. } => "consolidation-disabled",
            Blocker::ConsolidateAfter { .. } => "consolidate-after",
        }
    }
}

/// A node that may be disrupted, with what ranking and simulation need.
#[derive(Clone, Debug)]
pub struct Candidate<'a> {
    /// The Node.
    pub(crate) node: &'a Node,
    /// Its NodeClaim.
    pub claim: &'a NodeClaim,
    /// The claim's NodePool.
    pub(crate) nodepool: &'a NodePool,
    /// Shared with the round's memory of the node's labels, so a candidate copies no text.
    pub(crate) instance_type: Arc<str>,
    /// The node's zone label; empty when it has none.
    pub(crate) zone: Arc<str>,
    /// The node's capacity-type label; `None` when absent or not one Karpenter knows.
    pub(crate) capacity_type: Option<CapacityType>,
    /// The hourly price of the offering the node runs on (0 when unknown).
    pub(crate) price: f64,
    /// Pods that would have to be placed elsewhere.
    pub(crate) reschedulable_pods: Vec<&'a Pod>,
    /// The sum of its pods' eviction costs times the share of its life left before it
    /// expires; upstream's searches try the lowest first.
    pub(crate) disruption_cost: f64,
    /// `1 + Σ max(0, eviction cost)` over `reschedulable_pods`: exactly 1 for an empty node.
    pub(crate) reschedule_cost: f64,
}

impl Candidate<'_> {
    /// Only daemon, mirror or terminal pods remain.
    pub fn is_empty(&self) -> bool {
        self.reschedule_cost <= 1.0
    }

    /// Karpenter's ranking: savings per unit of disruption, highest first.
    pub(crate) fn savings_ratio(&self) -> f64 {
        self.price / self.reschedule_cost
    }
}

/// The outcome of candidate selection over a whole snapshot, sorted by node name.
#[derive(Clone, Debug, Default)]
pub struct Selection<'a> {
    /// The nodes that may be disrupted.
    pub candidates: Vec<Candidate<'a>>,
    /// The other nodes, by name, each with the reason it may not be disrupted.
    pub blocked: Vec<(String, Blocker)>,
}

/// Splits every Karpenter-managed node into candidates and blocked nodes for `class`.
pub(crate) fn select<'a>(snapshot: &'a Snapshot, class: MethodClass) -> Selection<'a> {
    let types = OnceCell::new();
    select_in(&Tables::new(snapshot, None, &types), snapshot, class)
}

/// [`select`] of the nodes named in `names` only (a re-check's few targets): each node's
/// verdict reads only what concerns that node, so it is the one `select` gives, and only
/// their pods, claims and instance types are looked up.
pub(crate) fn select_only<'a>(
    snapshot: &'a Snapshot,
    class: MethodClass,
    names: &[&str],
) -> Selection<'a> {
    let types = OnceCell::new();
    select_in(&Tables::new(snapshot, Some(names), &types), snapshot, class)
}

fn select_in<'a>(t: &Tables<'a, '_>, snapshot: &'a Snapshot, class: MethodClass) -> Selection<'a> {
    let mut out = Selection::with_capacity(t.nodes.len());
    let mut scratch = Vec::new();
    for (at, &node) in t.nodes.iter().enumerate() {
        let (claim, pool, pods) = match admitted(t, at, node.labels.get(labels::NODEPOOL)) {
            Ok(found) => found,
            Err(b) => {
                out.blocked.push((node.name.clone(), b));
                continue;
            }
        };
        let pod_blockers_apply =
            class == MethodClass::Graceful || claim.termination_grace_period.is_none();
        let blocker = pod_blockers_apply
            .then(|| pod_blocker(pods, &snapshot.pdbs, snapshot.now))
            .flatten()
            .or_else(|| {
                (class == MethodClass::Graceful)
                    .then(|| consolidate_after_blocker(pool, claim, snapshot.now))
                    .flatten()
            });
        match blocker {
            Some(b) => out.blocked.push((node.name.clone(), b)),
            None => out.candidates.push(candidate(
                node,
                claim,
                pool,
                pods,
                t.facts(node, pool),
                snapshot.now,
                &mut scratch,
            )),
        }
    }
    out
}

/// [`select`] for both classes (graceful, eventual) in one pass over the nodes: what the
/// classes share (the node's lookups, its pod blockers, the candidate itself) is worked out
/// once per node.
#[cfg(test)]
pub(crate) fn select_both<'a>(snapshot: &'a Snapshot) -> (Selection<'a>, Selection<'a>) {
    let (graceful, eventual, _) = select_both_counted(snapshot);
    (graceful, eventual)
}

/// [`select_both`], with [`budget_node_counts`] worked out in the same pass: the nodes'
/// NodePools and claims are looked up there anyway.
#[allow(clippy::type_complexity)]
pub fn select_both_counted<'a>(
    snapshot: &'a Snapshot,
) -> (Selection<'a>, Selection<'a>, BTreeMap<String, (u32, u32)>) {
    let lists = Lists {
        blocked: true,
        eventual_whole: true,
    };
    let types = OnceCell::new();
    let s = select_both_with(snapshot, None, lists, &types);
    (s.graceful, s.eventual, s.counts)
}

/// A planning round's selection (see [`select_round`]).
pub(super) struct RoundSelection<'a> {
    /// The graceful methods' candidates, and (when asked for) their blocked nodes.
    pub graceful: Selection<'a>,
    /// Every eventual candidate that is not a graceful one: every graceful candidate is an
    /// eventual one too, since nothing blocks the eventual methods that does not block the
    /// graceful ones.
    pub eventual_only: Vec<Candidate<'a>>,
    pub counts: BTreeMap<String, (u32, u32)>,
}

/// The selection a planning round reads, with what nodes' labels say kept across rounds in
/// `kept`. Each candidate is built once and held once; blocked nodes are listed only when
/// `blocked` is set (a round without verdicts reads none). `types` is the round's index of
/// instance types, built here if a price is looked up.
pub(super) fn select_round<'a>(
    snapshot: &'a Snapshot,
    kept: &mut NodeRound<'_, 'a>,
    blocked: bool,
    types: &OnceCell<TypeIndex<'a>>,
) -> RoundSelection<'a> {
    let s = select_both_with(
        snapshot,
        Some(kept),
        Lists {
            blocked,
            eventual_whole: false,
        },
        types,
    );
    RoundSelection {
        graceful: s.graceful,
        eventual_only: s.eventual.candidates,
        counts: s.counts,
    }
}

/// What [`select_both_with`] lists besides the graceful candidates.
#[derive(Clone, Copy)]
struct Lists {
    /// Both classes' blocked nodes.
    blocked: bool,
    /// Every eventual candidate, the graceful ones copied; otherwise only those that are not
    /// graceful ones, and no candidate is copied.
    eventual_whole: bool,
}

struct Both<'a> {
    graceful: Selection<'a>,
    eventual: Selection<'a>,
    counts: BTreeMap<String, (u32, u32)>,
}

/// Both classes in one pass, listing what `lists` asks for.
fn select_both_with<'a>(
    snapshot: &'a Snapshot,
    mut kept: Option<&mut NodeRound<'_, 'a>>,
    lists: Lists,
    types: &OnceCell<TypeIndex<'a>>,
) -> Both<'a> {
    let t = Tables::new(snapshot, None, types);
    let now = snapshot.now;
    let mut graceful = Selection::with_capacity(t.nodes.len());
    let mut eventual = Selection::with_capacity(t.nodes.len());
    let mut scratch = Vec::new();
    let mut counts: FastMap<&str, (u32, u32)> = FastMap::default();
    for (at, &node) in t.nodes.iter().enumerate() {
        let pool_label = node.labels.get(labels::NODEPOOL);
        if let Some(pool) = pool_label
            && let Some(claim) = t.claim_of[t.entry[at] as usize]
        {
            count_for_budget(&mut counts, pool, node, claim);
        }
        let (claim, pool, pods) = match admitted(&t, at, pool_label) {
            Ok(found) => found,
            Err(b) => {
                if lists.blocked {
                    graceful.blocked.push((node.name.clone(), b.clone()));
                    eventual.blocked.push((node.name.clone(), b));
                }
                continue;
            }
        };
        // Graceful methods always respect pod blockers, so they are always worked out.
        let pod_block = pod_blocker(pods, &snapshot.pdbs, now);
        let eventual_block = if claim.termination_grace_period.is_none() {
            pod_block.clone()
        } else {
            None
        };
        let graceful_block = pod_block.or_else(|| consolidate_after_blocker(pool, claim, now));
        let graceful_takes = graceful_block.is_none();
        if graceful_takes || eventual_block.is_none() {
            let facts = match kept.as_deref_mut() {
                Some(k) => k.facts(node, pool, |it, zone, ct| t.price(&pool.name, it, zone, ct)),
                None => t.facts(node, pool),
            };
            let c = candidate(node, claim, pool, pods, facts, now, &mut scratch);
            match (graceful_takes, lists.eventual_whole) {
                (true, true) => {
                    graceful.candidates.push(c.clone());
                    eventual.candidates.push(c);
                }
                (true, false) => graceful.candidates.push(c),
                (false, _) => eventual.candidates.push(c),
            }
        }
        if lists.blocked {
            if let Some(b) = graceful_block {
                graceful.blocked.push((node.name.clone(), b));
            }
            if let Some(b) = eventual_block {
                eventual.blocked.push((node.name.clone(), b));
            }
        }
    }
    Both {
        graceful,
        eventual,
        counts: owned_counts(counts),
    }
}

impl Selection<'_> {
    fn with_capacity(n: usize) -> Self {
        Selection {
            candidates: Vec::with_capacity(n),
            blocked: Vec::with_capacity(n),
        }
    }
}

/// The checks both method classes make, in their order: the node's claim, NodePool and pods,
/// or the first reason it is not a candidate for any method. `at` is the node's position in
/// the tables.
#[allow(clippy::type_complexity)]
fn admitted<'a, 't>(
    t: &'t Tables<'a, '_>,
    at: usize,
    pool_label: Option<&String>,
) -> Result<(&'a NodeClaim, &'a NodePool, &'t [&'a Pod]), Blocker> {
    let node = t.nodes[at];
    let Some(pool_name) = pool_label else {
        return Err(Blocker::NotManaged);
    };
    let claim = t.claim_of[t.entry[at] as usize]
        .or_else(|| t.by_provider().get(node.provider_id.as_str()).copied());
    let Some(claim) = claim else {
        return Err(Blocker::NoNodeClaim);
    };
    let Some(&pool) = t.pools.get(pool_name.as_str()) else {
        return Err(Blocker::NodePoolNotFound {
            nodepool: pool_name.clone(),
        });
    };
    if !claim.initialized {
        return Err(Blocker::NotInitialized);
    }
    if node.deletion_timestamp.is_some() || claim.deletion_timestamp.is_some() {
        return Err(Blocker::Deleting);
    }
    if node
        .annotations
        .get(DO_NOT_DISRUPT)
        .is_some_and(|v| v == "true")
    {
        return Err(Blocker::NodeDoNotDisrupt);
    }
    Ok((claim, pool, t.pods_of(at)))
}

/// The candidate for an admitted node, with what its labels say (`facts`); `scratch` holds
/// its pods' eviction costs.
#[allow(clippy::too_many_arguments)]
fn candidate<'a>(
    node: &'a Node,
    claim: &'a NodeClaim,
    pool: &'a NodePool,
    pods: &[&'a Pod],
    facts: NodeFacts,
    now: Timestamp,
    scratch: &mut Vec<f64>,
) -> Candidate<'a> {
    let NodeFacts {
        instance_type,
        zone,
        capacity_type,
        price,
    } = facts;
    let reschedulable_pods: Vec<&Pod> = pods
        .iter()
        .copied()
        .filter(|p| is_reschedulable(p))
        .collect();
    let age = now.since(claim.creation_timestamp);
    let lifetime = cost::lifetime_remaining(claim.expire_after.or(pool.template.expire_after), age);
    // Each pod's eviction cost once, summed in the same order as the two cost functions.
    scratch.clear();
    scratch.extend(reschedulable_pods.iter().map(|p| cost::eviction_cost(p)));
    Candidate {
        node,
        claim,
        nodepool: pool,
        instance_type,
        zone,
        capacity_type,
        price,
        disruption_cost: cost::disruption_cost_of(scratch, lifetime),
        reschedule_cost: cost::reschedule_cost_of(scratch),
        reschedulable_pods,
    }
}

#[cfg(test)]
mod tests;
