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
//! candidates and choosing among them stay private to the methods.

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

/// Why a node is not a disruption candidate. `code()` is stable for machines; `Display` is
/// for people.
#[derive(Clone, Debug, PartialEq)]
pub enum Blocker {
    /// The node has no `karpenter.sh/nodepool` label: Karpenter does not manage it.
    NotManaged,
    /// No NodeClaim names the node, by node name or provider ID.
    NoNodeClaim,
    /// The node's `karpenter.sh/nodepool` label names a NodePool the snapshot lacks.
    NodePoolNotFound {
        /// The NodePool the label names.
        nodepool: String,
    },
    /// The node's NodeClaim is not `Initialized` yet.
    NotInitialized,
    /// The node or its NodeClaim has a deletion timestamp.
    Deleting,
    /// The node carries `karpenter.sh/do-not-disrupt: "true"`.
    NodeDoNotDisrupt,
    /// An active pod on the node carries `karpenter.sh/do-not-disrupt`, not lapsed.
    PodDoNotDisrupt {
        /// The pod, `namespace/name`.
        pod: String,
        /// When a duration value's protection lapses; `None` for `"true"` (forever).
        until: Option<Timestamp>,
    },
    /// An active pod on the node has no owner reference: nothing would recreate it.
    PodHasNoController {
        /// The pod, `namespace/name`.
        pod: String,
    },
    /// The PodDisruptionBudget covering a pod on the node allows no eviction now.
    PdbAllowsNoEviction {
        /// The budget, `namespace/name`.
        pdb: String,
        /// The pod, `namespace/name`.
        pod: String,
    },
    /// A pod on the node is selected by more than one PodDisruptionBudget, which the
    /// eviction API refuses.
    MultiplePdbs {
        /// The pod, `namespace/name`.
        pod: String,
        /// The budgets selecting it, `namespace/name`, sorted.
        pdbs: Vec<String>,
    },
    /// The NodePool is static (`spec.replicas`): static capacity keeps its size.
    StaticNodePool {
        /// The static NodePool.
        nodepool: String,
    },
    /// The node's NodePool has `spec.disruption.consolidateAfter: Never` (graceful methods
    /// only).
    ConsolidationDisabled {
        /// The NodePool.
        nodepool: String,
    },
    /// Less than the NodePool's `consolidateAfter` has passed since the claim's last pod
    /// event (graceful methods only).
    ConsolidateAfter {
        /// How much of `consolidateAfter` is still to run.
        remaining: Duration,
    },
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

impl fmt::Display for Blocker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Blocker::NotManaged => f.write_str("node has no karpenter.sh/nodepool label"),
            Blocker::NoNodeClaim => f.write_str("node has no NodeClaim"),
            Blocker::NodePoolNotFound { nodepool } => write!(f, "NodePool {nodepool} not found"),
            Blocker::NotInitialized => f.write_str("node is not initialized"),
            Blocker::Deleting => f.write_str("node is already being deleted"),
            Blocker::NodeDoNotDisrupt => write!(f, "node has {DO_NOT_DISRUPT}=true"),
            Blocker::PodDoNotDisrupt { pod, until: None } => write!(f, "do-not-disrupt pod {pod}"),
            Blocker::PodDoNotDisrupt {
                pod,
                until: Some(t),
            } => {
                write!(
                    f,
                    "do-not-disrupt pod {pod} (until {}s after epoch)",
                    t.unix_seconds()
                )
            }
            Blocker::PodHasNoController { pod } => write!(f, "pod {pod} has no controller"),
            Blocker::PdbAllowsNoEviction { pdb, pod } => {
                write!(f, "PDB {pdb} allows 0 evictions (pod {pod})")
            }
            Blocker::MultiplePdbs { pod, pdbs } => {
                write!(
                    f,
                    "pod {pod} is selected by more than one PDB ({})",
                    pdbs.join(", ")
                )
            }
            Blocker::StaticNodePool { nodepool } => write!(
                f,
                "NodePool {nodepool} is static (spec.replicas): its size is kept, not consolidated"
            ),
            Blocker::ConsolidationDisabled { nodepool } => {
                write!(f, "NodePool {nodepool} has consolidateAfter: Never")
            }
            Blocker::ConsolidateAfter { remaining } => {
                write!(
                    f,
                    "consolidateAfter not elapsed ({}s left)",
                    remaining.as_secs().max(1)
                )
            }
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

/// Pods that are still running or starting (not finished, not being deleted).
fn is_active(p: &Pod) -> bool {
    !p.is_terminal() && !p.is_terminating()
}

/// Pods a disruption must move: active (or terminating StatefulSet pods), not daemon or mirror.
pub(crate) fn is_reschedulable(p: &Pod) -> bool {
    let sts_terminating = p.is_terminating()
        && !p.is_terminal()
        && p.owner.as_ref().is_some_and(|o| o.kind == "StatefulSet");
    (is_active(p) || sts_terminating) && !p.is_daemonset_pod() && !p.is_mirror_pod()
}

/// The instant a pod's `do-not-disrupt` protection ends: `Some(None)` forever (`"true"`),
/// `Some(Some(t))` until `t` (a duration counted from the pod's start), `None` if the
/// annotation is absent, invalid, or has lapsed.
pub fn do_not_disrupt_until(pod: &Pod, now: Timestamp) -> Option<Option<Timestamp>> {
    let value = pod.annotations.get(DO_NOT_DISRUPT)?;
    if value == "true" {
        return Some(None);
    }
    let d = parse_go_duration(value).filter(|d| !d.is_zero())?;
    let start = pod.start_time.unwrap_or(pod.creation_timestamp);
    let until = start.plus(d);
    (until > now).then_some(Some(until))
}

/// A pod's `do-not-disrupt` protection given as a duration counted from the pod's start: the
/// instant it ends, and whether that has passed by `now` (upstream tells the pod which:
/// `DoNotDisruptUntil`, `DoNotDisruptGracePeriodElapsed`). `None` for `"true"`, an invalid
/// value, no annotation, or a pod not started yet (upstream says nothing about those).
pub fn timed_do_not_disrupt(pod: &Pod, now: Timestamp) -> Option<(Timestamp, bool)> {
    let value = pod.annotations.get(DO_NOT_DISRUPT)?;
    let d = parse_go_duration(value).filter(|d| !d.is_zero())?;
    let until = pod.start_time?.plus(d);
    Some((until, until <= now))
}

/// A pod's `do-not-disrupt` value when it is neither `"true"` nor a positive duration: ignored
/// by [`do_not_disrupt_until`], and reported by upstream (`InvalidDoNotDisruptAnnotation`).
pub fn invalid_do_not_disrupt(pod: &Pod) -> Option<&str> {
    let value = pod.annotations.get(DO_NOT_DISRUPT)?;
    let valid = value == "true" || parse_go_duration(value).is_some_and(|d| !d.is_zero());
    (!valid).then_some(value.as_str())
}

/// Karpenter refuses to disrupt a node running an active pod that has no owner reference at
/// all (mirror pods excepted): evicting it would delete it for good. Daemon pods have an owner,
/// and terminal or terminating pods are filtered out before this is asked.
fn ownerless_blocker(pod: &Pod) -> Option<Blocker> {
    (pod.is_ownerless() && !pod.is_mirror_pod())
        .then(|| Blocker::PodHasNoController { pod: pod.key() })
}

fn pdb_blocker(pod: &Pod, pdbs: &[PodDisruptionBudget]) -> Option<Blocker> {
    let matching: Vec<&PodDisruptionBudget> = pdbs
        .iter()
        .filter(|b| b.namespace == pod.namespace)
        .filter(|b| b.selector.as_ref().is_some_and(|s| s.matches(&pod.labels)))
        .collect();
    if matching.len() > 1 {
        let mut names: Vec<String> = matching
            .iter()
            .map(|b| format!("{}/{}", b.namespace, b.name))
            .collect();
        names.sort();
        return Some(Blocker::MultiplePdbs {
            pod: pod.key(),
            pdbs: names,
        });
    }
    let b = matching.first()?;
    let unhealthy_exempt =
        b.unhealthy_pod_eviction_policy == UnhealthyPodEvictionPolicy::AlwaysAllow && !pod.ready;
    (b.disruptions_allowed <= 0 && !unhealthy_exempt).then(|| Blocker::PdbAllowsNoEviction {
        pdb: format!("{}/{}", b.namespace, b.name),
        pod: pod.key(),
    })
}

/// The hourly price of `it`'s offering in `zone` with capacity type `ct` (0 when it has none).
fn offering_price(it: &InstanceType, zone: &str, ct: Option<CapacityType>) -> f64 {
    it.offerings
        .iter()
        .find(|o| o.zone == zone && Some(o.capacity_type) == ct)
        .map_or(0.0, |o| o.price)
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

/// What selection looks up per node, built once per snapshot: the nodes by name, and per
/// node its claim and its pods, found by the node's position rather than by hashing its name
/// again. Nodes sharing a name share one entry, the last claim of a node name winning, as a map
/// built in order would have it.
struct Tables<'a, 't> {
    /// The nodes by name.
    nodes: Vec<&'a Node>,
    /// Per node, the position of the first node of its name: the entry it reads.
    entry: Vec<u32>,
    /// Per entry, the last claim naming that node.
    claim_of: Vec<Option<&'a NodeClaim>>,
    /// Per entry `e`, its pods in snapshot order: `pods[starts[e]..starts[e + 1]]`.
    pods: Vec<&'a Pod>,
    starts: Vec<u32>,
    /// Built at the first node whose claim is not found by node name (rare: a claim names
    /// its node once registered).
    claims_by_provider: OnceCell<FastMap<&'a str, &'a NodeClaim>>,
    claims: &'a [NodeClaim],
    wanted_provider: Option<FastSet<&'a str>>,
    pools: FastMap<&'a str, &'a NodePool>,
    /// Built when a node's facts are worked out, not answered from memory.
    types: &'t OnceCell<TypeIndex<'a>>,
    snapshot: &'a Snapshot,
}

impl<'a, 't> Tables<'a, 't> {
    /// What `node`'s labels say, its price looked up among `pool`'s instance types.
    fn facts(&self, node: &Node, pool: &NodePool) -> NodeFacts {
        NodeFacts::of(node, |it, zone, ct| self.price(&pool.name, it, zone, ct))
    }

    /// The hourly price of the offering of `pool`'s instance type `it` in `zone` with `ct`
    /// (0 when unknown), the type the first of its name in the NodePool's list. Tables for a
    /// few nodes scan that list; tables for every node look it up in the index of every
    /// NodePool's types, built at the first price asked for.
    fn price(&self, pool: &str, it: &str, zone: &str, ct: Option<CapacityType>) -> f64 {
        let found = if self.is_partial() {
            self.snapshot
                .instance_types
                .get(pool)
                .and_then(|its| its.iter().find(|t| t.name == it))
        } else {
            self.types
                .get_or_init(|| TypeIndex::new(self.snapshot))
                .get(pool, it)
        };
        found.map_or(0.0, |t| offering_price(t, zone, ct))
    }

    /// Whether the tables are for the nodes of some names only ([`select_only`]).
    fn is_partial(&self) -> bool {
        self.wanted_provider.is_some()
    }

    /// Claims by provider ID, the last of an ID winning as a map built in order would have it.
    fn by_provider(&self) -> &FastMap<&'a str, &'a NodeClaim> {
        self.claims_by_provider.get_or_init(|| {
            let asked = |p: &str| self.wanted_provider.as_ref().is_none_or(|s| s.contains(p));
            self.claims
                .iter()
                .filter_map(|c| c.provider_id.as_deref().map(|p| (p, c)))
                .filter(|(p, _)| asked(p))
                .collect()
        })
    }

    /// The pods of the node at position `at` in `nodes`.
    fn pods_of(&self, at: usize) -> &[&'a Pod] {
        let e = self.entry[at] as usize;
        &self.pods[self.starts[e] as usize..self.starts[e + 1] as usize]
    }

    /// The tables for every node, or (`only`) for the nodes of those names: then only what
    /// those nodes look up is entered, each entry as the full tables have it.
    fn new(
        snapshot: &'a Snapshot,
        only: Option<&[&str]>,
        types: &'t OnceCell<TypeIndex<'a>>,
    ) -> Self {
        let mut nodes: Vec<&Node> = match only {
            None => snapshot.nodes.iter().collect(),
            Some(names) => snapshot
                .nodes
                .iter()
                .filter(|n| names.contains(&n.name.as_str()))
                .collect(),
        };
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        let mut by_name: FastMap<&str, u32> = FastMap::default();
        by_name.reserve(nodes.len());
        let entry: Vec<u32> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| *by_name.entry(n.name.as_str()).or_insert(i as u32))
            .collect();
        let wanted_provider: Option<FastSet<&str>> =
            only.map(|_| nodes.iter().map(|n| n.provider_id.as_str()).collect());
        let mut claim_of = vec![None; nodes.len()];
        for c in &snapshot.node_claims {
            if let Some(e) = c.node_name.as_deref().and_then(|n| by_name.get(n)) {
                claim_of[*e as usize] = Some(c);
            }
        }
        // Pods grouped by entry in one counting pass, each group in snapshot order.
        let placed: Vec<(u32, &Pod)> = snapshot
            .pods
            .iter()
            .filter_map(|p| Some((*by_name.get(p.node_name.as_deref()?)?, &**p)))
            .collect();
        let mut starts = vec![0u32; nodes.len() + 1];
        for (e, _) in &placed {
            starts[*e as usize + 1] += 1;
        }
        for i in 0..nodes.len() {
            starts[i + 1] += starts[i];
        }
        let mut next = starts.clone();
        let mut pods: Vec<Option<&Pod>> = vec![None; placed.len()];
        for (e, p) in placed {
            pods[next[e as usize] as usize] = Some(p);
            next[e as usize] += 1;
        }
        let pools = snapshot
            .nodepools
            .iter()
            .map(|p| (p.name.as_str(), p))
            .collect();
        Tables {
            nodes,
            entry,
            claim_of,
            pods: pods
                .into_iter()
                .map(|p| p.expect("every slot is filled"))
                .collect(),
            starts,
            claims_by_provider: OnceCell::new(),
            claims: &snapshot.node_claims,
            wanted_provider,
            pools,
            types,
            snapshot,
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

/// The blocker of the first blocked pod by key (the earliest on equal keys): keys are built
/// only for blocked pods, not to sort every pod of every node.
fn pod_blocker(pods: &[&Pod], pdbs: &[PodDisruptionBudget], now: Timestamp) -> Option<Blocker> {
    let mut first: Option<(String, Blocker)> = None;
    for p in pods.iter().filter(|p| is_active(p)) {
        let b = do_not_disrupt_until(p, now)
            .map(|until| Blocker::PodDoNotDisrupt {
                pod: p.key(),
                until,
            })
            .or_else(|| ownerless_blocker(p))
            .or_else(|| {
                if is_reschedulable(p) {
                    pdb_blocker(p, pdbs)
                } else {
                    None
                }
            });
        if let Some(b) = b {
            let k = p.key();
            if first.as_ref().is_none_or(|(f, _)| k < *f) {
                first = Some((k, b));
            }
        }
    }
    first.map(|(_, b)| b)
}

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
fn quiet_since(claim: &NodeClaim) -> Timestamp {
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
pub(super) fn closed_node_names(snapshot: &Snapshot) -> FastSet<&str> {
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
fn consolidate_after_blocker(
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

/// Per NodePool: (nodes that count for budgets, nodes already disrupting). Counted nodes are
/// managed and initialized; disrupting ones are not Ready or marked for deletion.
pub fn budget_node_counts(snapshot: &Snapshot) -> BTreeMap<String, (u32, u32)> {
    let claims: FastMap<&str, &NodeClaim> = snapshot
        .node_claims
        .iter()
        .filter_map(|c| c.node_name.as_deref().map(|n| (n, c)))
        .collect();
    // Counted under borrowed names; one owned name per NodePool at the end.
    let mut counts: FastMap<&str, (u32, u32)> = FastMap::default();
    for node in &snapshot.nodes {
        if let (Some(pool), Some(claim)) = (
            node.labels.get(labels::NODEPOOL),
            claims.get(node.name.as_str()),
        ) {
            count_for_budget(&mut counts, pool, node, claim);
        }
    }
    owned_counts(counts)
}

/// Counts `node` (of NodePool `pool`, with its `claim`) for budgets when it is initialized.
fn count_for_budget<'a>(
    counts: &mut FastMap<&'a str, (u32, u32)>,
    pool: &'a str,
    node: &Node,
    claim: &NodeClaim,
) {
    if !claim.initialized {
        return;
    }
    let entry = counts.entry(pool).or_default();
    entry.0 += 1;
    if !node.ready || node.deletion_timestamp.is_some() || claim.deletion_timestamp.is_some() {
        entry.1 += 1;
    }
}

fn owned_counts(counts: FastMap<&str, (u32, u32)>) -> BTreeMap<String, (u32, u32)> {
    counts
        .into_iter()
        .map(|(pool, n)| (pool.to_string(), n))
        .collect()
}

#[cfg(test)]
mod tests;
