//! A cheap improvement pass after the greedy placement: a new claim whose pods fit on a few
//! smaller nodes for less than its own cheapest type is split into them.
//!
//! The greedy grows a claim while some type still takes the next pod, so with a real catalog
//! (sizes doubling up to 96xlarge, pods pinned to one zone by a spread) it can end on a type
//! twice the size of what its pods use. Splitting keeps every constraint: the parts keep the
//! claim's requirements (zone, capacity type, architecture, NodePool), each gets a fresh
//! hostname, and claims whose pods count or need each other per hostname (hostname spreads
//! and affinity) are left whole. Limits and `minValues` are checked for the parts.

use super::*;

/// Claims priced within this factor of covering their cpu and memory with fractions of the
/// most cost-efficient compatible type are left alone: no split can save much there.
const EFFICIENT_ENOUGH: f64 = 1.05;

/// Smaller instance types tried as the bin of the first-fit-decreasing repack, the most
/// cost-efficient for the claim's mix of cpu and memory first.
const CANDIDATE_TYPES: usize = 6;

/// A split must save at least this share of the claim's price.
const MIN_SAVING: f64 = 0.01;

/// One part of a split claim: its pods (indices into the claim's pod list) and total requests.
struct Part {
    members: Vec<usize>,
    used: Res,
}

/// A part with its options and its cheapest type.
type Priced = (Part, Bitset, usize);

impl Engine<'_> {
    /// Splits every claim that gets cheaper as several smaller ones. Deterministic: claims are
    /// visited in creation order and ties keep the earlier candidate.
    pub(crate) fn repack(&mut self) {
        let pod_class = self.pod_classes();
        // Claims share requirements but for their hostname, so their compatible types are
        // worked out once per distinct rest.
        let mut compatible: std::collections::HashMap<(usize, Reqs), Bitset> =
            std::collections::HashMap::new();
        for k in 0..self.claims.len() {
            let cl = &self.claims[k];
            if cl.pods.len() < 2 || cl.price == f64::MAX {
                continue;
            }
            let mut key = cl.reqs.clone();
            key.items.retain(|r| r.key != self.w.hostname);
            let bits = compatible
                .entry((cl.pool, key))
                .or_insert_with(|| self.compatible_types(k));
            if let Some(parts) = self.split_plan(k, bits, &pod_class) {
                self.apply_split(k, parts, &pod_class);
            }
        }
    }

    fn pod_classes(&self) -> std::collections::HashMap<usize, usize> {
        let mut m = std::collections::HashMap::new();
        for (ci, c) in self.w.classes.iter().enumerate() {
            for &p in &c.pods {
                m.insert(p, ci);
            }
        }
        m
    }

    /// Whether a class's pods may move to another new node of the same requirements: nothing
    /// counts them or needs them per hostname, except anti-affinity, which a split can only
    /// keep satisfied.
    fn movable(&self, ci: usize) -> bool {
        let c = &self.w.classes[ci];
        let per_host = |g: &usize| {
            let def = &self.w.groups[*g].def;
            def.key == self.w.hostname && def.kind != super::super::topology::Kind::AntiAffinity
        };
        c.host_ports.is_empty()
            && !c.spreads.iter().any(|(g, _)| per_host(g))
            && !c.affinity.iter().any(per_host)
            && !c.preferred_affinity.iter().any(per_host)
            && !c.counted_by.iter().any(per_host)
    }

    fn split_plan(
        &self,
        k: usize,
        compatible: &Bitset,
        pod_class: &std::collections::HashMap<usize, usize>,
    ) -> Option<Vec<Priced>> {
        let cl = &self.claims[k];
        let pool = &self.w.pools[cl.pool];
        let candidates = self.candidates(k, compatible);
        let fractional = candidates.first()?.0;
        if cl.price <= fractional * EFFICIENT_ENOUGH {
            return None;
        }
        if !cl
            .pods
            .iter()
            .all(|p| pod_class.get(p).is_some_and(|&ci| self.movable(ci)))
        {
            return None;
        }
        let requests: Vec<&Res> = cl
            .pods
            .iter()
            .map(|p| &self.w.classes[pod_class[p]].requests)
            .collect();
        let mut best: Option<(f64, Vec<Priced>)> = None;
        for &(_, t) in &candidates {
            let Some(parts) = first_fit_decreasing(&requests, &pool.its[t].alloc) else {
                continue;
            };
            if parts.len() < 2 {
                continue;
            }
            let Some(priced) = self.price_parts(k, compatible, parts) else {
                continue;
            };
            let total: f64 = priced.iter().map(|(_, _, _, price)| price).sum();
            if best.as_ref().is_none_or(|(b, _)| total < *b - 1e-9) {
                let parts = priced.into_iter().map(|(p, b, f, _)| (p, b, f)).collect();
                best = Some((total, parts));
            }
        }
        let (total, mut parts) = best?;
        if total >= cl.price * (1.0 - MIN_SAVING) {
            return None;
        }
        if !self.limits_allow(k, &parts) {
            // Charged at their largest options, the parts can pass a limit the whole claim
            // kept within; narrowed as the greedy narrows claims at a limit, each part is
            // charged no more than its own cheapest type.
            for (_, bits, first) in &mut parts {
                *bits = narrowed(&self.w.pools[cl.pool], bits, *first);
            }
        }
        self.limits_allow(k, &parts).then_some(parts)
    }

    /// Types of the claim's NodePool that its requirements allow and that have an offering
    /// there, whatever their size.
    fn compatible_types(&self, k: usize) -> Bitset {
        let cl = &self.claims[k];
        let pool = &self.w.pools[cl.pool];
        let mut bits = Bitset::empty(pool.its.len());
        for (t, itc) in pool.its.iter().enumerate() {
            if itc.reqs.intersects(&cl.reqs, &self.w.interner).is_ok()
                && self.w.offering(cl.pool, t, &cl.reqs).is_some()
            {
                bits.insert(t);
            }
        }
        bits
    }

    /// Compatible types cheaper than the claim's, ranked by what covering the claim's cpu and
    /// memory with (fractional) copies of them would cost, with that cost.
    fn candidates(&self, k: usize, compatible: &Bitset) -> Vec<(f64, usize)> {
        let cl = &self.claims[k];
        let pool = &self.w.pools[cl.pool];
        let mut ranked: Vec<(f64, usize)> = compatible
            .iter()
            .filter_map(|t| {
                let (price, _) = self.w.offering(cl.pool, t, &cl.reqs)?;
                if price >= cl.price {
                    return None;
                }
                let a = &pool.its[t].alloc;
                let copies = (0..2)
                    .filter(|&r| cl.used[r] > 0)
                    .map(|r| cl.used[r] as f64 / a[r].max(1) as f64)
                    .fold(0.0, f64::max);
                Some((price * copies, t))
            })
            .collect();
        ranked.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        ranked.truncate(CANDIDATE_TYPES);
        ranked
    }

    /// Each part's options (compatible types that fit it), cheapest type and price; `None`
    /// when a part has no option or breaks `minValues`.
    fn price_parts(
        &self,
        k: usize,
        compatible: &Bitset,
        parts: Vec<Part>,
    ) -> Option<Vec<(Part, Bitset, usize, f64)>> {
        let cl = &self.claims[k];
        let pool = &self.w.pools[cl.pool];
        let mut out = Vec::with_capacity(parts.len());
        for part in parts {
            let mut bits = compatible.clone();
            for t in compatible.iter() {
                if !fits(&part.used, &pool.its[t].alloc) {
                    bits.remove(t);
                }
            }
            if pool.min_values && self.w.min_values_ok(cl.pool, &bits, &cl.reqs).is_err() {
                return None;
            }
            let (first, price) = self.w.first_fit(cl.pool, &bits, &cl.reqs, &part.used)?;
            out.push((part, bits, first, price));
        }
        Some(out)
    }

    /// NodePool limits (charged at each claim's largest option) and node limits still hold.
    fn limits_allow(&self, k: usize, parts: &[Priced]) -> bool {
        let cl = &self.claims[k];
        let pool = &self.w.pools[cl.pool];
        if let Some(limit) = pool.node_limit
            && pool.used_nodes + self.pool_claims[cl.pool] + parts.len() as i64 - 1 > limit
        {
            return false;
        }
        (0..pool.limits.len()).all(|r| {
            let Some(limit) = pool.limits[r] else {
                return true;
            };
            let parts_charge: i64 = parts
                .iter()
                .map(|(_, bits, _)| {
                    bits.iter()
                        .map(|t| pool.its[t].capacity[r])
                        .max()
                        .unwrap_or(0)
                })
                .sum();
            pool.used[r] + self.pool_charged[cl.pool][r] - cl.charged[r] + parts_charge <= limit
        })
    }

    fn apply_split(
        &mut self,
        k: usize,
        parts: Vec<Priced>,
        pod_class: &std::collections::HashMap<usize, usize>,
    ) {
        let old_pods = std::mem::take(&mut self.claims[k].pods);
        let template = self.claims[k].clone();
        let pool = template.pool;
        for (pc, old) in self.pool_charged[pool].iter_mut().zip(&template.charged) {
            *pc -= old;
        }
        let mut moved: std::collections::HashMap<usize, usize> = std::collections::HashMap::new();
        for (i, (part, bits, first)) in parts.into_iter().enumerate() {
            let index = if i == 0 { k } else { self.claims.len() };
            let mut cl = template.clone();
            if i > 0 {
                let host = format!("hostname-placeholder-{:05}", self.claims.len() + 1);
                let host = self.w.interner.intern(&host);
                cl.reqs.items.retain(|r| r.key != self.w.hostname);
                cl.reqs
                    .add(self.w.hostname, ValueSet::one(host), None, &self.w.interner);
                self.pool_claims[pool] += 1;
            }
            cl.pods = part.members.iter().map(|&m| old_pods[m]).collect();
            cl.ports = self.w.pools[pool].daemon_ports.clone();
            for &p in &cl.pods {
                cl.ports
                    .extend(self.w.classes[pod_class[&p]].host_ports.iter().cloned());
                moved.insert(p, index);
            }
            cl.used = part.used;
            cl.cheapest = first;
            cl.price = self
                .w
                .offering(pool, first, &cl.reqs)
                .map_or(f64::MAX, |o| o.0);
            let its = &self.w.pools[pool].its;
            let r = cl.used.len();
            cl.max_alloc = vec![i64::MIN; r];
            cl.charged = vec![0; r];
            for t in bits.iter() {
                for x in 0..r {
                    cl.max_alloc[x] = cl.max_alloc[x].max(its[t].alloc[x]);
                    cl.charged[x] = cl.charged[x].max(its[t].capacity[x]);
                }
            }
            cl.bits = bits;
            for (pc, new) in self.pool_charged[pool].iter_mut().zip(&cl.charged) {
                *pc += new;
            }
            if i == 0 {
                self.claims[k] = cl;
            } else {
                self.claims.push(cl);
            }
        }
        for (p, t) in self.placements.iter_mut() {
            if let (Tgt::Claim(_), Some(&index)) = (*t, moved.get(p)) {
                *t = Tgt::Claim(index);
            }
        }
    }
}

/// First-fit decreasing of the pods' requests into bins of `alloc`, largest pods (by their
/// larger share of cpu or memory) first; `None` when a pod does not fit an empty bin.
fn first_fit_decreasing(requests: &[&Res], alloc: &Res) -> Option<Vec<Part>> {
    let share = |q: &Res| {
        (0..2)
            .map(|r| q[r] as f64 / alloc[r].max(1) as f64)
            .fold(0.0, f64::max)
    };
    let mut order: Vec<usize> = (0..requests.len()).collect();
    order.sort_by(|&a, &b| {
        share(requests[b])
            .total_cmp(&share(requests[a]))
            .then(a.cmp(&b))
    });
    let mut parts: Vec<Part> = Vec::new();
    for i in order {
        let q = requests[i];
        match parts
            .iter_mut()
            .find(|p| super::super::compile::fits_plus(&p.used, q, alloc))
        {
            Some(p) => {
                for (u, x) in p.used.iter_mut().zip(q) {
                    *u += x;
                }
                p.members.push(i);
            }
            None => {
                if !fits(q, alloc) {
                    return None;
                }
                parts.push(Part {
                    members: vec![i],
                    used: q.clone(),
                });
            }
        }
    }
    for p in &mut parts {
        p.members.sort_unstable();
    }
    Some(parts)
}
