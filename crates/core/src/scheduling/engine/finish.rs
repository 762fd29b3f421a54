//! Turning the solver's state into a [`Plan`]: claims with their options ranked by price,
//! placements by pod, and reasons sorted by pod.

use super::*;

impl Engine<'_> {
    pub(crate) fn finish(self, s: &crate::model::Snapshot, unplaced: Vec<(usize, String)>) -> Plan {
        let w = &*self.w;
        let mut new_claims = Vec::new();
        let mut claim_index = vec![usize::MAX; self.claims.len()];
        let instance_type_names = w.type_names.names.clone();
        let pool_type_ids = &w.type_names.pool_ids;
        let mut zone_ids: std::collections::BTreeMap<u32, u32> = std::collections::BTreeMap::new();
        let mut held: std::collections::HashMap<String, u32> = std::collections::HashMap::new();
        let mut lost: Vec<(usize, String)> = Vec::new();
        for (k, cl) in self.claims.iter().enumerate() {
            if cl.pods.is_empty() {
                continue;
            }
            let p = &w.pools[cl.pool];
            // Reserved offerings are only as deep as their reservation: once the claims before
            // this one hold every free instance, this claim prices its options without them.
            let mut options: Vec<(f64, usize, usize)> = cl
                .bits
                .iter()
                .filter_map(|it| {
                    let o = w.offering(cl.pool, it, &cl.reqs)?;
                    let off = &p.its[it].offerings[o.1];
                    if !reservation_exhausted(off, &held) {
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
                                && !reservation_exhausted(x, &held)
                                && zones.is_none_or(|z| z.has(x.zone, &w.interner))
                                && cts.is_none_or(|z| z.has(x.capacity_type, &w.interner))
                        })
                        .map(|(i, x)| (x.price, it, i))
                })
                .collect();
            // Ties keep the NodePool's ranking (cheapest offering anywhere, then name).
            options.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            options.truncate(self.opts.max_instance_types);
            if let Some(&(_, it, o)) = options.first()
                && let Some((id, Some(cap))) = &p.its[it].offerings[o].reservation
            {
                let left = held.entry(id.clone()).or_insert(*cap);
                *left = left.saturating_sub(1);
            }
            let instance_types: Vec<InstanceOption> = options
                .iter()
                .map(|&(price, it, o)| {
                    let off = &p.its[it].offerings[o];
                    let next = zone_ids.len() as u32;
                    InstanceOption {
                        instance_type: pool_type_ids[cl.pool][it],
                        zone: *zone_ids.entry(off.zone).or_insert(next),
                        capacity_type: off.ct,
                        price,
                    }
                })
                .collect();
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
            if instance_types.is_empty() {
                // Its only offerings were reservations that earlier claims now hold.
                for &pi in &cl.pods {
                    lost.push((pi, format!(
                        "NodePool {}: the reserved capacity this node needs is taken by other new nodes",
                        p.name
                    )));
                }
                continue;
            }
            claim_index[k] = new_claims.len();
            let mut kept = super::Bitset::empty(p.its.len());
            for &(_, it, _) in &options {
                kept.insert(it);
            }
            let min_values_relaxed = w.min_values_ok(cl.pool, &kept, &cl.reqs).is_err();
            new_claims.push(NewClaim {
                nodepool: p.name.clone(),
                requirements,
                requirement_list,
                instance_types,
                pods: cl.pods.iter().map(|&i| s.pods[i].key()).collect(),
                requests,
                min_values_relaxed,
            });
        }
        let lost_pods: std::collections::HashSet<usize> = lost.iter().map(|l| l.0).collect();
        let placements = self
            .placements
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
                    Tgt::Claim(k) | Tgt::NewClaim(k) => Target::NewClaim(claim_index[k]),
                },
            })
            .collect();
        let mut unplaced: Vec<Unplaced> = unplaced
            .into_iter()
            .chain(lost)
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
        let mut zone_names = vec![String::new(); zone_ids.len()];
        for (&z, &i) in &zone_ids {
            zone_names[i as usize] = w.interner.name(z).to_string();
        }
        Plan {
            placements,
            new_claims,
            unplaced,
            pods: w.pods_considered,
            cost,
            lower_bound: 0.0,
            instance_type_names,
            zone_names,
        }
    }
}

fn reservation_exhausted(
    o: &crate::scheduling::compile::OfferingC,
    held: &std::collections::HashMap<String, u32>,
) -> bool {
    match &o.reservation {
        Some((id, Some(_))) => held.get(id).is_some_and(|&left| left == 0),
        _ => false,
    }
}
