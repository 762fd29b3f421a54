//! The incremental invariant check against the full one, after random sequences of changes
//! that break every rule now and then.

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;

use nodewright_core::model::{
    NodeClaim, NodePool, PersistentVolume, PersistentVolumeClaim, Pod, PodTemplate,
};
use nodewright_core::requirements::{NodeSelectorTerm, Operator, Requirement};
use nodewright_core::resources::{CPU, Resources};
use nodewright_core::taints::{Taint, TaintEffect, Toleration, TolerationOperator};
use nodewright_core::time::Timestamp;

use crate::cluster::{Cluster, SimClaim};
use crate::invariants::{Checker, violations};

#[derive(Clone, Debug)]
enum Op {
    InsertPod {
        pod: u8,
        on: Option<u8>,
        cpu: u8,
    },
    Bind {
        pod: u8,
        node: u8,
    },
    RemovePod(u8),
    /// Sets the pod's request to `cpu` hundred millicores.
    Resize {
        pod: u8,
        cpu: u8,
    },
    Select {
        pod: u8,
        zone: u8,
    },
    Tolerate(u8),
    Mount {
        pod: u8,
        volume: u8,
    },
    InsertClaim {
        node: u8,
        pool: u8,
    },
    /// The claim's node becomes Ready, named `n{named}` (usually its own name).
    Ready {
        node: u8,
        named: u8,
    },
    Taint(u8),
    Untaint(u8),
    Zone {
        node: u8,
        zone: u8,
    },
    Shrink(u8),
    DeleteClaim(u8),
    Pool {
        pool: u8,
        zone: u8,
        limit: u8,
    },
    DropPool(u8),
    Volume {
        volume: u8,
        zone: u8,
    },
    Check,
}

fn op() -> impl Strategy<Value = Op> {
    let pod = 0u8..16;
    let node = 0u8..6;
    prop_oneof![
        (pod.clone(), proptest::option::of(node.clone()), 0u8..12)
            .prop_map(|(pod, on, cpu)| Op::InsertPod { pod, on, cpu }),
        (pod.clone(), node.clone()).prop_map(|(pod, node)| Op::Bind { pod, node }),
        pod.clone().prop_map(Op::RemovePod),
        (pod.clone(), 0u8..12).prop_map(|(pod, cpu)| Op::Resize { pod, cpu }),
        (pod.clone(), 0u8..3).prop_map(|(pod, zone)| Op::Select { pod, zone }),
        pod.clone().prop_map(Op::Tolerate),
        (pod, 0u8..3).prop_map(|(pod, volume)| Op::Mount { pod, volume }),
        (node.clone(), 0u8..2).prop_map(|(node, pool)| Op::InsertClaim { node, pool }),
        (node.clone(), 0u8..8).prop_map(|(node, named)| Op::Ready { node, named }),
        node.clone().prop_map(Op::Taint),
        node.clone().prop_map(Op::Untaint),
        (node.clone(), 0u8..3).prop_map(|(node, zone)| Op::Zone { node, zone }),
        node.clone().prop_map(Op::Shrink),
        node.prop_map(Op::DeleteClaim),
        (0u8..2, 0u8..3, 0u8..4).prop_map(|(pool, zone, limit)| Op::Pool { pool, zone, limit }),
        (0u8..2).prop_map(Op::DropPool),
        (0u8..3, 0u8..3).prop_map(|(volume, zone)| Op::Volume { volume, zone }),
        Just(Op::Check),
        Just(Op::Check),
    ]
}

fn pod_key(i: u8) -> String {
    format!("default/p{i}")
}

fn node_name(i: u8) -> String {
    format!("n{i}")
}

fn zone(i: u8) -> String {
    format!("z{i}")
}

fn zone_term(z: u8) -> NodeSelectorTerm {
    NodeSelectorTerm {
        match_expressions: vec![Requirement::new("zone", Operator::In, &[&zone(z)])],
    }
}

/// Applies `op`; `Check` compares the checker with the full check.
fn apply(c: &mut Cluster, checker: &mut Checker, op: &Op, now: Timestamp) {
    match *op {
        Op::InsertPod { pod, on, cpu } => c.insert_pod(Pod {
            namespace: "default".into(),
            name: format!("p{pod}"),
            node_name: on.map(node_name),
            template: Arc::new(PodTemplate {
                requests: Resources::new().with(CPU, 100 * i64::from(cpu)),
                ..PodTemplate::default()
            }),
            ..Pod::default()
        }),
        Op::Bind { pod, node } => c.bind(&pod_key(pod), &node_name(node), now),
        Op::RemovePod(pod) => {
            c.remove_pod(&pod_key(pod), now);
        }
        Op::Resize { pod, cpu } => {
            if let Some(p) = c.pod_mut(&pod_key(pod)) {
                p.requests.set(CPU, 100 * i64::from(cpu));
            }
        }
        Op::Select { pod, zone: z } => {
            if let Some(p) = c.pod_mut(&pod_key(pod)) {
                if z == 0 {
                    p.required_node_affinity = vec![zone_term(1), zone_term(2)];
                } else {
                    p.node_selector.insert("zone".into(), zone(z));
                }
            }
        }
        Op::Tolerate(pod) => {
            if let Some(p) = c.pod_mut(&pod_key(pod)) {
                p.tolerations.push(Toleration {
                    key: "example.com/t".into(),
                    operator: TolerationOperator::Exists,
                    value: String::new(),
                    effect: None,
                });
            }
        }
        Op::Mount { pod, volume } => {
            if let Some(p) = c.pod_mut(&pod_key(pod)) {
                p.volume_claims.push(format!("v{volume}"));
            }
        }
        Op::InsertClaim { node, pool } => {
            let name = node_name(node);
            c.insert_claim(
                &name,
                SimClaim {
                    claim: NodeClaim {
                        name: name.clone(),
                        nodepool: format!("np{pool}"),
                        capacity: Resources::new().with(CPU, 1000),
                        creation_timestamp: now,
                        ..NodeClaim::default()
                    },
                    instance: Some(nodewright_cloud_sim::fleet::Launch {
                        id: format!("i-{node}"),
                        instance_type: "t".into(),
                        zone: zone(0),
                        capacity_type: nodewright_core::model::CapacityType::OnDemand,
                        price: 1.0,
                        out_of_capacity: vec![],
                    }),
                    node: None,
                    launched_at: None,
                    terminating: None,
                    deleted_at: None,
                    reason: String::new(),
                },
            );
        }
        Op::Ready { node, named } => {
            // Mostly its own name; now and then another claim's, so two claims share one.
            let n = if named < 6 { node } else { named - 6 };
            let name = node_name(n);
            if let Some(claim) = c.claim_mut(&node_name(node)) {
                claim.claim.node_name = Some(name.clone());
                claim.node = Some(nodewright_core::model::Node {
                    name,
                    ready: true,
                    labels: BTreeMap::from([("zone".to_string(), zone(node % 3))]),
                    allocatable: Resources::new().with(CPU, 1000),
                    creation_timestamp: now,
                    ..nodewright_core::model::Node::default()
                });
            }
        }
        Op::Taint(node) => {
            if let Some(n) = c.claim_mut(&node_name(node)).and_then(|c| c.node.as_mut()) {
                n.taints
                    .push(Taint::new("example.com/t", "", TaintEffect::NoSchedule));
            }
        }
        Op::Untaint(node) => {
            if let Some(n) = c.claim_mut(&node_name(node)).and_then(|c| c.node.as_mut()) {
                n.taints.clear();
            }
        }
        Op::Zone { node, zone: z } => {
            if let Some(n) = c.claim_mut(&node_name(node)).and_then(|c| c.node.as_mut()) {
                n.labels.insert("zone".into(), zone(z));
            }
        }
        Op::Shrink(node) => {
            if let Some(n) = c.claim_mut(&node_name(node)).and_then(|c| c.node.as_mut()) {
                n.allocatable.set(CPU, 300);
            }
        }
        Op::DeleteClaim(node) => {
            if let Some(claim) = c.claim_mut(&node_name(node)) {
                claim.deleted_at = Some(now);
                claim.claim.deletion_timestamp = Some(now);
            }
        }
        Op::Pool {
            pool,
            zone: z,
            limit,
        } => {
            let name = format!("np{pool}");
            c.nodepools.retain(|p| p.name != name);
            let mut np = NodePool {
                name,
                ..NodePool::default()
            };
            np.template.requirements = vec![Requirement::new("zone", Operator::In, &[&zone(z)])];
            np.limits = Resources::new().with(CPU, 1000 * i64::from(limit + 1));
            c.nodepools.push(np);
        }
        Op::DropPool(pool) => c.nodepools.retain(|p| p.name != format!("np{pool}")),
        Op::Volume { volume, zone: z } => {
            c.pvcs.insert(
                ("default".into(), format!("v{volume}")),
                PersistentVolumeClaim {
                    namespace: "default".into(),
                    name: format!("v{volume}"),
                    volume_name: Some(format!("pv{volume}")),
                    storage_class: None,
                },
            );
            c.pvs.insert(
                format!("pv{volume}"),
                PersistentVolume {
                    name: format!("pv{volume}"),
                    node_affinity: vec![zone_term(z)],
                    local_or_host_path: false,
                },
            );
        }
        Op::Check => {
            let full = violations(c);
            assert_eq!(checker.violations(c), full);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_incremental_check_equals_the_full_one(ops in proptest::collection::vec(op(), 1..150)) {
        let mut c = Cluster::default();
        let mut checker = Checker::default();
        for (i, op) in ops.iter().enumerate() {
            apply(&mut c, &mut checker, op, Timestamp(1_000 * (i as i64 + 1)));
        }
        let full = violations(&c);
        prop_assert_eq!(checker.violations(&mut c), full);
    }
}

/// The generated sequences do break the rules: a check that found nothing would pass.
#[test]
fn every_kind_of_violation_is_met() {
    let mut c = Cluster::default();
    let mut checker = Checker::default();
    let steps = [
        Op::Pool {
            pool: 0,
            zone: 1,
            limit: 0,
        },
        Op::InsertClaim { node: 0, pool: 0 },
        Op::InsertClaim { node: 1, pool: 0 },
        Op::Ready { node: 0, named: 0 },
        Op::Ready { node: 1, named: 1 },
        Op::Check,
        Op::InsertPod {
            pod: 0,
            on: Some(0),
            cpu: 11,
        },
        Op::InsertPod {
            pod: 1,
            on: Some(5),
            cpu: 1,
        },
        Op::InsertPod {
            pod: 2,
            on: None,
            cpu: 1,
        },
        Op::Check,
        Op::Bind { pod: 2, node: 1 },
        Op::Taint(1),
        Op::Select { pod: 0, zone: 2 },
        Op::Volume { volume: 0, zone: 2 },
        Op::Mount { pod: 2, volume: 0 },
        Op::Check,
    ];
    for (i, op) in steps.iter().enumerate() {
        apply(&mut c, &mut checker, op, Timestamp(1_000 * (i as i64 + 1)));
    }
    let found = checker.violations(&mut c).join("\n");
    for want in [
        "node n0 is over-committed on cpu",
        "pod default/p1 is bound to missing node n5",
        "pod default/p2 runs on n1 without tolerating example.com/t",
        "pod default/p0 runs on n0 whose labels it does not select",
        "pod default/p2 runs on n1 outside the zone of its volume pv0",
        "node n0 breaks its NodePool's requirement",
        "NodePool np0 exceeds its cpu limit (2000 > 1000)",
    ] {
        assert!(found.contains(want), "{want} missing from:\n{found}");
    }
}
