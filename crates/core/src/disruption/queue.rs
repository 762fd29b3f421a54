//! The orchestration queue: what happens to a disruption command after a round plans it, as
//! upstream's disruption queue runs it. Graceful commands wait for their re-check; a command
//! that starts has its targets tainted and its replacements launched; once every replacement
//! is initialized its targets are deleted (the termination controller drains them), and its
//! replacements stay reserved while they drain ([`Draining`]). A replacement that is gone, or
//! a command older than [`COMMAND_TIMEOUT`], is rolled back: taint and reason removed.
//!
//! The queue is pure: it is told what the cluster shows and answers with [`Effect`]s. The
//! controller turns them into API and cloud calls, the simulator into changes on its clock, so
//! both run commands the same way.
//!
//! Offers the state machine and its effects; the taints, launches and deletions are the shells'.

use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

use super::command::{Command, Target};
use super::in_flight::InFlight;
use super::in_flight::draining::Draining;
use crate::cadence::Planned;
use crate::time::Timestamp;

/// How long a started command may wait for its replacements before it is rolled back
/// (upstream's floor of 10 minutes).
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// A command that has started: targets tainted, replacements launched.
#[derive(Clone, Debug, PartialEq)]
pub struct Running {
    /// The command started.
    pub command: Command,
    /// The NodeClaims launched as its replacements.
    pub replacements: Vec<String>,
    /// When it started: it is rolled back if its replacements are not initialized
    /// [`COMMAND_TIMEOUT`] later.
    pub started: Timestamp,
}

/// What a replacement NodeClaim looks like to the shell that launched it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replacement {
    /// Gone, being deleted, or its launch failed.
    Gone,
    /// Created, not yet initialized.
    Launching,
    /// Initialized: its node takes pods.
    Initialized,
}

/// Why a running command was rolled back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// This replacement is gone before it initialized.
    ReplacementGone(String),
    /// The replacements did not initialize within [`COMMAND_TIMEOUT`].
    TimedOut,
}

/// One wording for both shells, so the controller's log and journal and the simulator's
/// timeline say the same of the same rollback.
impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::ReplacementGone(name) => {
                write!(f, "replacement {name} is gone before it initialized")
            }
            Failure::TimedOut => write!(
                f,
                "replacements not initialized within {} minutes",
                COMMAND_TIMEOUT.as_secs() / 60
            ),
        }
    }
}

/// What the shell must do for the queue.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    /// Every replacement is initialized, or the command is forceful: delete the targets.
    Terminate(Running),
    /// Untaint the targets and clear their disruption reason: the command failed.
    RollBack(Running, Failure),
    /// These replacements of a running command are not initialized yet.
    Waiting(Vec<String>),
}

/// The commands between planning and the end of their targets' drain.
#[derive(Clone, Debug, Default)]
pub struct Queue {
    /// Graceful commands of the last round, waiting for their re-check.
    awaiting: Vec<Command>,
    running: Vec<Running>,
    /// Finished commands whose targets still drain.
    draining: Draining,
}

impl Queue {
    /// Takes a round's commands: those that start at once (forceful ones and drift, see
    /// [`Command::starts_at_once`]) are returned in order, to be started; the others wait for
    /// their re-check, replacing any left from an earlier round. Also says what the round
    /// planned, for the loop's cadence.
    pub fn plan(&mut self, commands: Vec<Command>) -> (Vec<Command>, Planned) {
        let (now, later): (Vec<Command>, Vec<Command>) =
            commands.into_iter().partition(Command::starts_at_once);
        let planned = Planned::after(now.len(), later.len());
        self.awaiting = later;
        (now, planned)
    }

    /// The commands waiting for their re-check, which the shell validates on a fresh snapshot
    /// and starts if they still hold.
    pub fn take_awaiting(&mut self) -> Vec<Command> {
        std::mem::take(&mut self.awaiting)
    }

    /// The graceful commands planned and waiting for their re-check.
    pub fn awaiting(&self) -> &[Command] {
        &self.awaiting
    }

    /// The shell started `command` at `now` and launched `replacements`. A forceful command
    /// does not wait for them: its targets go at once.
    pub fn started(
        &mut self,
        command: Command,
        replacements: Vec<String>,
        now: Timestamp,
    ) -> Vec<Effect> {
        let running = Running {
            command,
            replacements,
            started: now,
        };
        if running.command.forceful {
            self.finish(&running, now);
            return vec![Effect::Terminate(running)];
        }
        self.running.push(running);
        Vec::new()
    }

    /// Advances the running commands at `now`, as `replacement` says their replacements are
    /// and `drained` says a finished command's target is (its claim gone, or its instance
    /// terminating).
    pub fn progress(
        &mut self,
        now: Timestamp,
        replacement: impl Fn(&str) -> Replacement,
        drained: impl Fn(&Target) -> bool,
    ) -> Vec<Effect> {
        self.forget_drained(now, drained);
        let mut effects = Vec::new();
        for r in std::mem::take(&mut self.running) {
            let states: Vec<(&String, Replacement)> = r
                .replacements
                .iter()
                .map(|name| (name, replacement(name)))
                .collect();
            let gone = states.iter().find(|(_, s)| *s == Replacement::Gone);
            let waiting: Vec<String> = states
                .iter()
                .filter(|(_, s)| *s == Replacement::Launching)
                .map(|(name, _)| name.to_string())
                .collect();
            if let Some((name, _)) = gone {
                let why = Failure::ReplacementGone(name.to_string());
                effects.push(Effect::RollBack(r, why));
            } else if now.since(r.started) >= COMMAND_TIMEOUT {
                effects.push(Effect::RollBack(r, Failure::TimedOut));
            } else if waiting.is_empty() {
                self.finish(&r, now);
                effects.push(Effect::Terminate(r));
            } else {
                effects.push(Effect::Waiting(waiting));
                self.running.push(r);
            }
        }
        effects
    }

    /// Forgets the finished commands whose targets have all drained (as `drained` says), or
    /// that finished long enough ago (see [`Draining`]).
    pub fn forget_drained(&mut self, now: Timestamp, drained: impl Fn(&Target) -> bool) {
        self.draining.forget_drained(now, drained);
    }

    fn finish(&mut self, r: &Running, now: Timestamp) {
        self.draining
            .finished(r.command.clone(), r.replacements.clone(), now);
    }

    /// Drops the running commands that target `claim` (its node was interrupted and is going
    /// anyway), returning them; the shell untaints their other targets.
    pub fn drop_targeting(&mut self, claim: &str) -> Vec<Running> {
        let (dropped, keep) = std::mem::take(&mut self.running)
            .into_iter()
            .partition(|r| r.command.targets.iter().any(|t| t.nodeclaim == claim));
        self.running = keep;
        dropped
    }

    /// How many commands the queue holds: running, or finished with targets still draining.
    /// It drops when a command rolls back or its targets have all drained (their instances
    /// terminating or gone): then they no longer count against the budgets, which the
    /// disruption cadence acts on ([`crate::cadence::DisruptionCadence::observe_held`]).
    pub fn held(&self) -> usize {
        self.running.len() + self.draining.len()
    }

    /// The commands started and not yet finished or rolled back.
    pub fn running(&self) -> &[Running] {
        &self.running
    }

    /// The nodes of running commands' targets: a node joins one command at a time.
    pub fn busy_nodes(&self) -> BTreeSet<String> {
        self.running
            .iter()
            .flat_map(|r| r.command.targets.iter().map(|t| t.node.clone()))
            .collect()
    }

    /// What later rounds must see as in flight: the running commands, the finished ones whose
    /// targets still drain, and the nodes `terminating`.
    pub fn in_flight(&self, terminating: BTreeSet<String>) -> InFlight {
        let mut held = InFlight {
            terminating,
            ..InFlight::default()
        };
        for r in &self.running {
            held.add(&r.command, r.replacements.iter().map(String::as_str));
        }
        self.draining.hold(&mut held);
        held
    }
}

#[cfg(test)]
mod tests;
