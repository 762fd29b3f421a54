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
    dead_existing: Vec<Vec<Vec<u64>>>,
    /// New claims per zone value.
    zone_claims: std::collections::HashMap<u32, usize>,
    /// Claims by free cpu under their current cheapest type: `(free millicores, claim)`.
    room: std::collections::BTreeSet<(i64, usize)>,
    /// Per class, claims that can never take it (see [`super::solver::Con::permanent`]).
    dead: Vec<Vec<Vec<u64>>>,
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
            dead: vec![Vec::new(); nc],
            room: std::collections::BTreeSet::new(),
            node_room,
            inflight_room,
            dead_existing: vec![Vec::new(); nc],
            zone_claims: std::collections::HashMap::new(),
            closed,
        }
    }

    /// Tries one step for class `ci`: places 1..=want pods somewhere or says why not.
    fn step(&mut self, ci: usize, relax: &Relax, want: usize) -> Result<Choice, Vec<String>> {
        let c = &self.w.classes[ci];
        let cons = active_constraints(self.w, c, relax);
        let alts = effective_reqs(self.w, c, relax);
        // Pods that count themselves (spread, affinity) go one at a time, so each sees the
        // counts the previous one left.
        let want = if c.one_at_a_time() { 1 } else { want };
        if let Some((ei, m)) = self.existing_with_room(ci, &cons, &alts, relax, want) {
            return Ok(Choice {
                target: Tgt::Existing(ei),
                reqs: None,
                bits: None,
                pins: vec![],
                m,
            });
        }
        if let Some(choice) = self.claim_choice(ci, &cons, &alts, relax, want) {
            return Ok(choice);
        }
        match self.new_claim_choice(ci, &cons, &alts, relax, want) {
            Ok(choice) => Ok(choice),
            Err(mut reasons) => {
                // Only now, on the way out, work out why each existing node said no.
                if !self.w.existing.is_empty() {
                    let c = &self.w.classes[ci];
                    let refusals: Vec<Refusal> = (0..self.w.existing.len())
                        .filter_map(|ei| {
                            self.eval_existing(c, &cons, &alts, relax, ei, want, true)
                                .err()
                        })
                        .collect();
                    reasons.insert(0, self.summarise_existing(c, &refusals));
                }
                Err(reasons)
            }
        }
    }

    /// Step 1: existing nodes, then in-flight claims: the first with room, visiting those
    /// with the least free cpu that still suffices first (a tight fit keeps big holes for big
    /// pods; emptiest first under `Options::emptiest_first`). Refusals that cannot change at
    /// this relaxation level are remembered. Returns the node and how many pods it takes.
    fn existing_with_room(
        &mut self,
        ci: usize,
        cons: &[Con],
        alts: &[Reqs],
        relax: &Relax,
        want: usize,
    ) -> Option<(usize, usize)> {
        let c = &self.w.classes[ci];
        let need_cpu = c.requests.first().copied().unwrap_or(0);
        let mut found: Option<(usize, usize)> = None;
        let mut refused: Vec<usize> = Vec::new();
        let closed: &[u64] = if c.from_deleting { &[] } else { &self.closed };
        'tiers: for tier in [&self.node_room, &self.inflight_room] {
            // One of the two scans, without boxing it: this runs for every placement step.
            let (tightest, emptiest) = if self.opts.emptiest_first {
                (None, Some(tier.emptiest_from(need_cpu)))
            } else {
                (Some(tier.from(need_cpu)), None)
            };
            let order = tightest
                .into_iter()
                .flatten()
                .chain(emptiest.into_iter().flatten());
            for (_, ei) in order {
                if (!closed.is_empty() && get_bit(closed, ei))
                    || self.is_dead_existing(ci, relax.level, ei)
                {
                    continue;
                }
                match self.eval_existing(c, cons, alts, relax, ei, want, false) {
                    Ok((m, _)) => {
                        found = Some((ei, m));
                        break 'tiers;
                    }
                    // A topology refusal may lift as other pods land, unless its
                    // constraint is permanent.
                    Err(Refusal::Topology { group, .. })
                        if !cons.iter().any(|x| x.con == group && x.permanent) => {}
                    Err(_) => refused.push(ei),
                }
            }
        }
        for ei in refused {
            self.mark_dead_existing(ci, relax.level, ei);
        }
        found
    }

    /// Step 2: this run's new claims: one with room at its current price
    /// ([`Self::tightest_claim_with_room`]), else the one that grows cheapest
    /// ([`Self::cheapest_claim_growth`]). Claims that can never take the class are
    /// remembered either way.
    fn claim_choice(
        &mut self,
        ci: usize,
        cons: &[Con],
        alts: &[Reqs],
        relax: &Relax,
        want: usize,
    ) -> Option<Choice> {
        let mut dead: Vec<u64> = vec![0; self.claims.len().div_ceil(64)];
        let mut best = self.tightest_claim_with_room(ci, cons, alts, relax, &mut dead);
        if best.is_none() {
            best = self.cheapest_claim_growth(ci, cons, alts, relax, &mut dead);
        }
        for (wi, &w) in dead.iter().enumerate() {
            let mut w = w;
            while w != 0 {
                let k = wi * 64 + w.trailing_zeros() as usize;
                w &= w - 1;
                self.mark_dead(ci, relax.level, k);
            }
        }
        let (k, e) = best?;
        let c = &self.w.classes[ci];
        let m = if want > 1 {
            let total = add_scaled(&self.claims[k].used, &c.requests, 1);
            let alloc = &self.w.pools[self.claims[k].pool].its[e.first].alloc;
            pods_fitting(&total, &c.requests, alloc, want)
        } else {
            1
        };
        Some(Choice {
            target: Tgt::Claim(k),
            reqs: e.reqs,
            bits: e.bits,
            pins: e.pins,
            m,
        })
    }

    /// Among the first few claims with room that take the pod without raising their launch
    /// price, the one whose cpu and memory fill stay most even (ties: lowest index), so the
    /// remaining room suits the pods still to come. Sets `dead` for claims that never can.
    fn tightest_claim_with_room(
        &self,
        ci: usize,
        cons: &[Con],
        alts: &[Reqs],
        relax: &Relax,
        dead: &mut [u64],
    ) -> Option<(usize, Eval)> {
        let c = &self.w.classes[ci];
        let need_cpu = c.requests.first().copied().unwrap_or(0);
        let mut best: Option<(usize, Eval, f64)> = None;
        let mut seen = 0;
        for &(_, k) in self.room.range((need_cpu, 0)..) {
            if self.is_dead(ci, relax.level, k) {
                continue;
            }
            match self.eval_claim(c, cons, alts, relax, k, true) {
                Ok(e) => {
                    let score = self.slack_after(k, e.first, &c.requests);
                    if best
                        .as_ref()
                        .is_none_or(|b| score < b.2 - 1e-12 || (score <= b.2 + 1e-12 && k < b.0))
                    {
                        best = Some((k, e, score));
                    }
                    seen += 1;
                    if seen >= BEST_FIT_CANDIDATES {
                        break;
                    }
                }
                Err(true) => set_bit(dead, k),
                Err(false) => {}
            }
        }
        best.map(|(k, e, _)| (k, e))
    }

    /// Among the first few claims that can grow to take the pod, the one whose price grows
    /// least (ties: tightest fit). Those closest to having room need the smallest step up, so
    /// they are visited first. Skips and sets `dead` as [`Self::tightest_claim_with_room`].
    fn cheapest_claim_growth(
        &self,
        ci: usize,
        cons: &[Con],
        alts: &[Reqs],
        relax: &Relax,
        dead: &mut [u64],
    ) -> Option<(usize, Eval)> {
        let c = &self.w.classes[ci];
        let need_cpu = c.requests.first().copied().unwrap_or(0);
        let mut best: Option<(usize, Eval)> = None;
        let mut seen = 0;
        let order = self
            .room
            .range(..(need_cpu, 0))
            .rev()
            .chain(self.room.range((need_cpu, 0)..));
        for &(_, k) in order {
            if seen >= GROWTH_CANDIDATES {
                break;
            }
            if self.is_dead(ci, relax.level, k) || get_bit(dead, k) {
                continue;
            }
            match self.eval_claim(c, cons, alts, relax, k, false) {
                Ok(e) => {
                    let better = match &best {
                        None => true,
                        Some((_, b)) => {
                            e.marginal < b.marginal - 1e-9
                                || (e.marginal <= b.marginal + 1e-9 && e.slack < b.slack - 1e-12)
                        }
                    };
                    if better {
                        best = Some((k, e));
                    }
                    seen += 1;
                }
                Err(true) => set_bit(dead, k),
                Err(false) => {}
            }
        }
        best
    }

    /// Step 3: a new claim from the first NodePool that can take the pod; else each
    /// NodePool's reason.
    fn new_claim_choice(
        &mut self,
        ci: usize,
        cons: &[Con],
        alts: &[Reqs],
        relax: &Relax,
        want: usize,
    ) -> Result<Choice, Vec<String>> {
        let host = format!("hostname-placeholder-{:05}", self.claims.len() + 1);
        let host = self.w.interner.intern(&host);
        let c = &self.w.classes[ci];
        let mut reasons = Vec::new();
        if self.w.pools.is_empty() {
            reasons.push("no NodePool is available".to_string());
        }
        for p in 0..self.w.pools.len() {
            match self.eval_new(c, cons, alts, relax, p, host) {
                Ok((reqs, bits, pins, first)) => {
                    let m = if want > 1 {
                        let alloc = &self.w.pools[p].its[first].alloc;
                        pods_fitting(&c.requests, &c.requests, alloc, want)
                    } else {
                        1
                    };
                    return Ok(Choice {
                        target: Tgt::NewClaim(p),
                        reqs: Some(reqs),
                        bits: Some(bits),
                        pins,
                        m,
                    });
                }
                Err(why) => {
                    // A limit is in the way: drop larger fallback types from this NodePool's
                    // claims (each keeps its cheapest), which lowers what they are charged.
                    if why.contains(" leaves ")
                        && trim_to_cheapest(self.w, &mut self.claims, &mut self.pool_charged, p)
                        && let Ok((reqs, bits, pins, _)) =
                            self.eval_new(c, cons, alts, relax, p, host)
                    {
                        return Ok(Choice {
                            target: Tgt::NewClaim(p),
                            reqs: Some(reqs),
                            bits: Some(bits),
                            pins,
                            m: 1,
                        });
                    }
                    reasons.push(format!("NodePool {}: {why}", self.w.pools[p].name));
                }
            }
        }
        Err(reasons)
    }

    fn is_dead_existing(&self, ci: usize, level: usize, ei: usize) -> bool {
        self.dead_existing[ci]
            .get(level)
            .and_then(|d| d.get(ei / 64))
            .is_some_and(|w| w & (1 << (ei % 64)) != 0)
    }

    fn mark_dead_existing(&mut self, ci: usize, level: usize, ei: usize) {
        let levels = &mut self.dead_existing[ci];
        if levels.len() <= level {
            levels.resize(level + 1, Vec::new());
        }
        let d = &mut levels[level];
        if d.len() <= ei / 64 {
            d.resize(ei / 64 + 1, 0);
        }
        d[ei / 64] |= 1 << (ei % 64);
    }

    fn is_dead(&self, ci: usize, level: usize, k: usize) -> bool {
        self.dead[ci]
            .get(level)
            .and_then(|d| d.get(k / 64))
            .is_some_and(|w| w & (1 << (k % 64)) != 0)
    }

    fn mark_dead(&mut self, ci: usize, level: usize, k: usize) {
        let levels = &mut self.dead[ci];
        if levels.len() <= level {
            levels.resize(level + 1, Vec::new());
        }
        let d = &mut levels[level];
        if d.len() <= k / 64 {
            d.resize(k / 64 + 1, 0);
        }
        d[k / 64] |= 1 << (k % 64);
    }

    /// Room left on claim `k`'s instance type `it` after adding `req` (cpu and memory fractions).
    fn slack_after(&self, k: usize, it: usize, req: &[i64]) -> f64 {
        let cl = &self.claims[k];
        let alloc = &self.w.pools[cl.pool].its[it].alloc;
        let mut slack = 0.0;
        for ((&a, &u), &q) in alloc.iter().zip(&cl.used).zip(req).take(2) {
            if a > 0 {
                slack += (a - u - q) as f64 / a as f64;
            }
        }
        slack
    }

    fn summarise_existing(&self, c: &Class, refusals: &[Refusal]) -> String {
        let mut kinds: Vec<(String, usize)> = Vec::new();
        for r in refusals {
            let s = self.w.describe_refusal(c, r);
            match kinds.iter_mut().find(|(k, _)| *k == s) {
                Some(e) => e.1 += 1,
                None => kinds.push((s, 1)),
            }
        }
        let parts: Vec<String> = kinds
            .iter()
            .take(4)
            .map(|(k, n)| format!("{n}: {k}"))
            .collect();
        format!(
            "{} existing nodes refused ({})",
            refusals.len(),
            parts.join("; ")
        )
    }

    fn apply(&mut self, ci: usize, choice: Choice, pods: &[usize]) {
        let m = choice.m;
        let req = self.w.classes[ci].requests.clone();
        let ports = self.w.classes[ci].host_ports.clone();
        let tgt = match choice.target {
            Tgt::Existing(ei) => {
                self.fill_existing(ei, &req, ports, m, pods);
                Tgt::Existing(ei)
            }
            Tgt::Claim(k) => {
                self.narrow_claim(k, choice.reqs, &choice.pins, choice.bits);
                self.fill_claim(k, &req, ports, m, pods);
                Tgt::Claim(k)
            }
            Tgt::NewClaim(p) => {
                let k = self.open_claim(p, choice.reqs.as_ref());
                self.narrow_claim(k, choice.reqs, &choice.pins, choice.bits);
                self.fill_claim(k, &req, ports, m, pods);
                Tgt::Claim(k)
            }
        };
        // The target's requirements and taints are read only for topology counts; copying
        // them for classes that count nothing cost an allocation per label per placement.
        let c = &self.w.classes[ci];
        if (!c.counted_by.is_empty() || !c.owns_inverse.is_empty())
            && let Some((treqs, taints)) = self.counted_labels(tgt)
        {
            self.record_topology(ci, &treqs, &taints, m);
        }
        for &p in pods {
            self.placements.push((p, tgt));
        }
    }

    /// Adds `m` pods of size `req` to existing target `ei` and re-files it by free cpu.
    fn fill_existing(
        &mut self,
        ei: usize,
        req: &[i64],
        ports: Vec<HostPort>,
        m: usize,
        pods: &[usize],
    ) {
        let free = |e: &Self| {
            e.w.existing[ei].available.first().copied().unwrap_or(0)
                - e.w.existing_used[ei].first().copied().unwrap_or(0)
        };
        let before = free(self);
        for (u, r) in self.w.existing_used.get_mut(ei).iter_mut().zip(req) {
            *u += r * m as i64;
        }
        let after = free(self);
        let room = if self.w.existing[ei].in_flight {
            &mut self.inflight_room
        } else {
            &mut self.node_room
        };
        room.update(ei, before, after);
        self.w.existing_ports.get_mut(ei).extend(ports);
        self.existing_pods[ei].extend_from_slice(pods);
    }

    /// Opens an empty claim on NodePool `p` and returns its index; `reqs` (the requirements it
    /// is opened with) tells whether it counts towards a zone's new claims.
    fn open_claim(&mut self, p: usize, reqs: Option<&Reqs>) -> usize {
        let n = self.w.names.len();
        self.claims.push(Claim {
            pool: p,
            reqs: Reqs::new(),
            bits: Bitset::empty(self.w.pools[p].its.len()),
            used: vec![0; n],
            pods: Vec::new(),
            ports: self.w.pools[p].daemon_ports.clone(),
            cheapest: 0,
            price: 0.0,
            max_alloc: vec![0; n],
            charged: vec![0; n],
        });
        self.pool_claims[p] += 1;
        if let Some(z) = reqs.and_then(|r| r.get(self.w.zone))
            && !z.complement
            && z.values.len() == 1
        {
            *self.zone_claims.entry(z.values[0]).or_insert(0) += 1;
        }
        self.claims.len() - 1
    }

    /// Gives claim `k` the requirements, topology pins and options the placement was
    /// evaluated with (`None`: unchanged).
    fn narrow_claim(&mut self, k: usize, reqs: Option<Reqs>, pins: &Pins, bits: Option<Bitset>) {
        if let Some(r) = reqs {
            self.claims[k].reqs = r;
        }
        for &(key, v) in pins {
            let w = &*self.w;
            self.claims[k]
                .reqs
                .add(key, ValueSet::one(v), None, &w.interner);
        }
        if let Some(b) = bits {
            self.claims[k].bits = b;
        }
    }

    /// Adds `m` pods of size `req` to claim `k`: drops the options they outgrow, re-prices the
    /// claim, re-files it by free cpu and re-charges its NodePool for its largest option.
    fn fill_claim(
        &mut self,
        k: usize,
        req: &[i64],
        ports: Vec<HostPort>,
        m: usize,
        pods: &[usize],
    ) {
        let pool = self.claims[k].pool;
        let total = add_scaled(&self.claims[k].used, req, m as i64);
        let w = &*self.w;
        let p = &w.pools[pool];
        let mut bits = self.claims[k].bits.clone();
        for it in self.claims[k].bits.iter() {
            if !fits(&total, &p.its[it].alloc) {
                bits.remove(it);
            }
        }
        let cl = &mut self.claims[k];
        if !cl.pods.is_empty() {
            let old = p.its[cl.cheapest].alloc[0] - cl.used[0];
            self.room.remove(&(old, k));
        }
        cl.bits = bits;
        cl.used = total;
        cl.pods.extend_from_slice(pods);
        cl.ports.extend(ports);
        let (first, price) = w
            .first_fit(pool, &cl.bits, &cl.reqs, &cl.used)
            .unwrap_or((0, f64::MAX));
        cl.cheapest = first;
        cl.price = price;
        self.room.insert((p.its[first].alloc[0] - cl.used[0], k));
        let (max_alloc, charged) = option_bounds(p, &cl.bits, cl.used.len());
        for (pc, (new, old)) in self.pool_charged[pool]
            .iter_mut()
            .zip(charged.iter().zip(&cl.charged))
        {
            *pc += new - old;
        }
        cl.max_alloc = max_alloc;
        cl.charged = charged;
    }

    /// The requirements and taints of a filled target, which topology groups filter and count
    /// by; `None` for a claim not opened yet, which [`Self::apply`] never asks about (it opens
    /// a new claim before filling it).
    fn counted_labels(&self, tgt: Tgt) -> Option<(Reqs, Vec<crate::taints::Taint>)> {
        match tgt {
            Tgt::Existing(ei) => Some((
                Reqs::clone(&self.w.existing[ei].reqs),
                self.w.existing[ei].taints.clone(),
            )),
            Tgt::Claim(k) => {
                let cl = &self.claims[k];
                Some((cl.reqs.clone(), self.w.pools[cl.pool].taints.clone()))
            }
            Tgt::NewClaim(_) => None,
        }
    }

    /// Counts `m` pods of class `ci` in the topology groups that count it and the inverse
    /// groups it owns, at the domain the target `treqs` pins (if one).
    fn record_topology(
        &mut self,
        ci: usize,
        treqs: &Reqs,
        taints: &[crate::taints::Taint],
        m: usize,
    ) {
        let c = &self.w.classes[ci];
        let counted = c.counted_by.clone();
        let owns = c.owns_inverse.clone();
        for g in counted {
            let grp = &self.w.groups[g];
            if !grp.def.filter.accepts(treqs, taints, &self.w.interner) {
                continue;
            }
            if let Some(set) = treqs.get(grp.def.key)
                && !set.complement
                && set.values.len() == 1
            {
                let v = set.values[0];
                self.w.groups[g].record(v, m as u32);
            }
        }
        for i in owns {
            if let Some(set) = treqs.get(self.w.inverse[i].def.key)
                && !set.complement
                && set.values.len() == 1
            {
                let v = set.values[0];
                self.w.inverse[i].record(v, m as u32);
            }
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
