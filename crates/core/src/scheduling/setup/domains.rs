//! The domains a topology spread may use: every value a NodePool or an existing target can
//! give its key, less those its node filter refuses.

use super::*;

/// Per topology key of the groups, every value the NodePools' instance types can give it,
/// with the NodePool that gives it.
pub(super) fn domain_universe(
    pools: &[PoolC],
    g: &Groups,
    interner: &Interner,
) -> HashMap<u32, Vec<(u32, usize)>> {
    let keys: BTreeSet<u32> = g
        .groups
        .iter()
        .map(|x| x.def.key)
        .chain(g.inverse.iter().map(|x| x.def.key))
        .collect();
    let mut universe = HashMap::new();
    for &k in &keys {
        let mut vals: BTreeSet<(u32, usize)> = BTreeSet::new();
        for (pi, p) in pools.iter().enumerate() {
            for it in p.its.iter() {
                let mut r = p.reqs.clone();
                r.merge(&it.reqs, interner);
                if let Some(set) = r.get(k)
                    && !set.complement
                {
                    vals.extend(set.values.iter().map(|&v| (v, pi)));
                }
            }
        }
        universe.insert(k, vals.into_iter().collect());
    }
    universe
}

/// Each spread's eligible domains (for the global minimum and minDomains): the values a
/// NodePool or an existing target its node filter accepts can give its key.
pub(super) fn eligible_domains(
    g: &mut Groups,
    universe: &HashMap<u32, Vec<(u32, usize)>>,
    pools: &[PoolC],
    existing: &Existing,
    interner: &Interner,
    hostname: u32,
) {
    for group in g.groups.iter_mut() {
        let def = &group.def;
        if !matches!(def.kind, Kind::Spread { .. }) || def.key == hostname {
            continue;
        }
        let mut el: BTreeSet<u32> = BTreeSet::new();
        for &(v, pi) in universe.get(&def.key).map(|x| x.as_slice()).unwrap_or(&[]) {
            let mut node = pools[pi].reqs.clone();
            node.add(def.key, reqs::ValueSet::one(v), None, interner);
            if def.filter.accepts(&node, &pools[pi].taints, interner) {
                el.insert(v);
            }
        }
        for e in existing.iter() {
            if let Some(set) = e.reqs.get(def.key)
                && set.values.len() == 1
                && !set.complement
                && def.filter.accepts(&e.reqs, &e.taints, interner)
            {
                el.insert(set.values[0]);
            }
        }
        group.eligible = el.into_iter().collect();
        group.refresh_min();
    }
}
