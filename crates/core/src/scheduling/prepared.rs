//! One compiled cluster answering many "without these nodes, where do these pods go?" solves.
//!
//! [`Prepared::new`] compiles the snapshot's NodePools and existing targets once, with what
//! runs on them. Each [`Prepared::solve`] then copies only the small per-target state, drops
//! the removed targets, compiles the moving pods' classes on a layer over the shared interner
//! and runs the engine. The result equals [`super::solve`] on the snapshot with those nodes,
//! their claims and their pods removed and the moving pods pending again (the lower bound
//! aside, which it does not compute); a differential test holds it to that.
//!
//! Equality needs interned ids in the same relative order as a fresh compile. Only the ids a
//! removed target interned first can move: one that a later target also interns would be
//! first seen there. From each target's interning sequence, recorded at compile time, a solve
//! works out where those ids would land; when that changes nothing (the usual case: shared
//! keys such as `karpenter.sh/initialized` are met again before anything new), the shared
//! compile is used as it is. Otherwise the kept targets' requirements are compiled again on a
//! layer over the ids before them (NodePools and well-known keys), which is a fresh compile of
//! the targets without the snapshot copy or the NodePool compile.

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, OnceLock};

use super::Compile;
use super::compile::{self, ExistingC};
use super::engine::room::{self, RoomBase, Sorted};
use super::engine::{Engine, Options};
use super::intern::{FastMap, FastSet, Interner};
use super::plan::Plan;
use super::setup::{self, Existing, Targets, World};
use crate::model::{Pod, PodPhase, Snapshot};

mod compiled;

use compiled::*;

/// A compiled cluster; cheap to clone (the compile is shared), so a cache can hand it out
/// again for the same cluster.
#[derive(Clone)]
pub(crate) struct Prepared(pub(super) Arc<Compiled>);

impl std::ops::Deref for Prepared {
    type Target = Compiled;

    fn deref(&self) -> &Compiled {
        &self.0
    }
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("targets", &self.targets.existing.len())
            .finish_non_exhaustive()
    }
}

/// What [`Prepared`] shares.
pub(crate) struct Compiled {
    pub(super) targets: Targets,
    base: Arc<Interner>,
    /// Pods running on existing targets: `(pod index, existing index)`.
    running: Vec<(usize, usize)>,
    /// `running` in sets of one namespace and labels ([`setup::label_sets`]), made when a
    /// topology group first counts them.
    running_sets: OnceLock<Vec<Vec<(usize, usize)>>>,
    /// The part of `running` with required anti-affinity terms.
    anti: Vec<(usize, usize)>,
    /// Per existing target, the NodePool it counts against.
    pool_of: Vec<Option<usize>>,
    /// Per NodePool, the capacity and count of all its existing targets.
    pool_used: Vec<(Vec<i64>, i64)>,
    /// Per node name, the existing targets its removal takes away.
    removed_by: FastMap<String, Vec<usize>>,
    /// Registered nodes and in-flight claims by free cpu, with nothing removed.
    room: (Sorted, Sorted),
    /// Ids first interned by existing targets: `[start, end)`.
    fresh: (u32, u32),
    /// The ids before `fresh`, which a compile of the kept targets layers on (made on demand).
    pre: OnceLock<Arc<Interner>>,
    /// Per id in `fresh`, the existing targets whose compile interned it, in order.
    users: Vec<Vec<u32>>,
    /// Per existing target, where in its interning sequence it met its first id of its own.
    first_own: Vec<usize>,
    /// Per existing target (and one past the last), how many targets before it own ids.
    owning_before: Vec<u32>,
    /// Per id in `fresh`, whether the daemons' requirements intern it.
    daemon_hit: Vec<bool>,
    /// The strings of the `daemon_hit` ids.
    daemon_strings: Vec<String>,
    /// Pod keys that occur more than once in the snapshot.
    duplicate_keys: HashSet<String>,
}

impl Prepared {
    /// Compiles `s`; `None` when its shape needs full solves (pods on deleting nodes to
    /// reschedule, or daemons that bring strings of their own).
    pub(crate) fn new(s: &Snapshot) -> Option<Prepared> {
        Self::new_with(s, Compile::default())
    }

    /// [`Prepared::new`], compiled as `compile` says: with its cache, nodes compiled before are
    /// taken from it, or the whole compile when the cache was told (see
    /// [`NodeCache::same_as`](super::NodeCache::same_as)) that `s` equals one it compiled.
    pub(crate) fn new_with(s: &Snapshot, compile: Compile<'_>) -> Option<Prepared> {
        let Compile { cache, one_thread } = compile;
        let Some(c) = cache else {
            return Self::compile(
                s,
                Compile {
                    cache: None,
                    one_thread,
                },
            );
        };
        let key = c.same.take();
        if let Some(k) = key
            && let Some((kept, compiled)) = &c.kept
            && *kept == k
        {
            c.compiles_reused += 1;
            return compiled.clone();
        }
        if key.is_some() {
            // Replaced below in any case; dropped first, it no longer shares the requirements
            // the node cache would otherwise copy to rename (see `NodeCache::node_reqs`).
            c.kept = None;
        }
        let compiled = Self::compile(
            s,
            Compile {
                cache: Some(&mut *c),
                one_thread,
            },
        );
        if let Some(k) = key {
            c.kept = Some((k, compiled.clone()));
        }
        compiled
    }

    fn compile(s: &Snapshot, compile: Compile<'_>) -> Option<Prepared> {
        // The duplicate-key check reads every pod and nothing else the compile makes: on a
        // large cluster it runs on another core meanwhile.
        if s.pods.len() < PODS_WORTH_A_THREAD || compile.one_thread {
            return Self::compile_with(s, compile, || duplicate_keys(&s.pods));
        }
        std::thread::scope(|scope| {
            let keys = scope.spawn(|| duplicate_keys(&s.pods));
            Self::compile_with(s, compile, || {
                keys.join().expect("the duplicate-key check panicked")
            })
        })
    }

    /// [`Prepared::compile`], with the snapshot's duplicate pod keys from `duplicates`.
    fn compile_with(
        s: &Snapshot,
        compile: Compile<'_>,
        duplicates: impl FnOnce() -> HashSet<String>,
    ) -> Option<Prepared> {
        if setup::pods_to_schedule(s)
            .iter()
            .any(|&i| s.pods[i].node_name.is_some())
        {
            return None;
        }
        let mut targets = setup::targets_with(s, compile);
        let start = targets
            .fresh
            .first()
            .map(|f| f.0)
            .unwrap_or(targets.interner.len() as u32);
        let end = targets.interner.len() as u32;
        targets.interner.watch((start, end));
        let running = setup::usage(s, &mut targets, &BTreeSet::new());
        let daemon_hits = targets.interner.take_hits();
        if targets.interner.len() as u32 != end {
            return None;
        }
        let (users, first_own, owning_before) = interning_record(&targets, (start, end));
        let width = (end - start) as usize;
        let mut daemon_hit = vec![false; width];
        for id in daemon_hits {
            daemon_hit[(id - start) as usize] = true;
        }
        let daemon_strings = (start..end)
            .filter(|&id| daemon_hit[(id - start) as usize])
            .map(|id| targets.interner.name(id).to_string())
            .collect();
        let removed_by = removed_by(s, &targets);
        let room = free_room(&targets);
        let duplicate_keys = duplicates();
        let anti = running
            .iter()
            .copied()
            .filter(|&(pi, _)| !s.pods[pi].pod_anti_affinity.is_empty())
            .collect();
        let (pool_of, pool_used) = pool_counts(&targets)?;
        targets.type_names = Some(setup::type_names(&targets.pools));
        let base = Arc::new(std::mem::take(&mut targets.interner));
        Some(Prepared(Arc::new(Compiled {
            targets,
            base,
            running,
            running_sets: OnceLock::new(),
            anti,
            pool_of,
            pool_used,
            removed_by,
            room,
            fresh: (start, end),
            pre: OnceLock::new(),
            users,
            first_own,
            owning_before,
            daemon_hit,
            daemon_strings,
            duplicate_keys,
        })))
    }

    /// Solves `pods` (each bound to a node in `without`) on the prepared snapshot `s` without
    /// the nodes in `without`; `None` when this case needs a full solve.
    pub(crate) fn solve(
        &self,
        s: &Snapshot,
        without: &BTreeSet<String>,
        pods: &[&Pod],
        options: &Options,
    ) -> Option<Plan> {
        for p in pods {
            if p.node_name.as_ref().is_none_or(|n| !without.contains(n))
                || self.duplicate_keys.contains(&p.key())
            {
                return None;
            }
        }
        let (removed_list, removed) = self.removed_targets(without);
        let (remap, keep) = kept_indices(&removed);
        let (same_order, vanished) = self.order_without(&removed, &removed_list)?;
        let pool_used = self.pool_used_without(&removed_list);
        let stays = |list: &[(usize, usize)]| -> Vec<(&Pod, usize)> {
            list.iter()
                .filter(|&&(_, ei)| remap[ei] != usize::MAX)
                .map(|&(pi, ei)| (&*s.pods[pi], remap[ei]))
                .collect()
        };
        let all = || {
            (self.running_sets)
                .get_or_init(|| setup::label_sets(s, &self.running))
                .iter()
                .map(|set| stays(set))
                .filter(|set| !set.is_empty())
                .collect()
        };
        let running = setup::Running {
            all: &all,
            with_anti_affinity: stays(&self.anti),
        };
        let moving = pending_again(pods);
        let order = queue_order(pods, &moving, options);
        let schedule: Vec<(usize, &Pod)> = order.iter().map(|&i| (i, &*moving[i])).collect();
        let shared = |recompile: bool| -> Option<World> {
            let targets = self.kept_targets(s, &keep, pool_used.clone(), recompile)?;
            Some(setup::complete(
                s,
                targets,
                &schedule,
                &running,
                !options.closed.is_empty(),
            ))
        };
        let mut world = shared(!same_order)?;
        // A pod interning a string only removed targets had gets a new id in a fresh
        // compile: after every target's, not where the shared compile has it.
        if same_order
            && world
                .interner
                .take_hits()
                .iter()
                .any(|id| vanished.contains(id))
        {
            world = shared(true)?;
        }
        world.room = Some(RoomBase {
            nodes: self.room.0.clone(),
            in_flight: self.room.1.clone(),
            hidden: Arc::new(removed_list.iter().map(|&ei| ei as u32).collect()),
        });
        let local = Snapshot {
            pods: moving,
            ..Snapshot::default()
        };
        let mut engine = Engine::new(&mut world, options.clone());
        let unplaced = engine.run();
        // As `solve_with` does, so the two answers stay the same.
        if options.repack {
            engine.repack();
        }
        Some(engine.finish(&local, unplaced))
    }

    /// The existing targets that removing the nodes in `without` takes away: as a sorted
    /// list, and as a flag per target.
    fn removed_targets(&self, without: &BTreeSet<String>) -> (Vec<usize>, Vec<bool>) {
        let mut removed_list: Vec<usize> = without
            .iter()
            .filter_map(|n| self.removed_by.get(n))
            .flatten()
            .copied()
            .collect();
        removed_list.sort_unstable();
        removed_list.dedup();
        let mut removed = vec![false; self.targets.existing.len()];
        for &ei in &removed_list {
            removed[ei] = true;
        }
        (removed_list, removed)
    }

    /// Per NodePool, the capacity and count of its existing targets once `removed_list` go.
    fn pool_used_without(&self, removed_list: &[usize]) -> PoolUsed {
        let mut pool_used = self.pool_used.clone();
        for &ei in removed_list {
            if let Some(pi) = self.pool_of[ei] {
                for (u, a) in pool_used[pi]
                    .0
                    .iter_mut()
                    .zip(&self.targets.existing[ei].available)
                {
                    *u -= a;
                }
                pool_used[pi].1 -= 1;
            }
        }
        pool_used
    }

    /// Whether a solve without `without` can use the shared compile as it is (`Some(true)`)
    /// or compiles the kept targets again (`Some(false)`).
    #[cfg(test)]
    pub(crate) fn keeps_order(&self, without: &BTreeSet<String>) -> Option<bool> {
        let (list, removed) = self.removed_targets(without);
        self.order_without(&removed, &list).map(|(same, _)| same)
    }

    /// The strings the existing targets interned first, in id order.
    #[cfg(test)]
    pub(crate) fn target_strings(&self) -> Vec<String> {
        (self.fresh.0..self.fresh.1)
            .map(|id| self.base.name(id).to_string())
            .collect()
    }

    /// Whether the ids that stay keep a fresh compile's relative order once `removed` go, and
    /// the ids no kept target interns (they vanish); `None` when daemons would intern one of
    /// those again, which only a full build replays.
    fn order_without(&self, removed: &[bool], removed_list: &[usize]) -> Option<(bool, Vec<u32>)> {
        let t = &self.targets;
        let lo = self.fresh.0;
        let mut same = true;
        let mut vanished = Vec::new();
        // Where each moved id lands in a fresh compile: (target, step in its sequence).
        let mut last: Option<(usize, usize)> = None;
        for &r in removed_list {
            let (a, b) = t.fresh[r];
            for id in a..b {
                let at = (id - lo) as usize;
                let Some(k) = self.users[at]
                    .iter()
                    .map(|&k| k as usize)
                    .find(|&k| !removed[k])
                else {
                    if self.daemon_hit[at] {
                        return None;
                    }
                    vanished.push(id);
                    continue;
                };
                let step = t.seqs[k]
                    .iter()
                    .position(|&x| x == id)
                    .expect("a user's sequence holds the id");
                // Targets between its old owner and its new one that keep ids of their own
                // would now come first; so would ids the new owner met before it.
                let removed_owning = removed_list
                    .iter()
                    .filter(|&&x| x > r && x < k && t.fresh[x].0 < t.fresh[x].1)
                    .count() as u32;
                let between = self.owning_before[k] - self.owning_before[r + 1] - removed_owning;
                if between > 0 || self.first_own[k] < step || last.is_some_and(|l| l >= (k, step)) {
                    same = false;
                }
                last = Some((k, step));
            }
        }
        Some((same, vanished))
    }

    /// The compiled targets without the removed ones (`keep` lists the others, in order):
    /// the shared compile, or with `recompile` the kept targets' requirements compiled again
    /// over the ids before them, as a fresh compile would number them.
    fn kept_targets(
        &self,
        s: &Snapshot,
        keep: &[u32],
        pool_used: Vec<(Vec<i64>, i64)>,
        recompile: bool,
    ) -> Option<Targets> {
        let t = &self.targets;
        let (interner, existing) = if recompile {
            let pre = self
                .pre
                .get_or_init(|| Arc::new(self.base.prefix(self.fresh.0 as usize)))
                .clone();
            let mut interner = Interner::layered(pre);
            let all: Vec<ExistingC> = keep
                .iter()
                .map(|&ei| {
                    let e = &t.existing[ei as usize];
                    let reqs = t.sources[ei as usize].reqs(s, &mut interner);
                    ExistingC {
                        name: e.name.clone(),
                        in_flight: e.in_flight,
                        nodepool: compile::nodepool_value(&reqs, &interner),
                        reqs: Arc::new(reqs),
                        taints: e.taints.clone(),
                        available: e.available.clone(),
                        initialized: e.initialized,
                    }
                })
                .collect();
            // The daemons then intern nothing new, as in the shared compile.
            if self
                .daemon_strings
                .iter()
                .any(|d| interner.get(d).is_none())
            {
                return None;
            }
            (interner, Existing::new(all))
        } else {
            let mut interner = Interner::layered(self.base.clone());
            interner.watch(self.fresh);
            let existing = Existing {
                all: t.existing.all.clone(),
                keep: Some(keep.to_vec()),
            };
            (interner, existing)
        };
        Some(Targets {
            names: t.names.clone(),
            interner,
            pools: t.pools.clone(),
            allow_undefined: t.allow_undefined.clone(),
            existing,
            existing_used: t.existing_used.subset(keep.to_vec()),
            existing_ports: t.existing_ports.subset(keep.to_vec()),
            hostname: t.hostname,
            zone: t.zone,
            capacity_type: t.capacity_type,
            fresh: Vec::new(),
            seqs: Vec::new(),
            sources: Vec::new(),
            pool_used: Some(pool_used),
            type_names: t.type_names.clone(),
        })
    }
}

/// The existing targets that stay: per target its index among them (`usize::MAX` for a
/// removed one), and their indices in order.
fn kept_indices(removed: &[bool]) -> (Vec<usize>, Vec<u32>) {
    let mut remap = vec![usize::MAX; removed.len()];
    let mut keep: Vec<u32> = Vec::with_capacity(removed.len());
    for (ei, r) in removed.iter().enumerate() {
        if !r {
            remap[ei] = keep.len();
            keep.push(ei as u32);
        }
    }
    (remap, keep)
}

/// The moving pods as the scheduler sees them once their nodes are gone: pending, on no node.
fn pending_again(pods: &[&Pod]) -> Vec<Arc<Pod>> {
    pods.iter()
        .map(|p| {
            let mut q = (*p).clone();
            q.node_name = None;
            q.phase = PodPhase::Pending;
            Arc::new(q)
        })
        .collect()
}

/// The indices of the `moving` pods that wait for a node, in the queue order `options` ask
/// for.
fn queue_order(pods: &[&Pod], moving: &[Arc<Pod>], options: &Options) -> Vec<usize> {
    let mut order: Vec<usize> = (0..moving.len())
        .filter(|&i| setup::waits(&moving[i]))
        .collect();
    if options.emptiest_first {
        // `pods` still carries each pod's node (`moving` has them pending already).
        order.sort_by(|&a, &b| setup::kube_queue_cmp(pods[a], pods[b]));
    } else {
        order.sort_by(|&a, &b| setup::karpenter_queue_cmp(&moving[a], &moving[b]));
    }
    order
}

/// Below this many pods, the duplicate-key check costs less than starting a thread for it.
const PODS_WORTH_A_THREAD: usize = 4096;
