//! Compiled node requirements kept from one compile of a cluster to the next.
//!
//! Compiling a node interns every label key and value (dozens per node: the instance type's
//! labels come along) and builds its requirements. Between two decisions few nodes change, so
//! the cache keeps, per node name, its labels (compared again only when the Node's
//! `resourceVersion` is unknown or moved), the strings its compile interned in call order
//! and its requirements written against positions in that sequence. A later compile of a node
//! with the same labels replays the sequence instead: each distinct string is interned once
//! per compile (a repeated one is an array lookup), in the order a fresh compile would meet
//! it, so every id, the interner's contents and the recorded sequence come out exactly as a
//! fresh compile's. The requirements are then renamed to those ids and sorted again, unless
//! the replayed ids are exactly those of the node's last compile (every node before it and the
//! NodePools unchanged, the usual case): then the requirements renamed then are handed out
//! again, shared, with nothing copied or sorted.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::compile;
use super::intern::{FastMap, Interner};
use super::pool_cache::PoolCache;
use super::prepared::Prepared;
use super::reqs::Reqs;
use crate::model::Node;

#[derive(Clone, Debug)]
struct Entry {
    labels: Packed,
    /// The `resourceVersion` of the Node the labels were last seen on (empty: unknown).
    version: String,
    /// The strings the node's compile interned, in call order, as cache string ids.
    trace: Vec<u32>,
    /// The requirements with every id replaced by its first position in `trace`.
    reqs: Reqs,
    /// The ids the node's last compile interned and its requirements renamed to them.
    last: (Arc<Vec<u32>>, Arc<Reqs>),
    /// The position in `trace` of the node's one NodePool label value
    /// ([`compile::nodepool_value`]).
    nodepool_at: Option<u32>,
    /// The compile that last used the entry.
    used: u64,
}

/// What compiles of one cluster over time keep for the next ([`super::Compile::cached`]): each
/// node's compiled requirements by name, the last NodePool compile, and the last compile made
/// under a [`NodeCache::same_as`] key. Every compile made with it equals a fresh one, ids
/// included. Both shells keep one for their lifetime: the simulator compiles the same cluster
/// for every decision, and the controller's provisioner and disruption share one (what it
/// saves is measured in `docs/PERFORMANCE.md`, "What the caches are worth").
#[derive(Clone, Debug, Default)]
pub struct NodeCache {
    /// Every string an entry refers to, numbered once for the cache's lifetime.
    ids: FastMap<String, u32>,
    names: Vec<String>,
    entries: FastMap<String, Entry>,
    compiles: u64,
    /// Per cache string id, its id in the current compile (`u32::MAX` until met).
    current: Vec<u32>,
    /// The ids a replay interned, before they are compared with the last compile's.
    scratch: Vec<u32>,
    /// Nodes answered from the cache and compiled afresh, for tests.
    pub(crate) hits: u64,
    pub(crate) misses: u64,
    /// Hits whose ids were those of the node's last compile (nothing renamed), for tests.
    pub(crate) same_ids: u64,
    /// Hits renamed in the requirements of the node's last compile, for tests.
    pub(crate) renamed_in_place: u64,
    /// Hits known by the Node's `resourceVersion`, its labels not compared, for tests.
    pub(crate) by_version: u64,
    /// The NodePools compiled last (they are compiled before any node).
    pub(crate) pools: PoolCache,
    /// What the next compile's snapshot equals, when the caller knows (see `same_as`).
    pub(super) same: Option<u64>,
    /// The last compile made under a `same_as` key, with that key.
    pub(super) kept: Option<(u64, Option<Prepared>)>,
    /// Compiles answered whole from `kept`, for tests.
    pub(crate) compiles_reused: u64,
    /// The size of the string table at which it is next rebuilt from the live entries.
    compact_at: usize,
}

/// The smallest string table worth rebuilding ([`NodeCache::compact`]).
const COMPACT_FROM: usize = 4096;

impl NodeCache {
    #[cfg(test)]
    fn new() -> Self {
        Self::default()
    }

    /// Says that the next compile ([`Prepared::new_with`]) is of a snapshot equal, its time
    /// aside, to every other snapshot compiled after `same_as` with the same `key`: the
    /// compile is then answered with the last one made under that key. A compile reads no
    /// clock, so the answer is the same. Callers use a key that changes whenever anything but
    /// the time may have changed.
    pub(crate) fn same_as(&mut self, key: u64) {
        self.same = Some(key);
    }

    /// `(nodes looked up, compiles answered whole under a same_as key)` so far: for the
    /// caller's tests that a compile was made, or reused.
    pub fn counts(&self) -> (u64, u64) {
        (self.hits + self.misses, self.compiles_reused)
    }

    /// `(NodePool compiles reused, NodePool compiles made)` so far: for the caller's tests that
    /// unchanged NodePools were not compiled again.
    pub fn pool_counts(&self) -> (u64, u64) {
        (self.pools.hits, self.pools.misses)
    }

    /// Starts a compile: ids of the last one mean nothing now.
    pub(super) fn begin(&mut self) {
        self.compiles += 1;
        self.current.clear();
        self.current.resize(self.names.len(), u32::MAX);
    }

    /// Ends a compile: entries of nodes it did not see are dropped, and the string table is
    /// rebuilt once it has doubled since it last was.
    pub(super) fn end(&mut self) {
        let now = self.compiles;
        self.entries.retain(|_, e| e.used == now);
        if self.names.len() >= self.compact_at.max(COMPACT_FROM) {
            self.compact();
        }
    }

    /// Numbers again only the strings the entries still use. Every node brings a string of
    /// its own (its hostname label), which outlives the node in the table; a controller
    /// keeps one cache for its lifetime while nodes come and go, so without this the table
    /// would grow with every node ever seen. The ids are the cache's own: compiles see only
    /// the strings, so none of their answers moves.
    fn compact(&mut self) {
        let mut renumbered = vec![u32::MAX; self.names.len()];
        let mut names = Vec::new();
        for e in self.entries.values_mut() {
            for g in &mut e.trace {
                let slot = &mut renumbered[*g as usize];
                if *slot == u32::MAX {
                    *slot = names.len() as u32;
                    names.push(std::mem::take(&mut self.names[*g as usize]));
                }
                *g = *slot;
            }
        }
        self.ids = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), i as u32))
            .collect();
        self.names = names;
        self.current.clear();
        self.current.resize(self.names.len(), u32::MAX);
        self.compact_at = 2 * self.names.len();
    }

    fn string_id(&mut self, s: &str) -> u32 {
        if let Some(&g) = self.ids.get(s) {
            return g;
        }
        let g = self.names.len() as u32;
        self.ids.insert(s.to_string(), g);
        self.names.push(s.to_string());
        self.current.push(u32::MAX);
        g
    }

    /// `node`'s requirements compiled with `interner`, every id the compile interned in call
    /// order, and the requirements' NodePool value; the same as [`compile::node_reqs`] with
    /// the interner tracing, then [`compile::nodepool_value`].
    pub(super) fn node_reqs(
        &mut self,
        node: &Node,
        interner: &mut Interner,
    ) -> (Arc<Reqs>, Arc<Vec<u32>>, Option<u32>) {
        let now = self.compiles;
        if let Some(e) = self.entries.get_mut(&node.name)
            && (known_version(&e.version, node) || e.labels.same(&node.labels))
        {
            if known_version(&e.version, node) {
                self.by_version += 1;
                debug_assert!(
                    e.labels.same(&node.labels),
                    "{} changed at one version",
                    node.name
                );
            }
            if e.version != node.resource_version {
                e.version.clone_from(&node.resource_version);
            }
            e.used = now;
            self.hits += 1;
            let seq = &mut self.scratch;
            seq.clear();
            for &g in &e.trace {
                let slot = &mut self.current[g as usize];
                if *slot == u32::MAX {
                    *slot = interner.intern(&self.names[g as usize]);
                }
                seq.push(*slot);
            }
            if *seq != *e.last.0 {
                let (ids, reqs) = &mut e.last;
                match (Arc::get_mut(ids), Arc::get_mut(reqs)) {
                    // No compile shares them any more: renamed where they are, the buffers
                    // of the last rename reused.
                    (Some(ids), Some(reqs)) => {
                        self.renamed_in_place += 1;
                        ids.clone_from(seq);
                        rename_into(&e.reqs, seq, reqs);
                    }
                    // Copied (one allocation of the right size): the buffer keeps its
                    // capacity for the next replay, which would otherwise grow a new one push
                    // by push.
                    _ => e.last = (Arc::new(seq.clone()), Arc::new(rename(&e.reqs, seq))),
                }
            } else {
                self.same_ids += 1;
            }
            let nodepool = e.nodepool_at.map(|at| seq[at as usize]);
            return (e.last.1.clone(), e.last.0.clone(), nodepool);
        }
        self.misses += 1;
        interner.trace();
        let reqs = compile::node_reqs(node, interner);
        let seq = interner.take_trace();
        let trace: Vec<u32> = seq
            .iter()
            .map(|&id| {
                let g = self.string_id(interner.name(id));
                self.current[g as usize] = id;
                g
            })
            .collect();
        let position = |id: u32| {
            seq.iter()
                .position(|&x| x == id)
                .expect("a compiled node's ids were all interned by its compile") as u32
        };
        let nodepool = compile::nodepool_value(&reqs, interner);
        let mut positional = reqs.clone();
        for r in &mut positional.items {
            r.key = position(r.key);
            for v in &mut r.set.values {
                *v = position(*v);
            }
        }
        let nodepool_at = nodepool.map(position);
        let reqs = Arc::new(reqs);
        let seq = Arc::new(seq);
        self.entries.insert(
            node.name.clone(),
            Entry {
                labels: Packed::of(&node.labels),
                version: node.resource_version.clone(),
                trace,
                reqs: positional,
                last: (seq.clone(), reqs.clone()),
                nodepool_at,
                used: now,
            },
        );
        (reqs, seq, nodepool)
    }
}

/// Whether `node` is at `version`, a version its entry was made or confirmed at: the Node has
/// not been written since, so its labels are the entry's without comparing them. An empty
/// version is unknown and proves nothing.
fn known_version(version: &str, node: &Node) -> bool {
    !version.is_empty() && version == node.resource_version
}

/// A node's labels in key order, packed into one buffer (each key and value as its length and
/// bytes): comparing a node's map with it reads the kept side in one sequential pass, where two
/// maps of separately allocated strings cost a cache miss per string on both sides.
#[derive(Clone, Debug)]
struct Packed {
    count: usize,
    bytes: Vec<u8>,
}

impl Packed {
    fn of(labels: &BTreeMap<String, String>) -> Packed {
        let mut bytes = Vec::new();
        for (k, v) in labels {
            for s in [k, v] {
                bytes.extend_from_slice(&(s.len() as u32).to_le_bytes());
                bytes.extend_from_slice(s.as_bytes());
            }
        }
        Packed {
            count: labels.len(),
            bytes,
        }
    }

    /// Whether `labels` are exactly the packed ones.
    fn same(&self, labels: &BTreeMap<String, String>) -> bool {
        if self.count != labels.len() {
            return false;
        }
        let mut rest = self.bytes.as_slice();
        for (k, v) in labels {
            for s in [k, v] {
                let Some((len, tail)) = rest.split_first_chunk::<4>() else {
                    return false;
                };
                let n = u32::from_le_bytes(*len) as usize;
                if tail.len() < n || tail[..n] != *s.as_bytes() {
                    return false;
                }
                rest = &tail[n..];
            }
        }
        rest.is_empty()
    }
}

/// [`rename`] into `out`, a renaming of the same `reqs` before: its vectors are refilled, so
/// nothing is allocated unless a value set outgrows the one whose place it takes.
fn rename_into(reqs: &Reqs, seq: &[u32], out: &mut Reqs) {
    debug_assert_eq!(reqs.items.len(), out.items.len());
    for (from, to) in reqs.items.iter().zip(&mut out.items) {
        to.key = seq[from.key as usize];
        to.min_values = from.min_values;
        to.set.complement = from.set.complement;
        to.set.gt = from.set.gt;
        to.set.lt = from.set.lt;
        to.set.values.clear();
        to.set
            .values
            .extend(from.set.values.iter().map(|&v| seq[v as usize]));
        if !to.set.values.is_sorted() {
            to.set.values.sort_unstable();
        }
    }
    if !out.items.is_sorted_by_key(|r| r.key) {
        out.items.sort_by_key(|r| r.key);
    }
}

/// `reqs` written against positions in `seq`, with the ids found there, in id order.
fn rename(reqs: &Reqs, seq: &[u32]) -> Reqs {
    let mut out = reqs.clone();
    for r in &mut out.items {
        r.key = seq[r.key as usize];
        for v in &mut r.set.values {
            *v = seq[*v as usize];
        }
        if !r.set.values.is_sorted() {
            r.set.values.sort_unstable();
        }
    }
    // Ids usually move together (a node before this one gone): often still in order.
    if !out.items.is_sorted_by_key(|r| r.key) {
        out.items.sort_by_key(|r| r.key);
    }
    out
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::disruption::bench::cluster;
    use crate::labels;
    use crate::model::Snapshot;
    use crate::scheduling::Compile;
    use crate::scheduling::setup::{Targets, targets, targets_with};
    use std::sync::Arc;

    #[derive(Clone, Debug)]
    enum Op {
        Remove(usize),
        /// A copy of a node under a new name, with a label of its own or a shared one.
        Add {
            from: usize,
            own: bool,
        },
        Relabel {
            node: usize,
            value: u8,
        },
        Initialize(usize),
        /// A deprecated zone label that disagrees with the node's zone.
        OldZone {
            node: usize,
            value: u8,
        },
        /// The NodePool's weight changes.
        Weigh(i32),
        /// The instance types are copied into a new list, one offering made unavailable or
        /// (`cold: false`) unchanged.
        Catalog {
            cold: bool,
            index: usize,
        },
        /// A DaemonSet is added.
        Daemon(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0usize..64).prop_map(Op::Remove),
            (0usize..64, any::<bool>()).prop_map(|(from, own)| Op::Add { from, own }),
            (0usize..64, 0u8..4).prop_map(|(node, value)| Op::Relabel { node, value }),
            (0usize..64).prop_map(Op::Initialize),
            (0usize..64, 0u8..3).prop_map(|(node, value)| Op::OldZone { node, value }),
            (0i32..3).prop_map(Op::Weigh),
            (any::<bool>(), 0usize..400).prop_map(|(cold, index)| Op::Catalog { cold, index }),
            (0u8..3).prop_map(Op::Daemon),
        ]
    }

    fn apply(s: &mut Snapshot, op: &Op, step: usize) {
        let n = s.nodes.len();
        if n == 0 {
            return;
        }
        match *op {
            Op::Weigh(w) => s.nodepools[0].weight = w,
            Op::Catalog { cold, index } => {
                for list in s.instance_types.values_mut() {
                    let mut types = (**list).clone();
                    if cold && !types.is_empty() {
                        let i = index % types.len();
                        if let Some(o) = types[i].offerings.first_mut() {
                            o.available = false;
                        }
                    }
                    *list = std::sync::Arc::new(types);
                }
            }
            Op::Daemon(d) => s.daemonsets.push(crate::model::DaemonSet {
                namespace: "kube-system".into(),
                name: format!("d{d}-{step}"),
                pod: crate::model::Pod {
                    requests: crate::resources::Resources::new().with(crate::resources::CPU, 50),
                    ..crate::model::Pod::default()
                },
            }),
            Op::Remove(i) => {
                s.nodes.remove(i % n);
            }
            Op::Add { from, own } => {
                let mut node = s.nodes[from % n].clone();
                node.name = format!("extra-{step:03}");
                node.labels
                    .insert(labels::HOSTNAME.into(), node.name.clone());
                let (k, v) = if own {
                    ("example.com/id", format!("id-{step}"))
                } else {
                    ("example.com/team", format!("team-{}", step % 3))
                };
                node.labels.insert(k.into(), v);
                s.nodes.push(node);
                s.nodes.sort_by(|a, b| a.name.cmp(&b.name));
            }
            Op::Relabel { node, value } => {
                s.nodes[node % n]
                    .labels
                    .insert("example.com/v".into(), format!("v{value}"));
            }
            Op::Initialize(i) => {
                s.nodes[i % n]
                    .labels
                    .insert(labels::INITIALIZED.into(), "true".into());
            }
            Op::OldZone { node, value } => {
                s.nodes[node % n].labels.insert(
                    "failure-domain.beta.kubernetes.io/zone".into(),
                    format!("test-zone-{value}"),
                );
            }
        }
    }

    /// Everything a compile decides about the targets, ids included.
    fn shape(t: &Targets) -> String {
        let names: Vec<&str> = (0..t.interner.len() as u32)
            .map(|id| t.interner.name(id))
            .collect();
        format!(
            "{names:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}",
            t.existing.all,
            t.fresh,
            t.seqs,
            t.sources,
            t.pools,
            t.allow_undefined,
            (t.hostname, t.zone, t.capacity_type)
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Compiling with the cache, step after step of a changing cluster, gives exactly the
        /// fresh compile: the same ids in the same order, requirements, sequences and ranges.
        #[test]
        fn cached_compiles_equal_fresh_ones(
            seed in 0u64..1000,
            ops in proptest::collection::vec(op(), 1..24),
        ) {
            let mut s = cluster(12, 40, seed);
            let mut cache = NodeCache::new();
            prop_assert_eq!(shape(&targets_with(&s, Compile::cached(&mut cache))), shape(&targets(&s)));
            for (step, op) in ops.iter().enumerate() {
                apply(&mut s, op, step);
                // Odd steps carry versions, which name the labels: known ones go unread.
                for n in &mut s.nodes {
                    n.resource_version = if step % 2 == 1 { version_of(n) } else { String::new() };
                }
                prop_assert_eq!(
                    shape(&targets_with(&s, Compile::cached(&mut cache))),
                    shape(&targets(&s)),
                    "after {:?}",
                    op
                );
            }
            prop_assert!(cache.hits > 0);
            // Once more over an unchanged cluster: the NodePools come from the cache.
            prop_assert_eq!(shape(&targets_with(&s, Compile::cached(&mut cache))), shape(&targets(&s)));
            prop_assert!(cache.pools.hits > 0);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(16))]

        /// Full solves with the cache, step after step of a changing cluster with pods to
        /// place, plan exactly as fresh ones.
        #[test]
        fn cached_full_solves_equal_fresh_ones(
            seed in 0u64..1000,
            ops in proptest::collection::vec(op(), 1..10),
        ) {
            let mut s = cluster(10, 40, seed);
            for p in s.pods.iter_mut().step_by(7).map(Arc::make_mut) {
                p.node_name = None;
                p.phase = crate::model::PodPhase::Pending;
            }
            let options = crate::scheduling::Options::default();
            let mut cache = NodeCache::new();
            let solve = |s: &Snapshot, cache: &mut NodeCache| {
                crate::scheduling::solve_with(s, &options, Compile::cached(cache))
            };
            prop_assert_eq!(solve(&s, &mut cache), crate::scheduling::solve(&s, &options));
            for (step, op) in ops.iter().enumerate() {
                apply(&mut s, op, step);
                prop_assert_eq!(
                    solve(&s, &mut cache),
                    crate::scheduling::solve(&s, &options),
                    "after {:?}",
                    op
                );
            }
            prop_assert!(cache.hits > 0);
        }
    }

    /// Solves of `compiled` without each of the first few nodes (their pods moving), and
    /// without nothing.
    fn solves(s: &Snapshot, compiled: &Prepared) -> Vec<Option<crate::scheduling::Plan>> {
        let options = crate::scheduling::Options::default();
        let mut sets: Vec<std::collections::BTreeSet<String>> = vec![Default::default()];
        sets.extend(s.nodes.iter().take(4).map(|n| [n.name.clone()].into()));
        sets.iter()
            .map(|without| {
                let pods: Vec<&crate::model::Pod> = s
                    .pods
                    .iter()
                    .filter(|p| p.node_name.as_ref().is_some_and(|n| without.contains(n)))
                    .map(|p| &**p)
                    .collect();
                compiled.solve(s, without, &pods, &options)
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// Compiles from the cache (nodes replayed, requirements handed out again when their
        /// ids did not move, whole compiles kept under a key) solve exactly as fresh ones.
        #[test]
        fn kept_compiles_solve_as_fresh_ones(
            seed in 0u64..1000,
            ops in proptest::collection::vec(op(), 1..12),
        ) {
            let mut s = cluster(10, 60, seed);
            let mut cache = NodeCache::new();
            for (step, op) in ops.iter().enumerate() {
                apply(&mut s, op, step);
                let fresh = Prepared::new(&s).map(|p| solves(&s, &p));
                cache.same_as(step as u64);
                let cached = Prepared::new_with(&s, Compile::cached(&mut cache));
                prop_assert_eq!(cached.as_ref().map(|p| solves(&s, p)), fresh.clone());
                // The same cluster later: the kept compile answers, the same way.
                s.now = crate::time::Timestamp(s.now.0 + 15_000);
                let reused = cache.compiles_reused;
                cache.same_as(step as u64);
                let kept = Prepared::new_with(&s, Compile::cached(&mut cache));
                prop_assert_eq!(cache.compiles_reused, reused + 1);
                prop_assert_eq!(kept.as_ref().map(|p| solves(&s, p)), fresh);
            }
        }
    }

    /// A version that changes whenever the node's labels do, as a write's would.
    fn version_of(n: &Node) -> String {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        n.labels.hash(&mut h);
        format!("{:x}", h.finish())
    }

    #[test]
    fn a_node_at_a_known_version_is_not_compared_again() {
        let mut s = cluster(6, 20, 4);
        for (i, n) in s.nodes.iter_mut().enumerate() {
            n.resource_version = format!("{i}");
        }
        let mut cache = NodeCache::new();
        targets_with(&s, Compile::cached(&mut cache));
        assert_eq!((cache.misses, cache.by_version), (6, 0));
        targets_with(&s, Compile::cached(&mut cache));
        assert_eq!((cache.hits, cache.by_version), (6, 6));
        // Relabelled at a new version: compiled again. Unversioned: compared, and a hit.
        s.nodes[0]
            .labels
            .insert("example.com/new".into(), "x".into());
        s.nodes[0].resource_version = "100".into();
        s.nodes[1].resource_version = String::new();
        assert_eq!(
            shape(&targets_with(&s, Compile::cached(&mut cache))),
            shape(&targets(&s))
        );
        assert_eq!((cache.misses, cache.hits, cache.by_version), (7, 11, 10));
    }

    #[test]
    fn requirements_no_compile_shares_are_renamed_in_place() {
        let mut s = cluster(8, 30, 3);
        let mut cache = NodeCache::new();
        let first = targets_with(&s, Compile::cached(&mut cache));
        // The first node gone moves every later node's own ids.
        let gone = s.nodes.iter().map(|n| n.name.clone()).min().unwrap();
        s.nodes.retain(|n| n.name != gone);
        // While a compile shares them, the renamed requirements are copies.
        assert_eq!(
            shape(&targets_with(&s, Compile::cached(&mut cache))),
            shape(&targets(&s))
        );
        assert_eq!(cache.renamed_in_place, 0);
        drop(first);
        let s2 = {
            let mut s2 = s.clone();
            let gone = s2.nodes.iter().map(|n| n.name.clone()).min().unwrap();
            s2.nodes.retain(|n| n.name != gone);
            s2
        };
        assert_eq!(
            shape(&targets_with(&s2, Compile::cached(&mut cache))),
            shape(&targets(&s2))
        );
        assert!(cache.renamed_in_place > 0);
    }

    #[test]
    fn a_compile_is_kept_only_under_its_key() {
        let mut s = cluster(6, 30, 2);
        let mut cache = NodeCache::new();
        cache.same_as(1);
        let first = Prepared::new_with(&s, Compile::cached(&mut cache)).unwrap();
        // Without a key, a compile neither uses nor replaces the kept one.
        let _ = Prepared::new_with(&s, Compile::cached(&mut cache));
        cache.same_as(1);
        let again = Prepared::new_with(&s, Compile::cached(&mut cache)).unwrap();
        assert_eq!(cache.compiles_reused, 1);
        assert!(Arc::ptr_eq(&first.0, &again.0));
        // Another key compiles anew, and sees the change.
        s.nodes.remove(0);
        cache.same_as(2);
        let changed = Prepared::new_with(&s, Compile::cached(&mut cache)).unwrap();
        assert_eq!(cache.compiles_reused, 1);
        assert_eq!(
            solves(&s, &changed),
            solves(&s, &Prepared::new(&s).unwrap())
        );
        let nodes = |p: &Prepared| p.targets.existing.iter().filter(|e| !e.in_flight).count();
        assert_eq!(nodes(&first), nodes(&changed) + 1);
    }

    #[test]
    fn a_compile_kept_on_one_thread_equals_one_that_splits() {
        // Large enough that every part that may move to a thread of its own does.
        let s = cluster(300, 4200, 5);
        fn one(cache: Option<&mut NodeCache>) -> Compile<'_> {
            Compile {
                cache,
                one_thread: true,
            }
        }
        assert_eq!(shape(&targets_with(&s, one(None))), shape(&targets(&s)));
        let split = Prepared::new(&s).unwrap();
        let alone = Prepared::new_with(&s, one(None)).unwrap();
        assert_eq!(solves(&s, &alone), solves(&s, &split));
        // With a cache too, filled by a compile that split.
        let mut cache = NodeCache::new();
        let _ = targets_with(&s, Compile::cached(&mut cache));
        assert_eq!(
            shape(&targets_with(&s, one(Some(&mut cache)))),
            shape(&targets(&s))
        );
    }

    #[test]
    fn packed_labels_equal_only_the_same_labels() {
        let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let a = map(&[("ab", "c"), ("k", "")]);
        let packed = Packed::of(&a);
        assert!(packed.same(&a));
        // The same bytes split differently, a missing or extra label, another value.
        for other in [
            map(&[("a", "bc"), ("k", "")]),
            map(&[("ab", "c")]),
            map(&[("ab", "c"), ("k", ""), ("z", "")]),
            map(&[("ab", "c"), ("k", "x")]),
            map(&[("ab", "c"), ("l", "")]),
            map(&[]),
        ] {
            assert!(!packed.same(&other), "{other:?}");
        }
        assert!(Packed::of(&map(&[])).same(&map(&[])));
    }

    #[test]
    fn unchanged_nodepools_are_reused_and_changed_ones_compiled() {
        let mut s = cluster(4, 10, 1);
        let mut cache = NodeCache::new();
        let _ = targets_with(&s, Compile::cached(&mut cache));
        let _ = targets_with(&s, Compile::cached(&mut cache));
        assert_eq!((cache.pools.hits, cache.pools.misses), (1, 1));
        // An equal catalog in a new list is the same input.
        for list in s.instance_types.values_mut() {
            *list = std::sync::Arc::new((**list).clone());
        }
        let _ = targets_with(&s, Compile::cached(&mut cache));
        assert_eq!((cache.pools.hits, cache.pools.misses), (2, 1));
        s.nodepools[0].weight += 1;
        assert_eq!(
            shape(&targets_with(&s, Compile::cached(&mut cache))),
            shape(&targets(&s))
        );
        assert_eq!((cache.pools.hits, cache.pools.misses), (2, 2));
    }

    /// Nodes replaced by new ones, round after round, as a long-lived controller sees them:
    /// the string table stays the size of the cluster, and every compile still equals a fresh
    /// one, ids included.
    #[test]
    fn strings_of_nodes_long_gone_are_dropped() {
        let mut s = cluster(20, 40, 5);
        let mut cache = NodeCache::new();
        let mut largest = 0;
        for round in 0..600 {
            for (i, n) in s.nodes.iter_mut().enumerate() {
                n.name = format!("node-{round}-{i}");
                n.labels.insert(labels::HOSTNAME.into(), n.name.clone());
            }
            let cached = targets_with(&s, Compile::cached(&mut cache));
            if round % 50 == 0 {
                assert_eq!(shape(&cached), shape(&targets(&s)), "round {round}");
            }
            largest = largest.max(cache.names.len());
        }
        // 600 rounds named 12,000 nodes, each with a string of its own (its hostname).
        assert!(largest < 2 * COMPACT_FROM, "{largest} strings");
        assert_eq!(cache.ids.len(), cache.names.len());
        assert_eq!(cache.misses, 600 * 20);
        // What is left is what the last nodes use, and replays them.
        let before = cache.hits;
        assert_eq!(
            shape(&targets_with(&s, Compile::cached(&mut cache))),
            shape(&targets(&s))
        );
        assert_eq!(cache.hits, before + 20);
    }

    #[test]
    fn unchanged_nodes_are_replayed_and_changed_ones_compiled() {
        let mut s = cluster(10, 30, 1);
        let mut cache = NodeCache::new();
        let _ = targets_with(&s, Compile::cached(&mut cache));
        assert_eq!((cache.hits, cache.misses), (0, 10));
        s.nodes[3]
            .labels
            .insert("example.com/v".into(), "changed".into());
        let _ = targets_with(&s, Compile::cached(&mut cache));
        assert_eq!((cache.hits, cache.misses), (9, 11));
        // Nodes before the changed one keep their ids: their requirements are shared, not
        // renamed; so is everything once nothing changes.
        assert!(
            cache.same_ids > 0 && cache.same_ids < 9,
            "{}",
            cache.same_ids
        );
        let before = cache.same_ids;
        let a = targets_with(&s, Compile::cached(&mut cache));
        let b = targets_with(&s, Compile::cached(&mut cache));
        assert_eq!(cache.same_ids, before + 20);
        assert!(Arc::ptr_eq(&a.existing[0].reqs, &b.existing[0].reqs));
    }
}
