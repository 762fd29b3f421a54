//! Turning the solver's state into a [`Plan`]: claims with their options ranked by price,
//! placements by pod, and reasons sorted by pod.

use super::*;

impl Engine<'_> {
    pub fn finish(self, s: &crate::model::Snapshot, unplaced: Vec<(usize, String)>) -> Plan {
        let w = &*self.w;
        let mut new_claims = Vec::new();
        let mut claim_index = vec![usize::MAX; self.claims.len()];
        let mut type_ids: std::collections::BTreeMap<&str, u32> = std::collections::BTreeMap::new();
        for p in &w.pools {
            for it in &p.its {
                type_ids.entry(it.name.as_str()).or_insert(0);
            }
        }
        for (i, v) in type_ids.values_mut().enumerate() {
            *v = i as u32;
        }
        let instance_type_names: Vec<String> = type_ids.keys().map(|k| k.to_string()).collect();
        let mut zone_ids: std::collections::BTreeMap<u32, u32> = std::collections::BTreeMap::new();
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
                    let next = zone_ids.len() as u32;
                    InstanceOption {
                        instance_type: type_ids[p.its[it].name.as_str()],
                        zone: *zone_ids.entry(off.zone).or_insert(next),
                        capacity_type: off.ct,
                        price,
                    }
                })
                .collect();
            let mut reqs = cl.reqs.clone();
            reqs.items.retain(|r| r.key != w.hostname);
            let mut requirements = reqs.describe(&w.interner);
            requirements.sort();
            let mut requests = crate::scheduling::compile::sparse(&cl.used, &w.names);
            if let Some(&(_, it, _)) = options.first() {
                requests.add(&crate::scheduling::compile::sparse(
                    &p.its[it].daemon,
                    &w.names,
                ));
            }
            claim_index[k] = new_claims.len();
            new_claims.push(NewClaim {
                nodepool: p.name.clone(),
                requirements,
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
