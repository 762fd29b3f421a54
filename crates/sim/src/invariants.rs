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
mod tests {
    use std::collections::BTreeMap;

    use nodewright_core::model::{Node, NodeClaim, NodePool, Pod};
    use nodewright_core::requirements::{Operator, Requirement};
    use nodewright_core::resources::{CPU, Resources};
    use nodewright_core::taints::{Taint, TaintEffect};

    use super::*;
    use crate::cluster::SimClaim;
    use nodewright_cloud_sim::fleet::Launch;

    fn cluster() -> Cluster {
        let mut c = Cluster::default();
        let mut pool = NodePool {
            name: "p".into(),
            ..NodePool::default()
        };
        pool.template.requirements = vec![Requirement::new(
            "karpenter.sh/capacity-type",
            Operator::In,
            &["on-demand"],
        )];
        pool.limits = Resources::new().with(CPU, 4000);
        c.nodepools.push(pool);
        let node = Node {
            name: "n1".into(),
            labels: BTreeMap::from([
                (
                    "karpenter.sh/capacity-type".to_string(),
                    "on-demand".to_string(),
                ),
                ("zone".to_string(), "a".to_string()),
            ]),
            allocatable: Resources::new().with(CPU, 2000),
            ready: true,
            ..Node::default()
        };
        c.insert_claim(
            "n1",
            SimClaim {
                claim: NodeClaim {
                    name: "n1".into(),
                    nodepool: "p".into(),
                    node_name: Some("n1".into()),
                    capacity: Resources::new().with(CPU, 2000),
                    ..NodeClaim::default()
                },
                instance: Some(Launch {
                    id: "i-1".into(),
                    instance_type: "c5.large".into(),
                    zone: "a".into(),
                    capacity_type: nodewright_core::model::CapacityType::OnDemand,
                    price: 0.085,
                    out_of_capacity: vec![],
                }),
                node: Some(node),
                launched_at: None,
                terminating: None,
                deleted_at: None,
                reason: String::new(),
            },
        );
        c
    }

    fn pod(name: &str, cpu: i64, node: &str) -> Pod {
        Pod {
            namespace: "d".into(),
            name: name.into(),
            requests: Resources::new().with(CPU, cpu),
            node_name: Some(node.into()),
            ..Pod::default()
        }
    }

    fn add(c: &mut Cluster, p: Pod) {
        c.insert_pod(p);
    }

    #[test]
    fn a_sound_cluster_has_no_violations() {
        let mut c = cluster();
        add(&mut c, pod("a", 1000, "n1"));
        assert_eq!(check(&c, Duration::ZERO), Vec::<String>::new());
    }

    #[test]
    fn each_broken_rule_is_reported() {
        let mut c = cluster();
        add(&mut c, pod("a", 1500, "n1"));
        add(&mut c, pod("b", 1000, "n1"));
        add(&mut c, pod("c", 100, "gone"));
        let mut picky = pod("d", 0, "n1");
        picky.node_selector.insert("zone".into(), "b".into());
        add(&mut c, picky);
        let claim = c.claim_mut("n1").unwrap();
        let node = claim.node.as_mut().unwrap();
        node.taints
            .push(Taint::new("dedicated", "x", TaintEffect::NoSchedule));
        node.labels
            .insert("karpenter.sh/capacity-type".into(), "spot".into());
        claim.claim.capacity = Resources::new().with(CPU, 8000);
        let v = check(&c, Duration::from_secs(61)).join("\n");
        assert!(v.contains("01:01: node n1 is over-committed on cpu"), "{v}");
        assert!(v.contains("pod d/c is bound to missing node gone"), "{v}");
        assert!(
            v.contains("pod d/a runs on n1 without tolerating dedicated"),
            "{v}"
        );
        assert!(
            v.contains("pod d/d runs on n1 whose labels it does not select"),
            "{v}"
        );
        assert!(
            v.contains("node n1 breaks its NodePool's requirement"),
            "{v}"
        );
        assert!(
            v.contains("NodePool p exceeds its cpu limit (8000 > 4000)"),
            "{v}"
        );
    }

    #[test]
    fn an_eviction_below_a_budget_is_reported() {
        use crate::cluster::{Workload, WorkloadKind};
        use crate::disruption_budget::SimPdb;
        let mut c = cluster();
        let mut template = pod("t", 100, "n1");
        template.labels.insert("app".into(), "a".into());
        let w = Workload::new(WorkloadKind::Deployment, "d", "a", 2, template.clone());
        c.workloads.insert(("d".into(), "a".into()), w);
        for name in ["a-1", "a-2"] {
            let mut p = template.clone();
            p.name = name.into();
            p.ready = true;
            p.owner = Some(nodewright_core::model::OwnerRef {
                kind: "ReplicaSet".into(),
                name: "a".into(),
                controller: true,
            });
            add(&mut c, p);
        }
        let manifest = serde_json::from_value(serde_json::json!({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "a", "namespace": "d"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "a"}}}
        }))
        .unwrap();
        c.pdbs
            .insert(("d".into(), "a".into()), SimPdb::new(manifest).unwrap());
        c.pod_mut("d/a-1").unwrap().deletion_timestamp = Some(Default::default());
        assert!(eviction(&c, "d/a-1", "00:01").is_empty(), "one may go");
        c.pod_mut("d/a-2").unwrap().deletion_timestamp = Some(Default::default());
        let v = eviction(&c, "d/a-2", "00:01");
        assert_eq!(
            v,
            vec!["00:01: evicting d/a-2 left PodDisruptionBudget d/a with 0 healthy pod(s), fewer than the 1 it requires".to_string()]
        );
    }

    #[test]
    fn a_pod_outside_its_volume_zone_is_reported() {
        use nodewright_core::model::{PersistentVolume, PersistentVolumeClaim};
        use nodewright_core::requirements::NodeSelectorTerm;
        let mut c = cluster();
        let mut p = pod("db-0", 100, "n1");
        p.volume_claims.push("data-db-0".into());
        add(&mut c, p);
        c.pvcs.insert(
            ("d".into(), "data-db-0".into()),
            PersistentVolumeClaim {
                namespace: "d".into(),
                name: "data-db-0".into(),
                volume_name: Some("pv-1".into()),
                storage_class: Some("ebs".into()),
            },
        );
        let pinned = |zone: &str| PersistentVolume {
            name: "pv-1".into(),
            node_affinity: vec![NodeSelectorTerm {
                match_expressions: vec![Requirement::new(
                    nodewright_core::labels::ZONE,
                    Operator::In,
                    &[zone],
                )],
            }],
            local_or_host_path: false,
        };
        c.claim_mut("n1")
            .unwrap()
            .node
            .as_mut()
            .unwrap()
            .labels
            .insert(nodewright_core::labels::ZONE.into(), "us-east-1a".into());
        c.pvs.insert("pv-1".into(), pinned("us-east-1a"));
        assert!(check(&c, Duration::ZERO).is_empty());
        c.pvs.insert("pv-1".into(), pinned("us-east-1b"));
        assert_eq!(
            check(&c, Duration::ZERO),
            vec![
                "00:00: pod d/db-0 runs on n1 outside the zone of its volume pv-1 (us-east-1b)"
                    .to_string()
            ]
        );
    }

    #[test]
    fn the_disruption_taint_does_not_evict_pods_already_bound() {
        let mut c = cluster();
        add(&mut c, pod("a", 1000, "n1"));
        let node = c.claim_mut("n1").unwrap().node.as_mut().unwrap();
        node.taints
            .push(Taint::new(DISRUPTED_TAINT, "", TaintEffect::NoSchedule));
        assert!(check(&c, Duration::ZERO).is_empty());
    }

    /// The limit check as first written: every claim's whole capacity summed.
    fn limits_plain(cluster: &Cluster) -> Vec<String> {
        let mut out = Vec::new();
        for pool in &cluster.nodepools {
            let mut used = Resources::new();
            let mut nodes = 0;
            for c in cluster.claims().values() {
                if c.is_live() && c.claim.nodepool == pool.name && c.instance.is_some() {
                    used.add(&c.claim.capacity);
                    nodes += 1;
                }
            }
            used.set(NODES, nodes);
            for (k, limit) in pool.limits.iter() {
                if used.get(k) > limit {
                    out.push(format!(
                        "NodePool {} exceeds its {k} limit ({} > {limit})",
                        pool.name,
                        used.get(k)
                    ));
                }
            }
        }
        out
    }

    #[test]
    fn limits_sum_only_what_they_name_and_find_the_same() {
        let shapes: [&[(&str, i64)]; 5] = [
            &[],
            &[(CPU, 4000)],
            &[(CPU, 1000), (NODES, 0), ("memory", 0)],
            &[(NODES, 1), ("nvidia.com/gpu", 0)],
            &[(CPU, i64::MAX), ("memory", 1)],
        ];
        for shape in shapes {
            for extra in 0..3 {
                let mut c = cluster();
                let mut l = Resources::new();
                for (k, v) in shape {
                    l.set_explicit(k, *v);
                }
                c.nodepools[0].limits = l;
                for i in 0..extra {
                    let mut claim = c.claims()["n1"].clone();
                    claim.claim.name = format!("x{i}");
                    claim.claim.capacity =
                        Resources::new().with(CPU, i64::MAX - 10).with("memory", 5);
                    claim.deleted_at = (i == 1).then_some(nodewright_core::time::Timestamp(1));
                    c.insert_claim(&format!("x{i}"), claim);
                }
                let mut fast = Vec::new();
                limits(&c, &mut fast);
                assert_eq!(fast, limits_plain(&c), "{shape:?} with {extra} more");
            }
        }
    }
}
