//! Where the next pods of a class go: an existing node with room, a claim this run already
//! opened (the tightest fit, or the cheapest growth), or a new claim from a NodePool; the
//! targets found dead for a class at a relaxation level are not asked again.

use super::*;

impl Engine<'_> {
    /// Tries one step for class `ci`: places 1..=want pods somewhere or says why not.
    pub(super) fn step(
        &mut self,
        ci: usize,
        relax: &Relax,
        want: usize,
    ) -> Result<Choice, Vec<String>> {
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
    pub(super) fn existing_with_room(
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
                    || self.dead_existing[ci].get(relax.level, ei)
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
            self.dead_existing[ci].set(relax.level, ei);
        }
        found
    }

    /// Step 2: this run's new claims: one with room at its current price
    /// ([`Self::tightest_claim_with_room`]), else the one that grows cheapest
    /// ([`Self::cheapest_claim_growth`]). Claims that can never take the class are
    /// remembered either way.
    pub(super) fn claim_choice(
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
                self.dead[ci].set(relax.level, k);
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
    pub(super) fn tightest_claim_with_room(
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
            if self.dead[ci].get(relax.level, k) {
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
    pub(super) fn cheapest_claim_growth(
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
            if self.dead[ci].get(relax.level, k) || get_bit(dead, k) {
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
    pub(super) fn new_claim_choice(
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

    /// Room left on claim `k`'s instance type `it` after adding `req` (cpu and memory fractions).
    pub(super) fn slack_after(&self, k: usize, it: usize, req: &[i64]) -> f64 {
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

    pub(super) fn summarise_existing(&self, c: &Class, refusals: &[Refusal]) -> String {
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
}
