//! The provisioning batcher: triggers (pending pods) open a window that closes after an idle
//! gap or a maximum length, whichever comes first; each trigger extends the idle gap.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::time::Timestamp;

/// `BATCH_IDLE_DURATION` and `BATCH_MAX_DURATION`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchWindow {
    /// `BATCH_IDLE_DURATION`: the window closes once this long passes without a trigger
    /// (default 1 s).
    pub idle: Duration,
    /// `BATCH_MAX_DURATION`: the window closes this long after it opened, whatever arrives
    /// (default 10 s).
    pub max: Duration,
}

impl Default for BatchWindow {
    fn default() -> Self {
        BatchWindow {
            idle: Duration::from_secs(1),
            max: Duration::from_secs(10),
        }
    }
}

/// How often a pod that is still pending triggers the provisioner again.
pub const POD_REQUEUE: Duration = Duration::from_secs(10);

/// A closed window: the distinct trigger keys it collected, sorted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    /// The first trigger.
    pub(crate) opened: Timestamp,
    /// The deadline it closed at (the idle gap or the maximum, whichever came first).
    pub(crate) closed: Timestamp,
    /// The distinct trigger keys, sorted.
    pub keys: Vec<String>,
}

#[derive(Clone, Debug)]
struct Open {
    opened: Timestamp,
    last: Timestamp,
    keys: BTreeSet<String>,
}

/// The pod batcher: collects triggers into one batch that closes after the idle gap or the
/// maximum window, whichever comes first.
#[derive(Clone, Debug, Default)]
pub struct Batcher {
    window: BatchWindow,
    open: Option<Open>,
}

impl Batcher {
    /// A batcher with no batch open.
    pub fn new(window: BatchWindow) -> Self {
        Batcher { window, open: None }
    }

    /// Records a trigger at `now`. Keys are deduplicated within a window.
    pub fn trigger(&mut self, now: Timestamp, key: &str) {
        match &mut self.open {
            Some(open) => {
                open.last = open.last.max(now);
                open.keys.insert(key.to_string());
            }
            None => {
                self.open = Some(Open {
                    opened: now,
                    last: now,
                    keys: BTreeSet::from([key.to_string()]),
                })
            }
        }
    }

    /// When the open window closes if nothing else arrives; `None` when no window is open.
    pub fn deadline(&self) -> Option<Timestamp> {
        self.open.as_ref().map(|o| {
            o.last
                .plus(self.window.idle)
                .min(o.opened.plus(self.window.max))
        })
    }

    /// Closes and returns the window if its deadline has passed at `now`.
    pub fn poll(&mut self, now: Timestamp) -> Option<Batch> {
        let deadline = self.deadline()?;
        if now < deadline {
            return None;
        }
        let open = self.open.take()?;
        Some(Batch {
            opened: open.opened,
            closed: deadline,
            keys: open.keys.into_iter().collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(secs: f64) -> Timestamp {
        Timestamp((secs * 1000.0) as i64)
    }

    #[test]
    fn a_single_trigger_closes_after_the_idle_gap() {
        let mut b = Batcher::new(BatchWindow::default());
        assert_eq!(b.poll(s(0.0)), None);
        b.trigger(s(2.0), "default/a");
        assert_eq!(b.deadline(), Some(s(3.0)));
        assert_eq!(b.poll(s(2.9)), None);
        let batch = b.poll(s(3.0)).unwrap();
        assert_eq!(batch.opened, s(2.0));
        assert_eq!(batch.closed, s(3.0));
        assert_eq!(batch.keys, vec!["default/a".to_string()]);
        assert_eq!(b.deadline(), None);
    }

    #[test]
    fn each_trigger_extends_the_idle_gap() {
        let mut b = Batcher::new(BatchWindow::default());
        b.trigger(s(0.0), "a");
        b.trigger(s(0.5), "b");
        b.trigger(s(1.2), "c");
        assert_eq!(b.deadline(), Some(s(2.2)));
        assert_eq!(b.poll(s(2.0)), None);
        let batch = b.poll(s(2.2)).unwrap();
        assert_eq!(batch.keys, vec!["a", "b", "c"]);
    }

    #[test]
    fn a_steady_stream_is_cut_at_the_maximum() {
        let mut b = Batcher::new(BatchWindow::default());
        for i in 0..40 {
            let t = s(i as f64 * 0.5);
            if let Some(batch) = b.poll(t) {
                assert_eq!(batch.opened, s(0.0));
                assert_eq!(batch.closed, s(10.0));
                assert_eq!(batch.keys.len(), 20);
                return;
            }
            b.trigger(t, &format!("p{i:02}"));
        }
        panic!("the window never closed");
    }

    #[test]
    fn duplicate_keys_count_once() {
        let mut b = Batcher::new(BatchWindow::default());
        b.trigger(s(0.0), "a");
        b.trigger(s(0.1), "a");
        assert_eq!(b.poll(s(5.0)).unwrap().keys, vec!["a"]);
    }

    #[test]
    fn custom_windows_apply() {
        let mut b = Batcher::new(BatchWindow {
            idle: Duration::from_secs(3),
            max: Duration::from_secs(4),
        });
        b.trigger(s(0.0), "a");
        b.trigger(s(2.0), "b");
        assert_eq!(b.deadline(), Some(s(4.0)));
    }
}
