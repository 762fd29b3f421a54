//! The solve loop: classes of identical pods in Karpenter's queue order, each placed on existing
//! nodes, then in-flight claims, then this run's new claims, then a new claim from the first
//! NodePool (by weight) that can take it. Preferences are relaxed in Karpenter's order when a
//! pod cannot be placed; pods that still fail are retried once the rest are placed.
//!
//! Where Karpenter picks the first new claim with the fewest pods, this solver picks the claim
//! whose cheapest launch grows least (ties: tightest fit), which packs nodes closer to the
//! lower bound without ever opening a claim Karpenter would not.
//!
//! A topology domain is an interned id, and ids follow the order the compile first meets each
//! string in: the order the snapshot lists a NodePool's requirement values, its instance types
//! and their offerings. That order says nothing about the domains, so no choice may follow it:
//! where domains tie (as many matching pods, or no count to compare), the one whose name sorts
//! first is taken, here and when a new claim's domains are settled (`engine::evaluate`). A test
//! (`tests/topology.rs`) lists the zones in both orders and requires the same plan.

use super::bitset::Bitset;
use super::compile::{Res, fits};
use super::reqs::{Reqs, ValueSet};
use super::setup::{Class, World, untolerated};
use super::topology::Kind;
use crate::model::HostPort;

/// How far a pod's preferences have been relaxed (Karpenter's order, one step at a time).
#[derive(Clone, Debug, Default)]
pub(crate) struct Relax {
    pub required_terms: usize,
    pub preferred_affinity: usize,
    pub preferred_anti_affinity: usize,
    pub preferred_node: usize,
    pub schedule_anyway: usize,
    pub prefer_no_schedule: bool,
    /// Relaxation steps taken so far.
    pub level: usize,
}

impl Relax {
    pub(crate) fn initial(c: &Class, ignore_preferences: bool) -> Relax {
        if !ignore_preferences {
            return Relax::default();
        }
        Relax {
            required_terms: 0,
            preferred_affinity: c.preferred_affinity.len(),
            preferred_anti_affinity: c.preferred_anti_affinity.len(),
            preferred_node: c.preferred_terms.len(),
            schedule_anyway: c.spreads.iter().filter(|s| s.1).count(),
            prefer_no_schedule: false,
            level: 0,
        }
    }

    /// Removes one more preference; false when nothing is left to relax.
    pub(crate) fn next(&mut self, c: &Class, any_prefer_no_schedule: bool) -> bool {
        if c.required_terms.len() > self.required_terms + 1 {
            self.required_terms += 1;
        } else if self.preferred_affinity < c.preferred_affinity.len() {
            self.preferred_affinity += 1;
        } else if self.preferred_anti_affinity < c.preferred_anti_affinity.len() {
            self.preferred_anti_affinity += 1;
        } else if self.preferred_node < c.preferred_terms.len() {
            self.preferred_node += 1;
        } else if self.schedule_anyway < c.spreads.iter().filter(|s| s.1).count() {
            self.schedule_anyway += 1;
        } else if any_prefer_no_schedule && !self.prefer_no_schedule {
            self.prefer_no_schedule = true;
        } else {
            return false;
        }
        self.level += 1;
        true
    }
}

/// A pod's active topology constraints under a relaxation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Constraint {
    Group(usize),
    Inverse(usize),
}

/// An active constraint with what every check needs precomputed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Con {
    pub con: Constraint,
    pub key: u32,
    /// The pod matches the group's own selector.
    pub own: bool,
    /// A refusal by this constraint cannot be undone while the pod stays at this relaxation
    /// level: anti-affinity, running pods' anti-affinity, and hostname spreads.
    pub permanent: bool,
}

pub(crate) fn active_constraints(w: &World, c: &Class, r: &Relax) -> Vec<Con> {
    active_list(c, r)
        .into_iter()
        .map(|con| match con {
            Constraint::Group(g) => {
                let key = w.groups[g].def.key;
                // Anti-affinity counts and hostname spread counts (whose minimum is 0) only
                // grow, so while this constraint is active a refusal stands.
                let permanent = c.anti_affinity.contains(&g)
                    || c.preferred_anti_affinity.contains(&g)
                    || (key == w.hostname && c.spreads.iter().any(|&(x, _)| x == g));
                Con {
                    con,
                    key,
                    own: c.counted_by.binary_search(&g).is_ok(),
                    permanent,
                }
            }
            Constraint::Inverse(i) => Con {
                con,
                key: w.inverse[i].def.key,
                own: false,
                permanent: true,
            },
        })
        .collect()
}

fn active_list(c: &Class, r: &Relax) -> Vec<Constraint> {
    let mut out = Vec::new();
    let mut anyway_skipped = 0;
    for &(g, anyway) in &c.spreads {
        if anyway && anyway_skipped < r.schedule_anyway {
            anyway_skipped += 1;
            continue;
        }
        out.push(Constraint::Group(g));
    }
    out.extend(c.affinity.iter().map(|&g| Constraint::Group(g)));
    out.extend(
        c.preferred_affinity
            .iter()
            .skip(r.preferred_affinity)
            .map(|&g| Constraint::Group(g)),
    );
    out.extend(c.anti_affinity.iter().map(|&g| Constraint::Group(g)));
    out.extend(
        c.preferred_anti_affinity
            .iter()
            .skip(r.preferred_anti_affinity)
            .map(|&g| Constraint::Group(g)),
    );
    out.extend(c.blocked_by.iter().map(|&g| Constraint::Inverse(g)));
    out
}

/// The requirement alternatives a pod brings under a relaxation.
pub(crate) fn effective_reqs(w: &World, c: &Class, r: &Relax) -> Vec<Reqs> {
    let mut base = c.node_selector.clone();
    if let Some(t) = c.required_terms.get(r.required_terms) {
        base.merge(t, &w.interner);
    }
    if let Some(t) = c.preferred_terms.get(r.preferred_node) {
        base.merge(t, &w.interner);
    }
    c.volume_alternatives
        .iter()
        .map(|v| {
            let mut x = base.clone();
            x.merge(v, &w.interner);
            x
        })
        .collect()
}

/// Why one target refused a pod.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Refusal {
    Taint(String),
    Requirements(String),
    Topology {
        group: Constraint,
        key: u32,
    },
    MissingTopologyKey(u32),
    HostPort(i32),
    Resources(Vec<usize>),
    MinValues(u32),
    /// Refused, reason not worked out (the hot path; see `explain`).
    Quiet,
}

/// The first host port two sets of ports both claim (same port and protocol, overlapping
/// address), as the kube-scheduler's NodePorts filter decides; `None` when they fit together.
pub fn ports_conflict(a: &[HostPort], b: &[HostPort]) -> Option<i32> {
    let any = |ip: &str| ip.is_empty() || ip == "0.0.0.0" || ip == "::";
    for x in a {
        for y in b {
            if x.port == y.port
                && x.protocol == y.protocol
                && (x.host_ip == y.host_ip || any(&x.host_ip) || any(&y.host_ip))
            {
                return Some(x.port);
            }
        }
    }
    None
}

fn single(reqs: &Reqs, key: u32) -> Option<u32> {
    reqs.get(key)
        .and_then(|s| (!s.complement && s.values.len() == 1).then(|| s.values[0]))
}

/// Domain decisions a placement needs: `(key, value)` to pin on the target.
pub(crate) type Pins = Vec<(u32, u32)>;

impl World {
    fn candidates(&self, treqs: &Reqs, key: u32) -> Option<Vec<u32>> {
        let exists = ValueSet::exists();
        let set = treqs.get(key).unwrap_or(&exists);
        if !set.complement {
            return Some(set.values.to_vec());
        }
        let mut v: Vec<u32> = self
            .universe
            .get(&key)
            .map(|u| {
                u.iter()
                    .map(|x| x.0)
                    .filter(|&d| set.has(d, &self.interner))
                    .collect()
            })
            .unwrap_or_default();
        v.dedup();
        Some(v)
    }

    fn allows(&self, c: &Con, domain: u32, hostname: bool) -> bool {
        match c.con {
            Constraint::Inverse(i) => self.inverse[i].count(domain) == 0,
            Constraint::Group(g) => {
                let grp = &self.groups[g];
                match grp.def.kind {
                    Kind::Spread { max_skew, .. } => {
                        let own = u32::from(c.own);
                        let min = grp.spread_min(hostname);
                        i64::from(grp.count(domain) + own) - i64::from(min) <= i64::from(max_skew)
                    }
                    Kind::Affinity => grp.count(domain) > 0 || (grp.total == 0 && c.own),
                    Kind::AntiAffinity => grp.count(domain) == 0,
                }
            }
        }
    }

    /// Checks a pod's topology constraints against a target with requirements `treqs`, and
    /// chooses a domain for every topology key the target has not settled yet.
    ///
    /// On a new node (`open`), a key its requirements leave undefined may take any value the
    /// NodePools offer; on an existing node it means the node lacks the label.
    pub(crate) fn topology(
        &self,
        c: &Class,
        cons: &[Con],
        treqs: &Reqs,
        open_world: bool,
    ) -> Result<Pins, Refusal> {
        let mut open: Vec<u32> = Vec::new();
        for con in cons {
            let key = con.key;
            match single(treqs, key) {
                Some(d) => {
                    if !self.allows(con, d, key == self.hostname) {
                        return Err(Refusal::Topology {
                            group: con.con,
                            key,
                        });
                    }
                }
                None if !open_world && treqs.get(key).is_none() => {
                    return Err(Refusal::MissingTopologyKey(key));
                }
                None => {
                    if !open.contains(&key) {
                        open.push(key);
                    }
                }
            }
        }
        for &key in &c.counted_keys {
            if (open_world || treqs.get(key).is_some())
                && single(treqs, key).is_none()
                && !open.contains(&key)
            {
                open.push(key);
            }
        }
        if open.is_empty() {
            return Ok(Vec::new());
        }
        let mut pins = Vec::with_capacity(open.len());
        for key in open {
            let mut cands = self.candidates(treqs, key).unwrap_or_default();
            let mut first_spread: Option<usize> = None;
            for con in cons.iter().filter(|k| k.key == key) {
                cands.retain(|&d| self.allows(con, d, key == self.hostname));
                if cands.is_empty() {
                    return Err(Refusal::Topology {
                        group: con.con,
                        key,
                    });
                }
                if let Constraint::Group(g) = con.con
                    && first_spread.is_none()
                    && matches!(self.groups[g].def.kind, Kind::Spread { .. })
                {
                    first_spread = Some(g);
                }
            }
            // Spread pods take the least-populated valid domain; otherwise balance the first
            // group that counts this pod.
            let order_by = first_spread.or_else(|| {
                c.counted_by
                    .iter()
                    .copied()
                    .find(|&g| self.groups[g].def.key == key)
            });
            // Ties go to the domain whose name sorts first, never to the lowest id: ids follow
            // the order the snapshot lists strings in (see the module header).
            let name = |d: u32| self.interner.name(d);
            let count = |d: u32| order_by.map_or(0, |g| self.groups[g].count(d));
            let best = cands
                .iter()
                .copied()
                .min_by(|&a, &b| count(a).cmp(&count(b)).then_with(|| name(a).cmp(name(b))));
            match best {
                Some(d) => pins.push((key, d)),
                None => return Err(Refusal::MissingTopologyKey(key)),
            }
        }
        Ok(pins)
    }

    pub(crate) fn describe_refusal(&self, c: &Class, r: &Refusal) -> String {
        match r {
            Refusal::Taint(t) => format!("taint {t} is not tolerated"),
            Refusal::Quiet => "refused".to_string(),
            Refusal::Requirements(s) => format!("requirements: {s}"),
            Refusal::MissingTopologyKey(k) => {
                format!(
                    "no node here carries the topology key {}",
                    self.interner.name(*k)
                )
            }
            Refusal::HostPort(p) => format!("host port {p} is already in use"),
            Refusal::MinValues(k) => {
                format!(
                    "minValues for {} cannot be met by the remaining instance types",
                    self.interner.name(*k)
                )
            }
            Refusal::Resources(rs) => {
                let names: Vec<String> = rs
                    .iter()
                    .map(|&r| {
                        let n = self.names.name(r as u32);
                        format!("{n}={}", crate::resources::format_amount(n, c.requests[r]))
                    })
                    .collect();
                format!("not enough {}", names.join(", "))
            }
            Refusal::Topology { group, key } => {
                let key_name = self.interner.name(*key);
                match group {
                    Constraint::Inverse(_) => {
                        format!(
                            "the anti-affinity of running pods excludes every {key_name} domain available"
                        )
                    }
                    Constraint::Group(g) => {
                        let grp = &self.groups[*g];
                        let domains: Vec<u32> = if *key == self.hostname {
                            Vec::new()
                        } else {
                            grp.eligible.clone()
                        };
                        let counts = if domains.is_empty() {
                            String::new()
                        } else {
                            format!(
                                " (matching pods per domain: {})",
                                grp.describe_counts(&domains, &self.interner)
                            )
                        };
                        match grp.def.kind {
                            Kind::Spread { max_skew, .. } => format!(
                                "topology spread on {key_name} (maxSkew {max_skew}) leaves no domain that keeps the skew{counts}"
                            ),
                            Kind::Affinity => format!(
                                "pod affinity on {key_name}: no domain here runs a matching pod{counts}"
                            ),
                            Kind::AntiAffinity => format!(
                                "pod anti-affinity on {key_name}: every domain here already runs a matching pod{counts}"
                            ),
                        }
                    }
                }
            }
        }
    }

    pub(crate) fn it_key_ok(&self, pool: usize, it: usize, reqs: &Reqs, key: u32) -> bool {
        let itc = &self.pools[pool].its[it];
        if key == self.zone || key == self.capacity_type {
            return self.offering(pool, it, reqs).is_some();
        }
        let (Some(a), Some(b)) = (itc.reqs.get(key), reqs.get(key)) else {
            return true;
        };
        if a.overlaps(b, &self.interner) {
            return true;
        }
        use crate::requirements::Operator::{DoesNotExist, NotIn};
        matches!(a.operator(), NotIn | DoesNotExist) && matches!(b.operator(), NotIn | DoesNotExist)
    }

    /// The cheapest available offering of `it` compatible with `reqs`: (price, index).
    pub(crate) fn offering(&self, pool: usize, it: usize, reqs: &Reqs) -> Option<(f64, usize)> {
        let itc = &self.pools[pool].its[it];
        let zones = reqs.get(self.zone);
        let cts = reqs.get(self.capacity_type);
        for (i, o) in itc.offerings.iter().enumerate() {
            if !o.available
                || zones.is_some_and(|z| !z.has(o.zone, &self.interner))
                || cts.is_some_and(|z| !z.has(o.capacity_type, &self.interner))
            {
                continue;
            }
            return Some((o.price, i));
        }
        None
    }

    /// The cheapest instance type in `bits` (price order) that fits `used + req`.
    pub(crate) fn first_fit_plus(
        &self,
        pool: usize,
        bits: &Bitset,
        reqs: &Reqs,
        used: &[i64],
        req: &[i64],
    ) -> Option<(usize, f64)> {
        let p = &self.pools[pool];
        let mut best: Option<(usize, f64)> = None;
        for it in bits.iter() {
            let itc = &p.its[it];
            if best.is_some_and(|(_, bp)| itc.base_price >= bp) {
                break;
            }
            if !super::compile::fits_plus(used, req, &itc.alloc) {
                continue;
            }
            if let Some((price, _)) = self.offering(pool, it, reqs)
                && best.is_none_or(|(_, bp)| price < bp)
            {
                best = Some((it, price));
            }
        }
        best
    }

    /// The cheapest instance type in `bits` (price order) that fits `total`, with its price.
    pub(crate) fn first_fit(
        &self,
        pool: usize,
        bits: &Bitset,
        reqs: &Reqs,
        total: &[i64],
    ) -> Option<(usize, f64)> {
        let p = &self.pools[pool];
        let mut best: Option<(usize, f64)> = None;
        for it in bits.iter() {
            let itc = &p.its[it];
            if best.is_some_and(|(_, bp)| itc.base_price >= bp) {
                break;
            }
            if !fits(total, &itc.alloc) {
                continue;
            }
            if let Some((price, _)) = self.offering(pool, it, reqs)
                && best.is_none_or(|(_, bp)| price < bp)
            {
                best = Some((it, price));
            }
        }
        best
    }

    /// Distinct values of `key` among `bits`' instance types.
    pub(crate) fn distinct_values(&self, pool: usize, bits: &Bitset, key: u32) -> usize {
        let mut vals: Vec<u32> = Vec::new();
        for it in bits.iter() {
            if let Some(set) = self.pools[pool].its[it].reqs.get(key)
                && !set.complement
            {
                vals.extend_from_slice(&set.values);
            }
        }
        vals.sort_unstable();
        vals.dedup();
        vals.len()
    }

    pub(crate) fn min_values_ok(&self, pool: usize, bits: &Bitset, reqs: &Reqs) -> Result<(), u32> {
        for r in &reqs.items {
            if let Some(n) = r.min_values
                && self.distinct_values(pool, bits, r.key) < n as usize
            {
                return Err(r.key);
            }
        }
        Ok(())
    }

    pub(crate) fn allow_undefined(&self, key: u32) -> bool {
        self.allow_undefined
            .get(key as usize)
            .copied()
            .unwrap_or(false)
    }
}

/// `a + m * b`
pub(crate) fn add_scaled(a: &[i64], b: &[i64], m: i64) -> Res {
    a.iter().zip(b).map(|(x, y)| x + m * y).collect()
}

/// How many more copies of `req` fit in `alloc - total`.
pub(crate) fn more_fitting(total: &[i64], req: &[i64], alloc: &[i64]) -> i64 {
    let mut n = i64::MAX;
    for ((t, r), a) in total.iter().zip(req).zip(alloc) {
        if *r > 0 {
            n = n.min((a - t).max(0) / r);
        }
    }
    n
}

/// Taint refusal, if any.
pub(crate) fn taint_refusal(
    c: &Class,
    taints: &[crate::taints::Taint],
    relax: &Relax,
) -> Option<Refusal> {
    untolerated(&c.tolerations, taints, relax.prefer_no_schedule)
        .map(|t| Refusal::Taint(t.to_string()))
}
