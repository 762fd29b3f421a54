//! A change log of keys, so loops that keep something derived from the index (gauges, the
//! pod-startup observer) can ask what changed since they last looked instead of walking
//! every object each tick. Each key appears once, at the sequence number of its latest
//! change; readers keep a [`Cursor`] and the log never needs to know them.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Where a reader stopped: the log it read (a clone is another log) and the last sequence
/// number it saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cursor {
    log: u64,
    seq: u64,
}

/// What a reader must look at since its cursor.
#[derive(Debug)]
pub enum Since<'a> {
    /// These keys changed (added, updated or removed), oldest change first.
    Keys(Vec<&'a str>),
    /// The reader is too far behind (or new, or the log was reset by a relist): it must
    /// rebuild from the whole index.
    Resync,
}

static LOGS: AtomicU64 = AtomicU64::new(1);

fn next_id() -> u64 {
    LOGS.fetch_add(1, Ordering::Relaxed)
}

#[derive(Debug)]
pub struct ChangeLog {
    id: u64,
    seq: u64,
    /// Each key once, held by both maps.
    by_seq: BTreeMap<u64, Arc<str>>,
    latest: HashMap<Arc<str>, u64>,
    /// Changes up to this sequence number were dropped; a reader behind it resyncs.
    forgotten: u64,
}

impl Default for ChangeLog {
    fn default() -> Self {
        ChangeLog {
            id: next_id(),
            seq: 0,
            by_seq: BTreeMap::new(),
            latest: HashMap::new(),
            forgotten: 0,
        }
    }
}

/// A copy of the index is a different index: its readers start over.
impl Clone for ChangeLog {
    fn clone(&self) -> Self {
        ChangeLog {
            id: next_id(),
            seq: self.seq,
            by_seq: self.by_seq.clone(),
            latest: self.latest.clone(),
            forgotten: self.seq,
        }
    }
}

/// Entries kept beyond twice the live keys before the oldest are dropped.
const SLACK: usize = 4096;

impl ChangeLog {
    /// Records a change of `key`. `live` is how many keys the index holds, which bounds how
    /// many entries (removed keys included) the log keeps.
    pub fn touch(&mut self, key: &str, live: usize) {
        self.record(key, || Arc::from(key), live);
    }

    /// [`touch`](Self::touch), holding the caller's copy of the key if the log has none.
    pub fn touch_shared(&mut self, key: &Arc<str>, live: usize) {
        self.record(key, || Arc::clone(key), live);
    }

    fn record(&mut self, key: &str, copy: impl FnOnce() -> Arc<str>, live: usize) {
        self.seq += 1;
        let key = match self.latest.get_mut(key) {
            // The entry's key moves to the new sequence number.
            Some(at) => {
                let was = std::mem::replace(at, self.seq);
                // Both maps always hold the same keys; a fresh copy would do as well.
                self.by_seq.remove(&was).unwrap_or_else(copy)
            }
            None => {
                let key = copy();
                self.latest.insert(Arc::clone(&key), self.seq);
                key
            }
        };
        self.by_seq.insert(self.seq, key);
        if self.by_seq.len() > 2 * live + SLACK {
            self.trim(live + SLACK / 2);
        }
    }

    /// Forgets every change: readers resync (the index was relisted).
    pub fn reset(&mut self) {
        self.by_seq.clear();
        self.latest.clear();
        // A reader that saw everything so far is behind too: what was reset is unknown.
        self.seq += 1;
        self.forgotten = self.seq;
    }

    fn trim(&mut self, keep: usize) {
        while self.by_seq.len() > keep {
            let Some((seq, key)) = self.by_seq.pop_first() else {
                break;
            };
            self.latest.remove(&key);
            self.forgotten = seq;
        }
    }

    /// The cursor of a reader that has seen everything so far.
    pub fn head(&self) -> Cursor {
        Cursor {
            log: self.id,
            seq: self.seq,
        }
    }

    /// What changed after `cursor` (`None`: a reader that has never read).
    pub fn since(&self, cursor: Option<Cursor>) -> Since<'_> {
        match cursor {
            Some(c) if c.log == self.id && c.seq >= self.forgotten => {
                Since::Keys(self.by_seq.range(c.seq + 1..).map(|(_, k)| &**k).collect())
            }
            _ => Since::Resync,
        }
    }

    /// Entries held; for tests.
    pub fn len(&self) -> usize {
        self.by_seq.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_seq.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(s: Since<'_>) -> Vec<String> {
        match s {
            Since::Keys(k) => k.into_iter().map(str::to_owned).collect(),
            Since::Resync => panic!("unexpected resync"),
        }
    }

    #[test]
    fn readers_see_each_changed_key_once_in_order_of_its_latest_change() {
        let mut log = ChangeLog::default();
        assert!(matches!(log.since(None), Since::Resync));
        log.touch("a", 1);
        let c = log.head();
        log.touch("b", 2);
        log.touch("c", 3);
        log.touch("b", 3);
        assert_eq!(keys(log.since(Some(c))), ["c", "b"]);
        assert!(keys(log.since(Some(log.head()))).is_empty());
    }

    #[test]
    fn a_reader_behind_a_trim_or_reset_resyncs_and_clones_are_new_logs() {
        let mut log = ChangeLog::default();
        let start = log.head();
        for i in 0..(SLACK + 10) {
            log.touch(&format!("gone-{i}"), 0);
        }
        assert!(log.len() <= SLACK + 1);
        assert!(matches!(log.since(Some(start)), Since::Resync));
        let recent = log.head();
        log.touch("x", 1);
        assert_eq!(keys(log.since(Some(recent))), ["x"]);
        let copy = log.clone();
        assert!(matches!(copy.since(Some(recent)), Since::Resync));
        let current = log.head();
        log.reset();
        assert!(matches!(log.since(Some(current)), Since::Resync));
        let after = log.head();
        log.touch("y", 1);
        assert_eq!(keys(log.since(Some(after))), ["y"]);
    }
}
