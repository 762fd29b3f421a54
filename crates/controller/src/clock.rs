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
