//! What must hold after every step of a run: no node holds more than it can, every bound pod
//! is on a live Ready node whose labels and taints it accepts, every node keeps its NodePool's
//! requirements, no NodePool exceeds its limits, and no pod runs outside the zone of a volume
//! it mounts. Evictions are checked as they happen: none leaves a PodDisruptionBudget with
//! fewer healthy pods than it requires.

use std::time::Duration;

use nodewright_core::model::{Node, Pod};
use nodewright_core::resources::NODES;
use nodewright_core::taints::{DISRUPTED_TAINT, first_untolerated};

use crate::cluster::{Cluster, SimClaim};
use crate::report::clock;

mod incremental;
pub use incremental::Checker;

/// Every violation at `at`, as sentences.
pub fn check(cluster: &Cluster, at: Duration) -> Vec<String> {
    stamped(&violations(cluster), at)
}

/// `violations` as they read at `at`.
pub fn stamped(violations: &[String], at: Duration) -> Vec<String> {
    let t = clock(at);
    violations.iter().map(|v| format!("{t}: {v}")).collect()
}

/// Every violation, as sentences without the time: a function of the cluster alone, so an
/// unchanged cluster has the same ones. [`Checker`] finds the same, looking again at only
/// what changed.
pub fn violations(cluster: &Cluster) -> Vec<String> {
    let mut out = Vec::new();
    for (_, node) in cluster.ready_nodes() {
        out.extend(over_commit(cluster, node));
    }
    index_check(cluster, &mut out);
    let ready: std::collections::BTreeMap<&str, &Node> = cluster
        .ready_nodes()
        .map(|(_, n)| (n.name.as_str(), n))
        .collect();
    for p in cluster.pods().values() {
        pod_violations(cluster, p, &|n| ready.get(n).copied(), &mut out);
    }
    for (c, node) in cluster.ready_nodes() {
        out.extend(pool_requirement(cluster, c, node));
    }
    limits(cluster, &mut out);
    out
}

/// Whether `node` holds more than it can.
fn over_commit(cluster: &Cluster, node: &Node) -> Option<String> {
    let free = cluster.free(node);
    let over: Vec<String> = free
        .iter()
        .filter(|(_, v)| *v < 0)
        .map(|(k, _)| k.to_string())
        .collect();
    (!over.is_empty()).then(|| {
        format!(
            "node {} is over-committed on {}",
            node.name,
            over.join(", ")
        )
    })
}

/// The per-node pod index against the pods.
fn index_check(cluster: &Cluster, out: &mut Vec<String>) {
    // A full cross-check costs a pass over every pod; debug builds (the tests) pay it.
    if cfg!(debug_assertions) && !cluster.index_is_consistent() {
        out.push("the per-node pod index disagrees with the pods".to_string());
    }
}

/// What is wrong with where `p` runs, `ready` finding the Ready node of a name.
fn pod_violations<'c>(
    cluster: &'c Cluster,
    p: &Pod,
    ready: &dyn Fn(&str) -> Option<&'c Node>,
    out: &mut Vec<String>,
) {
    let Some(n) = &p.node_name else {
        return;
    };
    let Some(node) = ready(n.as_str()) else {
        out.push(format!("pod {} is bound to missing node {n}", p.key()));
        return;
    };
    // Pods bound before the disruption taint arrived may stay.
    let taints: Vec<_> = node
        .taints
        .iter()
        .filter(|x| x.key != DISRUPTED_TAINT)
        .cloned()
        .collect();
    if let Some(taint) = first_untolerated(&p.tolerations, &taints) {
        out.push(format!(
            "pod {} runs on {n} without tolerating {}",
            p.key(),
            taint.key
        ));
    }
    if p.node_selector
        .iter()
        .any(|(k, v)| node.labels.get(k) != Some(v))
        || (!p.required_node_affinity.is_empty()
            && !p.required_node_affinity.iter().any(|term| {
                term.match_expressions
                    .iter()
                    .all(|r| r.admits_labels(&node.labels))
            }))
    {
        out.push(format!(
            "pod {} runs on {n} whose labels it does not select",
            p.key()
        ));
    }
    for claim in &p.volume_claims {
        let pv = cluster
            .pvcs
            .get(&(p.namespace.clone(), claim.clone()))
            .and_then(|c| c.volume_name.as_ref())
            .and_then(|v| cluster.pvs.get(v));
        let Some(pv) = pv else {
            continue;
        };
        let inside = pv.node_affinity.is_empty()
            || pv.node_affinity.iter().any(|term| {
                term.match_expressions
                    .iter()
                    .all(|r| r.admits_labels(&node.labels))
            });
        if !inside {
            out.push(format!(
                "pod {} runs on {n} outside the zone of its volume {} ({})",
                p.key(),
                pv.name,
                crate::volumes::volume_zone(pv).unwrap_or("?")
            ));
        }
    }
}

/// Whether the Ready `node` of claim `c` breaks one of its NodePool's requirements.
fn pool_requirement(cluster: &Cluster, c: &SimClaim, node: &Node) -> Option<String> {
    let pool = cluster.nodepool(&c.claim.nodepool)?;
    pool.template
        .requirements
        .iter()
        .find(|r| node.labels.contains_key(&r.key) && !r.admits_labels(&node.labels))
        .map(|r| format!("node {} breaks its NodePool's requirement {r}", node.name))
}

/// NodePools over their limits. Only the resources a limit names are summed (with the same
/// saturating sum as `Resources::add`): a pool without limits costs nothing.
fn limits(cluster: &Cluster, out: &mut Vec<String>) {
    for pool in cluster.nodepools.iter().filter(|p| !p.limits.is_empty()) {
        let mut used: Vec<(&str, i64, i64)> = pool.limits.iter().map(|(k, l)| (k, l, 0)).collect();
        let mut nodes = 0;
        for c in cluster.claims().values() {
            if c.is_live() && c.claim.nodepool == pool.name && c.instance.is_some() {
                for (k, _, u) in &mut used {
                    *u = u.saturating_add(c.claim.capacity.get(k));
                }
                nodes += 1;
            }
        }
        for (k, limit, u) in used {
            let used = if k == NODES { nodes } else { u };
            if used > limit {
                out.push(format!(
                    "NodePool {} exceeds its {k} limit ({used} > {limit})",
                    pool.name
                ));
            }
        }
    }
}

/// After `pod` was evicted: every PodDisruptionBudget selecting it still has the healthy pods
/// it requires (an eviction of a pod that was not healthy takes nothing from a budget).
pub fn eviction(cluster: &Cluster, pod: &str, t: &str) -> Vec<String> {
    let Some(p) = cluster.pods().get(pod) else {
        return Vec::new();
    };
    if !p.ready {
        return Vec::new();
    }
    cluster
        .pdbs
        .values()
        .filter(|b| b.selects(p))
        .filter_map(|b| {
            let st = b.status(cluster);
            (st.healthy < st.desired).then(|| {
                format!(
                    "{t}: evicting {pod} left PodDisruptionBudget {} with {} healthy pod(s), fewer than the {} it requires",
                    b.key(),
                    st.healthy,
                    st.desired
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
