//! Multi-node consolidation: the longest prefix of the admitted candidates (highest savings
//! ratio first) that consolidates into at most one cheaper node, found by binary search. A
//! search that runs out of time ([`super::Deadline`]) keeps the longest prefix found by then.

use super::{Consolidations, Move, Round};
use crate::disruption::candidates::Candidate;
use crate::disruption::command::{Command, Method};
use crate::disruption::consolidation;

/// Pushes the command, if one is found, and says whether it was.
pub(super) fn plan<'s>(
    round: &mut Round<'s>,
    sims: &Consolidations<'s>,
    admitted: &[&Candidate<'s>],
    all: &[Candidate<'s>],
) -> bool {
    let mut found = None;
    let (mut lo, mut hi) = (2usize, admitted.len());
    round.deadline.start(Method::MultiNodeConsolidation);
    while lo <= hi {
        if round.out_of_time(Method::MultiNodeConsolidation) {
            break;
        }
        let mid = (lo + hi) / 2;
        let prefix = &admitted[..mid];
        // A simulation would reject it too: more than one new node, or one that costs as much
        // as the prefix, is no command.
        if sims.bounds().rules_out_together(prefix) {
            hi = mid - 1;
            continue;
        }
        let job = Consolidations::job(prefix, &round.taken);
        let result = consolidation::decide(
            &sims.prepared().simulate(&job.without, &job.pods),
            prefix,
            Method::MultiNodeConsolidation,
            round.settings.features,
        )
        .and_then(|cmd| consolidation::approve_balanced(cmd, prefix, all))
        .and_then(|cmd| sims.replayed(cmd, prefix, &round.taken));
        match result {
            Ok(cmd) => {
                found = Some((mid, cmd));
                lo = mid + 1;
            }
            Err(_) => hi = mid - 1,
        }
    }
    let Some((n, cmd)) = found else {
        return false;
    };
    for c in &admitted[..n] {
        round.budgets.record(&c.nodepool.name, 1);
    }
    round.moves.extend(moves(&admitted[..n], &cmd));
    round.push(cmd);
    true
}

/// The command found, as one approved move per NodePool of its targets.
fn moves(targets: &[&Candidate<'_>], cmd: &Command) -> Vec<Move> {
    let mut out: Vec<Move> = Vec::new();
    for c in targets {
        let pool = &c.nodepool.name;
        match out.iter_mut().find(|m| &m.nodepool == pool) {
            Some(m) => m.nodes.push(c.node.name.clone()),
            None => out.push(Move {
                nodepool: pool.clone(),
                policy: c.nodepool.disruption.consolidation_policy,
                nodes: vec![c.node.name.clone()],
                multi_node: true,
                approved: true,
                balanced: cmd.balanced.clone().filter(|b| &b.nodepool == pool),
            }),
        }
    }
    out
}
