//! The cluster's own kube-scheduler, approximated: bind pending pods to Ready nodes that fit.
//!
//! Filters: the node is Ready and schedulable, every NoSchedule/NoExecute taint is tolerated,
//! the node selector and required node affinity match, requests fit in what is free, and hard
//! topology spread (DoNotSchedule) keeps its skew. Among nodes that pass, soft spread
//! (ScheduleAnyway) prefers the least-populated domain, then the least allocated node, then the
//! name. Pods are taken by priority, then age, then name.

use std::collections::BTreeMap;

use nodewright_core::model::{Node, Pod, TopologySpreadConstraint, WhenUnsatisfiable};
use nodewright_core::resources::CPU;
use nodewright_core::taints::first_untolerated;
use nodewright_core::time::Timestamp;

use crate::cluster::{Cluster, label_matches};

/// Why `pod` cannot go on `node`, or `None` when it fits.
pub fn unfit(cluster: &Cluster, pod: &Pod, node: &Node) -> Option<String> {
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
                .all(|r| label_matches(r, &node.labels))
        })
    {
        return Some("required node affinity does not match".into());
    }
    let free = cluster.free(node);
    if !pod.requests.fits_in(&free) {
        return Some(format!(
            "insufficient {}",
            pod.requests.shortfall(&free).join(", ")
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
    None
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

fn score(cluster: &Cluster, pod: &Pod, node: &Node) -> (usize, i64, String) {
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
    let alloc = node.allocatable.get(CPU).max(1);
    // Per-mille of CPU left free, negated so the emptiest node sorts first.
    let free = -(cluster.free(node).get(CPU) * 1000 / alloc);
    (soft, free, node.name.clone())
}

/// Binds every pending pod it can, in kube-scheduler order. Returns `(pod, node)` pairs.
pub fn bind_pending(cluster: &mut Cluster, now: Timestamp) -> Vec<(String, String)> {
    let mut pending: Vec<Pod> = cluster.pending_pods().into_iter().cloned().collect();
    pending.sort_by(|a, b| {
        b.priority
            .cmp(&a.priority)
            .then(a.creation_timestamp.cmp(&b.creation_timestamp))
            .then(a.key().cmp(&b.key()))
    });
    let mut bound = Vec::new();
    for pod in pending {
        let nodes: Vec<Node> = cluster.ready_nodes().map(|(_, n)| n.clone()).collect();
        let best = nodes
            .iter()
            .filter(|n| unfit(cluster, &pod, n).is_none())
            .min_by_key(|n| score(cluster, &pod, n));
        if let Some(node) = best {
            let name = node.name.clone();
            cluster.bind(&pod.key(), &name, now);
            bound.push((pod.key(), name));
        }
    }
    bound
}
