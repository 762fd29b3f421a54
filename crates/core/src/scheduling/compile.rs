//! Compiling a [`Snapshot`] into the scheduler's interned, dense form: resource vectors,
//! requirement sets over ids, instance types ranked by price, pod classes.

use std::collections::BTreeMap;

use super::intern::Interner;
use super::reqs::{self, Reqs, ValueSet};
use crate::labels;
use crate::model::{CapacityType, InstanceType, Node, NodeClaim, NodePool, Pod, Snapshot};
use crate::requirements::NodeSelectorTerm;
use crate::resources::{self, Resources};
use crate::taints::{self, Taint, TaintEffect, Toleration};

/// Dense resource vectors: index `r` is the resource interned as `r`.
pub(crate) type Res = Vec<i64>;

/// The position of resource `k` in `names` ([`resource_names`]): the well-known resources,
/// which almost every request names, by comparing with constants (no call, no hash), any other
/// by lookup.
pub(crate) fn resource_id(k: &str, names: &Interner) -> Option<usize> {
    let known = match k {
        resources::CPU => 0,
        resources::MEMORY => 1,
        resources::PODS => 2,
        resources::EPHEMERAL_STORAGE => 3,
        _ => return names.get(k).map(|id| id as usize),
    };
    debug_assert_eq!(names.get(k), Some(known as u32));
    Some(known)
}

pub(crate) fn dense(res: &Resources, names: &Interner) -> Res {
    let mut v = vec![0; names.len()];
    for (k, a) in res.iter() {
        if let Some(id) = resource_id(k, names) {
            v[id] = a;
        }
    }
    v
}

pub(crate) fn sparse(v: &[i64], names: &Interner) -> Resources {
    let mut r = Resources::new();
    for (i, &a) in v.iter().enumerate() {
        r.set(names.name(i as u32), a);
    }
    r
}

/// `used + req` fits in `alloc`, comparing only what `req` asks for (as the kube-scheduler does).
pub(crate) fn fits_plus(used: &[i64], req: &[i64], alloc: &[i64]) -> bool {
    used.iter()
        .zip(req)
        .zip(alloc)
        .all(|((&u, &r), &a)| r <= 0 || u + r <= a)
}

pub(crate) fn fits(total: &[i64], alloc: &[i64]) -> bool {
    total.iter().zip(alloc).all(|(&t, &a)| t <= 0 || t <= a)
}

#[derive(Clone, Debug)]
pub(crate) struct OfferingC {
    pub zone: u32,
    pub capacity_type: u32,
    pub ct: CapacityType,
    pub price: f64,
    pub available: bool,
    /// Reserved offerings: the reservation and the instances still free in it.
    pub reservation: Option<(String, Option<u32>)>,
}

#[derive(Clone, Debug)]
pub(crate) struct ItC {
    pub name: String,
    pub reqs: Reqs,
    pub capacity: Res,
    /// Allocatable minus the daemonset overhead on this NodePool.
    pub alloc: Res,
    pub daemon: Res,
    pub offerings: Vec<OfferingC>,
    /// Cheapest available offering, `f64::MAX` when none.
    pub base_price: f64,
}

#[derive(Clone, Debug)]
pub(crate) struct PoolC {
    pub name: String,
    pub reqs: Reqs,
    pub taints: Vec<Taint>,
    /// Ranked by base price then name: index order is price order.
    pub its: std::sync::Arc<Vec<ItC>>,
    /// `None` for unlimited resources.
    pub limits: Vec<Option<i64>>,
    pub node_limit: Option<i64>,
    /// Capacity of nodes and claims this NodePool already owns.
    pub used: Res,
    pub used_nodes: i64,
    pub has_prefer_no_schedule: bool,
    /// Some requirement of this NodePool carries `minValues`.
    pub min_values: bool,
    /// Host ports the NodePool's daemonsets hold on every new node.
    pub daemon_ports: Vec<crate::model::HostPort>,
}

/// A node or in-flight claim that already exists.
#[derive(Clone, Debug)]
pub(crate) struct ExistingC {
    pub name: String,
    pub in_flight: bool,
    /// Shared with the node cache, which hands the same requirements to later compiles.
    pub reqs: std::sync::Arc<Reqs>,
    pub taints: Vec<Taint>,
    pub available: Res,
    pub initialized: bool,
    /// The one value its requirements allow for the NodePool label, if exactly one: the
    /// NodePool that owns it, read once here rather than searched for per NodePool.
    pub nodepool: Option<u32>,
}

/// The user-written constraints shared by identical pods.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ClassKey {
    pub namespace: String,
    pub labels: BTreeMap<String, String>,
    pub requests: Resources,
    pub node_selector: BTreeMap<String, String>,
    pub required_node_affinity: Vec<NodeSelectorTerm>,
    pub preferred_node_affinity: Vec<crate::model::WeightedNodeSelectorTerm>,
    pub tolerations: Vec<Toleration>,
    pub topology_spread: Vec<crate::model::TopologySpreadConstraint>,
    pub pod_affinity: Vec<crate::model::PodAffinityTerm>,
    pub preferred_pod_affinity: Vec<crate::model::WeightedPodAffinityTerm>,
    pub pod_anti_affinity: Vec<crate::model::PodAffinityTerm>,
    pub preferred_pod_anti_affinity: Vec<crate::model::WeightedPodAffinityTerm>,
    pub host_ports: Vec<crate::model::HostPort>,
    pub volume_alternatives: Vec<Vec<crate::requirements::Requirement>>,
}

impl ClassKey {
    pub(crate) fn of(
        pod: &Pod,
        volume_alternatives: Vec<Vec<crate::requirements::Requirement>>,
    ) -> Self {
        ClassKey {
            namespace: pod.namespace.clone(),
            labels: pod.labels.clone(),
            requests: pod.requests.clone(),
            node_selector: pod.node_selector.clone(),
            required_node_affinity: pod.required_node_affinity.clone(),
            preferred_node_affinity: pod.preferred_node_affinity.clone(),
            tolerations: pod.tolerations.clone(),
            topology_spread: pod.topology_spread.clone(),
            pod_affinity: pod.pod_affinity.clone(),
            preferred_pod_affinity: pod.preferred_pod_affinity.clone(),
            pod_anti_affinity: pod.pod_anti_affinity.clone(),
            preferred_pod_anti_affinity: pod.preferred_pod_anti_affinity.clone(),
            host_ports: pod.host_ports.clone(),
            volume_alternatives,
        }
    }
}

/// Compiles the node-selector part of a pod: `nodeSelector` as `In` requirements.
pub(crate) fn node_selector_reqs(sel: &BTreeMap<String, String>, interner: &mut Interner) -> Reqs {
    let mut r = Reqs::new();
    for (k, v) in sel {
        let key = interner.intern(reqs::normalize(k));
        let value = interner.intern(v);
        r.add(key, ValueSet::one(value), None, interner);
    }
    r
}

pub(crate) fn term_reqs(term: &NodeSelectorTerm, interner: &mut Interner) -> Reqs {
    reqs::compile_all(&term.match_expressions, interner)
}

/// The requirements that `it` (offered in the given NodePool) implies for a node.
pub(crate) fn instance_type_reqs(it: &InstanceType, interner: &mut Interner) -> Reqs {
    let mut r = reqs::compile_all(&it.requirements, interner);
    let name_key = interner.intern(labels::INSTANCE_TYPE);
    let name = interner.intern(&it.name);
    r.add(name_key, ValueSet::one(name), None, interner);
    let zone_key = interner.intern(labels::ZONE);
    let ct_key = interner.intern(labels::CAPACITY_TYPE);
    let zones = it
        .offerings
        .iter()
        .map(|o| interner.intern(&o.zone))
        .collect();
    let cts = it
        .offerings
        .iter()
        .map(|o| interner.intern(o.capacity_type.as_str()))
        .collect();
    r.add(zone_key, ValueSet::of(zones), None, interner);
    r.add(ct_key, ValueSet::of(cts), None, interner);
    r
}

/// The template requirements of a NodePool: its requirements, its labels as `In`, and its name.
pub(crate) fn pool_reqs(np: &NodePool, interner: &mut Interner) -> Reqs {
    let mut r = reqs::compile_all(&np.template.requirements, interner);
    for (k, v) in &np.template.labels {
        let key = interner.intern(reqs::normalize(k));
        let value = interner.intern(v);
        r.add(key, ValueSet::one(value), None, interner);
    }
    let key = interner.intern(labels::NODEPOOL);
    let value = interner.intern(&np.name);
    r.add(key, ValueSet::one(value), None, interner);
    r
}

/// Pod requirements a daemonset pod brings: node selector and the first required term.
pub(crate) fn daemon_reqs(pod: &Pod, interner: &mut Interner) -> Reqs {
    let mut r = node_selector_reqs(&pod.node_selector, interner);
    if let Some(t) = pod.required_node_affinity.first() {
        let t = term_reqs(t, interner);
        r.merge(&t, interner);
    }
    r
}

/// Daemons tolerate PreferNoSchedule (Karpenter does the same when sizing overhead).
pub(crate) fn daemon_tolerates(pod: &Pod, taints: &[Taint]) -> bool {
    taints::first_untolerated(&pod.tolerations, taints).is_none()
}

/// Every resource name the snapshot mentions, interned in a fixed order (well-known first).
pub(crate) fn resource_names(s: &Snapshot) -> Interner {
    let mut names = Interner::new();
    for n in [
        resources::CPU,
        resources::MEMORY,
        resources::PODS,
        resources::EPHEMERAL_STORAGE,
    ] {
        names.intern(n);
    }
    let common = |k: &str| {
        matches!(
            k,
            resources::CPU
                | resources::MEMORY
                | resources::PODS
                | resources::EPHEMERAL_STORAGE
                | resources::NODES
        )
    };
    let mut extra: Vec<String> = Vec::new();
    let mut take = |r: &Resources| {
        for (k, _) in r.iter() {
            // Almost every pod asks only for the common resources: no lookup for those.
            if !common(k) && names.get(k).is_none() {
                extra.push(k.to_string());
            }
        }
    };
    for p in &s.pods {
        take(&p.requests);
    }
    for d in &s.daemonsets {
        take(&d.pod.requests);
    }
    for its in s.instance_types.values() {
        for it in its.iter() {
            take(&it.capacity);
        }
    }
    for np in &s.nodepools {
        take(&np.limits);
    }
    for n in &s.nodes {
        take(&n.allocatable);
    }
    extra.sort();
    for e in extra {
        names.intern(&e);
    }
    names
}

/// Karpenter's NodePool order: weight descending, then name descending.
pub(crate) fn pool_order(pools: &[NodePool]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..pools.len()).collect();
    idx.sort_by(|&a, &b| {
        pools[b]
            .weight
            .cmp(&pools[a].weight)
            .then_with(|| pools[b].name.cmp(&pools[a].name))
    });
    idx
}

pub(crate) struct PoolBuild<'a> {
    pub np: &'a NodePool,
    pub its: &'a [InstanceType],
}

/// One NodePool compiled: its requirements, the daemons its nodes run, its instance types
/// cheapest first, and its limits.
pub(crate) fn compile_pool(
    b: &PoolBuild<'_>,
    s: &Snapshot,
    names: &Interner,
    interner: &mut Interner,
) -> PoolC {
    let np = b.np;
    let reqs = pool_reqs(np, interner);
    let (daemons, daemon_ports) = pool_daemons(np, &reqs, s, names, interner);
    let mut its: Vec<ItC> = b
        .its
        .iter()
        .map(|it| compile_instance_type(it, &daemons, names, interner))
        .collect();
    sort_cheapest_first(&mut its);
    let limits = (0..names.len()).map(|i| {
        let n = names.name(i as u32);
        np.limits.iter().find(|(k, _)| *k == n).map(|(_, v)| v)
    });
    let limits: Vec<Option<i64>> = limits.collect();
    let node_limit = np
        .limits
        .iter()
        .find(|(k, _)| *k == resources::NODES)
        .map(|(_, v)| v);
    PoolC {
        name: np.name.clone(),
        reqs,
        taints: np.template.taints.clone(),
        its: std::sync::Arc::new(its),
        limits,
        node_limit,
        used: vec![0; names.len()],
        used_nodes: 0,
        has_prefer_no_schedule: np
            .template
            .taints
            .iter()
            .any(|t| t.effect == TaintEffect::PreferNoSchedule),
        min_values: np
            .template
            .requirements
            .iter()
            .any(|r| r.min_values.is_some()),
        daemon_ports,
    }
}

/// The DaemonSets that would run on a node of the NodePool (they tolerate its taints and
/// their requirements meet its own): each one's requirements and requests, and all their
/// host ports.
fn pool_daemons(
    np: &NodePool,
    reqs: &Reqs,
    s: &Snapshot,
    names: &Interner,
    interner: &mut Interner,
) -> (Vec<(Reqs, Res)>, Vec<crate::model::HostPort>) {
    let mut daemons: Vec<(Reqs, Res)> = Vec::new();
    let mut daemon_ports: Vec<crate::model::HostPort> = Vec::new();
    for d in s
        .daemonsets
        .iter()
        .filter(|d| daemon_tolerates(&d.pod, &np.template.taints))
    {
        let r = daemon_reqs(&d.pod, interner);
        if reqs.compatible(&r, interner, &|_| true).is_ok() {
            daemons.push((r, dense(&d.pod.requests, names)));
            daemon_ports.extend(d.pod.host_ports.iter().cloned());
        }
    }
    (daemons, daemon_ports)
}

/// One instance type of a NodePool: its allocatable less the overhead of the pool's
/// `daemons` that its requirements admit, and its offerings with the cheapest available
/// price.
fn compile_instance_type(
    it: &InstanceType,
    daemons: &[(Reqs, Res)],
    names: &Interner,
    interner: &mut Interner,
) -> ItC {
    let r = instance_type_reqs(it, interner);
    let capacity = dense(&it.capacity, names);
    let mut daemon = vec![0; names.len()];
    for (dr, dreq) in daemons {
        if r.intersects(dr, interner).is_ok() {
            for (d, x) in daemon.iter_mut().zip(dreq) {
                *d += x;
            }
        }
    }
    let mut alloc = dense(&it.allocatable(), names);
    for (a, d) in alloc.iter_mut().zip(&daemon) {
        *a -= d;
    }
    let offerings: Vec<OfferingC> = it
        .offerings
        .iter()
        .map(|o| OfferingC {
            zone: interner.intern(&o.zone),
            capacity_type: interner.intern(o.capacity_type.as_str()),
            ct: o.capacity_type,
            price: o.price,
            available: o.available,
            reservation: o
                .reservation_id
                .clone()
                .map(|id| (id, o.reservation_capacity)),
        })
        .collect();
    let base_price = offerings
        .iter()
        .filter(|o| o.available)
        .map(|o| o.price)
        .fold(f64::MAX, f64::min);
    ItC {
        name: it.name.clone(),
        reqs: r,
        capacity,
        alloc,
        daemon,
        offerings,
        base_price,
    }
}

/// Orders a NodePool's instance types by their cheapest available price (then name), and
/// each one's offerings by price (then zone and capacity type).
fn sort_cheapest_first(its: &mut [ItC]) {
    its.sort_by(|a, b| {
        a.base_price
            .total_cmp(&b.base_price)
            .then_with(|| a.name.cmp(&b.name))
    });
    // Cheapest offering first, so the first compatible one found is the cheapest.
    for it in its {
        it.offerings.sort_by(|a, b| {
            a.price
                .total_cmp(&b.price)
                .then(a.zone.cmp(&b.zone))
                .then(a.capacity_type.cmp(&b.capacity_type))
        });
    }
}

/// Taints that say a node is still coming up; they do not keep pods away from a node Karpenter
/// itself launched and is waiting for.
pub(crate) fn is_ephemeral_taint(t: &Taint) -> bool {
    matches!(
        t.key.as_str(),
        "node.kubernetes.io/not-ready"
            | "node.kubernetes.io/unreachable"
            | "node.cloudprovider.kubernetes.io/uninitialized"
            | "karpenter.sh/unregistered"
    )
}

/// The strings [`node_reqs`] interns for `node`, in call order: each label's key (normalized)
/// and value, the hostname key, then the node's name when no label gave the hostname. Two
/// nodes of one name with the same strings compile to the same requirements, which is how the
/// node cache tells a node's labels unchanged without keeping a copy of them.
pub(crate) fn node_strings(node: &Node) -> impl Iterator<Item = &str> {
    let named = node
        .labels
        .keys()
        .any(|k| reqs::normalize(k) == labels::HOSTNAME);
    node.labels
        .iter()
        .flat_map(|(k, v)| [reqs::normalize(k), v.as_str()])
        .chain([labels::HOSTNAME])
        .chain((!named).then_some(node.name.as_str()))
}

pub(crate) fn node_reqs(node: &Node, interner: &mut Interner) -> Reqs {
    let mut r = Reqs::from_labels(&node.labels, interner);
    let host = interner.intern(labels::HOSTNAME);
    if r.get(host).is_none() {
        let v = interner.intern(&node.name);
        r.add(host, ValueSet::one(v), None, interner);
    }
    r
}

/// The one value `reqs` allow for the NodePool label (not complemented), if exactly one.
pub(crate) fn nodepool_value(reqs: &Reqs, interner: &Interner) -> Option<u32> {
    let set = reqs.get(interner.get(labels::NODEPOOL)?)?;
    match &*set.values {
        [v] if !set.complement => Some(*v),
        _ => None,
    }
}

pub(crate) fn claim_reqs(claim: &NodeClaim, interner: &mut Interner) -> Reqs {
    let mut r = reqs::compile_all(&claim.requirements, interner);
    let l = Reqs::from_labels(&*claim.labels, interner);
    r.merge(&l, interner);
    let host = interner.intern(labels::HOSTNAME);
    if r.get(host).is_none() {
        let v = interner.intern(claim.node_name.as_deref().unwrap_or(&claim.name));
        r.add(host, ValueSet::one(v), None, interner);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::requirements::{Operator, Requirement};

    fn value_of(reqs: &[Requirement]) -> Option<String> {
        let mut interner = Interner::default();
        let compiled = reqs::compile_all(reqs, &mut interner);
        nodepool_value(&compiled, &interner).map(|v| interner.name(v).to_string())
    }

    #[test]
    fn only_one_allowed_nodepool_names_an_owner() {
        let pool = |op, values: &[&str]| Requirement::new(labels::NODEPOOL, op, values);
        assert_eq!(
            value_of(&[pool(Operator::In, &["default"])]).as_deref(),
            Some("default")
        );
        assert_eq!(value_of(&[pool(Operator::In, &["a", "b"])]), None);
        assert_eq!(value_of(&[pool(Operator::NotIn, &["a"])]), None);
        assert_eq!(value_of(&[pool(Operator::Exists, &[])]), None);
        assert_eq!(
            value_of(&[Requirement::single(labels::ZONE, "us-east-1a")]),
            None
        );
    }
}
