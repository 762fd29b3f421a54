//! Emptiness: every empty candidate within its NodePool's `Empty` budget, in one command.

use super::Round;
use super::budget::exhausted;
use crate::disruption::candidates::Candidate;
use crate::disruption::command::{Command, Method};
use crate::disruption::consolidation::target;
use crate::model::DisruptionReason;

/// `ranked` are the round's candidates not yet taken, highest savings ratio first.
pub(super) fn plan(round: &mut Round<'_>, ranked: &[&Candidate<'_>]) {
    let mut targets = Vec::new();
    for c in ranked.iter().filter(|c| c.is_empty()) {
        match round
            .budgets
            .take(&c.nodepool.name, DisruptionReason::Empty)
        {
            Ok(()) => targets.push(target(c)),
            Err(b) => round.verdicts.set(&c.node.name, || {
                exhausted(&c.node.name, &b, DisruptionReason::Empty)
            }),
        }
    }
    if !targets.is_empty() {
        round.push(Command::new(Method::Emptiness, targets, vec![]));
    }
}
