//! Turning the solver's state into a [`Plan`]: claims with their options ranked by price,
//! placements by pod, and reasons sorted by pod.

use super::*;
use std::collections::{BTreeMap, HashMap, HashSet};

/// Instances a reservation has left, by reservation id, as claims are written in order.
type Held = HashMap<String, u32>;

/// A claim's options as `(price, instance type, offering)`, cheapest first.
type Ranked = Vec<(f64, usize, usize)>;

/// The claims written so far: what the plan lists, where each engine claim went, the zones
/// named, and the pods that lost their node.
#[derive(Default)]
struct Written {
    new_claims: Vec<NewClaim>,
    /// Per engine claim, its index in `new_claims` (`usize::MAX`: none).
    claim_index: Vec<usize>,
    /// Zone value to its index in the plan's `zone_names`, in order of first use.
    zone_ids: BTreeMap<u32, u32>,
    lost: Vec<(usize, String)>,
}

impl Engine<'_> {
    pub(crate) fn finish(self, s: &crate::model::Snapshot, unplaced: Vec<(usize, String)>) -> Plan {
        let w = &*self.w;
        let written = self.write_claims(s);
        let placements = self.plan_placements(s, &written);
        let mut unplaced: Vec<Unplaced> = unplaced
            .into_iter()
            .chain(written.lost)
            .map(|(pi, reason)| Unplaced {
                pod: s.pods[pi].key(),
                reason,
            })
            .collect();
        unplaced.sort_by(|a, b| a.pod.cmp(&b.pod));
        let cost = written
            .new_claims
            .iter()
            .filter_map(|c| c.cheapest().map(|o| o.price))
            .sum();
        let mut zone_names = vec![String::new(); written.zone_ids.len()];
        for (&z, &i) in &written.zone_ids {
            zone_names[i as usize] = w.interner.name(z).to_string();
        }
        Plan {
            placements,
            new_claims: written.new_claims,
            unplaced,
            pods: w.pods_considered,
            cost,
            lower_bound: 0.0,
            instance_type_names: w.type_names.names.clone(),
            zone_names,
        }
    }

    /// Every claim that took pods, in claim order: in order because each one's reserved
    /// instances are no longer there for the claims after it.
    fn write_claims(&self, s: &crate::model::Snapshot) -> Written {
        let mut out = Written {
            claim_index: vec![usize::MAX; self.claims.len()],
            ..Written::default()
        };
        let mut held = Held::new();
        for (k, cl) in self.claims.iter().enumerate() {
            if cl.pods.is_empty() {
                continue;
            }
            let p = &self.w.pools[cl.pool];
            let options = self.ranked_options(cl, &held);
            if let Some(&(_, it, o)) = options.first()
                && let Some((id, Some(cap))) = &p.its[it].offerings[o].reservation
            {
                let left = held.entry(id.clone()).or_insert(*cap);
                *left = left.saturating_sub(1);
            }
            if options.is_empty() {
                // Its only offerings were reservations that earlier claims now hold.
                for &pi in &cl.pods {
                    out.lost.push((pi, format!(
                        "NodePool {}: the reserved capacity this node needs is taken by other new nodes",
                        p.name
                    )));
                }
                continue;
            }
            out.claim_index[k] = out.new_claims.len();
            let claim = self.new_claim(s, cl, &options, &mut out.zone_ids);
            out.new_claims.push(claim);
        }
        out
    }

    /// Claim `cl`'s options, each at its cheapest offering not used up by `held`, ranked.
    /// Reserved offerings are only as deep as their reservation: once the claims before this
    /// one hold every free instance, this claim prices its options without them.
    fn ranked_options(&self, cl: &Claim, held: &Held) -> Ranked {
        let w = &*self.w;
        let p = &w.pools[cl.pool];
        let mut options: Ranked = cl
            .bits
            .iter()
            .filter_map(|it| {
                let o = w.offering(cl.pool, it, &cl.reqs)?;
                let off = &p.its[it].offerings[o.1];
                if !reservation_exhausted(off, held) {
                    return Some((o.0, it, o.1));
                }
                let zones = cl.reqs.get(w.zone);
                let cts = cl.reqs.get(w.capacity_type);
                p.its[it]
                    .offerings
                    .iter()
                    .enumerate()
                    .find(|(_, x)| {
                        x.available
                            && !reservation_exhausted(x, held)
                            && zones.is_none_or(|z| z.has(x.zone, &w.interner))
                            && cts.is_none_or(|z| z.has(x.capacity_type, &w.interner))
                    })
                    .map(|(i, x)| (x.price, it, i))
            })
            .collect();
        // Ties keep the NodePool's ranking (cheapest offering anywhere, then name).
        options.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        options.truncate(self.opts.max_instance_types);
        options
    }

    /// Claim `cl` as the plan lists it, with its ranked `options` (not empty); zones get ids
    /// in `zone_ids` as they are first named.
    fn new_claim(
        &self,
        s: &crate::model::Snapshot,
        cl: &Claim,
        options: &Ranked,
        zone_ids: &mut BTreeMap<u32, u32>,
    ) -> NewClaim {
        let w = &*self.w;
        let p = &w.pools[cl.pool];
        let instance_types: Vec<InstanceOption> = options
            .iter()
            .map(|&(price, it, o)| {
                let off = &p.its[it].offerings[o];
                let next = zone_ids.len() as u32;
                InstanceOption {
                    instance_type: w.type_names.pool_ids[cl.pool][it],
                    zone: *zone_ids.entry(off.zone).or_insert(next),
                    capacity_type: off.ct,
                    price,
                }
            })
            .collect();
        // The hostname is a placeholder of this solve, not something the node must match.
        let mut reqs = cl.reqs.clone();
        reqs.items.retain(|r| r.key != w.hostname);
        let requirement_list = reqs.to_requirements(&w.interner);
        let mut requirements = reqs.describe(&w.interner);
        requirements.sort();
        let mut requests = crate::scheduling::compile::sparse(&cl.used, &w.names);
        if let Some(&(_, it, _)) = options.first() {
            requests.add(&crate::scheduling::compile::sparse(
                &p.its[it].daemon,
                &w.names,
            ));
        }
        let mut kept = super::Bitset::empty(p.its.len());
        for &(_, it, _) in options {
            kept.insert(it);
        }
        let min_values_relaxed = w.min_values_ok(cl.pool, &kept, &cl.reqs).is_err();
        NewClaim {
            nodepool: p.name.clone(),
            requirements,
            requirement_list,
            instance_types,
            pods: cl.pods.iter().map(|&i| s.pods[i].key()).collect(),
            requests,
            min_values_relaxed,
        }
    }

    /// Every placement by pod, in placement order, except the pods whose claim lost its
    /// reserved capacity.
    fn plan_placements(&self, s: &crate::model::Snapshot, written: &Written) -> Vec<Placement> {
        let w = &*self.w;
        let lost_pods: HashSet<usize> = written.lost.iter().map(|l| l.0).collect();
        self.placements
            .iter()
            .filter(|(pi, _)| !lost_pods.contains(pi))
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
                    Tgt::Claim(k) | Tgt::NewClaim(k) => Target::NewClaim(written.claim_index[k]),
                },
            })
            .collect()
    }
}

fn reservation_exhausted(o: &crate::scheduling::compile::OfferingC, held: &Held) -> bool {
    match &o.reservation {
        Some((id, Some(_))) => held.get(id).is_some_and(|&left| left == 0),
        _ => false,
    }
}
