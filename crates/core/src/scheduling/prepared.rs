//! One compiled cluster answering many "without these nodes, where do these pods go?" solves.
//!
//! [`Prepared::new`] compiles the snapshot's NodePools and existing targets once, with what
//! runs on them. Each [`Prepared::solve`] then copies only the small per-target state, drops
//! the removed targets, compiles the moving pods' classes on a layer over the shared interner
//! and runs the engine. The result equals [`super::solve`] on the snapshot with those nodes,
//! their claims and their pods removed and the moving pods pending again (the lower bound
//! aside, which it does not compute); a differential test holds it to that.
//!
//! Equality needs interned ids in the same relative order as a fresh compile. Ids a removed
//! target interned first are the only ones that could move, so a target whose first-seen
//! strings also appear elsewhere is never removed here, and a solve whose pods mention a
//! removed target's strings is declined (`None`): the caller then solves in full.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use super::engine::{Engine, Options};
use super::intern::Interner;
use super::plan::Plan;
use super::setup::{self, Existing, Targets};
use crate::model::{Pod, PodPhase, Snapshot};

pub struct Prepared {
    targets: Targets,
    base: Arc<Interner>,
    /// Pods running on existing targets: `(pod index, existing index)`.
    running: Vec<(usize, usize)>,
    /// The part of `running` with required anti-affinity terms.
    anti: Vec<(usize, usize)>,
    /// Per existing target, the NodePool it counts against.
    pool_of: Vec<Option<usize>>,
    /// Per NodePool, the capacity and count of all its existing targets.
    pool_used: Vec<(Vec<i64>, i64)>,
    /// Per existing target, the node name whose removal takes it away.
    removed_by: Vec<Option<String>>,
    /// Per existing target, whether dropping it could reorder the ids of what stays.
    pinned: Vec<bool>,
    /// Ids first interned by existing targets: `[start, end)`, and which target did.
    fresh: (u32, u32),
    owner: Vec<usize>,
    /// Pod keys that occur more than once in the snapshot.
    duplicate_keys: HashSet<String>,
}

impl Prepared {
    /// Compiles `s`; `None` when its shape needs full solves (pods on deleting nodes to
    /// reschedule, or daemons that bring strings of their own).
    pub fn new(s: &Snapshot) -> Option<Prepared> {
        if setup::pods_to_schedule(s)
            .iter()
            .any(|&i| s.pods[i].node_name.is_some())
        {
            return None;
        }
        let mut targets = setup::targets(s);
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
        let mut owner = vec![usize::MAX; (end - start) as usize];
        for (ei, &(a, b)) in targets.fresh.iter().enumerate() {
            for id in a..b {
                owner[(id - start) as usize] = ei;
            }
        }
        let mut count = vec![0u32; owner.len()];
        let mut bump = |id: u32| {
            if (start..end).contains(&id) {
                count[(id - start) as usize] += 1;
            }
        };
        for e in targets.existing.iter() {
            for r in &e.reqs.items {
                bump(r.key);
                for &v in &r.set.values {
                    bump(v);
                }
            }
        }
        let mut pinned: Vec<bool> = targets
            .fresh
            .iter()
            .map(|&(a, b)| (a..b).any(|id| count[(id - start) as usize] != 1))
            .collect();
        for id in daemon_hits {
            pinned[owner[(id - start) as usize]] = true;
        }
        let claimed: HashSet<&str> = s
            .node_claims
            .iter()
            .filter_map(|c| c.node_name.as_deref())
            .collect();
        let removed_by = targets
            .existing
            .iter()
            .map(|e| (!e.in_flight || claimed.contains(e.name.as_str())).then(|| e.name.clone()))
            .collect();
        let mut seen: HashSet<String> = HashSet::new();
        let mut duplicate_keys = HashSet::new();
        for p in &s.pods {
            let k = p.key();
            if !seen.insert(k.clone()) {
                duplicate_keys.insert(k);
            }
        }
        let anti = running
            .iter()
            .copied()
            .filter(|&(pi, _)| !s.pods[pi].pod_anti_affinity.is_empty())
            .collect();
        let owners: Vec<Option<setup::PoolOwner>> = targets
            .pools
            .iter()
            .map(|p| setup::pool_owner(&targets.interner, &p.name))
            .collect();
        let mut pool_used: Vec<(Vec<i64>, i64)> = targets
            .pools
            .iter()
            .map(|_| (vec![0; targets.names.len()], 0))
            .collect();
        let pool_of: Vec<Option<usize>> = targets
            .existing
            .iter()
            .map(|e| {
                let mut first = None;
                for (pi, o) in owners.iter().enumerate() {
                    if o.is_some_and(|o| o.owns(e)) {
                        for (u, a) in pool_used[pi].0.iter_mut().zip(&e.available) {
                            *u += a;
                        }
                        pool_used[pi].1 += 1;
                        first.get_or_insert(pi);
                    }
                }
                first
            })
            .collect();
        if targets.existing.iter().zip(&pool_of).any(|(e, first)| {
            owners
                .iter()
                .enumerate()
                .any(|(pi, o)| Some(pi) != *first && o.is_some_and(|o| o.owns(e)))
        }) {
            // A target counted against several NodePools: leave that to full solves.
            return None;
        }
        targets.type_names = Some(setup::type_names(&targets.pools));
        let base = Arc::new(std::mem::take(&mut targets.interner));
        Some(Prepared {
            targets,
            base,
            running,
            anti,
            pool_of,
            pool_used,
            removed_by,
            pinned,
            fresh: (start, end),
            owner,
            duplicate_keys,
        })
    }

    /// Solves `pods` (each bound to a node in `without`) on the prepared snapshot `s` without
    /// the nodes in `without`; `None` when this case needs a full solve.
    pub fn solve(
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
        let t = &self.targets;
        let mut remap = vec![usize::MAX; t.existing.len()];
        let mut keep = Vec::with_capacity(t.existing.len());
        let mut removed = vec![false; t.existing.len()];
        for (ei, by) in self.removed_by.iter().enumerate() {
            if by.as_ref().is_some_and(|n| without.contains(n)) {
                if self.pinned[ei] {
                    return None;
                }
                removed[ei] = true;
            } else {
                remap[ei] = keep.len();
                keep.push(ei);
            }
        }
        let mut pool_used = self.pool_used.clone();
        for (ei, _) in removed.iter().enumerate().filter(|r| *r.1) {
            if let Some(pi) = self.pool_of[ei] {
                for (u, a) in pool_used[pi].0.iter_mut().zip(&t.existing[ei].available) {
                    *u -= a;
                }
                pool_used[pi].1 -= 1;
            }
        }
        let mut interner = Interner::layered(self.base.clone());
        interner.watch(self.fresh);
        let targets = Targets {
            names: t.names.clone(),
            interner,
            pools: t.pools.clone(),
            allow_undefined: t.allow_undefined.clone(),
            existing: Existing {
                all: t.existing.all.clone(),
                keep: Some(keep.iter().map(|&i| i as u32).collect()),
            },
            existing_used: keep.iter().map(|&i| t.existing_used[i].clone()).collect(),
            existing_ports: keep.iter().map(|&i| t.existing_ports[i].clone()).collect(),
            hostname: t.hostname,
            zone: t.zone,
            capacity_type: t.capacity_type,
            fresh: Vec::new(),
            pool_used: Some(pool_used),
            type_names: t.type_names.clone(),
        };
        let stays = |list: &[(usize, usize)]| -> Vec<(&Pod, usize)> {
            list.iter()
                .filter(|&&(_, ei)| remap[ei] != usize::MAX)
                .map(|&(pi, ei)| (&s.pods[pi], remap[ei]))
                .collect()
        };
        let all = || stays(&self.running);
        let running = setup::Running {
            all: &all,
            with_anti_affinity: stays(&self.anti),
        };
        let moving: Vec<Pod> = pods
            .iter()
            .map(|p| {
                let mut q = (*p).clone();
                q.node_name = None;
                q.phase = PodPhase::Pending;
                q
            })
            .collect();
        let mut order: Vec<usize> = (0..moving.len())
            .filter(|&i| setup::waits(&moving[i]))
            .collect();
        order.sort_by(|&a, &b| setup::karpenter_queue_cmp(&moving[a], &moving[b]));
        let schedule: Vec<(usize, &Pod)> = order.iter().map(|&i| (i, &moving[i])).collect();
        let mut world = setup::complete(s, targets, &schedule, &running);
        let (lo, _) = self.fresh;
        if world
            .interner
            .take_hits()
            .iter()
            .any(|&id| removed[self.owner[(id - lo) as usize]])
        {
            return None;
        }
        let local = Snapshot {
            pods: moving,
            ..Snapshot::default()
        };
        let mut engine = Engine::new(&mut world, options.clone());
        let unplaced = engine.run();
        Some(engine.finish(&local, unplaced))
    }
}
