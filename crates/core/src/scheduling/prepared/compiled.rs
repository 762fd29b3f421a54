//! What a prepared compile works out once for all its solves: where each target met the ids
//! it interned first, which targets a node's removal takes away, the free room with nothing
//! removed, the NodePools' counts, and the pods that share a key.

use super::*;

/// From each existing target's interning sequence, for the ids targets interned first
/// (`fresh`, `[start, end)`): per id the targets that intern it, in order; per target
/// where in its sequence it met its first id of its own; and per target (and one past the
/// last) how many targets before it own ids.
pub(super) fn interning_record(
    targets: &Targets,
    fresh: (u32, u32),
) -> (Vec<Vec<u32>>, Vec<usize>, Vec<u32>) {
    let (start, end) = fresh;
    let mut users: Vec<Vec<u32>> = vec![Vec::new(); (end - start) as usize];
    let mut first_own = vec![usize::MAX; targets.seqs.len()];
    let mut owning_before = vec![0u32; targets.seqs.len() + 1];
    for (ei, seq) in targets.seqs.iter().enumerate() {
        let (a, b) = targets.fresh[ei];
        for (i, &id) in seq.iter().enumerate() {
            if (start..end).contains(&id) {
                let u = &mut users[(id - start) as usize];
                if u.last() != Some(&(ei as u32)) {
                    u.push(ei as u32);
                }
            }
            if (a..b).contains(&id) && first_own[ei] == usize::MAX {
                first_own[ei] = i;
            }
        }
        owning_before[ei + 1] = owning_before[ei] + u32::from(a < b);
    }
    (users, first_own, owning_before)
}

/// Per node name, the existing targets its removal takes away: the registered nodes, and
/// the in-flight claims whose node a claim names.
pub(super) fn removed_by(s: &Snapshot, targets: &Targets) -> FastMap<String, Vec<usize>> {
    let claimed: HashSet<&str> = s
        .node_claims
        .iter()
        .filter_map(|c| c.node_name.as_deref())
        .collect();
    let mut removed_by: FastMap<String, Vec<usize>> = FastMap::default();
    for (ei, e) in targets.existing.iter().enumerate() {
        if !e.in_flight || claimed.contains(e.name.as_str()) {
            removed_by.entry(e.name.clone()).or_default().push(ei);
        }
    }
    removed_by
}

/// Registered nodes and in-flight claims by free cpu, with nothing removed.
pub(super) fn free_room(targets: &Targets) -> (Sorted, Sorted) {
    let free: Vec<i64> = (0..targets.existing.len())
        .map(|ei| {
            targets.existing[ei].available.first().copied().unwrap_or(0)
                - targets.existing_used[ei].first().copied().unwrap_or(0)
        })
        .collect();
    let in_flight: Vec<bool> = targets.existing.iter().map(|e| e.in_flight).collect();
    room::sorted(&free, &in_flight)
}

/// Per existing target the NodePool it counts against, and per NodePool the capacity and
/// count of all its existing targets; `None` when a target counts against several.
pub(super) fn pool_counts(targets: &Targets) -> Option<(Vec<Option<usize>>, PoolUsed)> {
    let owners: Vec<Option<setup::PoolOwner>> = targets
        .pools
        .iter()
        .map(|p| setup::pool_owner(&targets.interner, &p.name))
        .collect();
    let mut pool_used: PoolUsed = targets
        .pools
        .iter()
        .map(|_| (vec![0; targets.names.len()], 0))
        .collect();
    // A target counted against several NodePools is left to full solves.
    let mut shared = false;
    let pool_of: Vec<Option<usize>> = targets
        .existing
        .iter()
        .map(|e| {
            let mut first = None;
            for (pi, o) in owners.iter().enumerate() {
                if o.is_some_and(|o| o.owns(e)) {
                    for (u, a) in pool_used[pi].0.iter_mut().zip(&e.available) {
                        *u += a;
                    }
                    pool_used[pi].1 += 1;
                    shared |= first.is_some();
                    first.get_or_insert(pi);
                }
            }
            first
        })
        .collect();
    if shared {
        return None;
    }
    Some((pool_of, pool_used))
}

/// Per NodePool, the capacity and count of its existing targets.
pub(super) type PoolUsed = Vec<(Vec<i64>, i64)>;

/// Pod keys that occur more than once. Snapshots usually list pods by key, so a pass over
/// neighbours finds them; any other order falls back to a set.
pub(super) fn duplicate_keys(pods: &[Arc<Pod>]) -> HashSet<String> {
    fn key(p: &Pod) -> (&str, &str) {
        (p.namespace.as_str(), p.name.as_str())
    }
    // One pass finds the neighbours' duplicates, and stops where the order breaks.
    let mut out = HashSet::new();
    let mut sorted = true;
    for w in pods.windows(2) {
        match key(&w[0]).cmp(&key(&w[1])) {
            std::cmp::Ordering::Less => {}
            std::cmp::Ordering::Equal => {
                out.insert(w[1].key());
            }
            std::cmp::Ordering::Greater => {
                sorted = false;
                break;
            }
        }
    }
    if sorted {
        return out;
    }
    out.clear();
    let mut seen: FastSet<(&str, &str)> = FastSet::default();
    for p in pods {
        if !seen.insert(key(p)) {
            out.insert(p.key());
        }
    }
    out
}
