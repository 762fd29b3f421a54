//! The mutable state of one solve (new claims, usage, counts) and the placement loop.

use super::bitset::Bitset;
use super::compile::{Res, fits, fits_plus};
use super::plan::{InstanceOption, NewClaim, Placement, Plan, Target, Unplaced};
use super::reqs::{Reqs, ValueSet};
use super::setup::{Class, World};
use super::solver::{
    Con, Pins, Refusal, Relax, active_constraints, add_scaled, effective_reqs, more_fitting,
    ports_conflict, taint_refusal,
};
use crate::model::HostPort;

/// Settings of a solve.
#[derive(Clone, Debug)]
pub struct Options {
    /// `PREFERENCE_POLICY=Ignore`: drop preferred affinities and ScheduleAnyway spreads up front.
    pub ignore_preferences: bool,
    /// Instance-type options kept per new claim (Karpenter: 600).
    pub max_instance_types: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            ignore_preferences: false,
            max_instance_types: 600,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Claim {
    pub pool: usize,
    pub reqs: Reqs,
    /// Instance types that are compatible and still fit everything placed so far.
    pub bits: Bitset,
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

/// A placement decision before it is applied.
struct Choice {
    target: Tgt,
    reqs: Option<Reqs>,
    bits: Option<Bitset>,
    pins: Pins,
    m: usize,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Tgt {
    Existing(usize),
    Claim(usize),
    NewClaim(usize),
}

pub struct Engine<'w> {
    pub w: &'w mut World,
    pub opts: Options,
    pub claims: Vec<Claim>,
    pub existing_pods: Vec<Vec<usize>>,
    pub pool_charged: Vec<Res>,
    pub pool_claims: Vec<i64>,
    pub placements: Vec<(usize, Tgt)>,
    /// Claims by free cpu under their current cheapest type: `(free millicores, claim)`.
    room: std::collections::BTreeSet<(i64, usize)>,
    /// Per class, claims that can never take it (see [`super::solver::Con::permanent`]).
    dead: Vec<Vec<u64>>,
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
    pub fn new(w: &'w mut World, opts: Options) -> Self {
        let n = w.existing.len();
        let np = w.pools.len();
        let r = w.names.len();
        let nc = w.classes.len();
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
        }
    }

    /// Tries one step for class `ci`: places 1..=want pods somewhere or says why not.
    fn step(&mut self, ci: usize, relax: &Relax, want: usize) -> Result<Choice, Vec<String>> {
        let c = &self.w.classes[ci];
        let cons = active_constraints(self.w, c, relax);
        let alts = effective_reqs(self.w, c, relax);
        let bulk = !c.one_at_a_time();
        let want_m = if bulk { want } else { 1 };

        // 1. Existing nodes and in-flight claims, first that fits.
        for ei in 0..self.w.existing.len() {
            if let Ok((m, _)) = self.eval_existing(c, &cons, &alts, relax, ei, want_m) {
                return Ok(Choice {
                    target: Tgt::Existing(ei),
                    reqs: None,
                    bits: None,
                    pins: vec![],
                    m,
                });
            }
        }
        let mut dead: Vec<u64> = vec![0; self.claims.len().div_ceil(64)];
        // 2. This run's new claims: the first that takes the pod without raising its launch
        // price, else the one whose price grows least (ties: tightest fit).
        // Among the first few claims with room, take the one whose cpu and memory fill stay
        // most even, so the remaining room suits the pods still to come.
        let mut best: Option<(usize, Eval, f64)> = None;
        let mut seen = 0;
        let need_cpu = c.requests.first().copied().unwrap_or(0);
        for &(_, k) in self.room.range((need_cpu, 0)..) {
            if self.is_dead(ci, k) {
                continue;
            }
            match self.eval_claim(c, &cons, &alts, relax, k, true) {
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
                Err(true) => set_bit(&mut dead, k),
                Err(false) => {}
            }
        }
        let mut best: Option<(usize, Eval)> = best.map(|(k, e, _)| (k, e));
        if best.is_none() {
            // Growing a claim: those closest to having room need the smallest step up, so
            // visit them first and compare the first few that can take the pod.
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
                if self.is_dead(ci, k) || get_bit(&dead, k) {
                    continue;
                }
                match self.eval_claim(c, &cons, &alts, relax, k, false) {
                    Ok(e) => {
                        let better = match &best {
                            None => true,
                            Some((_, b)) => {
                                e.marginal < b.marginal - 1e-9
                                    || (e.marginal <= b.marginal + 1e-9
                                        && e.slack < b.slack - 1e-12)
                            }
                        };
                        if better {
                            best = Some((k, e));
                        }
                        seen += 1;
                    }
                    Err(true) => set_bit(&mut dead, k),
                    Err(false) => {}
                }
            }
        }
        for (wi, &w) in dead.iter().enumerate() {
            let mut w = w;
            while w != 0 {
                let k = wi * 64 + w.trailing_zeros() as usize;
                w &= w - 1;
                self.mark_dead(ci, k);
            }
        }
        let c = &self.w.classes[ci];
        if let Some((k, e)) = best {
            let m = if bulk {
                let total = add_scaled(&self.claims[k].used, &c.requests, 1);
                let alloc = &self.w.pools[self.claims[k].pool].its[e.first].alloc;
                (1 + more_fitting(&total, &c.requests, alloc).min(want as i64 - 1)) as usize
            } else {
                1
            };
            return Ok(Choice {
                target: Tgt::Claim(k),
                reqs: e.reqs,
                bits: e.bits,
                pins: e.pins,
                m,
            });
        }
        // 3. A new claim from the first NodePool that can take the pod.
        let host = format!("hostname-placeholder-{:05}", self.claims.len() + 1);
        let host = self.w.interner.intern(&host);
        let c = &self.w.classes[ci];
        let mut reasons = Vec::new();
        if !self.w.existing.is_empty() {
            let refusals: Vec<Refusal> = (0..self.w.existing.len())
                .filter_map(|ei| self.eval_existing(c, &cons, &alts, relax, ei, want_m).err())
                .collect();
            reasons.push(self.summarise_existing(c, &refusals));
        }
        if self.w.pools.is_empty() {
            reasons.push("no NodePool is available".to_string());
        }
        for p in 0..self.w.pools.len() {
            match self.eval_new(c, &cons, &alts, relax, p, host) {
                Ok((reqs, bits, pins, first)) => {
                    let m = if bulk {
                        let alloc = &self.w.pools[p].its[first].alloc;
                        (1 + more_fitting(&c.requests, &c.requests, alloc).min(want as i64 - 1))
                            as usize
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
                Err(why) => reasons.push(format!("NodePool {}: {why}", self.w.pools[p].name)),
            }
        }
        Err(reasons)
    }

    fn is_dead(&self, ci: usize, k: usize) -> bool {
        self.dead[ci]
            .get(k / 64)
            .is_some_and(|w| w & (1 << (k % 64)) != 0)
    }

    fn mark_dead(&mut self, ci: usize, k: usize) {
        let d = &mut self.dead[ci];
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

    fn eval_existing(
        &self,
        c: &Class,
        cons: &[Con],
        alts: &[Reqs],
        relax: &Relax,
        ei: usize,
        want: usize,
    ) -> Result<(usize, ()), Refusal> {
        let e = &self.w.existing[ei];
        let used = &self.w.existing_used[ei];
        let total = add_scaled(used, &c.requests, 1);
        if !fits(&total, &e.available) {
            let short = (0..total.len())
                .filter(|&r| c.requests[r] > 0 && total[r] > e.available[r])
                .collect();
            return Err(Refusal::Resources(short));
        }
        if let Some(r) = taint_refusal(c, &e.taints, relax) {
            return Err(r);
        }
        if let Some(p) = ports_conflict(&c.host_ports, &self.w.existing_ports[ei]) {
            return Err(Refusal::HostPort(p));
        }
        let mut last = None;
        let ok = alts.iter().any(
            |a| match e.reqs.compatible(a, &self.w.interner, &|_| false) {
                Ok(()) => true,
                Err(conf) => {
                    last = Some(conf);
                    false
                }
            },
        );
        if !ok {
            return Err(Refusal::Requirements(
                last.map(|c| c.describe(&self.w.interner))
                    .unwrap_or_default(),
            ));
        }
        self.w.topology(c, cons, &e.reqs, false)?;
        let m = if want > 1 {
            let total = add_scaled(used, &c.requests, 1);
            1 + more_fitting(&total, &c.requests, &e.available).min(want as i64 - 1)
        } else {
            1
        };
        Ok((m as usize, ()))
    }

    /// Evaluates claim `k` for one more pod. With `zero_only`, only a placement that keeps the
    /// claim's launch price is accepted, and nothing is allocated on the way.
    fn eval_claim(
        &self,
        c: &Class,
        cons: &[Con],
        alts: &[Reqs],
        relax: &Relax,
        k: usize,
        zero_only: bool,
    ) -> Result<Eval, bool> {
        let cl = &self.claims[k];
        let pool = &self.w.pools[cl.pool];
        if zero_only {
            if !fits_plus(&cl.used, &c.requests, &pool.its[cl.cheapest].alloc) {
                return Err(false);
            }
        } else {
            for (r, &q) in c.requests.iter().enumerate() {
                if q > 0 && cl.used[r] + q > cl.max_alloc[r] {
                    return Err(true);
                }
            }
        }
        if !pool.taints.is_empty() && taint_refusal(c, &pool.taints, relax).is_some() {
            return Err(false);
        }
        if !c.host_ports.is_empty() && ports_conflict(&c.host_ports, &cl.ports).is_some() {
            return Err(true);
        }
        let mut permanent = alts.len() == 1;
        let allow = |key: u32| self.w.allow_undefined(key);
        for alt in alts {
            if !alt.items.is_empty() && cl.reqs.compatible(alt, &self.w.interner, &allow).is_err() {
                permanent = false;
                continue;
            }
            let mut merged: Option<Reqs> = None;
            let mut changed: Vec<u32> = Vec::new();
            if !alt.items.is_empty() && cl.reqs.would_change(alt, &self.w.interner) {
                let mut m = cl.reqs.clone();
                changed = m.merge(alt, &self.w.interner);
                if !changed.is_empty() {
                    merged = Some(m);
                }
            }
            let Ok(pins) = self
                .w
                .topology(c, cons, merged.as_ref().unwrap_or(&cl.reqs), true)
            else {
                continue;
            };
            if !pins.is_empty() {
                let m = merged.get_or_insert_with(|| cl.reqs.clone());
                for &(key, v) in &pins {
                    m.add(key, ValueSet::one(v), None, &self.w.interner);
                    changed.push(key);
                }
            }
            let mut bits: Option<Bitset> = None;
            if let Some(m) = &merged {
                let mut b = cl.bits.clone();
                for it in cl.bits.iter() {
                    if !changed
                        .iter()
                        .all(|&key| self.w.it_key_ok(cl.pool, it, m, key))
                    {
                        b.remove(it);
                    }
                }
                bits = Some(b);
            }
            let reqs_ref = merged.as_ref().unwrap_or(&cl.reqs);
            let bits_ref = bits.as_ref().unwrap_or(&cl.bits);
            if zero_only && merged.is_none() {
                // The current cheapest type still fits: the launch price does not move.
                if pool.min_values {
                    let total = add_scaled(&cl.used, &c.requests, 1);
                    if !self.min_values_after(cl.pool, bits_ref, reqs_ref, &total) {
                        continue;
                    }
                }
                return Ok(Eval {
                    marginal: 0.0,
                    slack: 0.0,
                    reqs: None,
                    bits: None,
                    pins,
                    first: cl.cheapest,
                });
            }
            let Some((first, price)) =
                self.w
                    .first_fit_plus(cl.pool, bits_ref, reqs_ref, &cl.used, &c.requests)
            else {
                continue;
            };
            if zero_only && price > cl.price + 1e-12 {
                continue;
            }
            if pool.min_values {
                let total = add_scaled(&cl.used, &c.requests, 1);
                if !self.min_values_after(cl.pool, bits_ref, reqs_ref, &total) {
                    continue;
                }
            }
            let alloc = &pool.its[first].alloc;
            let mut slack = 0.0;
            for ((&a, &u), &q) in alloc.iter().zip(&cl.used).zip(&c.requests).take(2) {
                if a > 0 {
                    slack += (a - u - q) as f64 / a as f64;
                }
            }
            return Ok(Eval {
                marginal: price - cl.price,
                slack,
                reqs: merged,
                bits,
                pins,
                first,
            });
        }
        Err(permanent)
    }

    fn min_values_after(&self, pool: usize, bits: &Bitset, reqs: &Reqs, total: &[i64]) -> bool {
        let mut nb = bits.clone();
        for it in bits.iter() {
            if !fits(total, &self.w.pools[pool].its[it].alloc) {
                nb.remove(it);
            }
        }
        self.w.min_values_ok(pool, &nb, reqs).is_ok()
    }

    fn remaining_limit(&self, p: usize) -> Vec<Option<i64>> {
        let pool = &self.w.pools[p];
        pool.limits
            .iter()
            .enumerate()
            .map(|(r, l)| l.map(|l| l - pool.used[r] - self.pool_charged[p][r]))
            .collect()
    }

    fn eval_new(
        &self,
        c: &Class,
        cons: &[Con],
        alts: &[Reqs],
        relax: &Relax,
        p: usize,
        host: u32,
    ) -> Result<(Reqs, Bitset, Pins, usize), String> {
        let pool = &self.w.pools[p];
        if let Some(limit) = pool.node_limit
            && pool.used_nodes + self.pool_claims[p] >= limit
        {
            return Err(format!("limit nodes={limit} is reached"));
        }
        if let Some(r) = taint_refusal(c, &pool.taints, relax) {
            return Err(self.w.describe_refusal(c, &r));
        }
        if pool.its.is_empty() {
            return Err("no instance types are available".to_string());
        }
        let allow = |key: u32| self.w.allow_undefined(key);
        let mut last = String::new();
        for alt in alts {
            if let Err(conf) = pool.reqs.compatible(alt, &self.w.interner, &allow) {
                last = format!("requirements: {}", conf.describe(&self.w.interner));
                continue;
            }
            let mut reqs = pool.reqs.clone();
            reqs.merge(alt, &self.w.interner);
            reqs.add(self.w.hostname, ValueSet::one(host), None, &self.w.interner);
            let pins = match self.w.topology(c, cons, &reqs, true) {
                Ok(p) => p,
                Err(r) => {
                    last = self.w.describe_refusal(c, &r);
                    continue;
                }
            };
            for &(key, v) in &pins {
                reqs.add(key, ValueSet::one(v), None, &self.w.interner);
            }
            let remaining = self.remaining_limit(p);
            let n = pool.its.len();
            let mut bits = Bitset::empty(n);
            let (mut compat, mut offer, mut fit) = (0, 0, 0);
            let mut limited: Option<String> = None;
            let mut largest: Option<usize> = None;
            for it in 0..n {
                let itc = &pool.its[it];
                if pool.reqs.items.len() + reqs.items.len() > 0
                    && itc.reqs.intersects(&reqs, &self.w.interner).is_err()
                {
                    continue;
                }
                compat += 1;
                if self.w.offering(p, it, &reqs).is_none() {
                    continue;
                }
                offer += 1;
                if largest.is_none_or(|l| itc.alloc[0] > pool.its[l].alloc[0]) {
                    largest = Some(it);
                }
                if !fits(&c.requests, &itc.alloc) {
                    continue;
                }
                fit += 1;
                if let Some((r, _)) = remaining
                    .iter()
                    .enumerate()
                    .find(|(r, rem)| rem.is_some_and(|x| itc.capacity[*r] > x))
                {
                    limited = Some(format!(
                        "limit {}: {} remaining",
                        self.w.names.name(r as u32),
                        crate::resources::format_amount(
                            self.w.names.name(r as u32),
                            remaining[r].unwrap_or(0).max(0)
                        )
                    ));
                    continue;
                }
                bits.insert(it);
            }
            if bits.is_empty() {
                last = if compat == 0 {
                    let mut why =
                        String::from("no instance type is compatible with the requirements");
                    if let Some(it) = pool.its.first()
                        && let Err(conf) = it.reqs.intersects(&reqs, &self.w.interner)
                    {
                        why = format!(
                            "{why} (e.g. {}: {})",
                            it.name,
                            conf.describe(&self.w.interner)
                        );
                    }
                    why
                } else if offer == 0 {
                    format!(
                        "{compat} compatible instance types but none has an available offering in the required zones/capacity types"
                    )
                } else if fit == 0 {
                    let req = super::compile::sparse(&c.requests, &self.w.names);
                    let big = largest
                        .map(|l| {
                            format!(
                                "; largest is {} with {}",
                                pool.its[l].name,
                                super::compile::sparse(&pool.its[l].alloc, &self.w.names)
                            )
                        })
                        .unwrap_or_default();
                    format!("no instance type fits requests {req} (after daemonset overhead){big}")
                } else {
                    limited.unwrap_or_else(|| "limits exhausted".to_string())
                };
                continue;
            }
            if let Err(key) = self.w.min_values_ok(p, &bits, &reqs) {
                last = self.w.describe_refusal(c, &Refusal::MinValues(key));
                continue;
            }
            let Some((mut first, _)) = self.w.first_fit(p, &bits, &reqs, &c.requests) else {
                last = "no available offering".to_string();
                continue;
            };
            // Settle every topology key now (zone from the cheapest offering), so later pods
            // check this claim's domains with plain lookups and every count is exact.
            let mut keys: Vec<u32> = self.w.universe.keys().copied().collect();
            keys.sort_unstable();
            let mut settled = Vec::new();
            for key in keys {
                let already = reqs
                    .get(key)
                    .is_some_and(|s| !s.complement && s.values.len() == 1);
                if already {
                    continue;
                }
                let value = if key == self.w.zone || key == self.w.capacity_type {
                    self.w.offering(p, first, &reqs).map(|(_, o)| {
                        let off = &pool.its[first].offerings[o];
                        if key == self.w.zone {
                            off.zone
                        } else {
                            off.capacity_type
                        }
                    })
                } else {
                    self.w.universe[&key]
                        .iter()
                        .map(|x| x.0)
                        .find(|&v| reqs.get(key).is_none_or(|s| s.has(v, &self.w.interner)))
                };
                if let Some(v) = value {
                    reqs.add(key, ValueSet::one(v), None, &self.w.interner);
                    settled.push(key);
                }
            }
            if !settled.is_empty() {
                for it in bits.clone().iter() {
                    if !settled
                        .iter()
                        .all(|&key| self.w.it_key_ok(p, it, &reqs, key))
                    {
                        bits.remove(it);
                    }
                }
                match self.w.first_fit(p, &bits, &reqs, &c.requests) {
                    Some((f, _)) => first = f,
                    None => {
                        last = "no available offering".to_string();
                        continue;
                    }
                }
            }
            return Ok((reqs, bits, pins, first));
        }
        Err(last)
    }

    fn apply(&mut self, ci: usize, choice: Choice, pods: &[usize]) {
        let m = choice.m;
        let req = self.w.classes[ci].requests.clone();
        let ports = self.w.classes[ci].host_ports.clone();
        let (treqs, taints): (Reqs, Vec<crate::taints::Taint>);
        let tgt = match choice.target {
            Tgt::Existing(ei) => {
                for (u, r) in self.w.existing_used[ei].iter_mut().zip(&req) {
                    *u += r * m as i64;
                }
                self.w.existing_ports[ei].extend(ports);
                self.existing_pods[ei].extend_from_slice(pods);
                treqs = self.w.existing[ei].reqs.clone();
                taints = self.w.existing[ei].taints.clone();
                Tgt::Existing(ei)
            }
            Tgt::Claim(k) | Tgt::NewClaim(k) => {
                let k = if let Tgt::NewClaim(p) = choice.target {
                    let n = self.w.names.len();
                    self.claims.push(Claim {
                        pool: p,
                        reqs: Reqs::new(),
                        bits: Bitset::empty(self.w.pools[p].its.len()),
                        used: vec![0; n],
                        pods: Vec::new(),
                        ports: Vec::new(),
                        cheapest: 0,
                        price: 0.0,
                        max_alloc: vec![0; n],
                        charged: vec![0; n],
                    });
                    self.pool_claims[p] += 1;
                    self.claims.len() - 1
                } else {
                    k
                };
                let pool = self.claims[k].pool;
                if let Some(r) = choice.reqs {
                    self.claims[k].reqs = r;
                }
                for &(key, v) in &choice.pins {
                    let w = &*self.w;
                    self.claims[k]
                        .reqs
                        .add(key, ValueSet::one(v), None, &w.interner);
                }
                if let Some(b) = choice.bits {
                    self.claims[k].bits = b;
                }
                let total = add_scaled(&self.claims[k].used, &req, m as i64);
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
                let r = cl.used.len();
                let mut max_alloc = vec![i64::MIN; r];
                let mut charged = vec![0; r];
                for it in cl.bits.iter() {
                    for i in 0..r {
                        max_alloc[i] = max_alloc[i].max(p.its[it].alloc[i]);
                        charged[i] = charged[i].max(p.its[it].capacity[i]);
                    }
                }
                for (pc, (new, old)) in self.pool_charged[pool]
                    .iter_mut()
                    .zip(charged.iter().zip(&cl.charged))
                {
                    *pc += new - old;
                }
                cl.max_alloc = max_alloc;
                cl.charged = charged;
                treqs = cl.reqs.clone();
                taints = p.taints.clone();
                Tgt::Claim(k)
            }
        };
        // Topology counts.
        let c = &self.w.classes[ci];
        let counted = c.counted_by.clone();
        let owns = c.owns_inverse.clone();
        for g in counted {
            let grp = &self.w.groups[g];
            if !grp.def.filter.accepts(&treqs, &taints, &self.w.interner) {
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
        for &p in pods {
            self.placements.push((p, tgt));
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

    pub fn run(&mut self) -> Vec<(usize, String)> {
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

    pub fn finish(self, s: &crate::model::Snapshot, unplaced: Vec<(usize, String)>) -> Plan {
        let w = &*self.w;
        let mut new_claims = Vec::new();
        let mut claim_index = vec![usize::MAX; self.claims.len()];
        for (k, cl) in self.claims.iter().enumerate() {
            if cl.pods.is_empty() {
                continue;
            }
            let p = &w.pools[cl.pool];
            let mut options: Vec<(f64, usize, usize)> = cl
                .bits
                .iter()
                .filter_map(|it| {
                    w.offering(cl.pool, it, &cl.reqs)
                        .map(|(price, o)| (price, it, o))
                })
                .collect();
            options.sort_by(|a, b| {
                a.0.total_cmp(&b.0)
                    .then_with(|| p.its[a.1].name.cmp(&p.its[b.1].name))
            });
            options.truncate(self.opts.max_instance_types);
            let instance_types: Vec<InstanceOption> = options
                .iter()
                .map(|&(price, it, o)| {
                    let off = &p.its[it].offerings[o];
                    InstanceOption {
                        name: p.its[it].name.clone(),
                        price,
                        zone: w.interner.name(off.zone).to_string(),
                        capacity_type: off.ct,
                    }
                })
                .collect();
            let mut reqs = cl.reqs.clone();
            reqs.items.retain(|r| r.key != w.hostname);
            let mut requirement_list = reqs.to_requirements(&w.interner);
            requirement_list.push(crate::requirements::Requirement {
                key: crate::labels::INSTANCE_TYPE.to_string(),
                operator: crate::requirements::Operator::In,
                values: instance_types.iter().map(|o| o.name.clone()).collect(),
                min_values: None,
            });
            let mut requirements = reqs.describe(&w.interner);
            let names: Vec<&str> = instance_types.iter().map(|o| o.name.as_str()).collect();
            requirements.push(format!(
                "{} In [{}]",
                crate::labels::INSTANCE_TYPE,
                names.join(", ")
            ));
            requirements.sort();
            let mut requests = super::compile::sparse(&cl.used, &w.names);
            if let Some(&(_, it, _)) = options.first() {
                requests.add(&super::compile::sparse(&p.its[it].daemon, &w.names));
            }
            claim_index[k] = new_claims.len();
            new_claims.push(NewClaim {
                nodepool: p.name.clone(),
                requirements,
                requirement_list,
                instance_types,
                pods: cl.pods.iter().map(|&i| s.pods[i].key()).collect(),
                requests,
            });
        }
        let placements = self
            .placements
            .iter()
            .map(|&(pi, t)| Placement {
                pod: s.pods[pi].key(),
                target: match t {
                    Tgt::Existing(ei) => {
                        let e = &w.existing[ei];
                        if e.in_flight {
                            Target::InFlight(e.name.clone())
                        } else {
                            Target::Node(e.name.clone())
                        }
                    }
                    Tgt::Claim(k) | Tgt::NewClaim(k) => Target::NewClaim(claim_index[k]),
                },
            })
            .collect();
        let mut unplaced: Vec<Unplaced> = unplaced
            .into_iter()
            .map(|(pi, reason)| Unplaced {
                pod: s.pods[pi].key(),
                reason,
            })
            .collect();
        unplaced.sort_by(|a, b| a.pod.cmp(&b.pod));
        let cost = new_claims
            .iter()
            .filter_map(|c| c.cheapest().map(|o| o.price))
            .sum();
        Plan {
            placements,
            new_claims,
            unplaced,
            pods: w.pods_considered,
            cost,
            lower_bound: 0.0,
        }
    }
}
