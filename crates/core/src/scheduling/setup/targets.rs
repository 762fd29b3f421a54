//! The existing targets a solve may place pods on, compiled from the snapshot: registered
//! nodes (initialized first, then by name), then in-flight claims, each with the strings its
//! compile interned first, so a compile can be reused for a snapshot without some of them.

use super::*;

/// The cluster compiled before its pods are known: resource names, NodePools, and the
/// existing targets (registered nodes, then in-flight claims) with what already runs there.
#[derive(Clone, Debug)]
pub(crate) struct Targets {
    pub names: Interner,
    pub interner: Interner,
    pub pools: Vec<PoolC>,
    pub allow_undefined: Vec<bool>,
    pub existing: Existing,
    pub existing_used: PerTarget<Res>,
    pub existing_ports: PerTarget<Vec<crate::model::HostPort>>,
    pub hostname: u32,
    pub zone: u32,
    pub capacity_type: u32,
    /// Per existing target, the ids its labels interned first: `[start, end)`.
    pub fresh: Vec<(u32, u32)>,
    /// Per existing target, every id its compile interned, in call order.
    pub seqs: Vec<Arc<Vec<u32>>>,
    /// Per existing target, what it was compiled from.
    pub sources: Vec<Source>,
    /// Per NodePool, the capacity and count of its existing targets, when already known.
    pub pool_used: Option<Vec<(Res, i64)>>,
    /// See [`type_names`], when already known.
    pub type_names: Option<Arc<TypeNames>>,
}

/// What an existing target was compiled from: an index into the snapshot's nodes or claims.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    Node(usize),
    Claim(usize),
}

impl Source {
    /// The target's requirements compiled again, with `interner`.
    pub(crate) fn reqs(self, s: &Snapshot, interner: &mut Interner) -> Reqs {
        match self {
            Source::Node(i) => compile::node_reqs(&s.nodes[i], interner),
            Source::Claim(i) => compile::claim_reqs(&s.node_claims[i], interner),
        }
    }
}

/// Compiles NodePools and existing targets, with nothing counted as running yet.
#[cfg(test)]
pub(crate) fn targets(s: &Snapshot) -> Targets {
    targets_with(s, Compile::default())
}

/// [`targets`], compiled as `compile` says (the result is the same).
pub(crate) fn targets_with(s: &Snapshot, compile: Compile<'_>) -> Targets {
    let Compile {
        mut cache,
        one_thread,
    } = compile;
    if let Some(c) = cache.as_deref_mut() {
        c.begin();
    }
    // The nodes' order reads only the nodes; on a large cluster it is worked out on another
    // core while the resource names (every pod's requests) are gathered.
    let (names, order) = if s.nodes.len() >= NODES_WORTH_A_THREAD && !one_thread {
        std::thread::scope(|scope| {
            let order = scope.spawn(|| NodeOrder::of(s));
            let names = compile::resource_names(s);
            (names, order.join().expect("ordering the nodes panicked"))
        })
    } else {
        (compile::resource_names(s), NodeOrder::of(s))
    };
    let PoolsCompiled {
        mut interner,
        pools,
        allow_undefined,
        hostname,
        zone,
        capacity_type,
    } = match cache.as_deref_mut() {
        Some(c) => c.pools.get(s, &names),
        None => compile_pools(s, &names),
    };
    // Existing targets: initialized nodes first, then by name; in-flight claims after them.
    let mut made = Made::with_capacity(order.sorted.len());
    // Counted on the live nodes alone, as the per-node work is.
    let threads = order.sorted.len() >= NODES_WORTH_A_THREAD && !one_thread;
    let mut existing = node_targets(
        s,
        &order,
        &names,
        &mut interner,
        &mut cache,
        threads,
        &mut made,
    );
    if let Some(c) = cache {
        c.end();
    }
    for (ci, c) in s.node_claims.iter().enumerate() {
        let on_a_node = c
            .node_name
            .as_deref()
            .is_some_and(|n| order.names.contains(n));
        if c.deletion_timestamp.is_none() && !on_a_node {
            existing.extend(claim_target(s, ci, &names, &mut interner, &mut made));
        }
    }
    let existing_used = PerTarget::new(existing.iter().map(|_| vec![0; names.len()]).collect());
    let existing_ports = PerTarget::new(existing.iter().map(|_| Vec::new()).collect());
    Targets {
        names,
        interner,
        pools,
        allow_undefined,
        existing: Existing::new(existing),
        existing_used,
        existing_ports,
        hostname,
        zone,
        capacity_type,
        fresh: made.fresh,
        seqs: made.seqs,
        sources: made.sources,
        pool_used: None,
        type_names: None,
    }
}

/// Per existing target, in order, what its compile added: the range of strings it interned
/// first, the sequence of strings it looked up, and where it came from.
struct Made {
    fresh: Vec<(u32, u32)>,
    seqs: Vec<Arc<Vec<u32>>>,
    sources: Vec<Source>,
}

impl Made {
    fn with_capacity(n: usize) -> Made {
        Made {
            fresh: Vec::with_capacity(n),
            seqs: Vec::with_capacity(n),
            sources: Vec::with_capacity(n),
        }
    }
}

/// The live nodes' targets in `order`, their requirements interned (from `cache` when there
/// is one) in that order, as [`Made`] records.
fn node_targets(
    s: &Snapshot,
    order: &NodeOrder<'_>,
    names: &Interner,
    interner: &mut Interner,
    cache: &mut Option<&mut NodeCache>,
    threads: bool,
    made: &mut Made,
) -> Vec<ExistingC> {
    let sorted = &order.sorted;
    // The requirements go in order (they number the strings); what else a target holds reads
    // only its node, and on a large cluster is made on another core meanwhile.
    let mut requirements = || -> Vec<(Arc<Reqs>, Option<u32>)> {
        sorted
            .iter()
            .map(|&i| {
                let n = &s.nodes[i];
                let first = interner.len() as u32;
                let (reqs, seq, nodepool) = match cache.as_deref_mut() {
                    Some(c) => c.node_reqs(n, interner),
                    None => {
                        interner.trace();
                        let reqs = Source::Node(i).reqs(s, interner);
                        let nodepool = compile::nodepool_value(&reqs, interner);
                        (Arc::new(reqs), Arc::new(interner.take_trace()), nodepool)
                    }
                };
                made.fresh.push((first, interner.len() as u32));
                made.seqs.push(seq);
                made.sources.push(Source::Node(i));
                (reqs, nodepool)
            })
            .collect()
    };
    let rest = || -> Vec<(String, Vec<Taint>, Res, bool)> {
        sorted
            .iter()
            .map(|&i| {
                let n = &s.nodes[i];
                let init = order.init_label[i] || n.ready;
                let taints = n
                    .taints
                    .iter()
                    .filter(|t| init || !compile::is_ephemeral_taint(t))
                    .cloned()
                    .collect();
                (n.name.clone(), taints, dense(&n.allocatable, names), init)
            })
            .collect()
    };
    let (rest, reqs) = if threads {
        std::thread::scope(|scope| {
            let rest = scope.spawn(rest);
            let reqs = requirements();
            (
                rest.join().expect("building the node targets panicked"),
                reqs,
            )
        })
    } else {
        (rest(), requirements())
    };
    rest.into_iter()
        .zip(reqs)
        .map(
            |((name, taints, available, initialized), (reqs, nodepool))| ExistingC {
                name,
                in_flight: false,
                reqs,
                taints,
                available,
                initialized,
                nodepool,
            },
        )
        .collect()
}

/// The target of in-flight claim `ci` of `s`, on the room it is taken to hold; `None` when
/// that is not known.
fn claim_target(
    s: &Snapshot,
    ci: usize,
    names: &Interner,
    interner: &mut Interner,
    made: &mut Made,
) -> Option<ExistingC> {
    let c = &s.node_claims[ci];
    let alloc = claim_allocatable(s, c);
    if alloc.is_empty() {
        return None;
    }
    let first = interner.len() as u32;
    interner.trace();
    let reqs = Source::Claim(ci).reqs(s, interner);
    let target = ExistingC {
        name: c.node_name.clone().unwrap_or_else(|| c.name.clone()),
        in_flight: true,
        nodepool: compile::nodepool_value(&reqs, interner),
        reqs: Arc::new(reqs),
        taints: c.taints.clone(),
        available: dense(&alloc, names),
        initialized: false,
    };
    made.fresh.push((first, interner.len() as u32));
    made.seqs.push(Arc::new(interner.take_trace()));
    made.sources.push(Source::Claim(ci));
    Some(target)
}

/// What an in-flight claim is taken to hold: its allocatable once launched, and before that
/// the smallest (by cpu) instance type it may become; empty when neither is known.
fn claim_allocatable(s: &Snapshot, c: &NodeClaim) -> Resources {
    if !c.allocatable.is_empty() {
        return c.allocatable.clone();
    }
    let allowed: Vec<&str> = c
        .requirements
        .iter()
        .filter(|r| {
            r.key == labels::INSTANCE_TYPE && r.operator == crate::requirements::Operator::In
        })
        .flat_map(|r| r.values.iter().map(String::as_str))
        .collect();
    let Some(its) = s.instance_types.get(&c.nodepool) else {
        return Resources::default();
    };
    let mut best: Option<Resources> = None;
    for it in its.iter().filter(|it| allowed.contains(&it.name.as_str())) {
        let a = it.allocatable();
        let smaller = best
            .as_ref()
            .is_none_or(|b| a.get(crate::resources::CPU) < b.get(crate::resources::CPU));
        if smaller {
            best = Some(a);
        }
    }
    best.unwrap_or_default()
}

/// Below this many nodes, the per-node work split off a compile costs less than starting a
/// thread for it.
const NODES_WORTH_A_THREAD: usize = 256;

/// The order of a compile's node targets: live nodes (not deleting, not cordoned), initialized
/// ones first, then by name.
struct NodeOrder<'s> {
    sorted: Vec<usize>,
    /// Per node of the snapshot, whether it carries `karpenter.sh/initialized=true`.
    init_label: Vec<bool>,
    /// Every node's name, live or not.
    names: FastSet<&'s str>,
}

impl<'s> NodeOrder<'s> {
    fn of(s: &'s Snapshot) -> NodeOrder<'s> {
        let mut sorted: Vec<usize> = (0..s.nodes.len())
            .filter(|&i| s.nodes[i].deletion_timestamp.is_none() && !s.nodes[i].unschedulable)
            .collect();
        // Looked up once per node, not once per comparison of the sort.
        let init_label: Vec<bool> = s
            .nodes
            .iter()
            .map(|n| {
                n.labels
                    .get(labels::INITIALIZED)
                    .is_some_and(|v| v == "true")
            })
            .collect();
        sorted.sort_by(|&a, &b| {
            init_label[b]
                .cmp(&init_label[a])
                .then_with(|| s.nodes[a].name.cmp(&s.nodes[b].name))
        });
        NodeOrder {
            sorted,
            init_label,
            names: s.nodes.iter().map(|n| n.name.as_str()).collect(),
        }
    }
}
