//! Each invariant on a sound cluster and on one broken the way it forbids.

use std::collections::BTreeMap;
use std::sync::Arc;

use nodewright_core::model::{Node, NodeClaim, NodePool, Pod, PodTemplate};
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
        node_name: Some(node.into()),
        template: Arc::new(PodTemplate {
            requests: Resources::new().with(CPU, cpu),
            ..PodTemplate::default()
        }),
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
                claim.claim.capacity = Resources::new().with(CPU, i64::MAX - 10).with("memory", 5);
                claim.deleted_at = (i == 1).then_some(nodewright_core::time::Timestamp(1));
                c.insert_claim(&format!("x{i}"), claim);
            }
            let mut fast = Vec::new();
            limits(&c, &mut fast);
            assert_eq!(fast, limits_plain(&c), "{shape:?} with {extra} more");
        }
    }
}
