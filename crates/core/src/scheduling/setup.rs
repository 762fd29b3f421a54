//! Building the solver's state from a snapshot: NodePools, existing targets, pod classes,
//! topology groups and the counts of pods already running.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use super::compile::{self, ClassKey, ExistingC, PoolBuild, PoolC, Res, dense};
use super::intern::{FastMap, FastSet, Interner};
use super::reqs::{self, Reqs};
use super::topology::{Group, GroupKey, Inverse, InverseKey, Kind, Namespaces, NodeFilter};
use super::{Compile, NodeCache};
use crate::labels;
use crate::model::{
    InclusionPolicy, NodeClaim, Pod, PodAffinityTerm, PodPhase, Snapshot, WhenUnsatisfiable,
};
use crate::requirements::Requirement;
use crate::resources::Resources;
use crate::selector::{LabelSelector, SelectorOperator, SelectorRequirement};
use crate::taints::{Taint, Toleration};

mod classes;
pub(crate) use classes::volume_alternatives;
use classes::{Groups, compile_class, inverse_groups, namespaces_in, with_label_keys};

/// One set of identical pods.
#[derive(Clone, Debug)]
pub(crate) struct Class {
    pub namespace: String,
    pub labels: BTreeMap<String, String>,
    pub requests: Res,
    pub tolerations: Vec<Toleration>,
    pub host_ports: Vec<crate::model::HostPort>,
    pub node_selector: Reqs,
    /// ORed required node-affinity terms.
    pub required_terms: Vec<Reqs>,
    /// Preferred node-affinity terms, heaviest first.
    pub preferred_terms: Vec<Reqs>,
    /// Volume topology alternatives (one empty set when the pod has no volume constraint).
    pub volume_alternatives: Vec<Reqs>,
    /// (group, ScheduleAnyway)
    pub spreads: Vec<(usize, bool)>,
    pub affinity: Vec<usize>,
    pub preferred_affinity: Vec<usize>,
    pub anti_affinity: Vec<usize>,
    pub preferred_anti_affinity: Vec<usize>,
    /// Inverse groups this class's required anti-affinity terms feed.
    pub owns_inverse: Vec<usize>,
    /// Groups that count pods of this class.
    pub counted_by: Vec<usize>,
    /// Distinct topology keys of `counted_by`.
    pub counted_keys: Vec<u32>,
    /// Inverse groups whose owners keep this class out of their domains.
    pub blocked_by: Vec<usize>,
    /// Pod indices, in queue order.
    pub pods: Vec<usize>,
    pub error: Option<String>,
    /// Its pods ran on nodes being deleted, which [`Options::closed`] nodes still take. Told
    /// apart only in solves that close nodes; otherwise false.
    ///
    /// [`Options::closed`]: super::engine::Options::closed
    pub from_deleting: bool,
}

impl Class {
    /// True when placing one pod can change what the next identical pod may do.
    pub(crate) fn one_at_a_time(&self) -> bool {
        !self.spreads.is_empty()
            || !self.affinity.is_empty()
            || !self.preferred_affinity.is_empty()
            || !self.anti_affinity.is_empty()
            || !self.preferred_anti_affinity.is_empty()
            || !self.owns_inverse.is_empty()
            || !self.host_ports.is_empty()
    }
}

/// The existing targets of one solve: a shared compiled list, or a subset of one (in its
/// order), so many solves over one cluster do not copy it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Existing {
    pub(crate) all: Arc<Vec<ExistingC>>,
    /// Indices into `all` that this solve sees; `None` for all of them.
    pub keep: Option<Vec<u32>>,
}

impl Existing {
    pub(crate) fn new(all: Vec<ExistingC>) -> Self {
        Existing {
            all: Arc::new(all),
            keep: None,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.keep.as_ref().map_or(self.all.len(), |k| k.len())
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &ExistingC> + '_ {
        (0..self.len()).map(move |i| &self[i])
    }
}

impl std::ops::Index<usize> for Existing {
    type Output = ExistingC;

    fn index(&self, i: usize) -> &ExistingC {
        match &self.keep {
            None => &self.all[i],
            Some(k) => &self.all[k[i] as usize],
        }
    }
}

/// Plan-wide instance-type ids: names sorted, and per NodePool the id of each of its types.
#[derive(Debug, Default)]
pub(crate) struct TypeNames {
    pub names: Arc<Vec<String>>,
    pub pool_ids: Vec<Vec<u32>>,
}

pub(crate) fn type_names(pools: &[PoolC]) -> Arc<TypeNames> {
    let mut ids: BTreeMap<&str, u32> = BTreeMap::new();
    for p in pools {
        for it in p.its.iter() {
            ids.entry(it.name.as_str()).or_insert(0);
        }
    }
    for (i, v) in ids.values_mut().enumerate() {
        *v = i as u32;
    }
    Arc::new(TypeNames {
        names: Arc::new(ids.keys().map(|k| k.to_string()).collect()),
        pool_ids: pools
            .iter()
            .map(|p| p.its.iter().map(|it| ids[it.name.as_str()]).collect())
            .collect(),
    })
}

/// A value per existing target (usage, host ports) shared with the compiled cluster and copied
/// on first write, so a solve over a masked cluster copies only the targets it fills.
#[derive(Clone, Debug, Default)]
pub(crate) struct PerTarget<T> {
    base: Arc<Vec<T>>,
    /// Indices into `base` this solve sees, as in [`Existing::keep`].
    keep: Option<Vec<u32>>,
    written: HashMap<usize, T>,
}

impl<T: Clone> PerTarget<T> {
    pub(crate) fn new(all: Vec<T>) -> Self {
        PerTarget {
            base: Arc::new(all),
            keep: None,
            written: HashMap::new(),
        }
    }

    /// The same values, seen through `keep`; nothing is copied.
    pub(crate) fn subset(&self, keep: Vec<u32>) -> Self {
        PerTarget {
            base: self.base.clone(),
            keep: Some(keep),
            written: HashMap::new(),
        }
    }

    fn at(&self, i: usize) -> usize {
        self.keep.as_ref().map_or(i, |k| k[i] as usize)
    }

    pub(crate) fn get_mut(&mut self, i: usize) -> &mut T {
        if self.keep.is_none() && self.written.is_empty() && Arc::get_mut(&mut self.base).is_some()
        {
            return &mut Arc::get_mut(&mut self.base).expect("unique")[i];
        }
        let j = self.at(i);
        let base = &self.base;
        self.written.entry(i).or_insert_with(|| base[j].clone())
    }
}

impl<T: Clone> std::ops::Index<usize> for PerTarget<T> {
    type Output = T;

    fn index(&self, i: usize) -> &T {
        if !self.written.is_empty()
            && let Some(v) = self.written.get(&i)
        {
            return v;
        }
        &self.base[self.at(i)]
    }
}

pub(crate) struct World {
    pub(crate) interner: Interner,
    pub(crate) names: Interner,
    pub(crate) pools: Vec<PoolC>,
    pub(crate) type_names: Arc<TypeNames>,
    pub(crate) existing: Existing,
    pub(crate) existing_used: PerTarget<Res>,
    pub(crate) existing_ports: PerTarget<Vec<crate::model::HostPort>>,
    pub groups: Vec<Group>,
    pub(crate) inverse: Vec<Inverse>,
    pub classes: Vec<Class>,
    /// Classes in queue order.
    pub order: Vec<usize>,
    /// Keys a pod may require on a new claim even when the NodePool does not define them.
    pub allow_undefined: Vec<bool>,
    /// Domain values each topology key can take on new claims, with the NodePool offering them.
    pub universe: HashMap<u32, Vec<(u32, usize)>>,
    pub hostname: u32,
    pub zone: u32,
    pub capacity_type: u32,
    pub pods_considered: usize,
    pub any_prefer_no_schedule: bool,
    /// The existing targets by free cpu, when the caller already has them sorted.
    pub(crate) room: Option<super::engine::room::RoomBase>,
}

/// The kube-scheduler's queue as a consolidation's moved pods meet it: by priority; the pods
/// already pending (older in the queue) before the pods of deleting nodes, which their
/// controllers create anew together, one controller after another; then by name.
pub(crate) fn kube_queue_cmp(a: &Pod, b: &Pod) -> std::cmp::Ordering {
    let key = |p: &Pod| {
        let moved = p.node_name.is_some();
        (
            std::cmp::Reverse(p.priority),
            moved,
            (!moved).then_some(p.creation_timestamp),
        )
    };
    fn owner(p: &Pod) -> &str {
        p.owner.as_ref().map_or("", |o| o.name.as_str())
    }
    key(a)
        .cmp(&key(b))
        .then_with(|| a.namespace.cmp(&b.namespace))
        .then_with(|| owner(a).cmp(owner(b)))
        .then_with(|| a.name.cmp(&b.name))
}

/// Karpenter's queue: the largest pods (cpu, then memory) first.
pub(crate) fn karpenter_queue_cmp(a: &Pod, b: &Pod) -> std::cmp::Ordering {
    let cpu = |p: &Pod| p.requests.get(crate::resources::CPU);
    let mem = |p: &Pod| p.requests.get(crate::resources::MEMORY);
    cpu(b)
        .cmp(&cpu(a))
        .then_with(|| mem(b).cmp(&mem(a)))
        .then_with(|| a.creation_timestamp.cmp(&b.creation_timestamp))
        .then_with(|| a.uid.cmp(&b.uid))
        .then_with(|| a.namespace.cmp(&b.namespace))
        .then_with(|| a.name.cmp(&b.name))
}

/// An unbound pod the scheduler places.
pub(crate) fn waits(p: &Pod) -> bool {
    !p.is_daemonset_pod()
        && !p.is_mirror_pod()
        && !p.is_terminal()
        && p.node_name.is_none()
        && !p.is_terminating()
        && p.phase == PodPhase::Pending
}

/// The pods this run places: pending ones, and those on nodes being deleted, in Karpenter's
/// queue order.
pub(crate) fn pods_to_schedule(s: &Snapshot) -> Vec<usize> {
    pods_to_schedule_by(s, karpenter_queue_cmp)
}

/// [`pods_to_schedule`] in the order `cmp` gives.
pub(crate) fn pods_to_schedule_by(
    s: &Snapshot,
    cmp: fn(&Pod, &Pod) -> std::cmp::Ordering,
) -> Vec<usize> {
    let deleting: BTreeSet<&str> = s
        .nodes
        .iter()
        .filter(|n| n.deletion_timestamp.is_some())
        .map(|n| n.name.as_str())
        .collect();
    let mut idx: Vec<usize> = (0..s.pods.len())
        .filter(|&i| {
            let p = &s.pods[i];
            // Most pods run on a node that stays: settled before the checks that read more.
            let asks = match &p.node_name {
                None => true,
                Some(n) => deleting.contains(n.as_str()),
            };
            if !asks || p.is_daemonset_pod() || p.is_mirror_pod() || p.is_terminal() {
                return false;
            }
            match p.node_name {
                // Upstream's reschedulable pods: a pod already terminating is replaced by its
                // controller, and that replacement is the pod to place; only a StatefulSet's
                // replacement waits for the old pod to go, so that one is placed itself.
                Some(_) => !p.is_terminating() || p.is_statefulset_pod(),
                None => waits(p),
            }
        })
        .collect();
    idx.sort_by(|&a, &b| cmp(&s.pods[a], &s.pods[b]));
    idx
}

/// Builds the solver's state for the snapshot's pending pods (and those on deleting nodes),
/// compiled as `compile` says (the result is the same), for a solve that closes nodes (see
/// [`Class::from_deleting`]) when `closes`, the pods taken in the order `cmp` gives.
pub(crate) fn build_ordered(
    s: &Snapshot,
    compile: Compile<'_>,
    closes: bool,
    cmp: fn(&Pod, &Pod) -> std::cmp::Ordering,
) -> World {
    let mut t = targets_with(s, compile);
    let schedule = pods_to_schedule_by(s, cmp);
    let rescheduled: BTreeSet<usize> = schedule.iter().copied().collect();
    let running = usage(s, &mut t, &rescheduled);
    let sched: Vec<(usize, &Pod)> = schedule.iter().map(|&i| (i, &*s.pods[i])).collect();
    let all = || {
        label_sets(s, &running)
            .iter()
            .map(|set| set.iter().map(|&(pi, ei)| (&*s.pods[pi], ei)).collect())
            .collect()
    };
    let running = Running {
        all: &all,
        with_anti_affinity: running
            .iter()
            .map(|&(pi, ei)| (&*s.pods[pi], ei))
            .filter(|(p, _)| !p.pod_anti_affinity.is_empty())
            .collect(),
    };
    complete(s, t, &sched, &running, closes)
}

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

/// Whether `owner`'s pod affinity term `term` selects `other`: `other` is in a namespace the
/// term names (a namespace selector read against the labels in `namespaces`), and its labels
/// match the term's selector with `matchLabelKeys` and `mismatchLabelKeys` filled in from
/// `owner`'s labels, as the compiled groups count pods. A term without a selector selects
/// nothing.
pub fn term_selects(
    term: &crate::model::PodAffinityTerm,
    owner: &Pod,
    other: &Pod,
    namespaces: &BTreeMap<String, BTreeMap<String, String>>,
) -> bool {
    namespaces_in(namespaces, &owner.namespace, term).contains(&other.namespace)
        && with_label_keys(
            &term.label_selector,
            &owner.labels,
            &term.match_label_keys,
            &term.mismatch_label_keys,
        )
        .is_some_and(|sel| sel.matches(&other.labels))
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

/// Counts the pods running on the targets (all but `rescheduled`) and the daemons that still
/// have to start; returns the running pods as `(pod index, existing index)`.
pub(crate) fn usage(
    s: &Snapshot,
    t: &mut Targets,
    rescheduled: &BTreeSet<usize>,
) -> Vec<(usize, usize)> {
    let Targets {
        names,
        interner,
        existing,
        existing_used,
        existing_ports,
        ..
    } = t;
    let existing_index: FastMap<&str, usize> = existing
        .iter()
        .enumerate()
        .map(|(i, e)| (e.name.as_str(), i))
        .collect();

    let resource_id = |k: &str| compile::resource_id(k, names);
    let mut running_ds: BTreeSet<(usize, String)> = BTreeSet::new();
    let mut running: Vec<(usize, usize)> = Vec::new();
    for (pi, p) in s.pods.iter().enumerate() {
        let Some(node) = &p.node_name else { continue };
        let Some(&ei) = existing_index.get(node.as_str()) else {
            continue;
        };
        if p.is_terminal() || rescheduled.contains(&pi) {
            continue;
        }
        // What `dense` would give, added in place: no vector per running pod.
        let used = existing_used.get_mut(ei);
        for (k, r) in p.requests.iter() {
            if let Some(id) = resource_id(k) {
                used[id] += r;
            }
        }
        if !p.host_ports.is_empty() {
            existing_ports
                .get_mut(ei)
                .extend(p.host_ports.iter().cloned());
        }
        if let Some(o) = &p.owner
            && o.kind == "DaemonSet"
        {
            running_ds.insert((ei, o.name.clone()));
        }
        if !p.is_terminating() {
            running.push((pi, ei));
        }
    }
    for (ei, e) in existing.iter().enumerate() {
        for d in &s.daemonsets {
            if running_ds.contains(&(ei, d.name.clone()))
                || !compile::daemon_tolerates(&d.pod, &e.taints)
            {
                continue;
            }
            let dr = compile::daemon_reqs(&d.pod, interner);
            if e.reqs.compatible(&dr, interner, &|_| false).is_ok() {
                for (u, r) in existing_used
                    .get_mut(ei)
                    .iter_mut()
                    .zip(dense(&d.pod.requests, names))
                {
                    *u += r;
                }
                existing_ports
                    .get_mut(ei)
                    .extend(d.pod.host_ports.iter().cloned());
            }
        }
    }
    running
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

/// The running pods a solve counts for topology, `(pod, existing index)`: all of them on
/// demand (only needed when some class brings topology groups), and those with required
/// anti-affinity terms up front.
pub struct Running<'p, 'f> {
    /// Every running pod, in sets that share a namespace and labels (see [`label_sets`]);
    /// called only when some topology group may count them.
    pub all: &'f dyn Fn() -> Vec<Vec<(&'p Pod, usize)>>,
    pub with_anti_affinity: Vec<(&'p Pod, usize)>,
}

/// `running` (`(pod index, existing index)`) in sets of pods with the same namespace and
/// labels, in order of first appearance. A topology group selects all of a set or none of it,
/// so counting matches a selector once per set, not once per pod: a Deployment's thousand
/// replicas are one set. A consolidation round counts the running pods once per candidate, and
/// per pod that made the round's cost grow with the cluster times its candidates.
pub(crate) fn label_sets(s: &Snapshot, running: &[(usize, usize)]) -> Vec<Vec<(usize, usize)>> {
    let mut index: HashMap<(&str, &BTreeMap<String, String>), usize> = HashMap::new();
    let mut sets: Vec<Vec<(usize, usize)>> = Vec::new();
    for &(pi, ei) in running {
        let p = &s.pods[pi];
        let i = *index
            .entry((p.namespace.as_str(), &p.labels))
            .or_insert_with(|| {
                sets.push(Vec::new());
                sets.len() - 1
            });
        sets[i].push((pi, ei));
    }
    sets
}

/// Finishes the state for `schedule` (`(index, pod)`, in queue order; the index is what
/// placements name) with `running` pods (`(pod, existing index)`) counted for topology.
pub(crate) fn complete<'p>(
    s: &Snapshot,
    t: Targets,
    schedule: &[(usize, &'p Pod)],
    running: &Running<'p, '_>,
    closes: bool,
) -> World {
    let Targets {
        names,
        mut interner,
        mut pools,
        allow_undefined,
        existing,
        existing_used,
        existing_ports,
        hostname,
        zone,
        capacity_type,
        pool_used,
        type_names: known_type_names,
        ..
    } = t;
    charge_existing(&mut pools, pool_used, &existing, &interner);
    let mut g = Groups {
        groups: Vec::new(),
        ids: HashMap::new(),
        inverse: Vec::new(),
        inverse_ids: HashMap::new(),
    };
    let (mut classes, order) = classes_of(s, schedule, closes, &names, &mut interner, &mut g);
    // Running pods' required anti-affinity keeps matching pods away.
    for &(p, _) in &running.with_anti_affinity {
        inverse_groups(s, p, &mut interner, &mut g);
    }
    for c in classes.iter_mut() {
        c.counted_by = (0..g.groups.len())
            .filter(|&i| g.groups[i].matches(&c.namespace, &c.labels))
            .collect();
        c.blocked_by = (0..g.inverse.len())
            .filter(|&i| g.inverse[i].blocks(&c.namespace, &c.labels))
            .collect();
    }
    let universe = domain_universe(&pools, &g, &interner);
    eligible_domains(&mut g, &universe, &pools, &existing, &interner, hostname);
    if !g.groups.is_empty() {
        count_in_groups(&(running.all)(), &existing, &interner, &mut g);
    }
    count_in_inverse(
        s,
        &running.with_anti_affinity,
        &existing,
        &mut interner,
        &mut g,
    );
    let order = queue_order(order, &classes, &pools, &g, hostname);
    let any_prefer_no_schedule = pools.iter().any(|p| p.has_prefer_no_schedule);
    let type_names = known_type_names.unwrap_or_else(|| type_names(&pools));
    World {
        interner,
        names,
        type_names,
        pools,
        existing,
        existing_used,
        existing_ports,
        groups: g.groups,
        inverse: g.inverse,
        classes,
        order,
        allow_undefined,
        universe,
        hostname,
        zone,
        capacity_type,
        pods_considered: schedule.len(),
        any_prefer_no_schedule,
        room: None,
    }
}

/// Charges each NodePool what its existing targets hold: `pool_used` when a prepared cluster
/// has it already, else summed here.
fn charge_existing(
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

/// The classes of the pods to schedule (identical pods share one), with the topology groups
/// they bring, and the classes in the order their first pods come.
fn classes_of(
    s: &Snapshot,
    schedule: &[(usize, &Pod)],
    closes: bool,
    names: &Interner,
    interner: &mut Interner,
    g: &mut Groups,
) -> (Vec<Class>, Vec<usize>) {
    let mut classes: Vec<Class> = Vec::new();
    let mut class_ids: HashMap<(ClassKey, bool), usize> = HashMap::new();
    let mut order: Vec<usize> = Vec::new();
    for &(pi, pod) in schedule {
        let (vols, vol_err) = match volume_alternatives(s, pod) {
            Ok(v) => (v, None),
            Err(e) => (vec![], Some(e)),
        };
        // A pod still bound to a node here is one of a deleting node's.
        let from_deleting = closes && pod.node_name.is_some();
        let key = (ClassKey::of(pod, vols.clone()), from_deleting);
        if let Some(&ci) = class_ids.get(&key) {
            classes[ci].pods.push(pi);
            continue;
        }
        let ci = classes.len();
        class_ids.insert(key, ci);
        order.push(ci);
        let mut class = compile_class(s, pod, &vols, names, interner, g);
        class.error = vol_err.or(class.error);
        class.from_deleting = from_deleting;
        class.pods.push(pi);
        classes.push(class);
    }
    (classes, order)
}

/// Per topology key of the groups, every value the NodePools' instance types can give it,
/// with the NodePool that gives it.
fn domain_universe(
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
fn eligible_domains(
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

/// The value `reqs` gives `key` when it gives exactly one: the domain a target is in.
fn single_value(reqs: &Reqs, key: u32) -> Option<u32> {
    reqs.get(key)
        .filter(|set| set.values.len() == 1 && !set.complement)
        .map(|set| set.values[0])
}

/// Counts the running pods, in `sets` of one namespace and labels each, in the groups that
/// select them, where they run.
fn count_in_groups(
    sets: &[Vec<(&Pod, usize)>],
    existing: &Existing,
    interner: &Interner,
    g: &mut Groups,
) {
    let mut selecting = Vec::new();
    for set in sets {
        let Some(&(first, _)) = set.first() else {
            continue;
        };
        selecting.clear();
        selecting.extend(
            (0..g.groups.len()).filter(|&i| g.groups[i].matches(&first.namespace, &first.labels)),
        );
        for &(_, ei) in set {
            let e = &existing[ei];
            for &gi in &selecting {
                let grp = &mut g.groups[gi];
                if grp.def.filter.accepts(&e.reqs, &e.taints, interner)
                    && let Some(v) = single_value(&e.reqs, grp.def.key)
                {
                    grp.record(v, 1);
                }
            }
        }
    }
}

/// Counts the running pods with required anti-affinity (`(pod, existing index)`) in the
/// inverse groups of their terms, where they run.
fn count_in_inverse(
    s: &Snapshot,
    with_anti_affinity: &[(&Pod, usize)],
    existing: &Existing,
    interner: &mut Interner,
    g: &mut Groups,
) {
    for &(p, ei) in with_anti_affinity {
        for id in inverse_groups(s, p, interner, g) {
            if let Some(v) = single_value(&existing[ei].reqs, g.inverse[id].def.key) {
                g.inverse[id].record(v, 1);
            }
        }
    }
}

/// The classes in the order the solve takes them. Classes that force pods apart per host
/// (required hostname anti-affinity against themselves) go first: the nodes they need exist
/// either way, and every later pod can then fill their spare room instead of opening nodes
/// of its own. The sort is stable, so everything else keeps Karpenter's queue order.
fn queue_order(
    mut order: Vec<usize>,
    classes: &[Class],
    pools: &[PoolC],
    g: &Groups,
    hostname: u32,
) -> Vec<usize> {
    let forces_nodes = |c: &Class| {
        c.anti_affinity.iter().any(|&gi| {
            g.groups[gi].def.key == hostname && g.groups[gi].matches(&c.namespace, &c.labels)
        })
    };
    order.sort_by_key(|&ci| !forces_nodes(&classes[ci]));
    interleave_by_shape(order, classes, pools, forces_nodes)
}

/// The first taint that keeps this pod off a node. PreferNoSchedule taints count too until
/// relaxation tolerates them, as Karpenter does.
pub(crate) fn untolerated<'a>(
    tolerations: &[Toleration],
    taints: &'a [crate::taints::Taint],
    prefer_no_schedule_tolerated: bool,
) -> Option<&'a crate::taints::Taint> {
    taints.iter().find(|t| {
        let waived = prefer_no_schedule_tolerated
            && t.effect == crate::taints::TaintEffect::PreferNoSchedule;
        !waived && !tolerations.iter().any(|tol| tol.tolerates(t))
    })
}

/// Reorders the classes after the node-forcing ones so cpu-heavy and memory-heavy work
/// alternate: each next class comes from whichever kind has placed less of its share so far.
/// Within each kind the queue order is kept, so large pods still go first; nodes then fill in
/// both dimensions at once instead of running out of cpu with memory to spare.
fn interleave_by_shape(
    order: Vec<usize>,
    classes: &[Class],
    pools: &[PoolC],
    forced: impl Fn(&Class) -> bool,
) -> Vec<usize> {
    let (mut big_cpu, mut big_mem) = (1i64, 1i64);
    for p in pools {
        for it in p.its.iter() {
            big_cpu = big_cpu.max(it.alloc.first().copied().unwrap_or(0));
            big_mem = big_mem.max(it.alloc.get(1).copied().unwrap_or(0));
        }
    }
    let shape = |c: &Class| {
        let cpu = c.requests.first().copied().unwrap_or(0) as f64 / big_cpu as f64;
        let mem = c.requests.get(1).copied().unwrap_or(0) as f64 / big_mem as f64;
        (cpu, mem)
    };
    let mut out: Vec<usize> = order
        .iter()
        .copied()
        .filter(|&ci| forced(&classes[ci]))
        .collect();
    let rest: Vec<usize> = order
        .iter()
        .copied()
        .filter(|&ci| !forced(&classes[ci]))
        .collect();
    let (cpu_heavy, mem_heavy): (Vec<usize>, Vec<usize>) = rest.iter().partition(|&&ci| {
        let (c, m) = shape(&classes[ci]);
        c >= m
    });
    let (mut i, mut j) = (0, 0);
    let (mut cpu_done, mut mem_done) = (0.0f64, 0.0f64);
    while i < cpu_heavy.len() || j < mem_heavy.len() {
        let take_cpu = j >= mem_heavy.len() || (i < cpu_heavy.len() && cpu_done <= mem_done);
        let ci = if take_cpu {
            i += 1;
            cpu_heavy[i - 1]
        } else {
            j += 1;
            mem_heavy[j - 1]
        };
        let (c, m) = shape(&classes[ci]);
        let n = classes[ci].pods.len() as f64;
        cpu_done += c * n;
        mem_done += m * n;
        out.push(ci);
    }
    out
}
