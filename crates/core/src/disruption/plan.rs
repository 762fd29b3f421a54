//! One planning round over a snapshot: every method in Karpenter's order, budgets applied,
//! and a verdict for every managed node saying what will happen to it or why not (for callers
//! that show verdicts).
//!
//! Methods claim nodes in order (expiration, emptiness, drift, multi-node consolidation,
//! single-node consolidation); a node claimed by one method is not offered to the next, and
//! every simulation treats already-claimed nodes as gone.

mod verdicts;

use std::cell::OnceCell;
use std::collections::{BTreeMap, BTreeSet};

use super::budgets::allowed_disruptions;
use super::candidates::{Candidate, select_round};
use super::command::{Command, Method};
use super::consolidation::{self, Features, Rejection, target};
use super::node_memo::NodeMemo;
use super::saving_bound::SavingBounds;
use super::simulate::{PreparedSimulation, Purpose, Simulator, prepare};
use super::type_index::TypeIndex;
use crate::model::{ConsolidationPolicy, DisruptionReason, Node, NodeClaim, NodePool, Snapshot};
use crate::scheduling::intern::FastMap;
use crate::time::Timestamp;
use verdicts::Verdicts;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    pub features: Features,
    /// Simulate only the single-node candidates that could become this round's command; the
    /// others get a `not-simulated` verdict (or `budget-exhausted` when their NodePool has
    /// no budget left). Candidates are then simulated in the order of what they could save at
    /// most ([`super::saving_bound`]: their price, or the gap to the cheapest offering when
    /// they cannot be deleted), a batch at a time, and the search stops once none left could
    /// save more than the best found. The commands are the same either way: callers that
    /// never show verdicts (the simulator) skip simulations whose only use is the verdict.
    pub only_actionable: bool,
    /// Return the commands only, no verdicts: for callers that never show them (the
    /// simulator). The commands are the same either way.
    pub commands_only: bool,
}

/// Single-node simulations run in the first batch when the search may stop early: one per
/// core, so every worker of [`PreparedSimulation::simulate_all`] has one and little is
/// wasted past the stopping point (usually the first batch). Later batches grow to this many.
const MAX_SINGLE_NODE_BATCH: usize = 16;

fn single_node_batch() -> usize {
    super::engine_simulator::workers().clamp(1, MAX_SINGLE_NODE_BATCH)
}

/// What happens to one node this round, or why nothing does.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub node: String,
    /// Stable machine-readable code (`disrupted`, `pod-do-not-disrupt`, `budget-exhausted` ...).
    pub code: String,
    pub message: String,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct DisruptionPlan {
    pub commands: Vec<Command>,
    /// One per Karpenter-managed node, sorted by node name; none with
    /// [`Settings::commands_only`].
    pub verdicts: Vec<Verdict>,
}

impl DisruptionPlan {
    pub fn savings_per_hour(&self) -> f64 {
        self.commands.iter().map(|c| c.savings_per_hour).sum()
    }
}

/// Budget bookkeeping for one round. Nodes taken earlier in the round count as disrupting for
/// every later decision, exactly as they would once their command is running.
struct Budgets<'s> {
    snapshot: &'s Snapshot,
    /// The first NodePool of each name, as a scan of the list would find it.
    pools: FastMap<&'s str, &'s NodePool>,
    counts: BTreeMap<String, (u32, u32)>,
    taken: BTreeMap<String, u32>,
}

impl<'s> Budgets<'s> {
    /// `counts` are the snapshot's [`super::candidates::budget_node_counts`].
    fn new(snapshot: &'s Snapshot, counts: BTreeMap<String, (u32, u32)>) -> Self {
        let mut pools: FastMap<&str, &NodePool> = FastMap::default();
        for p in &snapshot.nodepools {
            pools.entry(p.name.as_str()).or_insert(p);
        }
        Budgets {
            snapshot,
            pools,
            counts,
            taken: BTreeMap::new(),
        }
    }

    fn remaining(&self, pool: &str, reason: DisruptionReason) -> (u32, String) {
        let Some(np) = self.pools.get(pool).copied() else {
            return (0, String::new());
        };
        let (count, disrupting) = self.counts.get(pool).copied().unwrap_or((0, 0));
        let taken = self.taken.get(pool).copied().unwrap_or(0);
        let a = allowed_disruptions(np, reason, count, disrupting + taken, self.snapshot.now);
        (a.allowed, a.binding.unwrap_or_default())
    }

    /// Takes one node from the budget; `Err(binding)` when it is exhausted.
    fn take(&mut self, pool: &str, reason: DisruptionReason) -> Result<(), String> {
        let (left, binding) = self.remaining(pool, reason);
        if left == 0 {
            return Err(binding);
        }
        *self.taken.entry(pool.to_string()).or_default() += 1;
        Ok(())
    }

    /// Records nodes taken by a command whose budget was checked another way.
    fn record(&mut self, pool: &str, n: u32) {
        *self.taken.entry(pool.to_string()).or_default() += n;
    }
}

fn exhausted(node: &str, binding: &str, reason: DisruptionReason) -> Verdict {
    Verdict {
        node: node.to_string(),
        code: "budget-exhausted".into(),
        message: format!("budget {binding} exhausted for reason {}", reason.as_str()),
    }
}

fn disrupted(node: &str, command: &Command) -> Verdict {
    Verdict {
        node: node.to_string(),
        code: "disrupted".into(),
        message: command.to_string(),
    }
}

/// `pools` holds the first NodePool of each name, as a scan of the list would find it.
fn expired(pools: &FastMap<&str, &NodePool>, now: Timestamp, claim: &NodeClaim) -> bool {
    let expire_after = claim.expire_after.or_else(|| {
        pools
            .get(claim.nodepool.as_str())
            .and_then(|p| p.template.expire_after)
    });
    expire_after.is_some_and(|e| now.since(claim.creation_timestamp) >= e)
}

/// Plans one round of disruption over `snapshot`.
pub fn plan(snapshot: &Snapshot, simulator: &dyn Simulator, settings: Settings) -> DisruptionPlan {
    plan_kept(snapshot, simulator, settings, &NodeMemo::default())
}

/// [`plan`] for callers that plan one cluster round after round: what the labels of nodes
/// that did not change say (selection's facts, drift's label checks) comes from `kept`
/// ([`NodeMemo`]). The plan is the same.
pub fn plan_kept(
    snapshot: &Snapshot,
    simulator: &dyn Simulator,
    settings: Settings,
    kept: &NodeMemo,
) -> DisruptionPlan {
    plan_in_batches(snapshot, simulator, settings, single_node_batch(), kept)
}

/// [`plan`] with `batch` single-node simulations at a time when the search may stop early.
fn plan_in_batches<'s>(
    snapshot: &'s Snapshot,
    simulator: &dyn Simulator,
    settings: Settings,
    batch: usize,
    kept: &NodeMemo,
) -> DisruptionPlan {
    let mut out = DisruptionPlan::default();
    let mut verdicts = Verdicts::new(!settings.commands_only);
    let mut taken: BTreeSet<String> = BTreeSet::new();
    // Selection and drift read what nodes' labels say; for nodes that did not change since
    // the last round, `kept` has it.
    let mut node_round = kept.round(snapshot);
    // The round's index of instance types, built when selection or drift first asks.
    let types = OnceCell::new();
    let selection = select_round(snapshot, &mut node_round, !settings.commands_only, &types);
    let graceful = selection.graceful;
    let mut budgets = Budgets::new(snapshot, selection.counts);

    // Expiration is forceful: no budgets, no blockers, no replacement first.
    // The first node of each name, as a scan of the node list would find it; built only once
    // a claim has expired.
    let nodes_by_name: OnceCell<FastMap<&str, &Node>> = OnceCell::new();
    for claim in &snapshot.node_claims {
        if claim.deletion_timestamp.is_some() || !expired(&budgets.pools, snapshot.now, claim) {
            continue;
        }
        let Some(node) = claim.node_name.as_deref().and_then(|n| {
            nodes_by_name
                .get_or_init(|| {
                    let mut m = FastMap::default();
                    for n in &snapshot.nodes {
                        m.entry(n.name.as_str()).or_insert(n);
                    }
                    m
                })
                .get(n)
                .copied()
        }) else {
            continue;
        };
        let cmd = Command::new(
            Method::Expiration,
            vec![expiring_target(snapshot, claim, node)],
            vec![],
        );
        verdicts.set(&node.name, || disrupted(&node.name, &cmd));
        taken.insert(node.name.clone());
        out.commands.push(cmd);
    }
    for (node, blocker) in &graceful.blocked {
        verdicts.first(node, || Verdict {
            node: node.clone(),
            code: blocker.code().into(),
            message: blocker.to_string(),
        });
    }

    // Emptiness: every empty candidate within budget, in one command.
    let mut ranked: Vec<&Candidate<'_>> = graceful
        .candidates
        .iter()
        .filter(|c| !taken.contains(&c.node.name))
        .collect();
    // Highest savings ratio first, by node name among equal ratios: selection lists the
    // candidates by node name and the sort is stable, so no two names are compared.
    debug_assert!(ranked.is_sorted_by(|a, b| a.node.name <= b.node.name));
    ranked.sort_by(|a, b| b.savings_ratio().total_cmp(&a.savings_ratio()));
    let mut empty_targets = Vec::new();
    for c in ranked.iter().filter(|c| c.is_empty()) {
        match budgets.take(&c.nodepool.name, DisruptionReason::Empty) {
            Ok(()) => empty_targets.push(target(c)),
            Err(b) => verdicts.set(&c.node.name, || {
                exhausted(&c.node.name, &b, DisruptionReason::Empty)
            }),
        }
    }
    if !empty_targets.is_empty() {
        let cmd = Command::new(Method::Emptiness, empty_targets, vec![]);
        for t in &cmd.targets {
            verdicts.set(&t.node, || disrupted(&t.node, &cmd));
            taken.insert(t.node.clone());
        }
        out.commands.push(cmd);
    }

    // Drift: empty drifted nodes first, then the longest drifted; one command per round.
    let type_of = |pool: &str, name: &str| {
        types
            .get_or_init(|| TypeIndex::new(snapshot))
            .get(pool, name)
    };
    let mut drifted: Vec<(&Candidate<'_>, String)> = graceful
        .candidates
        .iter()
        .chain(&selection.eventual_only)
        .filter(|c| !taken.contains(&c.node.name))
        .filter_map(|c| {
            let pool = c.nodepool.name.as_str();
            node_round
                .reason(
                    c.claim,
                    c.node,
                    c.nodepool,
                    |name| type_of(pool, name),
                    snapshot.now,
                )
                .map(|r| (c, r))
        })
        .collect();
    drop(node_round);
    drifted.sort_by(|(a, _), (b, _)| {
        b.is_empty()
            .cmp(&a.is_empty())
            .then_with(|| a.claim.drifted_at.cmp(&b.claim.drifted_at))
            .then_with(|| a.node.name.cmp(&b.node.name))
    });
    let mut drift_done = false;
    let mut drift_sim: Option<Box<dyn PreparedSimulation + '_>> = None;
    for (c, reason) in &drifted {
        let name = c.node.name.clone();
        if drift_done {
            verdicts.set(&name, || Verdict {
                node: name.clone(),
                code: "drift-queued".into(),
                message: format!("drifted ({reason}); one drift replacement at a time"),
            });
            continue;
        }
        if let Err(b) = budgets.take(&c.nodepool.name, DisruptionReason::Drifted) {
            verdicts.set(&name, || exhausted(&name, &b, DisruptionReason::Drifted));
            continue;
        }
        let mut without = taken.clone();
        without.insert(name.clone());
        let sim = drift_sim
            .get_or_insert_with(|| prepare(simulator, snapshot, Purpose::Drift))
            .simulate(&without, &c.reschedulable_pods);
        if let Some((pod, why)) = sim.failures.first() {
            verdicts.set(&name, || Verdict {
                node: name.clone(),
                code: "pods-do-not-fit".into(),
                message: format!(
                    "drifted ({reason}) but pods do not fit elsewhere: pod {pod}: {why}"
                ),
            });
            continue;
        }
        let replacements = sim
            .new_claims
            .iter()
            .map(|claim| super::command::Replacement {
                nodepool: claim.nodepool.clone(),
                requirements: claim.requirements.clone(),
                instance_types: claim
                    .options
                    .iter()
                    .map(|o| o.instance_type.clone())
                    .collect(),
                price: claim
                    .options
                    .first()
                    .map(|o| o.cheapest_price)
                    .unwrap_or(0.0),
            })
            .collect();
        let cmd = Command::new(Method::Drift, vec![target(c)], replacements);
        verdicts.set(&name, || disrupted(&name, &cmd));
        taken.insert(name);
        out.commands.push(cmd);
        drift_done = true;
    }

    // Consolidation candidates: non-empty, policy allows it, within the Underutilized budget.
    let mut consolidatable: Vec<&Candidate<'_>> = Vec::new();
    // Evaluated too, so their verdict says what consolidating them would do.
    let mut over_budget: Vec<(&Candidate<'_>, String)> = Vec::new();
    // Per NodePool: its Underutilized allowance (nothing is taken during this pass) and how
    // many candidates it already admitted.
    let mut admitted: FastMap<&str, ((u32, String), u32)> = FastMap::default();
    for c in ranked
        .iter()
        .filter(|c| !taken.contains(&c.node.name) && !c.is_empty())
    {
        if c.nodepool.disruption.consolidation_policy == ConsolidationPolicy::WhenEmpty {
            verdicts.set(&c.node.name, || Verdict {
                node: c.node.name.clone(),
                code: "policy-when-empty".into(),
                message: format!(
                    "NodePool {} consolidates only empty nodes (WhenEmpty)",
                    c.nodepool.name
                ),
            });
            continue;
        }
        let ((left, binding), already) =
            admitted.entry(c.nodepool.name.as_str()).or_insert_with(|| {
                let allowance =
                    budgets.remaining(&c.nodepool.name, DisruptionReason::Underutilized);
                (allowance, 0)
            });
        if *left <= *already {
            over_budget.push((c, binding.clone()));
            continue;
        }
        *already += 1;
        consolidatable.push(c);
    }

    // Multi-node: the longest prefix that consolidates, found by binary search.
    let mut multi: Option<(usize, Command)> = None;
    let (mut lo, mut hi) = (2usize, consolidatable.len());
    // Every consolidation simulation of the round runs on one compile of the round's own
    // snapshot: nodes taken earlier in the round go with each simulation's candidates, as
    // drift's do. Compiled on the first simulation: a round whose every candidate and prefix
    // the bounds rule out compiles nothing.
    let consolidation_sim: OnceCell<Box<dyn PreparedSimulation + '_>> = OnceCell::new();
    let consolidation_prepared = || {
        &**consolidation_sim.get_or_init(|| prepare(simulator, snapshot, Purpose::Consolidation))
    };
    // The simulation consolidating `candidates` after the nodes taken so far.
    let job_after = |candidates: &[&Candidate<'s>], taken: &BTreeSet<String>| {
        let mut job = consolidation::job(candidates);
        job.without.extend(taken.iter().cloned());
        job
    };
    // What is known without a simulation, built once a search asks. It is built on this
    // thread: built on another one meanwhile, it took the second core from the compile the
    // round's first simulation waits for, and the round waited for both.
    let quick: OnceCell<SavingBounds<'_>> = OnceCell::new();
    let bounds_of = || SavingBounds::new(snapshot);
    while lo <= hi {
        let mid = (lo + hi) / 2;
        let prefix = &consolidatable[..mid];
        // A simulation would reject it too: more than one new node, or one that costs as much
        // as the prefix, is no command.
        if quick.get_or_init(bounds_of).rules_out_together(prefix) {
            hi = mid - 1;
            continue;
        }
        let job = job_after(prefix, &taken);
        let result = consolidation::decide(
            &consolidation_prepared().simulate(&job.without, &job.pods),
            prefix,
            Method::MultiNodeConsolidation,
            settings.features,
        )
        .and_then(|cmd| consolidation::approve_balanced(cmd, prefix, &graceful.candidates));
        match result {
            Ok(cmd) => {
                multi = Some((mid, cmd));
                lo = mid + 1;
            }
            Err(_) => hi = mid - 1,
        }
    }
    let multi_found = multi.is_some();
    if let Some((n, cmd)) = multi {
        for c in &consolidatable[..n] {
            verdicts.set(&c.node.name, || disrupted(&c.node.name, &cmd));
            taken.insert(c.node.name.clone());
            budgets.record(&c.nodepool.name, 1);
        }
        out.commands.push(cmd);
    }

    // Single-node: evaluate every remaining candidate, within budget or not; act on the best
    // saving within budget. One node is all a single-node command takes, so any candidate whose
    // NodePool still has a node of budget left (after the multi-node command) may act, not only
    // the prefix the multi-node search was limited to.
    let mut best: Option<(usize, Command)> = None;
    let mut results: Vec<(usize, Result<Command, Rejection>)> = Vec::new();
    let within = consolidatable.len();
    let evaluated: Vec<&Candidate<'_>> = consolidatable
        .iter()
        .copied()
        .chain(over_budget.iter().map(|(c, _)| *c))
        .collect();
    // Simulations run several at once where the simulator can; the best is the largest
    // saving, the earliest candidate on a tie, whatever order they ran in.
    // Nothing is taken between here and the end of the search: one allowance per NodePool.
    let mut allowances: FastMap<&str, (u32, String)> = FastMap::default();
    for c in &evaluated {
        allowances
            .entry(c.nodepool.name.as_str())
            .or_insert_with(|| {
                budgets.remaining(&c.nodepool.name, DisruptionReason::Underutilized)
            });
    }
    let budget_left: Vec<bool> = evaluated
        .iter()
        .map(|c| allowances[c.nodepool.name.as_str()].0 > 0)
        .collect();
    let untaken: Vec<usize> = (0..evaluated.len())
        .filter(|&i| !taken.contains(&evaluated[i].node.name))
        .collect();
    let (open, unsimulated): (Vec<usize>, Vec<usize>) = untaken
        .into_iter()
        .partition(|&i| !settings.only_actionable || (!multi_found && budget_left[i]));
    for i in unsimulated {
        let name = &evaluated[i].node.name;
        verdicts.first(name, || {
            if budget_left[i] {
                Verdict {
                    node: name.clone(),
                    code: "not-simulated".into(),
                    message: "not simulated: it could not be this round's command".into(),
                }
            } else {
                let binding = &allowances[evaluated[i].nodepool.name.as_str()].1;
                exhausted(name, binding, DisruptionReason::Underutilized)
            }
        });
    }
    // Stopping early needs every candidate open to act and savings bounded by the price:
    // finite prices, and no replacement that pays.
    let early = settings.only_actionable
        && open.iter().all(|&i| evaluated[i].price.is_finite())
        && snapshot
            .instance_types
            .values()
            .flat_map(|its| its.iter())
            .flat_map(|it| &it.offerings)
            .all(|o| o.price.is_finite() && o.price >= 0.0);
    let mut queue = open.clone();
    // Per open candidate, at least what a command for it alone saves (only when stopping
    // early: the bounds cost a pass over the pods). A candidate no command can come from is
    // left out of the queue: simulating it could only give its verdict.
    let mut bounds = vec![f64::NEG_INFINITY; if early { evaluated.len() } else { 0 }];
    if early {
        let b = quick.get_or_init(bounds_of);
        queue.retain(|&i| match b.of(evaluated[i]) {
            Some(bound) => {
                bounds[i] = bound;
                true
            }
            None => {
                let name = &evaluated[i].node.name;
                verdicts.first(name, || Verdict {
                    node: name.clone(),
                    code: "not-simulated".into(),
                    message: "not simulated: its pods cannot all move to other nodes, and no replacement could cost less".into(),
                });
                false
            }
        });
        queue.sort_by(|&a, &b| bounds[b].total_cmp(&bounds[a]).then(a.cmp(&b)));
    }
    let mut at = 0;
    // The first batch usually settles the round; each later one is twice as large, up to
    // the cap, so a long search spreads over every worker.
    let mut size = batch.max(1);
    while at < queue.len() {
        // The best is the largest saving, the earliest candidate on a tie; the next in the
        // queue has the highest bound left and the lowest index at that bound.
        if early && let Some((bi, b)) = &best {
            let next = queue[at];
            let bound = bounds[next];
            if bound < b.savings_per_hour || (bound == b.savings_per_hour && next > *bi) {
                break;
            }
        }
        let end = if early {
            let end = (at + size).min(queue.len());
            size = (size * 2).min(MAX_SINGLE_NODE_BATCH.max(batch));
            end
        } else {
            queue.len()
        };
        let jobs: Vec<_> = queue[at..end]
            .iter()
            .map(|&i| job_after(&[evaluated[i]], &taken))
            .collect();
        for (&i, sim) in queue[at..end]
            .iter()
            .zip(&consolidation_prepared().simulate_all(&jobs))
        {
            let c = evaluated[i];
            let one = [c];
            let r = consolidation::decide(
                sim,
                &one,
                Method::SingleNodeConsolidation,
                settings.features,
            )
            .and_then(|cmd| consolidation::approve_balanced(cmd, &one, &graceful.candidates));
            if let Ok(cmd) = &r
                && !multi_found
                && budget_left[i]
                && best.as_ref().is_none_or(|(bi, b)| {
                    cmd.savings_per_hour > b.savings_per_hour
                        || (cmd.savings_per_hour == b.savings_per_hour && i < *bi)
                })
            {
                best = Some((i, cmd.clone()));
            }
            results.push((i, r));
        }
        at = end;
    }
    for &i in &queue[at..] {
        let name = &evaluated[i].node.name;
        verdicts.first(name, || Verdict {
            node: name.clone(),
            code: "not-simulated".into(),
            message: "not simulated: no saving left to find could beat this round's best".into(),
        });
    }
    for (i, r) in results {
        let name = &evaluated[i].node.name;
        match (&best, r) {
            (Some((b, cmd)), _) if *b == i => verdicts.set(name, || disrupted(name, cmd)),
            (_, Ok(cmd)) if i >= within && !budget_left[i] => verdicts.set(name, || Verdict {
                node: name.clone(),
                code: "budget-exhausted".into(),
                message: format!(
                    "budget {} exhausted for reason Underutilized (consolidating would {} and save ${:.4}/h)",
                    over_budget[i - within].1,
                    cmd.decision.as_str(),
                    cmd.savings_per_hour
                ),
            }),
            (_, Ok(cmd)) => verdicts.set(name, || Verdict {
                node: name.clone(),
                code: "consolidatable".into(),
                message: format!(
                    "can be consolidated ({}, saves ${:.4}/h); one consolidation command per round",
                    cmd.decision.as_str(),
                    cmd.savings_per_hour
                ),
            }),
            // An earlier method may already have said something more specific (drift).
            (_, Err(rej)) => verdicts.first(name, || Verdict {
                node: name.clone(),
                code: rej.code().into(),
                message: rej.to_string(),
            }),
        }
    }
    if let Some((i, cmd)) = best {
        taken.insert(evaluated[i].node.name.clone());
        budgets.record(&evaluated[i].nodepool.name, 1);
        out.commands.push(cmd);
    }

    // Everything else that was a candidate is simply not worth disrupting now.
    for c in &graceful.candidates {
        verdicts.first(&c.node.name, || Verdict {
            node: c.node.name.clone(),
            code: "no-action".into(),
            message: "no disruption method applies".into(),
        });
    }
    out.verdicts = verdicts.into_sorted();
    out
}

/// A target for a node that expires, whatever protects it.
fn expiring_target(
    snapshot: &Snapshot,
    claim: &NodeClaim,
    node: &crate::model::Node,
) -> super::command::Target {
    let label = |k: &str| node.labels.get(k).cloned().unwrap_or_default();
    let pods = snapshot
        .pods
        .iter()
        .filter(|p| p.node_name.as_deref() == Some(node.name.as_str()))
        .filter(|p| super::candidates::is_reschedulable(p))
        .map(|p| p.key())
        .collect();
    let price = snapshot
        .instance_types
        .get(&claim.nodepool)
        .and_then(|its| {
            its.iter()
                .find(|it| it.name == label(crate::labels::INSTANCE_TYPE))
        })
        .and_then(|it| {
            it.offerings.iter().find(|o| {
                o.zone == label(crate::labels::ZONE)
                    && o.capacity_type.as_str() == label(crate::labels::CAPACITY_TYPE)
            })
        })
        .map(|o| o.price)
        .unwrap_or(0.0);
    super::command::Target {
        node: node.name.clone(),
        nodeclaim: claim.name.clone(),
        nodepool: claim.nodepool.clone(),
        instance_type: label(crate::labels::INSTANCE_TYPE),
        zone: label(crate::labels::ZONE),
        capacity_type: label(crate::labels::CAPACITY_TYPE),
        price,
        pods,
    }
}

#[cfg(test)]
mod tests;
