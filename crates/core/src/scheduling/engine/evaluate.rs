//! Whether one target can take one more pod of a class: existing nodes (strict label match),
//! this run's claims (price change if it does) and a fresh claim from a NodePool.

use super::*;

impl Engine<'_> {
    /// Checks existing node `ei`. Without `explain` the refusal carries no text, so the hot
    /// path allocates nothing; the failure summary asks again with `explain`.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::scheduling) fn eval_existing(
        &self,
        c: &Class,
        cons: &[Con],
        alts: &[Reqs],
        relax: &Relax,
        ei: usize,
        want: usize,
        explain: bool,
    ) -> Result<(usize, ()), Refusal> {
        let e = &self.w.existing[ei];
        let used = &self.w.existing_used[ei];
        if !fits_plus(used, &c.requests, &e.available) {
            if !explain {
                return Err(Refusal::Quiet);
            }
            let short = (0..used.len())
                .filter(|&r| c.requests[r] > 0 && used[r] + c.requests[r] > e.available[r])
                .collect();
            return Err(Refusal::Resources(short));
        }
        if !e.taints.is_empty()
            && let Some(r) = taint_refusal(c, &e.taints, relax)
        {
            return Err(if explain { r } else { Refusal::Quiet });
        }
        if !c.host_ports.is_empty()
            && let Some(p) = ports_conflict(&c.host_ports, &self.w.existing_ports[ei])
        {
            return Err(Refusal::HostPort(p));
        }
        let ok = alts
            .iter()
            .any(|a| a.items.is_empty() || e.reqs.compatible_ok(a, &self.w.interner, &|_| false));
        if !ok {
            if !explain {
                return Err(Refusal::Quiet);
            }
            let last = alts
                .iter()
                .find_map(|a| e.reqs.compatible(a, &self.w.interner, &|_| false).err());
            return Err(Refusal::Requirements(
                last.map(|c| c.describe(&self.w.interner))
                    .unwrap_or_default(),
            ));
        }
        self.w.topology(c, cons, &e.reqs, false)?;
        let m = if want > 1 {
            let total = add_scaled(used, &c.requests, 1);
            pods_fitting(&total, &c.requests, &e.available, want)
        } else {
            1
        };
        Ok((m, ()))
    }

    /// Evaluates claim `k` for one more pod. With `zero_only`, only a placement that keeps the
    /// claim's launch price is accepted, and nothing is allocated on the way. `Err(true)`: the
    /// claim can never take the class at this relaxation level.
    pub(super) fn eval_claim(
        &self,
        c: &Class,
        cons: &[Con],
        alts: &[Reqs],
        relax: &Relax,
        k: usize,
        zero_only: bool,
    ) -> Result<Eval, bool> {
        let cl = &self.claims[k];
        self.claim_can_hold(c, cl, relax, zero_only)?;
        // The claim is written off for good only when that is certain: a single alternative,
        // refused by a permanent topology constraint.
        let mut permanent = alts.len() == 1;
        let allow = |key: u32| self.w.allow_undefined(key);
        for alt in alts {
            if !alt.items.is_empty() && cl.reqs.compatible(alt, &self.w.interner, &allow).is_err() {
                permanent = false;
                continue;
            }
            let (mut merged, mut changed) = self.merged_with(cl, alt);
            let pins = match self
                .w
                .topology(c, cons, merged.as_ref().unwrap_or(&cl.reqs), true)
            {
                Ok(p) => p,
                Err(Refusal::Topology { group, .. }) => {
                    permanent &= cons.iter().any(|x| x.con == group && x.permanent);
                    continue;
                }
                Err(_) => {
                    permanent = false;
                    continue;
                }
            };
            permanent = false;
            if !pins.is_empty() {
                let m = merged.get_or_insert_with(|| cl.reqs.clone());
                for &(key, v) in &pins {
                    m.add(key, ValueSet::one(v), None, &self.w.interner);
                    changed.push(key);
                }
            }
            let bits = merged
                .as_ref()
                .map(|m| self.options_still_allowed(cl, m, &changed));
            if let Some(e) = self.priced_claim(c, k, merged, bits, pins, zero_only) {
                return Ok(e);
            }
        }
        Err(permanent)
    }

    /// Whether claim `cl` has room, tolerable taints and free host ports for one more pod of
    /// `c`, before any requirement is looked at. `Err(true)`: it never will, as the room of
    /// its largest option only shrinks and its ports only fill.
    fn claim_can_hold(
        &self,
        c: &Class,
        cl: &Claim,
        relax: &Relax,
        zero_only: bool,
    ) -> Result<(), bool> {
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
        Ok(())
    }

    /// Claim `cl`'s requirements merged with `alt` and the keys that changed, or `None` (no
    /// copy made) when the merge would change nothing.
    fn merged_with(&self, cl: &Claim, alt: &Reqs) -> (Option<Reqs>, Vec<u32>) {
        if alt.items.is_empty() || !cl.reqs.would_change(alt, &self.w.interner) {
            return (None, Vec::new());
        }
        let mut m = cl.reqs.clone();
        let changed = m.merge(alt, &self.w.interner);
        if changed.is_empty() {
            (None, changed)
        } else {
            (Some(m), changed)
        }
    }

    /// Claim `cl`'s options that still suit `merged` on every `changed` key.
    fn options_still_allowed(&self, cl: &Claim, merged: &Reqs, changed: &[u32]) -> Bitset {
        let mut b = cl.bits.clone();
        for it in cl.bits.iter() {
            if !changed
                .iter()
                .all(|&key| self.w.it_key_ok(cl.pool, it, merged, key))
            {
                b.remove(it);
            }
        }
        b
    }

    /// Claim `k` with one more pod of `c` under requirements `merged` and options `bits`
    /// (`None`: the claim's own): its price change and slack, or `None` when no option takes
    /// the pod, minValues would break, or `zero_only` and the price would rise.
    fn priced_claim(
        &self,
        c: &Class,
        k: usize,
        merged: Option<Reqs>,
        bits: Option<Bitset>,
        pins: Pins,
        zero_only: bool,
    ) -> Option<Eval> {
        let cl = &self.claims[k];
        let reqs_ref = merged.as_ref().unwrap_or(&cl.reqs);
        let bits_ref = bits.as_ref().unwrap_or(&cl.bits);
        if zero_only && merged.is_none() {
            // The current cheapest type still fits: the launch price does not move.
            if !self.min_values_hold(cl, bits_ref, reqs_ref, &c.requests) {
                return None;
            }
            return Some(Eval {
                marginal: 0.0,
                slack: 0.0,
                reqs: None,
                bits: None,
                pins,
                first: cl.cheapest,
            });
        }
        let (first, price) =
            self.w
                .first_fit_plus(cl.pool, bits_ref, reqs_ref, &cl.used, &c.requests)?;
        if zero_only && price > cl.price + 1e-12 {
            return None;
        }
        if !self.min_values_hold(cl, bits_ref, reqs_ref, &c.requests) {
            return None;
        }
        Some(Eval {
            marginal: price - cl.price,
            slack: self.slack_after(k, first, &c.requests),
            reqs: merged,
            bits,
            pins,
            first,
        })
    }

    /// Whether claim `cl`'s NodePool minValues still hold once one more pod of size `req`
    /// thins out options `bits`; true when the NodePool sets none.
    fn min_values_hold(&self, cl: &Claim, bits: &Bitset, reqs: &Reqs, req: &[i64]) -> bool {
        if !self.w.pools[cl.pool].min_values {
            return true;
        }
        let total = add_scaled(&cl.used, req, 1);
        self.min_values_after(cl.pool, bits, reqs, &total)
    }

    pub(super) fn min_values_after(
        &self,
        pool: usize,
        bits: &Bitset,
        reqs: &Reqs,
        total: &[i64],
    ) -> bool {
        let mut nb = bits.clone();
        for it in bits.iter() {
            if !fits(total, &self.w.pools[pool].its[it].alloc) {
                nb.remove(it);
            }
        }
        self.opts.min_values_best_effort || self.w.min_values_ok(pool, &nb, reqs).is_ok()
    }

    pub(super) fn remaining_limit(&self, p: usize) -> Vec<Option<i64>> {
        let pool = &self.w.pools[p];
        pool.limits
            .iter()
            .enumerate()
            .map(|(r, l)| l.map(|l| l - pool.used[r] - self.pool_charged[p][r]))
            .collect()
    }

    /// Evaluates a fresh claim from NodePool `p`, with hostname `host`, for one pod of `c`:
    /// its requirements, options, topology pins and cheapest option under the first
    /// alternative that works, or why none does (the last alternative's reason).
    pub(in crate::scheduling) fn eval_new(
        &self,
        c: &Class,
        cons: &[Con],
        alts: &[Reqs],
        relax: &Relax,
        p: usize,
        host: u32,
    ) -> Result<(Reqs, Bitset, Pins, usize), String> {
        self.pool_can_open(c, relax, p)?;
        let mut last = String::new();
        for alt in alts {
            match self.new_claim_under(c, cons, alt, p, host) {
                Ok(claim) => return Ok(claim),
                Err(why) => last = why,
            }
        }
        Err(last)
    }

    /// Whether NodePool `p` can open a node for `c` at all, whatever its requirements: node
    /// limit, taints, daemonset host ports, any instance type.
    fn pool_can_open(&self, c: &Class, relax: &Relax, p: usize) -> Result<(), String> {
        let pool = &self.w.pools[p];
        if let Some(limit) = pool.node_limit
            && pool.used_nodes + self.pool_claims[p] >= limit
        {
            return Err(format!("limit nodes={limit} is reached"));
        }
        if let Some(r) = taint_refusal(c, &pool.taints, relax) {
            return Err(self.w.describe_refusal(c, &r));
        }
        if let Some(port) = ports_conflict(&c.host_ports, &pool.daemon_ports) {
            return Err(format!(
                "host port {port} is held by a daemonset on every node"
            ));
        }
        if pool.its.is_empty() {
            return Err("no instance types are available".to_string());
        }
        Ok(())
    }

    /// A fresh claim from NodePool `p` under node requirements `alt`, as [`Self::eval_new`].
    fn new_claim_under(
        &self,
        c: &Class,
        cons: &[Con],
        alt: &Reqs,
        p: usize,
        host: u32,
    ) -> Result<(Reqs, Bitset, Pins, usize), String> {
        let pool = &self.w.pools[p];
        let allow = |key: u32| self.w.allow_undefined(key);
        if let Err(conf) = pool.reqs.compatible(alt, &self.w.interner, &allow) {
            return Err(format!("requirements: {}", conf.describe(&self.w.interner)));
        }
        let mut reqs = pool.reqs.clone();
        reqs.merge(alt, &self.w.interner);
        reqs.add(self.w.hostname, ValueSet::one(host), None, &self.w.interner);
        let pins = self
            .w
            .topology(c, cons, &reqs, true)
            .map_err(|r| self.w.describe_refusal(c, &r))?;
        for &(key, v) in &pins {
            reqs.add(key, ValueSet::one(v), None, &self.w.interner);
        }
        let mut bits = self.new_claim_options(c, p, &reqs)?;
        if let (Err(key), false) = (
            self.w.min_values_ok(p, &bits, &reqs),
            self.opts.min_values_best_effort,
        ) {
            return Err(self.w.describe_refusal(c, &Refusal::MinValues(key)));
        }
        let no_offering = || "no available offering".to_string();
        let (mut first, _) = self
            .w
            .first_fit(p, &bits, &reqs, &c.requests)
            .ok_or_else(no_offering)?;
        // Settle every topology key now (zone from the cheapest offering), so later pods
        // check this claim's domains with plain lookups and every count is exact.
        let settled = self.settle_topology_keys(p, first, &mut reqs);
        if !settled.is_empty() {
            for it in bits.clone().iter() {
                if !settled
                    .iter()
                    .all(|&key| self.w.it_key_ok(p, it, &reqs, key))
                {
                    bits.remove(it);
                }
            }
            (first, _) = self
                .w
                .first_fit(p, &bits, &reqs, &c.requests)
                .ok_or_else(no_offering)?;
        }
        Ok((reqs, bits, pins, first))
    }

    /// NodePool `p`'s instance types that suit `reqs`, have an offering, fit one pod of `c`
    /// and stay within the NodePool's limits; when none does, how far they got.
    fn new_claim_options(&self, c: &Class, p: usize, reqs: &Reqs) -> Result<Bitset, String> {
        let pool = &self.w.pools[p];
        let remaining = self.remaining_limit(p);
        let n = pool.its.len();
        let mut bits = Bitset::empty(n);
        let mut tally = OptionTally::default();
        for it in 0..n {
            let itc = &pool.its[it];
            if pool.reqs.items.len() + reqs.items.len() > 0
                && itc.reqs.intersects(reqs, &self.w.interner).is_err()
            {
                continue;
            }
            tally.compat += 1;
            if self.w.offering(p, it, reqs).is_none() {
                continue;
            }
            tally.offer += 1;
            if tally
                .largest
                .is_none_or(|l| itc.alloc[0] > pool.its[l].alloc[0])
            {
                tally.largest = Some(it);
            }
            if !fits(&c.requests, &itc.alloc) {
                continue;
            }
            tally.fit += 1;
            if let Some((r, _)) = remaining
                .iter()
                .enumerate()
                .find(|(r, rem)| rem.is_some_and(|x| itc.capacity[*r] > x))
            {
                tally.limited = Some(self.limit_reason(p, r, &remaining));
                continue;
            }
            bits.insert(it);
        }
        if bits.is_empty() {
            return Err(self.no_option_reason(c, p, reqs, tally));
        }
        Ok(bits)
    }

    /// Why NodePool `p`'s limit on resource `r` keeps a type from a new node.
    fn limit_reason(&self, p: usize, r: usize, remaining: &[Option<i64>]) -> String {
        let name = self.w.names.name(r as u32);
        let fmt = |v: i64| crate::resources::format_amount(name, v);
        format!(
            "limit {name}={} leaves {} for a new node, too little for any type that fits \
             (existing nodes and this plan's claims count at their largest option)",
            fmt(self.w.pools[p].limits[r].unwrap_or(0)),
            fmt(remaining[r].unwrap_or(0).max(0))
        )
    }

    /// Why NodePool `p` offers a fresh claim under `reqs` no option: the first of the filters
    /// of [`Self::new_claim_options`] that let no type through.
    fn no_option_reason(&self, c: &Class, p: usize, reqs: &Reqs, tally: OptionTally) -> String {
        let pool = &self.w.pools[p];
        if tally.compat == 0 {
            let mut why = String::from("no instance type is compatible with the requirements");
            if let Some(it) = pool.its.first()
                && let Err(conf) = it.reqs.intersects(reqs, &self.w.interner)
            {
                why = format!(
                    "{why} (e.g. {}: {})",
                    it.name,
                    conf.describe(&self.w.interner)
                );
            }
            why
        } else if tally.offer == 0 {
            format!(
                "{} compatible instance types but none has an available offering in the required zones/capacity types",
                tally.compat
            )
        } else if tally.fit == 0 {
            let req = crate::scheduling::compile::sparse(&c.requests, &self.w.names);
            let big = tally
                .largest
                .map(|l| {
                    format!(
                        "; largest is {} with {}",
                        pool.its[l].name,
                        crate::scheduling::compile::sparse(&pool.its[l].alloc, &self.w.names)
                    )
                })
                .unwrap_or_default();
            format!("no instance type fits requests {req} (after daemonset overhead){big}")
        } else {
            tally
                .limited
                .unwrap_or_else(|| "limits exhausted".to_string())
        }
    }

    /// Pins every topology key `reqs` leaves open on a fresh claim from NodePool `p` whose
    /// cheapest option is `first`; returns the keys pinned.
    fn settle_topology_keys(&self, p: usize, first: usize, reqs: &mut Reqs) -> Vec<u32> {
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
            let value = if key == self.w.zone {
                self.least_claimed_cheap_zone(p, first, reqs)
            } else if key == self.w.capacity_type {
                self.w
                    .offering(p, first, reqs)
                    .map(|(_, o)| self.w.pools[p].its[first].offerings[o].capacity_type)
            } else {
                // The allowed value whose name sorts first, not the lowest id.
                self.w.universe[&key]
                    .iter()
                    .map(|x| x.0)
                    .filter(|&v| reqs.get(key).is_none_or(|s| s.has(v, &self.w.interner)))
                    .min_by(|&a, &b| self.w.interner.name(a).cmp(self.w.interner.name(b)))
            };
            if let Some(v) = value {
                reqs.add(key, ValueSet::one(v), None, &self.w.interner);
                settled.push(key);
            }
        }
        settled
    }

    /// Among the zones where instance type `first` of NodePool `p` is offered at its cheapest
    /// price under `reqs`, the one with the fewest new claims, so zonal pods that come later
    /// find room in every zone.
    fn least_claimed_cheap_zone(&self, p: usize, first: usize, reqs: &Reqs) -> Option<u32> {
        let it = &self.w.pools[p].its[first];
        self.w.offering(p, first, reqs).map(|(price, _)| {
            let zones = reqs.get(self.w.zone);
            let cts = reqs.get(self.w.capacity_type);
            it.offerings
                .iter()
                .filter(|o| {
                    o.available
                        && o.price <= price + 1e-12
                        && zones.is_none_or(|z| z.has(o.zone, &self.w.interner))
                        && cts.is_none_or(|z| z.has(o.capacity_type, &self.w.interner))
                })
                .map(|o| o.zone)
                .min_by(|a, b| {
                    // Ties by name, not id (see `solver`'s header).
                    let claims = |z| self.zone_claims.get(z).copied().unwrap_or(0);
                    let name = |z: &u32| self.w.interner.name(*z);
                    claims(a).cmp(&claims(b)).then_with(|| name(a).cmp(name(b)))
                })
                .unwrap_or(it.offerings[0].zone)
        })
    }
}

/// How far a NodePool's instance types got towards being a fresh claim's option: counts past
/// each filter, the largest offered type, and the last limit that turned one away.
#[derive(Default)]
struct OptionTally {
    compat: usize,
    offer: usize,
    fit: usize,
    largest: Option<usize>,
    limited: Option<String>,
}
