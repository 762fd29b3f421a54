//! What selection looks up per node, built once per snapshot: nodes, their claims, pods and
//! NodePools, and the prices of their offerings.

use super::*;

/// The hourly price of `it`'s offering in `zone` with capacity type `ct` (0 when it has none).
pub(super) fn offering_price(it: &InstanceType, zone: &str, ct: Option<CapacityType>) -> f64 {
    it.offerings
        .iter()
        .find(|o| o.zone == zone && Some(o.capacity_type) == ct)
        .map_or(0.0, |o| o.price)
}

/// What selection looks up per node, built once per snapshot: the nodes by name, and per
/// node its claim and its pods, found by the node's position rather than by hashing its name
/// again. Nodes sharing a name share one entry, the last claim of a node name winning, as a map
/// built in order would have it.
pub(super) struct Tables<'a, 't> {
    /// The nodes by name.
    pub(super) nodes: Vec<&'a Node>,
    /// Per node, the position of the first node of its name: the entry it reads.
    pub(super) entry: Vec<u32>,
    /// Per entry, the last claim naming that node.
    pub(super) claim_of: Vec<Option<&'a NodeClaim>>,
    /// Per entry `e`, its pods in snapshot order: `pods[starts[e]..starts[e + 1]]`.
    pub(super) pods: Vec<&'a Pod>,
    pub(super) starts: Vec<u32>,
    /// Built at the first node whose claim is not found by node name (rare: a claim names
    /// its node once registered).
    pub(super) claims_by_provider: OnceCell<FastMap<&'a str, &'a NodeClaim>>,
    pub(super) claims: &'a [Arc<NodeClaim>],
    pub(super) wanted_provider: Option<FastSet<&'a str>>,
    pub(super) pools: FastMap<&'a str, &'a NodePool>,
    /// Built when a node's facts are worked out, not answered from memory.
    pub(super) types: &'t OnceCell<TypeIndex<'a>>,
    pub(super) snapshot: &'a Snapshot,
}

impl<'a, 't> Tables<'a, 't> {
    /// What `node`'s labels say, its price looked up among `pool`'s instance types.
    pub(super) fn facts(&self, node: &Node, pool: &NodePool) -> NodeFacts {
        NodeFacts::of(node, |it, zone, ct| self.price(&pool.name, it, zone, ct))
    }

    /// The hourly price of the offering of `pool`'s instance type `it` in `zone` with `ct`
    /// (0 when unknown), the type the first of its name in the NodePool's list. Tables for a
    /// few nodes scan that list; tables for every node look it up in the index of every
    /// NodePool's types, built at the first price asked for.
    pub(super) fn price(&self, pool: &str, it: &str, zone: &str, ct: Option<CapacityType>) -> f64 {
        let found = if self.is_partial() {
            self.snapshot
                .instance_types
                .get(pool)
                .and_then(|its| its.iter().find(|t| t.name == it))
        } else {
            self.types
                .get_or_init(|| TypeIndex::new(self.snapshot))
                .get(pool, it)
        };
        found.map_or(0.0, |t| offering_price(t, zone, ct))
    }

    /// Whether the tables are for the nodes of some names only ([`select_only`]).
    pub(super) fn is_partial(&self) -> bool {
        self.wanted_provider.is_some()
    }

    /// Claims by provider ID, the last of an ID winning as a map built in order would have it.
    pub(super) fn by_provider(&self) -> &FastMap<&'a str, &'a NodeClaim> {
        self.claims_by_provider.get_or_init(|| {
            let asked = |p: &str| self.wanted_provider.as_ref().is_none_or(|s| s.contains(p));
            self.claims
                .iter()
                .filter_map(|c| c.provider_id.as_deref().map(|p| (p, &**c)))
                .filter(|(p, _)| asked(p))
                .collect()
        })
    }

    /// The pods of the node at position `at` in `nodes`.
    pub(super) fn pods_of(&self, at: usize) -> &[&'a Pod] {
        let e = self.entry[at] as usize;
        &self.pods[self.starts[e] as usize..self.starts[e + 1] as usize]
    }

    /// The tables for every node, or (`only`) for the nodes of those names: then only what
    /// those nodes look up is entered, each entry as the full tables have it.
    pub(super) fn new(
        snapshot: &'a Snapshot,
        only: Option<&[&str]>,
        types: &'t OnceCell<TypeIndex<'a>>,
    ) -> Self {
        let mut nodes: Vec<&Node> = match only {
            None => snapshot.nodes.iter().map(Arc::as_ref).collect(),
            Some(names) => snapshot
                .nodes
                .iter()
                .filter(|n| names.contains(&n.name.as_str()))
                .map(Arc::as_ref)
                .collect(),
        };
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        let mut by_name: FastMap<&str, u32> = FastMap::default();
        by_name.reserve(nodes.len());
        let entry: Vec<u32> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| *by_name.entry(n.name.as_str()).or_insert(i as u32))
            .collect();
        let wanted_provider: Option<FastSet<&str>> =
            only.map(|_| nodes.iter().map(|n| n.provider_id.as_str()).collect());
        let mut claim_of = vec![None; nodes.len()];
        for c in &snapshot.node_claims {
            if let Some(e) = c.node_name.as_deref().and_then(|n| by_name.get(n)) {
                claim_of[*e as usize] = Some(&**c);
            }
        }
        // Pods grouped by entry in one counting pass, each group in snapshot order.
        let placed: Vec<(u32, &Pod)> = snapshot
            .pods
            .iter()
            .filter_map(|p| Some((*by_name.get(p.node_name.as_deref()?)?, &**p)))
            .collect();
        let mut starts = vec![0u32; nodes.len() + 1];
        for (e, _) in &placed {
            starts[*e as usize + 1] += 1;
        }
        for i in 0..nodes.len() {
            starts[i + 1] += starts[i];
        }
        let mut next = starts.clone();
        let mut pods: Vec<Option<&Pod>> = vec![None; placed.len()];
        for (e, p) in placed {
            pods[next[e as usize] as usize] = Some(p);
            next[e as usize] += 1;
        }
        let pools = snapshot
            .nodepools
            .iter()
            .map(|p| (p.name.as_str(), p))
            .collect();
        Tables {
            nodes,
            entry,
            claim_of,
            pods: pods
                .into_iter()
                .map(|p| p.expect("every slot is filled"))
                .collect(),
            starts,
            claims_by_provider: OnceCell::new(),
            claims: &snapshot.node_claims,
            wanted_provider,
            pools,
            types,
            snapshot,
        }
    }
}
