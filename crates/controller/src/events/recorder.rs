//! Upstream's recorder in front of any sink: an event carrying [`Dedupe`] values is published
//! once per (reason, values) within its timeout, and an event under a [`Limit`] also needs a
//! token from that limit's shared bucket.

use std::collections::BTreeMap;
use std::sync::Mutex;

use tokio::time::Instant;

use super::{Event, EventSink, Limit};

/// A token bucket that starts full, as client-go's.
#[derive(Clone, Debug)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

/// Decides which events are published, as upstream's recorder does: an event with [`Dedupe`]
/// values is dropped while an earlier one with the same reason and values is younger than
/// its timeout (the first one marks the key even when a rate limit then drops it, as
/// upstream); an event under a [`Limit`] needs a token from that limit's bucket. Time is an
/// argument, so the decisions are plain data.
#[derive(Debug, Default)]
pub struct Throttle {
    /// (reason, values) → when the key expires.
    seen: BTreeMap<(String, Vec<String>), Instant>,
    buckets: BTreeMap<Limit, Bucket>,
    /// Size of `seen` after its last sweep; the next sweep waits until it has doubled, so
    /// sweeping costs O(1) per event amortised.
    swept_at: usize,
}

/// Why [`Throttle::admit`] turned an event away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// The same (reason, values) was published within the timeout.
    Duplicate,
    /// The event's rate limit had no token left.
    RateLimited,
}

impl Throttle {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `event`, arriving at `now`, is published.
    pub fn admit(&mut self, event: &Event, now: Instant) -> Result<(), Refused> {
        if let Some(d) = &event.dedupe {
            let key = (event.reason.to_lowercase(), d.values.clone());
            if self.seen.get(&key).is_some_and(|until| now < *until) {
                return Err(Refused::Duplicate);
            }
            self.seen.insert(key, now + d.timeout);
            if self.seen.len() > 2 * self.swept_at.max(512) {
                self.seen.retain(|_, until| now < *until);
                self.swept_at = self.seen.len();
            }
        }
        if let Some(limit) = event.limit {
            let (rate, burst) = limit.rate();
            let b = self.buckets.entry(limit).or_insert(Bucket {
                tokens: burst,
                last: now,
            });
            let refill = now.saturating_duration_since(b.last).as_secs_f64() * rate;
            b.tokens = (b.tokens + refill).min(burst);
            b.last = now;
            if b.tokens < 1.0 {
                return Err(Refused::RateLimited);
            }
            b.tokens -= 1.0;
        }
        Ok(())
    }

    /// Keys remembered; for tests.
    pub fn remembered(&self) -> usize {
        self.seen.len()
    }
}

/// A sink behind upstream's recorder: what [`Throttle`] admits (at tokio's clock) reaches
/// `inner`.
pub struct Recorded<S> {
    inner: S,
    throttle: Mutex<Throttle>,
}

impl<S: EventSink> Recorded<S> {
    pub fn new(inner: S) -> Self {
        Recorded {
            inner,
            throttle: Mutex::new(Throttle::new()),
        }
    }
}

impl<S: EventSink> EventSink for Recorded<S> {
    fn publish(&self, event: Event) {
        if admits(&self.throttle, &event) {
            self.inner.publish(event);
        }
    }
}

/// Whether the throttle behind `throttle` lets `event` through now; a lock poisoned by a
/// panic elsewhere still throttles.
pub(super) fn admits(throttle: &Mutex<Throttle>, event: &Event) -> bool {
    throttle
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .admit(event, Instant::now())
        .is_ok()
}
