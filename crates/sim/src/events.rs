//! The virtual clock's queue: events ordered by time, ties by the order they were scheduled.

use std::collections::BTreeMap;

use nodewright_core::time::Timestamp;

#[derive(Clone, Debug)]
pub struct EventQueue<E> {
    items: BTreeMap<(Timestamp, u64), E>,
    seq: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            items: BTreeMap::new(),
            seq: 0,
        }
    }
}

impl<E> EventQueue<E> {
    pub fn push(&mut self, at: Timestamp, event: E) {
        self.seq += 1;
        self.items.insert((at, self.seq), event);
    }

    pub fn peek_time(&self) -> Option<Timestamp> {
        self.items.keys().next().map(|(t, _)| *t)
    }

    /// The earliest event if it is due at `now`.
    pub fn pop_due(&mut self, now: Timestamp) -> Option<(Timestamp, E)> {
        if self.peek_time()? > now {
            return None;
        }
        self.items.pop_first().map(|((t, _), e)| (t, e))
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_come_out_in_time_order_then_insertion_order() {
        let mut q = EventQueue::default();
        q.push(Timestamp(20), "c");
        q.push(Timestamp(10), "a");
        q.push(Timestamp(10), "b");
        assert_eq!(q.peek_time(), Some(Timestamp(10)));
        assert_eq!(q.pop_due(Timestamp(5)), None);
        assert_eq!(q.pop_due(Timestamp(10)), Some((Timestamp(10), "a")));
        assert_eq!(q.pop_due(Timestamp(10)), Some((Timestamp(10), "b")));
        assert_eq!(q.pop_due(Timestamp(15)), None);
        assert_eq!(q.pop_due(Timestamp(30)), Some((Timestamp(20), "c")));
        assert!(q.is_empty());
    }
}
