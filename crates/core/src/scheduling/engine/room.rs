//! Existing targets by free cpu, for the "tightest target with room first" scan.
//!
//! A solve over a prepared cluster sees the compiled targets minus a few removed ones, and
//! changes the free cpu of only the targets it fills. So the order is kept as a sorted list
//! shared by every such solve (in compiled indices), the removed targets hidden, and each
//! solve's changes in a small set of its own: building a solve's index costs nothing per
//! target, and a scan visits exactly what a sorted set of `(free, index)` would, in the same
//! order.

use std::collections::BTreeSet;
use std::sync::Arc;

/// `(free millicores, compiled index)` of every target of one kind, sorted.
pub(crate) type Sorted = Arc<Vec<(i64, u32)>>;

/// Registered nodes and in-flight claims, each sorted by free cpu.
#[derive(Clone, Debug, Default)]
pub(crate) struct RoomBase {
    pub nodes: Sorted,
    pub in_flight: Sorted,
    /// Compiled indices the solve does not see, sorted; the others are numbered in order.
    pub hidden: Arc<Vec<u32>>,
}

/// One kind of target by free cpu, as this solve has changed it.
#[derive(Clone, Debug)]
pub(crate) struct Room {
    base: Sorted,
    hidden: Arc<Vec<u32>>,
    /// Targets (solve indices) whose base entry is stale: their entry is in `changed`.
    moved: Vec<u64>,
    changed: BTreeSet<(i64, usize)>,
}

impl Room {
    /// `targets` solve indices; `base` and `hidden` as in [`RoomBase`].
    pub(crate) fn new(base: Sorted, hidden: Arc<Vec<u32>>, targets: usize) -> Room {
        Room {
            base,
            hidden,
            moved: vec![0; targets.div_ceil(64)],
            changed: BTreeSet::new(),
        }
    }

    /// The solve index of compiled index `c`, unless the solve does not see it.
    fn solve_index(&self, c: u32) -> Option<usize> {
        match self.hidden.binary_search(&c) {
            Ok(_) => None,
            Err(before) => Some(c as usize - before),
        }
    }

    fn is_moved(&self, i: usize) -> bool {
        self.moved[i / 64] & (1 << (i % 64)) != 0
    }

    /// Targets with at least `need` free, least free first (ties: lower index).
    pub(crate) fn from(&self, need: i64) -> impl Iterator<Item = (i64, usize)> + '_ {
        let start = self.base.partition_point(|e| e.0 < need);
        let base = self.base[start..].iter().filter_map(move |&(free, c)| {
            let i = self.solve_index(c)?;
            (!self.is_moved(i)).then_some((free, i))
        });
        Merge {
            a: base.peekable(),
            b: self.changed.range((need, 0)..).copied().peekable(),
            descending: false,
        }
    }

    /// Targets with at least `need` free, most free first, ties lower index first: the
    /// kube-scheduler's `LeastAllocated` preference, for simulations of what it will do. The
    /// cluster's scheduler breaks a tie between equally empty nodes by its node order, and the
    /// targets are compiled in that order; taking the last of them instead sent a moved pod
    /// to another node than the scheduler then chose, and the pod the scheduler left without
    /// room was launched a node of its own.
    pub(crate) fn emptiest_from(&self, need: i64) -> impl Iterator<Item = (i64, usize)> + '_ {
        let start = self.base.partition_point(|e| e.0 < need);
        let base = &self.base[start..];
        // Runs of one free amount, the largest first; each run in index order.
        let mut end = base.len();
        let mut below: Option<i64> = None;
        std::iter::from_fn(move || {
            let top_base = end.checked_sub(1).map(|k| base[k].0);
            let top_changed = match below {
                None => self.changed.range((need, 0)..).next_back(),
                Some(b) => self.changed.range((need, 0)..(b, 0)).next_back(),
            }
            .map(|e| e.0);
            let free = top_base.max(top_changed)?;
            let run_start = base[..end].partition_point(|e| e.0 < free);
            let run = &base[run_start..end];
            end = run_start;
            below = Some(free);
            let run = run.iter().filter_map(move |&(f, c)| {
                let i = self.solve_index(c)?;
                (!self.is_moved(i)).then_some((f, i))
            });
            Some(Merge {
                a: run.peekable(),
                b: self
                    .changed
                    .range((free, 0)..=(free, usize::MAX))
                    .copied()
                    .peekable(),
                descending: false,
            })
        })
        .flatten()
    }

    /// Target `i` went from `before` to `after` free.
    pub(crate) fn update(&mut self, i: usize, before: i64, after: i64) {
        if self.is_moved(i) {
            self.changed.remove(&(before, i));
        } else {
            self.moved[i / 64] |= 1 << (i % 64);
        }
        self.changed.insert((after, i));
    }
}

/// Two sorted streams (both ascending, or both descending) as one.
struct Merge<A: Iterator, B: Iterator> {
    a: std::iter::Peekable<A>,
    b: std::iter::Peekable<B>,
    descending: bool,
}

impl<A, B> Iterator for Merge<A, B>
where
    A: Iterator<Item = (i64, usize)>,
    B: Iterator<Item = (i64, usize)>,
{
    type Item = (i64, usize);

    fn next(&mut self) -> Option<(i64, usize)> {
        match (self.a.peek(), self.b.peek()) {
            (Some(x), Some(y)) if (y < x) != self.descending && y != x => self.b.next(),
            (Some(_), _) => self.a.next(),
            (None, _) => self.b.next(),
        }
    }
}

/// Sorts `(free, index)` pairs into the two kinds: `in_flight[i]` says which `i` is.
pub(crate) fn sorted(free: &[i64], in_flight: &[bool]) -> (Sorted, Sorted) {
    let mut nodes = Vec::with_capacity(free.len());
    let mut flying = Vec::new();
    for (i, (&f, &fl)) in free.iter().zip(in_flight).enumerate() {
        if fl { &mut flying } else { &mut nodes }.push((f, i as u32));
    }
    nodes.sort_unstable();
    flying.sort_unstable();
    (Arc::new(nodes), Arc::new(flying))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The index answers every scan as a sorted set of the visible targets would, through
        /// any sequence of updates.
        #[test]
        fn scans_match_a_sorted_set(
            free in proptest::collection::vec(-500i64..4000, 1..40),
            hide in proptest::collection::vec(any::<bool>(), 40),
            updates in proptest::collection::vec((0usize..40, -1000i64..1000), 0..30),
            needs in proptest::collection::vec(-600i64..4200, 1..8),
        ) {
            let n = free.len();
            let flags = vec![false; n];
            let (base, _) = sorted(&free, &flags);
            let hidden: Vec<u32> = (0..n as u32).filter(|&c| hide[c as usize]).collect();
            let visible: Vec<usize> = (0..n).filter(|&c| !hide[c]).collect();
            let mut room = Room::new(base, Arc::new(hidden), visible.len());
            // The reference: a sorted set over solve indices.
            let mut now: Vec<i64> = visible.iter().map(|&c| free[c]).collect();
            let mut set: BTreeSet<(i64, usize)> =
                now.iter().enumerate().map(|(i, &f)| (f, i)).collect();
            let check = |room: &Room, set: &BTreeSet<(i64, usize)>| {
                for &need in &needs {
                    let got: Vec<_> = room.from(need).collect();
                    let want: Vec<_> = set.range((need, 0)..).copied().collect();
                    assert_eq!(got, want, "need {need}");
                    let got: Vec<_> = room.emptiest_from(need).collect();
                    let mut want: Vec<_> = set.range((need, 0)..).copied().collect();
                    want.sort_by_key(|&(f, i)| (std::cmp::Reverse(f), i));
                    assert_eq!(got, want, "emptiest, need {need}");
                }
            };
            check(&room, &set);
            for (i, delta) in updates {
                if visible.is_empty() {
                    break;
                }
                let i = i % visible.len();
                let before = now[i];
                now[i] += delta;
                set.remove(&(before, i));
                set.insert((now[i], i));
                room.update(i, before, now[i]);
                check(&room, &set);
            }
        }
    }

    #[test]
    fn kinds_are_split_and_sorted() {
        let (nodes, flying) = sorted(&[30, 10, 20, 10], &[false, true, false, false]);
        assert_eq!(*nodes, vec![(10, 3), (20, 2), (30, 0)]);
        assert_eq!(*flying, vec![(10, 1)]);
    }
}
