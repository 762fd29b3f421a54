//! NodePool limits as the provisioner applies them: what a pool's claims already hold, and
//! whether one more claim stays within every limit the pool sets.

use std::collections::BTreeSet;

use nodewright_core::model::{InstanceType, Snapshot};
use nodewright_core::resources::Resources;

/// Resources a pool's claims hold: launched claims by capacity, unlaunched ones by the
/// smallest instance type they may become; plus the `nodes` count.
pub(super) fn pool_usage(snap: &Snapshot, pool: &str) -> Resources {
    let mut used = Resources::new();
    let its = snap.instance_types.get(pool);
    let mut n = 0;
    for c in snap.node_claims.iter().filter(|c| c.nodepool == pool) {
        if c.deletion_timestamp.is_some() {
            continue;
        }
        n += 1;
        if !c.capacity.is_empty() {
            used.add(&c.capacity);
        } else if let Some(cap) = smallest_capacity(its.map(|v| v.as_slice()), &c.requirements) {
            used.add(&cap);
        }
    }
    used.set(nodewright_core::resources::NODES, n);
    used
}

/// The capacity of the smallest (by CPU) instance type the requirements allow.
pub(super) fn smallest_capacity(
    its: Option<&[InstanceType]>,
    reqs: &[nodewright_core::requirements::Requirement],
) -> Option<Resources> {
    let allowed: BTreeSet<&str> = reqs
        .iter()
        .filter(|r| r.key == nodewright_core::labels::INSTANCE_TYPE)
        .flat_map(|r| r.values.iter().map(String::as_str))
        .collect();
    its?.iter()
        .filter(|it| allowed.contains(it.name.as_str()))
        .min_by_key(|it| it.capacity.get(nodewright_core::resources::CPU))
        .map(|it| it.capacity.clone())
}

/// True when adding `add` to `used` stays within every explicit limit.
pub(super) fn within_limits(limits: &Resources, used: &Resources, add: &Resources) -> bool {
    limits
        .iter()
        .all(|(k, limit)| used.get(k) + add.get(k) <= limit)
}
