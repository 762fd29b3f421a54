//! Carrying out a choice: filling an existing target or a claim, opening and narrowing
//! claims, and counting the placed pods in the topology groups that select them.

use super::*;

impl Engine<'_> {
    pub(super) fn apply(&mut self, ci: usize, choice: Choice, pods: &[usize]) {
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
    pub(super) fn fill_existing(
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
    pub(super) fn open_claim(&mut self, p: usize, reqs: Option<&Reqs>) -> usize {
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
    pub(super) fn narrow_claim(
        &mut self,
        k: usize,
        reqs: Option<Reqs>,
        pins: &Pins,
        bits: Option<Bitset>,
    ) {
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
    pub(super) fn fill_claim(
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
    pub(super) fn counted_labels(&self, tgt: Tgt) -> Option<(Reqs, Vec<crate::taints::Taint>)> {
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
    pub(super) fn record_topology(
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
}
