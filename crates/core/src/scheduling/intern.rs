//! String interning: label keys, label values and resource names become dense `u32` ids so the
//! scheduler compares integers, never strings. Ids are assigned in first-seen order, which is
//! deterministic because the compiler walks its input in a fixed order.
//!
//! That order is the snapshot's own listing order (a NodePool's requirement values, its
//! instance types and their offerings, then the nodes by name), so two snapshots that differ
//! only in how they list the same things intern in different orders. What depends on it:
//! - No decision. Where ids would break a tie between domains, names do
//!   (`solver::World::topology`, `engine::evaluate`); a test lists the zones both ways.
//! - The order of values in rendered requirements: a value set lists its values in id order
//!   (`reqs::ValueSet::describe`, `Reqs::to_requirements`), so a new claim's
//!   `karpenter.sh/capacity-type In [spot, on-demand]` keeps the order its NodePool listed
//!   them in; `tests/topology.rs` pins that as the only difference.
//! - Byte equality between compiles: the incremental compiles (`prepared`, `node_cache`) must
//!   reproduce a fresh compile's ids exactly, because everything above compares by id.
//!
//! An interner may sit on a shared, frozen base ([`Interner::layered`]): the base's ids stay
//! as they are and new strings get ids after them, so one compiled cluster can serve many
//! simulations without copying its strings.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

/// A hash map keyed by strings the compiler looks up many times per solve. Lookups only: its
/// order never reaches the output, so a fast non-keyed hash is fine.
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;
/// The set form of [`FastMap`].
pub(crate) type FastSet<K> = HashSet<K, BuildHasherDefault<FastHasher>>;

/// A multiply-rotate hash over eight bytes at a time, much cheaper than the default keyed hash
/// for the short label keys, values and names interned here.
#[derive(Clone, Copy, Debug, Default)]
pub struct FastHasher {
    hash: u64,
}

const MULTIPLIER: u64 = 0xf135_7aea_2e62_a9c5;

impl FastHasher {
    fn add(&mut self, word: u64) {
        self.hash = (self.hash ^ word).wrapping_mul(MULTIPLIER).rotate_left(23);
    }
}

impl Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 59));
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    fn finish(&self) -> u64 {
        // Fold the high bits, which the multiply mixes best, into the low ones tables index by.
        let h = self.hash;
        (h ^ (h >> 29)).wrapping_mul(MULTIPLIER) ^ (h >> 32)
    }
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Interner {
    base: Option<Arc<Interner>>,
    /// `base.len()`, the first id this layer hands out.
    offset: u32,
    ids: FastMap<String, u32>,
    names: Vec<String>,
    /// The value parsed as an integer, for `Gt`/`Lt` comparisons.
    numbers: Vec<Option<i64>>,
    /// Ids in this range that `intern` found already present, recorded in order.
    watch: Option<(u32, u32)>,
    hits: Vec<u32>,
    /// Every id `intern` returned since [`Interner::trace`], in call order.
    trace: Option<Vec<u32>>,
}

impl Interner {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// An empty layer over `base`.
    pub(crate) fn layered(base: Arc<Interner>) -> Self {
        let offset = base.len() as u32;
        Interner {
            base: Some(base),
            offset,
            ..Interner::default()
        }
    }

    /// Starts recording which ids in `range` are interned again (see [`Interner::take_hits`]).
    pub(crate) fn watch(&mut self, range: (u32, u32)) {
        self.watch = Some(range);
        self.hits.clear();
    }

    /// The watched ids interned again since [`Interner::watch`]; stops watching.
    pub(crate) fn take_hits(&mut self) -> Vec<u32> {
        self.watch = None;
        std::mem::take(&mut self.hits)
    }

    /// Starts recording every id `intern` returns (see [`Interner::take_trace`]).
    pub(crate) fn trace(&mut self) {
        self.trace = Some(Vec::new());
    }

    /// The ids `intern` returned since [`Interner::trace`], in call order; stops recording.
    pub(crate) fn take_trace(&mut self) -> Vec<u32> {
        self.trace.take().unwrap_or_default()
    }

    pub(crate) fn intern(&mut self, s: &str) -> u32 {
        let id = match self.get(s) {
            Some(id) => {
                if let Some((lo, hi)) = self.watch
                    && (lo..hi).contains(&id)
                {
                    self.hits.push(id);
                }
                id
            }
            None => {
                let id = self.offset + self.names.len() as u32;
                self.ids.insert(s.to_string(), id);
                self.names.push(s.to_string());
                self.numbers.push(s.parse::<i64>().ok());
                id
            }
        };
        if let Some(t) = &mut self.trace {
            t.push(id);
        }
        id
    }

    /// A frozen copy of the first `n` ids, without any base layer.
    pub(crate) fn prefix(&self, n: usize) -> Interner {
        let mut out = Interner::new();
        for id in 0..n as u32 {
            out.intern(self.name(id));
        }
        out
    }

    pub(crate) fn get(&self, s: &str) -> Option<u32> {
        if let Some(b) = &self.base
            && let Some(id) = b.get(s)
        {
            return Some(id);
        }
        self.ids.get(s).copied()
    }

    pub(crate) fn name(&self, id: u32) -> &str {
        match &self.base {
            Some(b) if id < self.offset => b.name(id),
            _ => &self.names[(id - self.offset) as usize],
        }
    }

    pub(crate) fn number(&self, id: u32) -> Option<i64> {
        match &self.base {
            Some(b) if id < self.offset => b.number(id),
            _ => self.numbers[(id - self.offset) as usize],
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.offset as usize + self.names.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_layer_keeps_base_ids_and_numbers_after_them() {
        let mut base = Interner::new();
        assert_eq!(base.intern("a"), 0);
        assert_eq!(base.intern("7"), 1);
        let base = Arc::new(base);
        let mut l = Interner::layered(base.clone());
        assert_eq!(l.intern("7"), 1);
        assert_eq!(l.intern("b"), 2);
        assert_eq!(l.intern("b"), 2);
        assert_eq!(l.name(0), "a");
        assert_eq!(l.name(2), "b");
        assert_eq!(l.number(1), Some(7));
        assert_eq!(l.len(), 3);
        assert_eq!(base.len(), 2);
        l.watch((0, 2));
        l.intern("a");
        l.intern("b");
        l.intern("c");
        assert_eq!(l.take_hits(), vec![0]);
        l.trace();
        l.intern("c");
        l.intern("a");
        l.intern("d");
        assert_eq!(l.take_trace(), vec![3, 0, 4]);
        let p = l.prefix(3);
        assert_eq!((p.len(), p.name(2), p.get("c")), (3, "b", None));
    }

    #[test]
    fn many_similar_names_keep_their_ids() {
        // Names that differ only late or by length must not collide into wrong answers.
        let mut i = Interner::new();
        let names: Vec<String> = (0..5000)
            .map(|n| format!("ip-10-0-{}-{}.ec2.internal", n / 256, n % 256))
            .chain((0..64).map(|n| "x".repeat(n)))
            .collect();
        for (k, n) in names.iter().enumerate() {
            assert_eq!(i.intern(n), k as u32);
        }
        for (k, n) in names.iter().enumerate() {
            assert_eq!(i.get(n), Some(k as u32));
        }
        assert_eq!(i.get("ip-10-0-0-0.ec2.internal."), None);
    }
}
