//! A NodePool's registration health (upstream's `NodeRegistrationHealthy` condition): the
//! last [`WINDOW`] NodeClaims of the pool that either registered or timed out launching or
//! registering. The pool is unhealthy when at least half of them failed: its nodes do not
//! join (a broken network path, a bad image, a missing role), and the condition tells the
//! user before they wonder why their pods stay pending. The record starts again, as unknown,
//! whenever the NodePool's or its node class's generation changes: an edit may have fixed it.
//!
//! Upstream changes the condition on each result: a failure makes it false when the window
//! is then unhealthy, a success makes it true when the window is then healthy. A failure can
//! only add failures to the window and a success only take them away, so the condition is a
//! function of the window alone, which is what [`Health::status`] computes.
//!
//! Offers the record and its verdict; writing the NodePool condition is the controller's.

use std::collections::VecDeque;

/// How many results the window keeps.
pub const WINDOW: usize = 4;

/// The generations a record was started for: the NodePool's and its node class's.
pub type Generations = (Option<i64>, Option<i64>);

/// One NodePool's recent results.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Health {
    generations: Generations,
    /// Oldest first; `Err` holds the failure's reason.
    results: VecDeque<Result<(), String>>,
}

/// What the condition says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// No registration since the record started, and not unhealthy.
    Unknown,
    /// A claim registered since the record started, and fewer than half of [`WINDOW`]
    /// results failed.
    Healthy,
    /// Unhealthy, with the latest failure's reason and how many of the window failed.
    Unhealthy {
        /// The latest failure's reason.
        reason: String,
        /// How many of the window's results are failures.
        failed: usize,
    },
}

impl Health {
    /// Adds one claim's result, starting the record afresh if the generations moved on.
    pub fn record(&mut self, generations: Generations, result: Result<(), String>) {
        if generations != self.generations {
            *self = Health {
                generations,
                results: VecDeque::new(),
            };
        }
        if self.results.len() == WINDOW {
            self.results.pop_front();
        }
        self.results.push_back(result);
    }

    /// The condition for a pool now at `generations`.
    pub fn status(&self, generations: Generations) -> Status {
        if generations != self.generations {
            return Status::Unknown;
        }
        let failed = self.results.iter().filter(|r| r.is_err()).count();
        // At least half of the window, as upstream's failures ÷ 4 ≥ 0.5.
        if failed * 2 >= WINDOW {
            let reason = self
                .results
                .iter()
                .rev()
                .find_map(|r| r.clone().err())
                .unwrap_or_default();
            return Status::Unhealthy { reason, failed };
        }
        if self.results.iter().any(|r| r.is_ok()) {
            Status::Healthy
        } else {
            Status::Unknown
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: Generations = (Some(1), Some(1));

    fn fail() -> Result<(), String> {
        Err("RegistrationFailed".into())
    }

    #[test]
    fn one_failure_alone_says_nothing_and_a_success_says_healthy() {
        let mut h = Health::default();
        assert_eq!(h.status(G), Status::Unknown);
        h.record(G, fail());
        assert_eq!(h.status(G), Status::Unknown);
        h.record(G, Ok(()));
        assert_eq!(h.status(G), Status::Healthy);
    }

    #[test]
    fn two_failures_in_the_last_four_are_unhealthy_until_three_successes_follow() {
        let mut h = Health::default();
        h.record(G, Ok(()));
        h.record(G, fail());
        assert_eq!(h.status(G), Status::Healthy);
        h.record(G, Err("LaunchFailed".into()));
        assert_eq!(
            h.status(G),
            Status::Unhealthy {
                reason: "LaunchFailed".into(),
                failed: 2
            }
        );
        h.record(G, Ok(()));
        h.record(G, Ok(()));
        // [fail, LaunchFailed, ok, ok]: still half.
        assert!(matches!(h.status(G), Status::Unhealthy { failed: 2, .. }));
        h.record(G, Ok(()));
        assert_eq!(h.status(G), Status::Healthy);
    }

    #[test]
    fn an_edit_starts_the_record_again() {
        let mut h = Health::default();
        h.record(G, fail());
        h.record(G, fail());
        assert!(matches!(h.status(G), Status::Unhealthy { .. }));
        let edited = (Some(2), Some(1));
        assert_eq!(h.status(edited), Status::Unknown);
        h.record(edited, fail());
        assert_eq!(h.status(edited), Status::Unknown);
        let class_edited = (Some(2), Some(5));
        h.record(class_edited, Ok(()));
        assert_eq!(h.status(class_edited), Status::Healthy);
    }
}
