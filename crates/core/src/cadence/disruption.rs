//! The disruption loop's timing: plan every poll interval while idle; when a round produces a
//! command that needs re-checking, wait the validation delay, re-check it, and after a command
//! starts plan again immediately. Forceful commands (expiration) start without the delay.
//!
//! An idle loop also plans at once when the orchestration queue holds fewer commands than it
//! last did ([`DisruptionCadence::observe_held`]): a command's targets have drained (their
//! instances terminating or gone) or it rolled back, so its nodes no longer count against the
//! budgets. The round right after a command starts usually finds its NodePool's budget taken
//! by that command's own targets; without this it would wait out the poll interval after
//! they leave, once per command, which on a scale-down of many nodes under a 10% budget is
//! most of the time spent.

use std::time::Duration;

use crate::time::Timestamp;

/// The disruption loop's two waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DisruptionTimings {
    /// Sleep between rounds that found nothing to do.
    pub(crate) poll: Duration,
    /// Wait between planning a graceful command and re-checking it on a fresh snapshot.
    pub(crate) validation_delay: Duration,
}

impl Default for DisruptionTimings {
    fn default() -> Self {
        DisruptionTimings {
            poll: Duration::from_secs(10),
            validation_delay: Duration::from_secs(15),
        }
    }
}

/// What the loop wants done when it wakes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Due {
    /// Run a planning round.
    Plan,
    /// Re-check the commands planned at the last round.
    Validate,
}

/// The outcome of a planning round, reported back to the cadence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Planned {
    /// The round planned no command.
    Nothing,
    /// Only forceful commands, already started.
    StartedForceful,
    /// Graceful commands wait for validation.
    AwaitingValidation,
}

impl Planned {
    /// What a round did: `started` commands at once and left `awaiting` for their re-check.
    pub(crate) fn after(started: usize, awaiting: usize) -> Planned {
        match (started, awaiting) {
            (_, 1..) => Planned::AwaitingValidation,
            (1.., 0) => Planned::StartedForceful,
            (0, 0) => Planned::Nothing,
        }
    }
}

/// The outcome of a re-check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Validated {
    /// At least one command passed and started.
    Started,
    /// Every command was rejected.
    Rejected,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Idle { next: Timestamp },
    Validating { at: Timestamp },
}

/// When the disruption loop runs its next round and re-checks a planned command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DisruptionCadence {
    timings: DisruptionTimings,
    state: State,
    /// The commands the orchestration queue held when last observed.
    held: usize,
}

impl DisruptionCadence {
    /// A loop whose first round is due at `start`.
    pub fn new(timings: DisruptionTimings, start: Timestamp) -> Self {
        DisruptionCadence {
            timings,
            state: State::Idle { next: start },
            held: 0,
        }
    }

    /// The orchestration queue holds `held` commands at `now` (running, or finished with
    /// targets still draining: [`crate::disruption::queue::Queue::held`]). Fewer than at the
    /// last observation frees budget: an idle loop plans at once instead of at its next poll.
    /// The shells observe after advancing the queue and before asking what is due.
    pub fn observe_held(&mut self, now: Timestamp, held: usize) {
        if held < self.held
            && let State::Idle { next } = &mut self.state
        {
            *next = (*next).min(now);
        }
        self.held = held;
    }

    /// The next instant at which the loop has something to do.
    pub fn next_wake(&self) -> Timestamp {
        match self.state {
            State::Idle { next } => next,
            State::Validating { at } => at,
        }
    }

    /// What is due at `now`, if anything.
    pub fn due(&self, now: Timestamp) -> Option<Due> {
        match self.state {
            State::Idle { next } if now >= next => Some(Due::Plan),
            State::Validating { at } if now >= at => Some(Due::Validate),
            _ => None,
        }
    }

    /// Records the outcome of the planning round run at `now`.
    pub fn planned(&mut self, now: Timestamp, outcome: Planned) {
        self.state = match outcome {
            Planned::Nothing => State::Idle {
                next: now.plus(self.timings.poll),
            },
            Planned::StartedForceful => State::Idle { next: now },
            Planned::AwaitingValidation => State::Validating {
                at: now.plus(self.timings.validation_delay),
            },
        };
    }

    /// Records the outcome of the re-check run at `now`.
    pub fn validated(&mut self, now: Timestamp, outcome: Validated) {
        self.state = State::Idle {
            next: match outcome {
                Validated::Started => now,
                Validated::Rejected => now.plus(self.timings.poll),
            },
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(secs: i64) -> Timestamp {
        Timestamp(secs * 1000)
    }

    #[test]
    fn idle_rounds_poll_every_ten_seconds() {
        let mut c = DisruptionCadence::new(DisruptionTimings::default(), s(0));
        assert_eq!(c.due(s(0)), Some(Due::Plan));
        c.planned(s(0), Planned::Nothing);
        assert_eq!(c.next_wake(), s(10));
        assert_eq!(c.due(s(9)), None);
        assert_eq!(c.due(s(10)), Some(Due::Plan));
    }

    #[test]
    fn graceful_commands_are_rechecked_after_fifteen_seconds_then_the_loop_reruns() {
        let mut c = DisruptionCadence::new(DisruptionTimings::default(), s(0));
        c.planned(s(20), Planned::AwaitingValidation);
        assert_eq!(c.due(s(34)), None);
        assert_eq!(c.due(s(35)), Some(Due::Validate));
        c.validated(s(35), Validated::Started);
        assert_eq!(c.due(s(35)), Some(Due::Plan));
    }

    #[test]
    fn a_rejected_command_waits_a_poll_interval() {
        let mut c = DisruptionCadence::new(DisruptionTimings::default(), s(0));
        c.planned(s(0), Planned::AwaitingValidation);
        c.validated(s(15), Validated::Rejected);
        assert_eq!(c.next_wake(), s(25));
        assert_eq!(c.due(s(24)), None);
    }

    #[test]
    fn an_idle_loop_plans_at_once_when_a_held_command_lets_go() {
        let mut c = DisruptionCadence::new(DisruptionTimings::default(), s(0));
        c.observe_held(s(0), 0);
        c.planned(s(0), Planned::AwaitingValidation);
        c.validated(s(15), Validated::Started);
        // The round right after the start finds the budget taken by the command's targets.
        c.observe_held(s(15), 1);
        c.planned(s(15), Planned::Nothing);
        assert_eq!(c.next_wake(), s(25));
        c.observe_held(s(16), 1);
        assert_eq!(c.due(s(16)), None);
        // The targets' instances are terminating: they leave the budget.
        c.observe_held(s(17), 0);
        assert_eq!(c.due(s(17)), Some(Due::Plan));
    }

    #[test]
    fn more_held_commands_or_a_pending_recheck_change_nothing() {
        let mut c = DisruptionCadence::new(DisruptionTimings::default(), s(0));
        c.planned(s(0), Planned::Nothing);
        c.observe_held(s(1), 2);
        assert_eq!(c.next_wake(), s(10));
        c.planned(s(10), Planned::AwaitingValidation);
        // A re-check keeps its delay even when a command lets go meanwhile.
        c.observe_held(s(12), 1);
        assert_eq!(c.next_wake(), s(25));
        assert_eq!(c.due(s(12)), None);
    }

    #[test]
    fn forceful_commands_loop_again_at_once() {
        let mut c = DisruptionCadence::new(DisruptionTimings::default(), s(0));
        c.planned(s(3), Planned::StartedForceful);
        assert_eq!(c.due(s(3)), Some(Due::Plan));
    }
}
