//! The mutable state of one solve (new claims, usage, counts) and the placement loop.

use super::bitset::Bitset;
use super::compile::{PoolC, Res, fits, fits_plus};
use super::plan::{InstanceOption, NewClaim, Placement, Plan, Target, Unplaced};
use super::reqs::{Reqs, ValueSet};
use super::setup::{Class, World};
use super::solver::{
    Con, Pins, Refusal, Relax, active_constraints, add_scaled, effective_reqs, more_fitting,
    ports_conflict, taint_refusal,
};
use crate::model::HostPort;
use std::collections::BTreeSet;
use std::sync::Arc;

mod apply;
mod choose;
mod evaluate;
mod finish;
mod repack;
pub mod room;

use room::Room;

/// Settings of a solve.
#[derive(Clone, Debug)]
pub struct Options {
    /// `PREFERENCE_POLICY=Ignore`: drop preferred affinities and ScheduleAnyway spreads up front.
    pub ignore_preferences: bool,
    /// Instance-type options kept per new claim (Karpenter: 600).
    pub max_instance_types: usize,
    /// `MIN_VALUES_POLICY=BestEffort`: minValues never blocks a placement; claims that fall
    /// short are marked instead.
    pub min_values_best_effort: bool,
    /// Registered nodes that take none of the pods this solve places, except pods of nodes
    /// being deleted: Karpenter's consolidation simulations keep moving pods off nodes still
    /// inside their NodePool's `consolidateAfter`.
    pub closed: Arc<BTreeSet<String>>,
    /// Run the improvement pass after the greedy placement (see [`repack`]); off only to
    /// measure what it saves.
    pub repack: bool,
    /// Existing nodes are tried emptiest first, as the kube-scheduler's default scoring
    /// (`LeastAllocated`) places pods, instead of tightest first. Consolidation simulations
    /// use it: the pods they move are placed by the cluster's scheduler, not by this engine.
    pub emptiest_first: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            ignore_preferences: false,
            max_instance_types: 600,
            min_values_best_effort: false,
            closed: Arc::default(),
            repack: true,
            emptiest_first: false,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Claim {
    pub pool: usize,
    pub reqs: Reqs,
    /// Instance types that are compatible and still fit everything placed so far.
    pub(crate) bits: Bitset,
    pub used: Res,
    pub pods: Vec<usize>,
    pub ports: Vec<HostPort>,
    /// Current cheapest fitting instance type and its price.
    pub cheapest: usize,
    pub price: f64,
    /// Per resource, the largest allocatable among `bits` (a quick upper bound for rejects).
    pub max_alloc: Res,
    /// Per resource, the largest capacity among `bits`, charged against NodePool limits.
    pub charged: Res,
}

/// How many claims with room (visited in order of free cpu, smallest first) are compared before
/// taking the tightest fit.
const BEST_FIT_CANDIDATES: usize = 16;

/// How many claims that can grow to take a pod are compared before taking the cheapest growth.
const GROWTH_CANDIDATES: usize = 128;

fn set_bit(bits: &mut [u64], k: usize) {
    bits[k / 64] |= 1 << (k % 64);
}

fn get_bit(bits: &[u64], k: usize) -> bool {
    bits[k / 64] & (1 << (k % 64)) != 0
}

/// Targets found dead for one class, a growable bit set per relaxation level: most classes
/// never relax, so the levels and words are allocated as marks come.
#[derive(Clone, Default)]
struct DeadMarks(Vec<Vec<u64>>);

impl DeadMarks {
    fn get(&self, level: usize, k: usize) -> bool {
        self.0
            .get(level)
            .is_some_and(|bits| k / 64 < bits.len() && get_bit(bits, k))
    }

    fn set(&mut self, level: usize, k: usize) {
        if self.0.len() <= level {
            self.0.resize(level + 1, Vec::new());
        }
        let bits = &mut self.0[level];
        if bits.len() <= k / 64 {
            bits.resize(k / 64 + 1, 0);
        }
        set_bit(bits, k);
    }
}

/// How many of `want` pods of size `req` go in one placement on a target whose type offers
/// `alloc`, `total` being its usage with the first of them: at least that first one.
fn pods_fitting(total: &[i64], req: &[i64], alloc: &[i64], want: usize) -> usize {
    (1 + more_fitting(total, req, alloc).min(want as i64 - 1)) as usize
}

/// A placement decision before it is applied.
struct Choice {
    target: Tgt,
    reqs: Option<Reqs>,
    bits: Option<Bitset>,
    pins: Pins,
    m: usize,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Tgt {
    Existing(usize),
    Claim(usize),
    NewClaim(usize),
}

pub(crate) struct Engine<'w> {
    pub w: &'w mut World,
    pub opts: Options,
    pub claims: Vec<Claim>,
    pub existing_pods: Vec<Vec<usize>>,
    pub pool_charged: Vec<Res>,
    pub pool_claims: Vec<i64>,
    pub(crate) placements: Vec<(usize, Tgt)>,
    /// Registered nodes and in-flight claims by free cpu: `(free millicores, existing index)`.
    node_room: Room,
    inflight_room: Room,
    /// Per class and relaxation level, existing nodes that cannot take it.
    dead_existing: Vec<DeadMarks>,
    /// New claims per zone value.
    zone_claims: std::collections::HashMap<u32, usize>,
    /// Claims by free cpu under their current cheapest type: `(free millicores, claim)`.
    room: std::collections::BTreeSet<(i64, usize)>,
    /// Per class, claims that can never take it (see [`super::solver::Con::permanent`]).
    dead: Vec<DeadMarks>,
    /// Existing targets that [`Options::closed`] names, as bits; empty when it names none.
    closed: Vec<u64>,
}

struct Eval {
    marginal: f64,
    slack: f64,
    reqs: Option<Reqs>,
    bits: Option<Bitset>,
    pins: Pins,
    first: usize,
}

impl<'w> Engine<'w> {
    pub(crate) fn new(w: &'w mut World, opts: Options) -> Self {
        let n = w.existing.len();
        let np = w.pools.len();
        let r = w.names.len();
        let nc = w.classes.len();
        // A prepared cluster brings its targets already sorted; otherwise sort them here.
        let base = w.room.clone().unwrap_or_else(|| {
            let free: Vec<i64> = (0..n)
                .map(|ei| {
                    w.existing[ei].available.first().copied().unwrap_or(0)
                        - w.existing_used[ei].first().copied().unwrap_or(0)
                })
                .collect();
            let in_flight: Vec<bool> = w.existing.iter().map(|e| e.in_flight).collect();
            let (nodes, in_flight) = room::sorted(&free, &in_flight);
            room::RoomBase {
                nodes,
                in_flight,
                hidden: Default::default(),
            }
        });
        let node_room = Room::new(base.nodes, base.hidden.clone(), n);
        let inflight_room = Room::new(base.in_flight, base.hidden, n);
        let mut closed = Vec::new();
        if !opts.closed.is_empty() {
            closed = vec![0; n.div_ceil(64)];
            for (ei, e) in w.existing.iter().enumerate() {
                if !e.in_flight && opts.closed.contains(&e.name) {
                    set_bit(&mut closed, ei);
                }
            }
        }
        Engine {
            w,
            opts,
            claims: Vec::new(),
            existing_pods: vec![Vec::new(); n],
            pool_charged: vec![vec![0; r]; np],
            pool_claims: vec![0; np],
            placements: Vec::new(),
            dead: vec![DeadMarks::default(); nc],
            room: std::collections::BTreeSet::new(),
            node_room,
            inflight_room,
            dead_existing: vec![DeadMarks::default(); nc],
            zone_claims: std::collections::HashMap::new(),
            closed,
        }
    }

    /// Places every pod of class `ci` listed in `pods`; returns the ones that failed, with a reason.
    fn place_class(&mut self, ci: usize, pods: &[usize]) -> Option<(Vec<usize>, String)> {
        let mut i = 0;
        while i < pods.len() {
            let mut relax = Relax::initial(&self.w.classes[ci], self.opts.ignore_preferences);
            loop {
                match self.step(ci, &relax, pods.len() - i) {
                    Ok(choice) => {
                        let m = choice.m.max(1).min(pods.len() - i);
                        let slice: Vec<usize> = pods[i..i + m].to_vec();
                        self.apply(ci, Choice { m, ..choice }, &slice);
                        i += m;
                        break;
                    }
                    Err(reasons) => {
                        let more = self.w.any_prefer_no_schedule;
                        if !relax.next(&self.w.classes[ci], more) {
                            return Some((pods[i..].to_vec(), reasons.join("; ")));
                        }
                    }
                }
            }
        }
        None
    }

    pub(crate) fn run(&mut self) -> Vec<(usize, String)> {
        let order = self.w.order.clone();
        let mut failed: Vec<(usize, Vec<usize>, String)> = Vec::new();
        for ci in order {
            let pods = self.w.classes[ci].pods.clone();
            if let Some(e) = self.w.classes[ci].error.clone() {
                failed.push((ci, pods, e));
                continue;
            }
            if let Some((rest, why)) = self.place_class(ci, &pods) {
                failed.push((ci, rest, why));
            }
        }
        // Retry what failed while something else makes progress (affinity may now be met).
        loop {
            let before: usize = failed.iter().map(|f| f.1.len()).sum();
            let mut next = Vec::new();
            for (ci, pods, why) in std::mem::take(&mut failed) {
                if self.w.classes[ci].error.is_some() {
                    next.push((ci, pods, why));
                    continue;
                }
                if let Some((rest, why)) = self.place_class(ci, &pods) {
                    next.push((ci, rest, why))
                }
            }
            failed = next;
            let after: usize = failed.iter().map(|f| f.1.len()).sum();
            if after == before || after == 0 {
                break;
            }
        }
        failed
            .into_iter()
            .flat_map(|(_, pods, why)| pods.into_iter().map(move |p| (p, why.clone())))
            .collect()
    }
}

/// Restricts every claim of NodePool `p` to options no larger than its cheapest one in each
/// limited resource, and re-charges it. True when something was freed.
fn trim_to_cheapest(w: &World, claims: &mut [Claim], pool_charged: &mut [Res], p: usize) -> bool {
    let pool = &w.pools[p];
    let mut freed = false;
    for cl in claims
        .iter_mut()
        .filter(|c| c.pool == p && !c.pods.is_empty())
    {
        let bits = narrowed(pool, &cl.bits, cl.cheapest);
        if bits == cl.bits {
            continue;
        }
        cl.bits = bits;
        let (max_alloc, charged) = option_bounds(pool, &cl.bits, cl.used.len());
        for ((pc, new), old) in pool_charged[p].iter_mut().zip(&charged).zip(&cl.charged) {
            if new < old {
                freed = true;
            }
            *pc += new - old;
        }
        cl.max_alloc = max_alloc;
        cl.charged = charged;
    }
    freed
}

/// `bits` without the types larger than `first` in a resource `pool` limits: what a claim
/// whose cheapest type is `first` is charged no more than that type for.
pub(super) fn narrowed(pool: &PoolC, bits: &Bitset, first: usize) -> Bitset {
    let cap = &pool.its[first].capacity;
    let mut out = bits.clone();
    for t in bits.iter() {
        let larger =
            |(r, limit): (usize, &Option<i64>)| limit.is_some() && pool.its[t].capacity[r] > cap[r];
        if pool.limits.iter().enumerate().any(larger) {
            out.remove(t);
        }
    }
    out
}

/// Per resource, the largest allocatable and the largest capacity among `pool`'s options
/// `bits`: a claim's quick bound for rejects, and what its NodePool's limits are charged.
fn option_bounds(pool: &PoolC, bits: &Bitset, r: usize) -> (Res, Res) {
    let mut max_alloc = vec![i64::MIN; r];
    let mut charged = vec![0; r];
    for it in bits.iter() {
        for i in 0..r {
            max_alloc[i] = max_alloc[i].max(pool.its[it].alloc[i]);
            charged[i] = charged[i].max(pool.its[it].capacity[i]);
        }
    }
    (max_alloc, charged)
}
