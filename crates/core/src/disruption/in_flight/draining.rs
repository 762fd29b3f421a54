//! Finished commands whose targets still drain, and how long they hold their replacements.
//!
//! A command finishes when its replacements are initialized and its targets are deleted. The
//! targets' pods are then evicted, and on their way to the replacements they are pending,
//! which no simulation counts: until the targets have drained, a replacement looks emptier
//! than it is, and another candidate's pods would be planned onto room that is already spoken
//! for. So a finished command's replacements stay reserved (see [`InFlight`]) until every
//! target has drained, or [`HOLD_LIMIT`] after the command finished, so that a drain that
//! hangs (a PodDisruptionBudget that never allows the eviction) does not hold them forever.
//! The orchestration queue ([`crate::disruption::queue`]) keeps its finished commands here.

use std::time::Duration;

use super::InFlight;
use crate::disruption::command::{Command, Target};
use crate::time::Timestamp;

/// The longest a finished command holds its replacements: the queue's command timeout.
pub(crate) const HOLD_LIMIT: Duration = crate::disruption::queue::COMMAND_TIMEOUT;

/// One finished command: what it did, what it launched, and when it finished.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Finished {
    pub command: Command,
    pub replacements: Vec<String>,
    pub at: Timestamp,
}

/// The finished commands that may still hold their replacements.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Draining {
    finished: Vec<Finished>,
}

impl Draining {
    /// Records a command that finished at `at`, having launched the claims `replacements`.
    pub(crate) fn finished(&mut self, command: Command, replacements: Vec<String>, at: Timestamp) {
        self.finished.push(Finished {
            command,
            replacements,
            at,
        });
    }

    /// Forgets the commands that no longer hold their replacements at `now`: every target
    /// drained (as `drained` says: its claim gone, or its instance terminating), or the
    /// command finished [`HOLD_LIMIT`] ago.
    pub(crate) fn forget_drained(&mut self, now: Timestamp, drained: impl Fn(&Target) -> bool) {
        self.finished
            .retain(|f| now.since(f.at) < HOLD_LIMIT && !f.command.targets.iter().all(&drained));
    }

    /// Adds the commands still held to `held`, as running commands are.
    pub(crate) fn hold(&self, held: &mut InFlight) {
        for f in &self.finished {
            held.add(&f.command, f.replacements.iter().map(String::as_str));
        }
    }

    /// How many finished commands still hold their replacements.
    pub(crate) fn len(&self) -> usize {
        self.finished.len()
    }

    #[cfg(test)]
    fn iter(&self) -> impl Iterator<Item = &Finished> {
        self.finished.iter()
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.finished.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::disruption::command::Method;

    fn command(claims: &[&str]) -> Command {
        Command::new(
            Method::MultiNodeConsolidation,
            claims.iter().map(|c| Target::for_claim(c)).collect(),
            Vec::new(),
        )
    }

    #[test]
    fn replacements_are_held_until_every_target_drained() {
        let mut d = Draining::default();
        d.finished(command(&["a", "b"]), vec!["r1".into()], Timestamp(0));
        let mut gone: BTreeSet<&str> = BTreeSet::new();
        let now = Timestamp(60_000);
        gone.insert("a");
        d.forget_drained(now, |t| gone.contains(t.nodeclaim.as_str()));
        let mut held = InFlight::default();
        d.hold(&mut held);
        assert!(held.replacements.contains("r1"));
        // The targets are still planned as deleting while they drain.
        assert!(held.targets.contains("a") && held.targets.contains("b"));

        gone.insert("b");
        d.forget_drained(now, |t| gone.contains(t.nodeclaim.as_str()));
        assert!(d.is_empty());
        let mut held = InFlight::default();
        d.hold(&mut held);
        assert!(held.is_empty());
    }

    #[test]
    fn a_drain_that_hangs_holds_them_no_longer_than_the_limit() {
        let mut d = Draining::default();
        d.finished(command(&["a"]), vec!["r1".into()], Timestamp(1_000));
        let limit = HOLD_LIMIT.as_millis() as i64;
        d.forget_drained(Timestamp(1_000 + limit - 1), |_| false);
        assert_eq!(d.iter().count(), 1);
        d.forget_drained(Timestamp(1_000 + limit), |_| false);
        assert!(d.is_empty());
    }
}
