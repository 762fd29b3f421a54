//! Drift: a node that no longer matches what its NodePool would launch is replaced, empty
//! drifted nodes first, then the longest drifted; one command per round, and only when its
//! pods fit elsewhere or on the replacements the simulation launches.

use std::cell::OnceCell;

use super::budget::exhausted;
use super::{Round, Verdict};
use crate::disruption::candidates::Candidate;
use crate::disruption::command::{Command, Method, Replacement};
use crate::disruption::consolidation::target;
use crate::disruption::node_memo::NodeRound;
use crate::disruption::simulate::{Purpose, Simulation, Simulator, prepare};
use crate::disruption::type_index::TypeIndex;
use crate::model::DisruptionReason;

/// `candidates` are the round's graceful and eventual candidates; `node_round` answers why
/// a node drifted (and is released here, before any simulation).
pub(super) fn plan<'s, 'c>(
    round: &mut Round<'s>,
    simulator: &'s dyn Simulator,
    candidates: impl Iterator<Item = &'c Candidate<'s>>,
    mut node_round: NodeRound<'_, 's>,
    types: &OnceCell<TypeIndex<'s>>,
) where
    's: 'c,
{
    let snapshot = round.snapshot;
    let type_of = |pool: &str, name: &str| {
        types
            .get_or_init(|| TypeIndex::new(snapshot))
            .get(pool, name)
    };
    let mut drifted: Vec<(&Candidate<'_>, String)> = candidates
        .filter(|c| !round.taken.contains(&c.node.name))
        // A static pool's drifted claims are replaced one for one by static capacity.
        .filter(|c| c.nodepool.replicas.is_none())
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
    let mut sim = None;
    let mut done = false;
    for (c, reason) in &drifted {
        let name = c.node.name.as_str();
        if done {
            round.verdicts.set(name, || {
                Verdict::new(
                    name,
                    "drift-queued",
                    format!("drifted ({reason}); one drift replacement at a time"),
                )
            });
            continue;
        }
        if let Err(b) = round
            .budgets
            .take(&c.nodepool.name, DisruptionReason::Drifted)
        {
            round
                .verdicts
                .set(name, || exhausted(name, &b, DisruptionReason::Drifted));
            continue;
        }
        let mut without = round.taken.clone();
        without.insert(name.to_string());
        let result = sim
            .get_or_insert_with(|| prepare(simulator, snapshot, Purpose::Drift))
            .simulate(&without, &c.reschedulable_pods);
        if let Some(v) = unfit(name, reason, &result) {
            round.verdicts.set(name, || v);
            continue;
        }
        round.push(Command::new(
            Method::Drift,
            vec![target(c)],
            replacements(&result),
        ));
        done = true;
    }
}

/// The verdict of drifted node `name` when the simulation left a pod without a place.
pub(super) fn unfit(name: &str, reason: &str, sim: &Simulation) -> Option<Verdict> {
    let (pod, why) = sim.failures.first()?;
    Some(Verdict::new(
        name,
        "pods-do-not-fit",
        format!("drifted ({reason}) but pods do not fit elsewhere: pod {pod}: {why}"),
    ))
}

/// The claims the simulation launched, as the command's replacements.
pub(super) fn replacements(sim: &Simulation) -> Vec<Replacement> {
    sim.new_claims
        .iter()
        .map(|claim| Replacement {
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
        .collect()
}
