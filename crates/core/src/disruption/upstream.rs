//! Upstream Karpenter's consolidation search, kept as a yardstick for our planner.
//!
//! One round returns at most one command, from the first method that finds one, in upstream's
//! order: emptiness (every empty candidate within budget), multi-node consolidation, then
//! single-node consolidation. Both consolidation methods rank candidates by disruption cost,
//! lowest first. Multi-node keeps the candidates its NodePool budgets allow, looks at no more
//! than the first 100 and binary-searches the longest prefix (of at least two) that can be
//! deleted or replaced by one cheaper node. Single-node takes the first candidate in that order
//! that can be consolidated. Upstream's timeouts (one minute multi-node, three minutes
//! single-node), its 15-second validation wait and drift are not modelled: this is the search
//! with unlimited time, which is the most upstream could find.
//!
//! [`run_to_fixed_point`] applies rounds until nothing is left to do, for upstream's search or
//! for [`super::plan::plan`], so the two can be compared on the same cluster.
//!
//! A benchmark yardstick only: nothing in the controller or the simulator runs it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::budgets::allowed_disruptions;
use super::candidates::{Candidate, MethodClass, budget_node_counts, is_reschedulable, select};
use super::command::{Command, Method};
use super::consolidation::{self, Features, approve_balanced, target};
use super::plan::{Settings, plan};
use super::simulate::Simulator;
use crate::labels;
use crate::model::{ConsolidationPolicy, DisruptionReason, PodPhase, Snapshot};
use crate::scheduling::{self, launch};

/// Upstream's cap on the candidates one multi-node search looks at.
pub(crate) const MULTI_NODE_MAX_CANDIDATES: usize = 100;

/// Nodes each NodePool may still start disrupting for `reason`.
fn allowances(snapshot: &Snapshot, reason: DisruptionReason) -> BTreeMap<String, u32> {
    let counts = budget_node_counts(snapshot);
    snapshot
        .nodepools
        .iter()
        .map(|np| {
            let (count, disrupting) = counts.get(&np.name).copied().unwrap_or((0, 0));
            let a = allowed_disruptions(np, reason, count, disrupting, snapshot.now);
            (np.name.clone(), a.allowed)
        })
        .collect()
}

/// Lowest disruption cost first; the node name breaks ties so the order is total.
fn by_disruption_cost<'a, 'b>(cands: &'b [Candidate<'a>]) -> Vec<&'b Candidate<'a>> {
    let mut out: Vec<&Candidate<'a>> = cands.iter().collect();
    out.sort_by(|a, b| {
        a.disruption_cost
            .total_cmp(&b.disruption_cost)
            .then_with(|| a.node.name.cmp(&b.node.name))
    });
    out
}

fn emptiness(snapshot: &Snapshot, cands: &[Candidate<'_>]) -> Option<Command> {
    let mut budget = allowances(snapshot, DisruptionReason::Empty);
    let mut targets = Vec::new();
    for c in by_disruption_cost(cands)
        .into_iter()
        .filter(|c| c.is_empty())
    {
        let left = budget.entry(c.nodepool.name.clone()).or_default();
        if *left > 0 {
            *left -= 1;
            targets.push(target(c));
        }
    }
    (!targets.is_empty()).then(|| Command::new(Method::Emptiness, targets, vec![]))
}

fn consolidatable<'b, 'a>(cands: &'b [Candidate<'a>]) -> Vec<&'b Candidate<'a>> {
    by_disruption_cost(cands)
        .into_iter()
        .filter(|c| {
            !c.is_empty()
                && c.nodepool.disruption.consolidation_policy != ConsolidationPolicy::WhenEmpty
        })
        .collect()
}

fn multi_node(
    snapshot: &Snapshot,
    simulator: &dyn Simulator,
    cands: &[Candidate<'_>],
    features: Features,
) -> Option<Command> {
    let mut budget = allowances(snapshot, DisruptionReason::Underutilized);
    let mut within: Vec<&Candidate<'_>> = Vec::new();
    for c in consolidatable(cands) {
        let left = budget.entry(c.nodepool.name.clone()).or_default();
        if *left > 0 {
            *left -= 1;
            within.push(c);
        }
    }
    if within.len() < 2 {
        return None;
    }
    // Upstream's bounds, as written: prefixes of `mid + 1` candidates for `mid` in
    // [1, min(len - 1, 100)].
    let (mut lo, mut hi) = (1usize, (within.len() - 1).min(MULTI_NODE_MAX_CANDIDATES));
    let mut best = None;
    while lo <= hi {
        let mid = (lo + hi) / 2;
        let prefix = &within[..=mid];
        let found = consolidation::compute(
            snapshot,
            simulator,
            prefix,
            Method::MultiNodeConsolidation,
            features,
        )
        .and_then(|cmd| approve_balanced(cmd, prefix, cands));
        match found {
            Ok(cmd) => {
                best = Some(cmd);
                lo = mid + 1;
            }
            Err(_) => hi = mid - 1,
        }
    }
    best
}

fn single_node(
    snapshot: &Snapshot,
    simulator: &dyn Simulator,
    cands: &[Candidate<'_>],
    features: Features,
) -> Option<Command> {
    let budget = allowances(snapshot, DisruptionReason::Underutilized);
    consolidatable(cands)
        .into_iter()
        .filter(|c| budget.get(&c.nodepool.name).is_some_and(|n| *n > 0))
        .find_map(|c| {
            let one = [c];
            consolidation::compute(
                snapshot,
                simulator,
                &one,
                Method::SingleNodeConsolidation,
                features,
            )
            .and_then(|cmd| approve_balanced(cmd, &one, cands))
            .ok()
        })
}

/// One upstream round: the first command emptiness, multi-node or single-node consolidation
/// finds, or `None` when the cluster is consolidated as far as upstream can see.
pub fn round(
    snapshot: &Snapshot,
    simulator: &dyn Simulator,
    features: Features,
) -> Option<Command> {
    let sel = select(snapshot, MethodClass::Graceful);
    emptiness(snapshot, &sel.candidates)
        .or_else(|| multi_node(snapshot, simulator, &sel.candidates, features))
        .or_else(|| single_node(snapshot, simulator, &sel.candidates, features))
}

/// The hourly price of every node, from its instance type, zone and capacity-type labels and
/// its NodePool's offerings (0 for nodes whose offering is unknown).
pub fn cluster_cost(snapshot: &Snapshot) -> f64 {
    snapshot
        .nodes
        .iter()
        .map(|n| {
            let label = |k: &str| n.labels.get(k).map(String::as_str).unwrap_or("");
            snapshot
                .instance_types
                .get(label(labels::NODEPOOL))
                .and_then(|its| {
                    its.iter()
                        .find(|it| it.name == label(labels::INSTANCE_TYPE))
                })
                .and_then(|it| {
                    it.offerings.iter().find(|o| {
                        o.zone == label(labels::ZONE)
                            && o.capacity_type.as_str() == label(labels::CAPACITY_TYPE)
                    })
                })
                .map_or(0.0, |o| o.price)
        })
        .sum()
}

/// The cluster after `commands` have run: their nodes gone, the pods they evicted placed by
/// the scheduler (launching the replacements it needs, named `<prefix>-<i>`), and pods that
/// go with their node (daemon, mirror, finished) gone with it.
pub(crate) fn apply(snapshot: &Snapshot, commands: &[Command], prefix: &str) -> Snapshot {
    let gone: BTreeSet<&str> = commands
        .iter()
        .flat_map(|c| c.targets.iter().map(|t| t.node.as_str()))
        .collect();
    let mut s = snapshot.clone();
    s.nodes.retain(|n| !gone.contains(n.name.as_str()));
    s.node_claims
        .retain(|c| c.node_name.as_deref().is_none_or(|n| !gone.contains(n)));
    s.pods.retain_mut(|p| {
        let Some(node) = p.node_name.as_deref() else {
            return true;
        };
        if !gone.contains(node) {
            return true;
        }
        if !is_reschedulable(p) {
            return false;
        }
        let p = Arc::make_mut(p);
        p.node_name = None;
        p.phase = PodPhase::Pending;
        p.ready = false;
        p.start_time = None;
        true
    });
    let placed = scheduling::solve(&s, &scheduling::Options::default());
    launch(&s, &placed, prefix, s.now)
}

/// Which search drives [`run_to_fixed_point`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Search {
    /// [`round`]: one command per round.
    Upstream,
    /// [`super::plan::plan`]: every command of a planning round.
    Ours,
}

/// How a run to a fixed point went.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Rounds whose commands were applied (a stalled last round is not counted).
    pub rounds: usize,
    /// Commands applied over those rounds.
    pub commands: usize,
    /// Nodes in the snapshot given.
    pub nodes_before: usize,
    /// Nodes at the fixed point.
    pub nodes_after: usize,
    /// [`cluster_cost`] of the snapshot given, US dollars per hour.
    pub cost_before: f64,
    /// [`cluster_cost`] at the fixed point, US dollars per hour.
    pub cost_after: f64,
    /// Pods left pending after the last round (0 when every move found a place).
    pub pending_after: usize,
    /// True when the run ended on a round whose commands would not have lowered the cost.
    pub stalled: bool,
    /// Commands applied, by `method/decision`.
    pub by_kind: BTreeMap<String, usize>,
    /// The cluster at the fixed point.
    pub snapshot: Snapshot,
}

/// Applies rounds of `search` until one finds nothing (or `max_rounds` have run). A round
/// whose commands would not lower the cluster's cost ends the run too, so a search can never
/// cycle.
pub fn run_to_fixed_point(
    snapshot: &Snapshot,
    simulator: &dyn Simulator,
    search: Search,
    settings: Settings,
    max_rounds: usize,
) -> Outcome {
    let mut s = snapshot.clone();
    let mut out = Outcome {
        nodes_before: s.nodes.len(),
        cost_before: cluster_cost(&s),
        ..Outcome::default()
    };
    while out.rounds < max_rounds {
        let commands = match search {
            Search::Upstream => round(&s, simulator, settings.features)
                .into_iter()
                .collect(),
            Search::Ours => plan(&s, simulator, settings).commands,
        };
        if commands.is_empty() {
            break;
        }
        let next = apply(&s, &commands, &format!("round{}", out.rounds));
        if cluster_cost(&next) >= cluster_cost(&s) {
            out.stalled = true;
            break;
        }
        out.rounds += 1;
        out.commands += commands.len();
        for c in &commands {
            *out.by_kind
                .entry(format!("{}/{}", c.method.as_str(), c.decision.as_str()))
                .or_default() += 1;
        }
        s = next;
    }
    out.nodes_after = s.nodes.len();
    out.cost_after = cluster_cost(&s);
    out.pending_after = s.pods.iter().filter(|p| p.node_name.is_none()).count();
    out.snapshot = s;
    out
}

#[cfg(test)]
mod tests;
