//! The cluster's own kube-scheduler, approximated: bind pending pods to Ready nodes that fit.
//!
//! Filters: the node is Ready and schedulable, every NoSchedule/NoExecute taint is tolerated,
//! the node selector and required node affinity match, the pod's volumes allow the node (a
//! bound volume's zone, a StorageClass's allowed topologies), requests fit in what is free,
//! no bound pod holds a host port the pod asks for, hard topology spread (DoNotSchedule) keeps
//! its skew, and required inter-pod affinity and anti-affinity hold ([`inter_pod`]). Among
//! nodes that pass, soft spread (ScheduleAnyway) prefers the least-populated domain, then the
//! least allocated node, then the name. Pods are taken by priority, then age, then name.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use nodewright_core::model::{Node, Pod, TopologySpreadConstraint, WhenUnsatisfiable};
use nodewright_core::resources::{CPU, Resources};
use nodewright_core::scheduling::ports_conflict;
use nodewright_core::taints::first_untolerated;
use nodewright_core::time::Timestamp;

use crate::cluster::{Cluster, Room, SimClaim};

mod inter_pod;
use inter_pod::InterPod;

/// Why `pod` cannot go on `node`, or `None` when it fits.
pub fn unfit(cluster: &Cluster, pod: &Pod, node: &Node) -> Option<String> {
    unfit_given(
        cluster,
        pod,
        node,
        Some(&cluster.free(node)),
        &InterPod::of(cluster, pod),
    )
}

/// [`unfit`] with what is free on the node already known, or `None` when the pass already
/// found the requests fit, and with what inter-pod affinity allows the pod.
fn unfit_given(
    cluster: &Cluster,
    pod: &Pod,
    node: &Node,
    free: Option<&Resources>,
    inter: &InterPod,
) -> Option<String> {
    if !node.ready || node.unschedulable || node.deletion_timestamp.is_some() {
        return Some("node is not schedulable".into());
    }
    if let Some(t) = first_untolerated(&pod.tolerations, &node.taints) {
        return Some(format!("untolerated taint {}", t.key));
    }
    if let Some((k, v)) = pod
        .node_selector
        .iter()
        .find(|(k, v)| node.labels.get(*k) != Some(*v))
    {
        return Some(format!("node selector {k}={v} does not match"));
    }
    if !pod.required_node_affinity.is_empty()
        && !pod.required_node_affinity.iter().any(|term| {
            term.match_expressions
                .iter()
                .all(|r| r.admits_labels(&node.labels))
        })
    {
        return Some("required node affinity does not match".into());
    }
    if let Some(why) = crate::volumes::unfit(cluster, pod, node) {
        return Some(why);
    }
    if !pod.host_ports.is_empty()
        && let Some(port) = cluster
            .pods_on(&node.name)
            .filter(|q| !q.is_terminal() && (q.namespace != pod.namespace || q.name != pod.name))
            .find_map(|q| ports_conflict(&pod.host_ports, &q.host_ports))
    {
        return Some(format!("host port {port} is taken"));
    }
    if let Some(free) = free
        && !pod.requests.fits_in(free)
    {
        return Some(format!(
            "insufficient {}",
            pod.requests.shortfall(free).join(", ")
        ));
    }
    for c in pod
        .topology_spread
        .iter()
        .filter(|c| c.when_unsatisfiable == WhenUnsatisfiable::DoNotSchedule)
    {
        if let Some(domain) = node.labels.get(&c.topology_key) {
            let counts = domain_counts(cluster, pod, c);
            let min = counts.values().copied().min().unwrap_or(0);
            let here = counts.get(domain).copied().unwrap_or(0);
            if (here + 1) as i64 - min as i64 > c.max_skew as i64 {
                return Some(format!(
                    "topology spread on {} would exceed maxSkew",
                    c.topology_key
                ));
            }
        } else {
            return Some(format!("node has no {} label", c.topology_key));
        }
    }
    inter.unfit(node)
}

/// Matching pods per domain of `c`, over every Ready node that has the key.
fn domain_counts(
    cluster: &Cluster,
    pod: &Pod,
    c: &TopologySpreadConstraint,
) -> BTreeMap<String, usize> {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for (_, node) in cluster.ready_nodes() {
        let Some(domain) = node.labels.get(&c.topology_key) else {
            continue;
        };
        let n = cluster
            .pods_on(&node.name)
            .filter(|p| {
                p.namespace == pod.namespace
                    && c.label_selector
                        .as_ref()
                        .is_some_and(|s| s.matches(&p.labels))
            })
            .count();
        *counts.entry(domain.clone()).or_default() += n;
    }
    counts
}

fn score<'n>(
    cluster: &Cluster,
    pod: &Pod,
    node: &'n Node,
    free: &Resources,
) -> (usize, i64, &'n str) {
    let soft: usize = pod
        .topology_spread
        .iter()
        .filter(|c| c.when_unsatisfiable == WhenUnsatisfiable::ScheduleAnyway)
        .map(|c| {
            node.labels.get(&c.topology_key).map_or(0, |d| {
                domain_counts(cluster, pod, c).get(d).copied().unwrap_or(0)
            })
        })
        .sum();
    let free = emptiness(free.get(CPU), node.allocatable.get(CPU));
    (soft, free, node.name.as_str())
}

/// Per-mille of CPU left free, negated so the emptiest node sorts first.
fn emptiness(free_cpu: i64, allocatable_cpu: i64) -> i64 {
    -(free_cpu * 1000 / allocatable_cpu.max(1))
}

/// Whether [`score`] ranks nodes for `pod` by more than their room and name.
fn spreads_softly(pod: &Pod) -> bool {
    pod.topology_spread
        .iter()
        .any(|c| c.when_unsatisfiable == WhenUnsatisfiable::ScheduleAnyway)
}

/// The node [`score`] ranks first among those `pod` passes every filter on, for a pod that
/// does not spread softly: its score is then the node's share of cpu free and its name, both
/// in `room`, so the nodes with room are taken in score order and the first that passes the
/// other filters is the one, without filtering the rest. Ties (two Ready nodes of one name)
/// go to the earlier row, as a scan in order would. `cpu` is the column of cpu.
fn emptiest_fit(
    cluster: &Cluster,
    pod: &Pod,
    room: &Room,
    need: &[(usize, i64)],
    cpu: usize,
    inter: &InterPod,
) -> Option<(usize, String)> {
    let mut ranked: BinaryHeap<Reverse<(i64, &str, usize)>> = (0..room.len())
        .filter(|&i| room.fits(i, need))
        .map(|i| {
            let free = emptiness(room.amount(i, cpu), room.allocatable_cpu(i));
            Reverse((free, room.node(i), i))
        })
        .collect();
    while let Some(Reverse((_, _, i))) = ranked.pop() {
        let node = cluster
            .claims()
            .get(room.claim(i))
            .and_then(SimClaim::ready_node)
            .expect("a row per Ready node");
        if unfit_given(cluster, pod, node, None, inter).is_none() {
            return Some((i, node.name.clone()));
        }
    }
    None
}

/// Binds every pending pod it can, in kube-scheduler order. Returns `(pod, node)` pairs.
pub fn bind_pending(cluster: &mut Cluster, now: Timestamp) -> Vec<(String, String)> {
    let mut bound = Vec::new();
    if cluster.pending_keys().is_empty() {
        return bound;
    }
    // Pod keys are unique, so this order is total: no sort can tell two entries apart.
    let mut pending: Vec<(Reverse<i32>, Timestamp, String)> = {
        let keys: Vec<String> = cluster.pending_keys().iter().cloned().collect();
        keys.into_iter()
            .filter_map(|k| {
                let p = cluster.pods().get(&k)?;
                Some((Reverse(p.priority), p.creation_timestamp, k))
            })
            .collect()
    };
    pending.sort_unstable();
    // Every resource a pending pod asks for gets a column, so the search for room below
    // compares integers.
    let mut names: Vec<String> = vec![CPU.to_string()];
    for (_, _, key) in &pending {
        for (name, amount) in cluster
            .pods()
            .get(key)
            .into_iter()
            .flat_map(|p| p.requests.iter())
        {
            if amount > 0 && !names.iter().any(|n| n == name) {
                names.push(name.to_string());
            }
        }
    }
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    // What is free on each Ready node, in `ready_nodes` order (binding changes no node's
    // readiness), kept current as this pass binds pods.
    let mut room = cluster.room(&names);
    let cpu = room.column(CPU).expect("a column for cpu");
    let mut need: Vec<(usize, i64)> = Vec::new();
    for (_, _, key) in pending {
        let Some(pod) = cluster.pods().get(&key) else {
            continue;
        };
        // `Resources::fits_in` as columns: only positive requests are compared.
        need.clear();
        need.extend(
            pod.requests
                .iter()
                .filter(|&(_, v)| v > 0)
                .map(|(name, v)| {
                    let column = room
                        .column(name)
                        .expect("a column per name pending pods ask for");
                    (column, v)
                }),
        );
        // Most pending pods while nodes launch fit nowhere; the columns tell at once.
        if !room.may_fit_somewhere(&need) || !(0..room.len()).any(|i| room.fits(i, &need)) {
            continue;
        }
        let inter = InterPod::of(cluster, pod);
        let best = if spreads_softly(pod) {
            cluster
                .ready_nodes()
                .enumerate()
                // The cheap test first: most nodes are too full.
                .filter(|(i, _)| room.fits(*i, &need))
                .filter(|(_, (_, n))| unfit_given(cluster, pod, n, None, &inter).is_none())
                .min_by_key(|(i, (_, n))| score(cluster, pod, n, room.free(*i)))
                .map(|(i, (_, n))| (i, n.name.clone()))
        } else {
            emptiest_fit(cluster, pod, &room, &need, cpu, &inter)
        };
        if let Some((i, name)) = best {
            let requests = pod.requests.clone();
            cluster.bind(&key, &name, now);
            room.take(i, &requests);
            bound.push((key, name));
        }
    }
    bound
}

#[cfg(test)]
mod tests;
