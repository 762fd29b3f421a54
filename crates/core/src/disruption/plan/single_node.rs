//! Single-node consolidation: every admitted candidate (and those past their budget, for
//! their verdict) is simulated alone; the round acts on the largest saving within budget.
//! One node is all a single-node command takes, so any candidate whose NodePool still has a
//! node of budget left (after the multi-node command) may act, not only the prefix the
//! multi-node search was limited to.
//!
//! With [`super::Settings::only_actionable`] the search may stop early: candidates go in the
//! order of what they could save at most, a batch at a time, until none left could beat the
//! best found. It also stops, between batches, once it runs out of time
//! ([`super::Deadline`]), and keeps the best found by then.

use super::budget::exhausted;
use super::underutilized::Admitted;
use super::{Consolidations, MAX_SINGLE_NODE_BATCH, Move, Round, Verdict};
use crate::disruption::candidates::Candidate;
use crate::disruption::command::{Command, Method};
use crate::disruption::consolidation::{self, Features, Rejection};
use crate::disruption::simulate::Simulation;
use crate::model::DisruptionReason;
use crate::scheduling::intern::FastMap;

/// The candidates one search looks at, and what it found.
struct Search<'r, 's> {
    /// The admitted candidates, then those past their budget.
    evaluated: Vec<&'r Candidate<'s>>,
    /// How many of `evaluated` were admitted.
    within: usize,
    /// Per evaluated candidate: its NodePool has a node of budget left.
    budget_left: Vec<bool>,
    /// The best command so far and its candidate: the largest saving, the earliest candidate
    /// on a tie, whatever order the simulations ran in.
    best: Option<(usize, Command)>,
    results: Vec<(usize, Result<Command, Rejection>)>,
    /// The moves the simulations found, approved or rejected by the Balanced policy.
    moves: Vec<Move>,
}

pub(super) fn plan<'s>(
    round: &mut Round<'s>,
    sims: &Consolidations<'s>,
    admitted: &Admitted<'_, 's>,
    multi_found: bool,
    batch: usize,
    all: &[Candidate<'s>],
) {
    let evaluated: Vec<&Candidate<'_>> = admitted
        .within
        .iter()
        .copied()
        .chain(admitted.over_budget.iter().map(|(c, _)| *c))
        .collect();
    // Nothing is taken between here and the end of the search: one allowance per NodePool.
    let mut allowances: FastMap<&str, (u32, String)> = FastMap::default();
    for c in &evaluated {
        allowances
            .entry(c.nodepool.name.as_str())
            .or_insert_with(|| {
                round
                    .budgets
                    .remaining(&c.nodepool.name, DisruptionReason::Underutilized)
            });
    }
    let budget_left: Vec<bool> = evaluated
        .iter()
        .map(|c| allowances[c.nodepool.name.as_str()].0 > 0)
        .collect();
    let untaken = (0..evaluated.len()).filter(|&i| !round.taken.contains(&evaluated[i].node.name));
    let only_actionable = round.settings.only_actionable;
    let (open, unsimulated): (Vec<usize>, Vec<usize>) =
        untaken.partition(|&i| !only_actionable || (!multi_found && budget_left[i]));
    for i in unsimulated {
        let name = &evaluated[i].node.name;
        round.verdicts.first(name, || {
            if budget_left[i] {
                Verdict::new(
                    name,
                    "not-simulated",
                    "not simulated: it could not be this round's command",
                )
            } else {
                let binding = &allowances[evaluated[i].nodepool.name.as_str()].1;
                exhausted(name, binding, DisruptionReason::Underutilized)
            }
        });
    }
    let mut search = Search {
        within: admitted.within.len(),
        evaluated,
        budget_left,
        best: None,
        results: Vec::new(),
        moves: Vec::new(),
    };
    search.run(round, sims, open, multi_found, batch, all);
    round.moves.append(&mut search.moves);
    search.give_verdicts(round, admitted);
    if let Some((i, cmd)) = search.best {
        round.taken.insert(search.evaluated[i].node.name.clone());
        round.budgets.record(&search.evaluated[i].nodepool.name, 1);
        round.commands.push(cmd);
    }
}

impl<'s> Search<'_, 's> {
    /// Simulates the `open` candidates, several at once where the simulator can.
    fn run(
        &mut self,
        round: &mut Round<'s>,
        sims: &Consolidations<'s>,
        open: Vec<usize>,
        multi_found: bool,
        batch: usize,
        all: &[Candidate<'s>],
    ) {
        let evaluated = &self.evaluated;
        // Stopping early needs every candidate open to act and savings bounded by the price:
        // finite prices, and no replacement that pays.
        let early = round.settings.only_actionable
            && open.iter().all(|&i| evaluated[i].price.is_finite())
            && round
                .snapshot
                .instance_types
                .values()
                .flat_map(|its| its.iter())
                .flat_map(|it| &it.offerings)
                .all(|o| o.price.is_finite() && o.price >= 0.0);
        let mut queue = open;
        // Per open candidate, at least what a command for it alone saves (only when stopping
        // early: the bounds cost a pass over the pods). A candidate no command can come from
        // is left out of the queue: simulating it could only give its verdict.
        let mut bounds = vec![f64::NEG_INFINITY; if early { evaluated.len() } else { 0 }];
        if early {
            let b = sims.bounds();
            queue.retain(|&i| match b.of(evaluated[i]) {
                Some(bound) => {
                    bounds[i] = bound;
                    true
                }
                None => {
                    let name = &evaluated[i].node.name;
                    round.verdicts.first(name, || Verdict::new(name, "not-simulated", "not simulated: its pods cannot all move to other nodes, and no replacement could cost less"));
                    false
                }
            });
            queue.sort_by(|&a, &b| bounds[b].total_cmp(&bounds[a]).then(a.cmp(&b)));
        }
        let mut at = 0;
        // The first batch usually settles the round; each later one is twice as large, up to
        // the cap, so a long search spreads over every worker.
        let mut size = batch.max(1);
        round.deadline.start(Method::SingleNodeConsolidation);
        let mut timed_out = false;
        while at < queue.len() {
            // The next in the queue has the highest bound left and the lowest index at that
            // bound.
            if early && let Some((bi, b)) = &self.best {
                let next = queue[at];
                let bound = bounds[next];
                if bound < b.savings_per_hour || (bound == b.savings_per_hour && next > *bi) {
                    break;
                }
            }
            if round.out_of_time(Method::SingleNodeConsolidation) {
                timed_out = true;
                break;
            }
            let end = if early {
                let end = (at + size).min(queue.len());
                size = (size * 2).min(MAX_SINGLE_NODE_BATCH.max(batch));
                end
            } else {
                queue.len()
            };
            self.simulate(round, sims, &queue[at..end], multi_found, all);
            at = end;
        }
        let why = if timed_out {
            "not simulated: the search ran out of time"
        } else {
            "not simulated: no saving left to find could beat this round's best"
        };
        for &i in &queue[at..] {
            let name = &self.evaluated[i].node.name;
            round
                .verdicts
                .first(name, || Verdict::new(name, "not-simulated", why));
        }
    }

    /// One batch of simulations: each candidate alone, after the nodes taken so far.
    fn simulate(
        &mut self,
        round: &Round<'s>,
        sims: &Consolidations<'s>,
        batch: &[usize],
        multi_found: bool,
        all: &[Candidate<'s>],
    ) {
        let jobs: Vec<_> = batch
            .iter()
            .map(|&i| Consolidations::job(&[self.evaluated[i]], &round.taken))
            .collect();
        for (&i, sim) in batch.iter().zip(&sims.prepared().simulate_all(&jobs)) {
            let mut r = alone(sim, self.evaluated[i], round.settings.features, all);
            self.moves.extend(weighed(self.evaluated[i], &r));
            let beats = |cmd: &Command| {
                self.best.as_ref().is_none_or(|(bi, b)| {
                    cmd.savings_per_hour > b.savings_per_hour
                        || (cmd.savings_per_hour == b.savings_per_hour && i < *bi)
                })
            };
            // Only a command that would be the round's is replayed: the replay reads the
            // whole cluster's room, and every other result only gives a verdict.
            if let Ok(cmd) = &r
                && !multi_found
                && self.budget_left[i]
                && beats(cmd)
            {
                r = sims.replayed(cmd.clone(), &[self.evaluated[i]], &round.taken);
            }
            if let Ok(cmd) = &r
                && !multi_found
                && self.budget_left[i]
                && beats(cmd)
            {
                self.best = Some((i, cmd.clone()));
            }
            self.results.push((i, r));
        }
    }

    /// Every simulated candidate's verdict: disrupted, consolidatable (but not this round's
    /// command), past its budget, or why not.
    fn give_verdicts(&mut self, round: &mut Round<'s>, admitted: &Admitted<'_, 's>) {
        for (i, r) in std::mem::take(&mut self.results) {
            let name = &self.evaluated[i].node.name;
            // An earlier method may already have said something more specific (drift), and
            // only a rejection defers to it.
            let defer = r.is_err();
            let verdict = || match (&self.best, r) {
                (Some((b, cmd)), _) if *b == i => Verdict::disrupted(name, cmd),
                (_, Ok(cmd)) if i >= self.within && !self.budget_left[i] => {
                    over_budget(name, &admitted.over_budget[i - self.within].1, cmd)
                }
                (_, Ok(cmd)) => Verdict::new(
                    name,
                    "consolidatable",
                    format!(
                        "can be consolidated ({}, saves ${:.4}/h); one consolidation command per round",
                        cmd.decision.as_str(),
                        cmd.savings_per_hour
                    ),
                ),
                (_, Err(rej)) => Verdict::new(name, rej.code(), rej.to_string()),
            };
            if defer {
                round.verdicts.first(name, verdict);
            } else {
                round.verdicts.set(name, verdict);
            }
        }
    }
}

/// What the simulation of consolidating `c` alone means: its command, or why not. `all` are
/// the round's candidates, which the Balanced policy weighs it against.
pub(super) fn alone(
    sim: &Simulation,
    c: &Candidate<'_>,
    features: Features,
    all: &[Candidate<'_>],
) -> Result<Command, Rejection> {
    let one = [c];
    consolidation::decide(sim, &one, Method::SingleNodeConsolidation, features)
        .and_then(|cmd| consolidation::approve_balanced(cmd, &one, all))
}

/// The move consolidating `c` alone is, when its simulation found one: approved, or rejected
/// by the Balanced policy.
fn weighed(c: &Candidate<'_>, r: &Result<Command, Rejection>) -> Option<Move> {
    let (approved, balanced) = match r {
        Ok(cmd) => (true, cmd.balanced.clone()),
        Err(Rejection::BalancedScoreTooLow { score }) => (false, Some(score.clone())),
        Err(_) => return None,
    };
    Some(Move {
        nodepool: c.nodepool.name.clone(),
        policy: c.nodepool.disruption.consolidation_policy,
        nodes: vec![c.node.name.clone()],
        multi_node: false,
        approved,
        balanced,
    })
}

/// The verdict of a candidate that consolidating (`cmd`) would serve, but whose NodePool's
/// budget `binding` has no node left.
pub(super) fn over_budget(name: &str, binding: &str, cmd: Command) -> Verdict {
    Verdict::new(
        name,
        "budget-exhausted",
        format!(
            "budget {binding} exhausted for reason Underutilized (consolidating would {} and save ${:.4}/h)",
            cmd.decision.as_str(),
            cmd.savings_per_hour
        ),
    )
}
