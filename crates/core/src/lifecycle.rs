//! The NodeClaim lifecycle's timers (upstream's liveness rules): a claim not launched within
//! [`LAUNCH_TIMEOUT`] of its creation, or launched but not registered within
//! [`REGISTRATION_TIMEOUT`] of its launch, is deleted, so its pods go to a node that works.
//! Both shells ask the same question with their own clock's `now`: the controller on each
//! reconcile, the simulator when a deadline comes due. A failed launch is tried again after
//! [`launch_retry_after`].
//!
//! Offers the timers' answers; deleting the claim and counting its registration are the shells'.

use std::time::Duration;

use crate::time::Timestamp;

/// How long a claim may stay unlaunched after it was created.
pub(crate) const LAUNCH_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// How long a launched claim may stay without a registered Node.
pub(crate) const REGISTRATION_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// Where a claim is in its lifecycle, with the instants its timers run from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Created, not launched yet.
    Launching {
        /// When the claim was created.
        created: Timestamp,
    },
    /// Launched, its Node not registered yet.
    Registering {
        /// When the claim was launched (its `Launched` condition's transition).
        launched: Timestamp,
    },
    /// Its Node registered: no timer runs any more.
    Registered,
}

/// A timer that ran out: the claim is deleted with this reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timeout {
    /// Not launched within 5 minutes of its creation.
    Launch,
    /// Launched, its Node not registered within 15 minutes.
    Registration,
}

impl Timeout {
    /// The reason upstream's `karpenter_nodeclaims_disrupted_total` gives.
    pub fn reason(self) -> &'static str {
        match self {
            Timeout::Launch => "launch_timeout",
            Timeout::Registration => "registration_timeout",
        }
    }
}

impl Phase {
    /// When this phase's timer runs out, if one runs.
    pub fn deadline(self) -> Option<(Timestamp, Timeout)> {
        match self {
            Phase::Launching { created } => Some((created.plus(LAUNCH_TIMEOUT), Timeout::Launch)),
            Phase::Registering { launched } => {
                Some((launched.plus(REGISTRATION_TIMEOUT), Timeout::Registration))
            }
            Phase::Registered => None,
        }
    }

    /// The timer that has run out at `now`, if any.
    pub fn timed_out(self, now: Timestamp) -> Option<Timeout> {
        self.deadline()
            .filter(|(at, _)| now >= *at)
            .map(|(_, why)| why)
    }
}

/// The first wait before a failed launch is tried again, and the longest.
pub(crate) const LAUNCH_RETRY_FIRST: Duration = Duration::from_secs(1);
pub(crate) const LAUNCH_RETRY_MAX: Duration = Duration::from_secs(60);

/// How long a claim waits after its `failures`-th failed launch in a row before it is tried
/// again: doubling from one second to a minute, as upstream's per-claim rate limiter. A cloud
/// that throttles or fails is then asked less often the longer it fails, while the launch
/// timeout still bounds the whole wait.
pub fn launch_retry_after(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    LAUNCH_RETRY_FIRST
        .saturating_mul(1 << doublings)
        .min(LAUNCH_RETRY_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp(secs * 1000)
    }

    #[test]
    fn a_claim_not_launched_in_five_minutes_times_out() {
        let p = Phase::Launching { created: at(100) };
        assert_eq!(p.timed_out(at(100 + 299)), None);
        assert_eq!(p.timed_out(at(100 + 300)), Some(Timeout::Launch));
        assert_eq!(Timeout::Launch.reason(), "launch_timeout");
    }

    #[test]
    fn a_launched_claim_not_registered_in_fifteen_minutes_times_out() {
        let p = Phase::Registering { launched: at(10) };
        assert_eq!(p.timed_out(at(10 + 899)), None);
        assert_eq!(p.timed_out(at(10 + 900)), Some(Timeout::Registration));
        assert_eq!(p.deadline(), Some((at(910), Timeout::Registration)));
    }

    #[test]
    fn failed_launches_back_off_from_a_second_to_a_minute() {
        let secs: Vec<u64> = (1..=9).map(|n| launch_retry_after(n).as_secs()).collect();
        assert_eq!(secs, vec![1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(launch_retry_after(u32::MAX), LAUNCH_RETRY_MAX);
    }

    #[test]
    fn a_registered_claim_has_no_timer() {
        assert_eq!(Phase::Registered.deadline(), None);
        assert_eq!(Phase::Registered.timed_out(at(1_000_000)), None);
    }
}
