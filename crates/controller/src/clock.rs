//! Wall-clock instants that follow tokio's clock, so timeouts measured against API timestamps
//! (creation, deletion, condition transitions) advance under tokio's paused test time too.

use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff;
use nodewright_core::time::Timestamp;

#[derive(Clone, Copy, Debug)]
pub struct Clock {
    base_ms: i64,
    base: tokio::time::Instant,
}

impl Clock {
    /// Starts at the system's wall time.
    pub fn system() -> Self {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        Clock::starting_at(Timestamp(ms))
    }

    /// Starts at a fixed instant (tests).
    pub fn starting_at(at: Timestamp) -> Self {
        Clock {
            base_ms: at.0,
            base: tokio::time::Instant::now(),
        }
    }

    pub fn now(&self) -> Timestamp {
        let elapsed = tokio::time::Instant::now().saturating_duration_since(self.base);
        Timestamp(self.base_ms + elapsed.as_millis() as i64)
    }

    /// Sleeps until the next whole multiple of `every` since the clock started (at most
    /// `every`). Loops that share one clock and sleep this way wake at one instant, in one
    /// turn of the runtime, rather than each on its own: every loop that looks once a second
    /// (the lifecycle, termination, an idle provisioner and disruption, pod events, status,
    /// the state metrics) wakes the process once between them.
    pub async fn sleep_on_grid(&self, every: std::time::Duration) {
        let step = every.as_nanos().max(1);
        let elapsed = tokio::time::Instant::now()
            .saturating_duration_since(self.base)
            .as_nanos();
        let next = (elapsed / step + 1) * step;
        let at = self.base + std::time::Duration::from_nanos(next as u64);
        tokio::time::sleep_until(at).await;
    }

    /// Sleeps `wait` when that is shorter than a `look`; otherwise until the grid's next
    /// `look` (at most one), so a loop with nothing due soon wakes with the others.
    pub async fn sleep_at_most(&self, wait: std::time::Duration, look: std::time::Duration) {
        if wait < look {
            tokio::time::sleep(wait).await;
        } else {
            self.sleep_on_grid(look).await;
        }
    }

    pub fn now_time(&self) -> Time {
        to_time(self.now())
    }
}

pub fn to_time(t: Timestamp) -> Time {
    Time(jiff::Timestamp::from_millisecond(t.0).unwrap_or(jiff::Timestamp::UNIX_EPOCH))
}

pub fn from_time(t: &Time) -> Timestamp {
    Timestamp(t.0.as_millisecond())
}

/// RFC 3339 as the API server writes it (`2024-05-01T10:00:00Z`).
pub fn rfc3339(t: Timestamp) -> String {
    let ts = jiff::Timestamp::from_millisecond(t.0 - t.0.rem_euclid(1000))
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    ts.to_string()
}

pub fn parse_rfc3339(s: &str) -> Option<Timestamp> {
    s.parse::<jiff::Timestamp>()
        .ok()
        .map(|t| Timestamp(t.as_millisecond()))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Loops that began their sleeps at different moments wake at the same instant, the next
    /// whole second of the clock; one that starts on a whole second sleeps a whole second.
    #[tokio::test(start_paused = true)]
    async fn sleepers_on_one_grid_wake_together() {
        let clock = Clock::starting_at(Timestamp(0));
        let second = Duration::from_secs(1);
        tokio::time::advance(Duration::from_millis(300)).await;
        let early = tokio::spawn(async move {
            clock.sleep_on_grid(second).await;
            tokio::time::Instant::now()
        });
        tokio::task::yield_now().await;
        tokio::time::advance(Duration::from_millis(450)).await;
        let late = tokio::spawn(async move {
            clock.sleep_on_grid(second).await;
            tokio::time::Instant::now()
        });
        let (early, late) = (early.await.unwrap(), late.await.unwrap());
        assert_eq!(early, late);
        assert_eq!(clock.now(), Timestamp(1000));
        clock.sleep_on_grid(second).await;
        assert_eq!(clock.now(), Timestamp(2000));
    }

    /// A wait shorter than a look is slept as it is; a longer one ends on the grid's next
    /// look, not after the whole wait and not a look after the call.
    #[tokio::test(start_paused = true)]
    async fn a_long_wait_ends_on_the_grid_a_short_one_as_asked() {
        let clock = Clock::starting_at(Timestamp(0));
        let second = Duration::from_secs(1);
        tokio::time::advance(Duration::from_millis(250)).await;
        clock
            .sleep_at_most(Duration::from_millis(300), second)
            .await;
        assert_eq!(clock.now(), Timestamp(550));
        clock.sleep_at_most(Duration::from_secs(7), second).await;
        assert_eq!(clock.now(), Timestamp(1000));
        clock.sleep_at_most(second, second).await;
        assert_eq!(clock.now(), Timestamp(2000));
    }
}
