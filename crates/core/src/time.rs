//! Instants as integers. `core` never reads a clock: callers pass `now` in.
//!
//! Offers the instant type and Go duration strings; no clock, no time zones.

use std::time::Duration;

pub use crate::disruption::duration::parse_go_duration;

/// Milliseconds since the Unix epoch (UTC).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub i64);

impl Timestamp {
    /// The instant `d` after this one.
    pub fn plus(self, d: Duration) -> Timestamp {
        Timestamp(
            self.0
                .saturating_add(d.as_millis().min(i64::MAX as u128) as i64),
        )
    }

    /// The time elapsed from `earlier` to `self`, or zero if `earlier` is later.
    pub fn since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0).max(0) as u64)
    }

    /// Whole seconds since the epoch.
    pub fn unix_seconds(self) -> i64 {
        self.0.div_euclid(1000)
    }
}
