//! The NodePools compiled in weight order, and which existing targets count against each
//! one's limits.

use super::*;

/// The part of a compile that reads only the NodePools, their instance types, the DaemonSets
/// and the resource names: the NodePools compiled in weight order, and the interner after
/// them and the label keys every node may leave undefined.
#[derive(Clone, Debug)]
pub(crate) struct PoolsCompiled {
    pub interner: Interner,
    pub pools: Vec<PoolC>,
    pub allow_undefined: Vec<bool>,
    pub hostname: u32,
    pub zone: u32,
    pub capacity_type: u32,
}

/// Compiles the NodePools of `s` (see [`PoolsCompiled`]).
pub(crate) fn compile_pools(s: &Snapshot, names: &Interner) -> PoolsCompiled {
    let mut interner = Interner::new();
    let hostname = interner.intern(labels::HOSTNAME);
    let zone = interner.intern(labels::ZONE);
    let capacity_type = interner.intern(labels::CAPACITY_TYPE);

    // NodePools in weight order, each with its instance types ranked by price.
    let empty = Vec::new();
    let pools: Vec<PoolC> = compile::pool_order(&s.nodepools)
        .into_iter()
        .filter(|&i| s.nodepools[i].replicas.is_none() && s.nodepools[i].ready)
        .map(|i| {
            let np = &s.nodepools[i];
            let its = s
                .instance_types
                .get(&np.name)
                .map(|v| v.as_slice())
                .unwrap_or(&empty);
            compile::compile_pool(&PoolBuild { np, its }, s, names, &mut interner)
        })
        .collect();

    let mut allow_undefined = vec![false; 0];
    let mut allow = |interner: &mut Interner, key: &str| {
        let id = interner.intern(key) as usize;
        if allow_undefined.len() <= id {
            allow_undefined.resize(id + 1, false);
        }
        allow_undefined[id] = true;
    };
    for k in labels::WELL_KNOWN.iter().chain(labels::aws::WELL_KNOWN) {
        allow(&mut interner, k);
    }
    let it_keys: BTreeSet<u32> = pools
        .iter()
        .flat_map(|p| {
            p.its
                .iter()
                .flat_map(|it| it.reqs.items.iter().map(|r| r.key))
        })
        .collect();
    for k in it_keys {
        let name = interner.name(k).to_string();
        allow(&mut interner, &name);
    }
    PoolsCompiled {
        interner,
        pools,
        allow_undefined,
        hostname,
        zone,
        capacity_type,
    }
}

/// Which existing targets belong to a NodePool: those whose requirements allow its name, and
/// only it, for the NodePool label.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PoolOwner {
    key: u32,
    value: u32,
}

impl PoolOwner {
    pub(crate) fn owns(&self, e: &ExistingC) -> bool {
        debug_assert_eq!(
            e.nodepool,
            e.reqs
                .get(self.key)
                .filter(|set| set.values.len() == 1 && !set.complement)
                .map(|set| set.values[0]),
            "{}'s NodePool value",
            e.name
        );
        e.nodepool == Some(self.value)
    }
}

pub(crate) fn pool_owner(interner: &Interner, pool: &str) -> Option<PoolOwner> {
    Some(PoolOwner {
        key: interner.get(labels::NODEPOOL)?,
        value: interner.get(pool)?,
    })
}

/// Charges each NodePool what its existing targets hold: `pool_used` when a prepared cluster
/// has it already, else summed here.
pub(super) fn charge_existing(
    pools: &mut [PoolC],
    pool_used: Option<Vec<(Res, i64)>>,
    existing: &Existing,
    interner: &Interner,
) {
    if let Some(used) = pool_used {
        for (p, (u, n)) in pools.iter_mut().zip(used) {
            p.used = u;
            p.used_nodes = n;
        }
        return;
    }
    for p in pools.iter_mut() {
        let owner = pool_owner(interner, &p.name);
        for e in existing.iter().filter(|e| owner.is_some_and(|o| o.owns(e))) {
            for (u, a) in p.used.iter_mut().zip(&e.available) {
                *u += a;
            }
            p.used_nodes += 1;
        }
    }
}
