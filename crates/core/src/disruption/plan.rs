//! One planning round over a snapshot: every method in Karpenter's order, budgets applied,
//! and a verdict for every managed node saying what will happen to it or why not (for callers
//! that show verdicts).
//!
//! Methods claim nodes in order ([`expiration`], [`emptiness`], [`drift`], [`multi_node`]
//! consolidation, [`single_node`] consolidation); a node claimed by one method is not offered
//! to the next, and every simulation treats already-claimed nodes as gone. The consolidations
//! sit a round out while pending pods need new nodes ([`pending`]). Each method is a
//! module of its own; this file holds the round they share.
//!
//! Offers the round ([`plan`], [`plan_until`], [`plan_kept`]), its settings and its verdicts; each
//! method's search stays private.

mod budget;
mod drift;
mod emptiness;
mod expiration;
pub mod explain;
mod multi_node;
pub(crate) mod pending;
mod single_node;
mod underutilized;
mod verdicts;

use std::cell::OnceCell;
use std::collections::BTreeSet;
use std::time::Duration;

use super::candidates::{Candidate, RoundSelection, select_round};
use super::command::{Command, Method};
use super::consolidation::{self, BalancedScore, Features, Rejection};
pub use super::node_memo::NodeMemo;
use super::saving_bound::SavingBounds;
use super::scheduler_replay::Replay;
use super::simulate::{Job, PreparedSimulation, Purpose, Simulator, prepare};
use crate::model::{ConsolidationPolicy, Pod, Snapshot};
use budget::Budgets;
use verdicts::Verdicts;

/// How a round plans; the defaults are what the controller runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    /// The consolidation feature gates.
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

/// How long upstream's multi-node consolidation search may run before it keeps the last
/// command it found.
pub const MULTI_NODE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long upstream's single-node consolidation search may run.
pub const SINGLE_NODE_TIMEOUT: Duration = Duration::from_secs(3 * 60);

/// When a consolidation search must stop, asked between its simulations. Core reads no
/// clock: the shell answers, the controller from the wall clock ([`MULTI_NODE_TIMEOUT`],
/// [`SINGLE_NODE_TIMEOUT`]) and the simulator never ([`NoDeadline`]), so its rounds stay a
/// function of the snapshot. A search that stops keeps the best command found so far and is
/// named in [`DisruptionPlan::timed_out`].
pub trait Deadline {
    /// `method`'s search starts now.
    fn start(&self, method: Method);
    /// Whether `method`'s search has run out of time.
    fn passed(&self, method: Method) -> bool;
}

/// Searches that run to their end.
pub struct NoDeadline;

impl Deadline for NoDeadline {
    fn start(&self, _: Method) {}

    fn passed(&self, _: Method) -> bool {
        false
    }
}

/// What happens to one node this round, or why nothing does.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// The Node's name.
    pub node: String,
    /// Stable machine-readable code (`disrupted`, `pod-do-not-disrupt`, `budget-exhausted` ...).
    pub code: String,
    /// The same, for people.
    pub message: String,
}

impl Verdict {
    fn new(node: &str, code: &str, message: impl Into<String>) -> Self {
        Verdict {
            node: node.to_string(),
            code: code.to_string(),
            message: message.into(),
        }
    }

    fn disrupted(node: &str, command: &Command) -> Self {
        Verdict::new(node, "disrupted", command.to_string())
    }
}

/// A consolidation move the round weighed, as upstream's Balanced evaluator counts them
/// (`karpenter_consolidation_moves_total`, `_score`): each single-node candidate a simulation
/// found a command for, approved unless the Balanced policy rejected it, and the multi-node
/// command found, once per NodePool of its targets.
#[derive(Clone, Debug, PartialEq)]
pub struct Move {
    /// The NodePool the move is counted for.
    pub nodepool: String,
    /// That NodePool's consolidation policy.
    pub policy: ConsolidationPolicy,
    /// The targets of the move in this NodePool.
    pub nodes: Vec<String>,
    /// Found by multi-node consolidation (else single-node).
    pub multi_node: bool,
    /// Not rejected by the Balanced policy.
    pub approved: bool,
    /// The Balanced policy's score, for a NodePool that uses it.
    pub balanced: Option<BalancedScore>,
}

/// What one round decided: its commands, a verdict per node, and the moves it weighed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DisruptionPlan {
    /// The commands decided, in the order the methods ran (expiration, emptiness, drift,
    /// multi-node, then single-node consolidation); no node is in two.
    pub commands: Vec<Command>,
    /// One per Karpenter-managed node, sorted by node name; none with
    /// [`Settings::commands_only`].
    pub verdicts: Vec<Verdict>,
    /// The consolidation moves weighed, in the order they were.
    pub moves: Vec<Move>,
    /// The consolidation searches that ran out of time ([`Deadline`]) and kept what they had
    /// found by then.
    pub timed_out: Vec<Method>,
}

impl DisruptionPlan {
    /// Dollars per hour the round's commands save together.
    pub fn savings_per_hour(&self) -> f64 {
        self.commands.iter().map(|c| c.savings_per_hour).sum()
    }
}

/// What every method of one round reads and writes: the commands so far, the nodes they
/// took, the budgets they used and the verdicts given.
struct Round<'s> {
    snapshot: &'s Snapshot,
    settings: Settings,
    commands: Vec<Command>,
    verdicts: Verdicts,
    /// Nodes a command of this round takes; later methods neither offer nor place onto them.
    taken: BTreeSet<String>,
    budgets: Budgets<'s>,
    moves: Vec<Move>,
    deadline: &'s dyn Deadline,
    timed_out: Vec<Method>,
}

impl Round<'_> {
    /// Records `cmd`: its targets are taken, with a `disrupted` verdict each.
    fn push(&mut self, cmd: Command) {
        for t in &cmd.targets {
            self.verdicts
                .set(&t.node, || Verdict::disrupted(&t.node, &cmd));
            self.taken.insert(t.node.clone());
        }
        self.commands.push(cmd);
    }

    /// Whether `method`'s search must stop now; if so, it is recorded as timed out.
    fn out_of_time(&mut self, method: Method) -> bool {
        let passed = self.deadline.passed(method);
        if passed {
            self.timed_out.push(method);
        }
        passed
    }
}

/// The consolidation simulations of a round, shared by both consolidation methods: one
/// compile of the round's own snapshot, made on the first simulation (a round whose every
/// candidate and prefix the bounds rule out compiles nothing), and what is known without a
/// simulation ([`SavingBounds`]), built once a search asks.
struct Consolidations<'s> {
    snapshot: &'s Snapshot,
    simulator: &'s dyn Simulator,
    prepared: OnceCell<Box<dyn PreparedSimulation + 's>>,
    // Built on the planning thread: built on another one meanwhile, it took the second core
    // from the compile the round's first simulation waits for, and the round waited for both.
    bounds: OnceCell<SavingBounds<'s>>,
    replay: OnceCell<Replay<'s>>,
}

impl<'s> Consolidations<'s> {
    fn new(snapshot: &'s Snapshot, simulator: &'s dyn Simulator) -> Self {
        Consolidations {
            snapshot,
            simulator,
            prepared: OnceCell::new(),
            bounds: OnceCell::new(),
            replay: OnceCell::new(),
        }
    }

    /// `cmd` for `candidates`, unless the cluster's scheduler would leave one of their pods
    /// without room once the nodes `taken` so far are gone too ([`Replay`]).
    fn replayed(
        &self,
        cmd: Command,
        candidates: &[&Candidate<'s>],
        taken: &BTreeSet<String>,
    ) -> Result<Command, Rejection> {
        let replay = self.replay.get_or_init(|| Replay::new(self.snapshot));
        let moving: Vec<&Pod> = candidates
            .iter()
            .flat_map(|c| c.reschedulable_pods.iter().copied())
            .collect();
        match replay.unplaced(&cmd, &moving, taken) {
            None => Ok(cmd),
            Some((pod, reason)) => Err(Rejection::PodsDoNotFit { pod, reason }),
        }
    }

    fn prepared(&self) -> &dyn PreparedSimulation {
        &**self
            .prepared
            .get_or_init(|| prepare(self.simulator, self.snapshot, Purpose::Consolidation))
    }

    fn bounds(&self) -> &SavingBounds<'s> {
        self.bounds.get_or_init(|| SavingBounds::new(self.snapshot))
    }

    /// The simulation consolidating `candidates` after the nodes taken so far.
    fn job(candidates: &[&Candidate<'s>], taken: &BTreeSet<String>) -> Job<'s> {
        let mut job = consolidation::job(candidates);
        job.without.extend(taken.iter().cloned());
        job
    }
}

/// Plans one round of disruption over `snapshot`.
pub fn plan(snapshot: &Snapshot, simulator: &dyn Simulator, settings: Settings) -> DisruptionPlan {
    plan_until(snapshot, simulator, settings, &NoDeadline)
}

/// [`plan`] with consolidation searches that stop when `deadline` says, keeping the best
/// command found by then.
pub fn plan_until(
    snapshot: &Snapshot,
    simulator: &dyn Simulator,
    settings: Settings,
    deadline: &dyn Deadline,
) -> DisruptionPlan {
    plan_kept(
        snapshot,
        simulator,
        settings,
        &NodeMemo::default(),
        deadline,
    )
}

/// [`plan_until`] for callers that plan one cluster round after round: what the labels of
/// nodes that did not change say (selection's facts, drift's label checks) comes from `kept`
/// ([`NodeMemo`]). The plan is the same. The controller and the simulator each keep one
/// across their rounds.
pub fn plan_kept(
    snapshot: &Snapshot,
    simulator: &dyn Simulator,
    settings: Settings,
    kept: &NodeMemo,
    deadline: &dyn Deadline,
) -> DisruptionPlan {
    let batch = single_node_batch();
    plan_in_batches(snapshot, simulator, settings, batch, kept, deadline)
}

/// [`plan`] with `batch` single-node simulations at a time when the search may stop early.
fn plan_in_batches<'s>(
    snapshot: &'s Snapshot,
    simulator: &'s dyn Simulator,
    settings: Settings,
    batch: usize,
    kept: &NodeMemo,
    deadline: &'s dyn Deadline,
) -> DisruptionPlan {
    // Selection and drift read what nodes' labels say; for nodes that did not change since
    // the last round, `kept` has it.
    let mut node_round = kept.round(snapshot);
    // The round's index of instance types, built when selection or drift first asks.
    let types = OnceCell::new();
    let RoundSelection {
        graceful,
        eventual_only,
        counts,
    } = select_round(snapshot, &mut node_round, !settings.commands_only, &types);
    let mut round = Round {
        snapshot,
        settings,
        commands: Vec::new(),
        verdicts: Verdicts::new(!settings.commands_only),
        taken: BTreeSet::new(),
        budgets: Budgets::new(snapshot, counts),
        moves: Vec::new(),
        deadline,
        timed_out: Vec::new(),
    };

    expiration::plan(&mut round);
    for (node, blocker) in &graceful.blocked {
        round.verdicts.first(node, || {
            Verdict::new(node, blocker.code(), blocker.to_string())
        });
    }
    // Highest savings ratio first, by node name among equal ratios: selection lists the
    // candidates by node name and the sort is stable, so no two names are compared.
    let mut ranked: Vec<&Candidate<'_>> = graceful
        .candidates
        .iter()
        .filter(|c| !round.taken.contains(&c.node.name))
        .collect();
    debug_assert!(ranked.is_sorted_by(|a, b| a.node.name <= b.node.name));
    ranked.sort_by(|a, b| b.savings_ratio().total_cmp(&a.savings_ratio()));
    emptiness::plan(&mut round, &ranked);
    let drift_candidates = graceful.candidates.iter().chain(&eventual_only);
    drift::plan(&mut round, simulator, drift_candidates, node_round, &types);

    let admitted = underutilized::admit(&mut round, &ranked);
    let weighed: Vec<&str> = (admitted.within.iter())
        .chain(admitted.over_budget.iter().map(|(c, _)| c))
        .map(|c| c.node.name.as_str())
        .collect();
    let backlog = if weighed.is_empty() {
        None
    } else {
        pending::needing_nodes(&round, simulator)
    };
    if let Some(backlog) = backlog {
        pending::wait(&mut round, &backlog, weighed);
    } else {
        let sims = Consolidations::new(snapshot, simulator);
        let multi_found =
            multi_node::plan(&mut round, &sims, &admitted.within, &graceful.candidates);
        single_node::plan(
            &mut round,
            &sims,
            &admitted,
            multi_found,
            batch,
            &graceful.candidates,
        );
    }

    // Everything else that was a candidate is simply not worth disrupting now.
    for c in &graceful.candidates {
        round.verdicts.first(&c.node.name, || {
            Verdict::new(&c.node.name, "no-action", "no disruption method applies")
        });
    }
    DisruptionPlan {
        commands: round.commands,
        verdicts: round.verdicts.into_sorted(),
        moves: round.moves,
        timed_out: round.timed_out,
    }
}

#[cfg(test)]
mod tests;
