//! Compiled node requirements kept from one compile of a cluster to the next.
//!
//! Compiling a node interns every label key and value (dozens per node: the instance type's
//! labels come along) and builds its requirements. Between two decisions few nodes change, so
//! the cache keeps, per node name, the strings its compile interned in call order (they
//! determine the compile, so a node's labels are compared with them when its
//! `resourceVersion` is unknown or moved) and the ids and requirements of its last compile. A
//! later compile of a node with the same strings replays the sequence instead: each distinct
//! string is interned once per compile (a repeated one is an array lookup), in the order a
//! fresh compile would meet it, so every id, the interner's contents and the recorded
//! sequence come out exactly as a fresh compile's. The requirements of the node's last compile
//! are then renamed from its ids to these, position by position, and sorted again, unless the
//! replayed ids are exactly those of the last compile (every node before it and the NodePools
//! unchanged, the usual case): then they are handed out again, shared, with nothing copied or
//! sorted.

use std::sync::Arc;

use super::compile;
use super::intern::{FastMap, Interner};
use super::pool_cache::PoolCache;
use super::prepared::Prepared;
use super::reqs::Reqs;
use crate::model::Node;

#[derive(Clone, Debug)]
struct Entry {
    /// The `resourceVersion` of the Node the labels were last seen on (empty: unknown).
    version: String,
    /// The strings the node's compile interned, in call order, as cache string ids: the
    /// node's labels as the compile reads them ([`compile::node_strings`]).
    trace: Vec<u32>,
    /// The ids the node's last compile interned, in call order, and its requirements in those
    /// ids: a replay renames them from the first sequence to its own.
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
    /// A rename's table: at each id of the node's last compile, the replay's id for the same
    /// string. Only the slots of the node being renamed are read, so it is never cleared.
    renames: Vec<u32>,
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
            && (known_version(&e.version, node) || same_strings(&self.names, &e.trace, node))
        {
            if known_version(&e.version, node) {
                self.by_version += 1;
                debug_assert!(
                    same_strings(&self.names, &e.trace, node),
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
                let renames = &mut self.renames;
                for (&from, &to) in e.last.0.iter().zip(seq.iter()) {
                    if renames.len() <= from as usize {
                        renames.resize(from as usize + 1, u32::MAX);
                    }
                    renames[from as usize] = to;
                }
                let (ids, reqs) = &mut e.last;
                match (Arc::get_mut(ids), Arc::get_mut(reqs)) {
                    // No compile shares them any more: renamed where they are.
                    (Some(ids), Some(reqs)) => {
                        self.renamed_in_place += 1;
                        ids.clone_from(seq);
                        rename(reqs, renames);
                    }
                    // Copied (one allocation of the right size): the buffer keeps its
                    // capacity for the next replay, which would otherwise grow a new one push
                    // by push.
                    _ => {
                        let mut reqs = (**reqs).clone();
                        rename(&mut reqs, renames);
                        e.last = (Arc::new(seq.clone()), Arc::new(reqs));
                    }
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
        let nodepool_at = nodepool.map(position);
        let reqs = Arc::new(reqs);
        let seq = Arc::new(seq);
        self.entries.insert(
            node.name.clone(),
            Entry {
                version: node.resource_version.clone(),
                trace,
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

/// Whether `node` compiles to the strings `trace` names (in `names`), one for one: its labels
/// are then those of the compile the trace was taken from, as far as the compile can tell.
/// Each string is a lookup in the cache's table, but this runs only for a node written since
/// its entry was made, which few are between two compiles.
fn same_strings(names: &[String], trace: &[u32], node: &Node) -> bool {
    let mut strings = compile::node_strings(node);
    trace
        .iter()
        .all(|&g| strings.next() == Some(names[g as usize].as_str()))
        && strings.next().is_none()
}

/// `reqs` with every id replaced by its slot in `renames`, sorted again. Every id of `reqs`
/// has its slot set: a compile's requirements hold only ids it interned.
fn rename(reqs: &mut Reqs, renames: &[u32]) {
    let to = |id: u32| renames[id as usize];
    for r in &mut reqs.items {
        r.key = to(r.key);
        for v in &mut r.set.values {
            *v = to(*v);
        }
        if !r.set.values.is_sorted() {
            r.set.values.sort_unstable();
        }
    }
    // Ids usually move together (a node before this one gone): often still in order.
    if !reqs.items.is_sorted_by_key(|r| r.key) {
        reqs.items.sort_by_key(|r| r.key);
    }
}

#[cfg(test)]
mod tests;
