//! What each NodePool's disruption budgets are counted against: its nodes in all, and those
//! already being disrupted.

use super::*;

/// Per NodePool: (nodes that count for budgets, nodes already disrupting). Counted nodes are
/// managed and initialized; disrupting ones are not Ready or marked for deletion.
pub fn budget_node_counts(snapshot: &Snapshot) -> BTreeMap<String, (u32, u32)> {
    let claims: FastMap<&str, &NodeClaim> = snapshot
        .node_claims
        .iter()
        .filter_map(|c| c.node_name.as_deref().map(|n| (n, &**c)))
        .collect();
    // Counted under borrowed names; one owned name per NodePool at the end.
    let mut counts: FastMap<&str, (u32, u32)> = FastMap::default();
    for node in &snapshot.nodes {
        if let (Some(pool), Some(claim)) = (
            node.labels.get(labels::NODEPOOL),
            claims.get(node.name.as_str()),
        ) {
            count_for_budget(&mut counts, pool, node, claim);
        }
    }
    owned_counts(counts)
}

/// Counts `node` (of NodePool `pool`, with its `claim`) for budgets when it is initialized.
pub(super) fn count_for_budget<'a>(
    counts: &mut FastMap<&'a str, (u32, u32)>,
    pool: &'a str,
    node: &Node,
    claim: &NodeClaim,
) {
    if !claim.initialized {
        return;
    }
    let entry = counts.entry(pool).or_default();
    entry.0 += 1;
    if !node.ready || node.deletion_timestamp.is_some() || claim.deletion_timestamp.is_some() {
        entry.1 += 1;
    }
}

pub(super) fn owned_counts(counts: FastMap<&str, (u32, u32)>) -> BTreeMap<String, (u32, u32)> {
    counts
        .into_iter()
        .map(|(pool, n)| (pool.to_string(), n))
        .collect()
}
