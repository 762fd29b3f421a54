//! The maintained snapshot against a freshly built one, after random sequences of cluster
//! operations; and the sorted-list patch it is kept with, against the map it mirrors.

use proptest::prelude::*;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use nodewright_core::disruption::InFlight;
use nodewright_core::model::{
    CapacityType, InstanceType, Node, NodeClaim, NodePool, OwnerRef, PersistentVolumeClaim, Pod,
    PodTemplate,
};
use nodewright_core::resources::{CPU, MEMORY, Resources};
use nodewright_core::taints::{Taint, TaintEffect};
use nodewright_core::testkit;
use nodewright_core::time::Timestamp;

use super::patch;
use crate::cluster::{Cluster, ReadyCpu, SimClaim, Workload, WorkloadKind};

#[derive(Clone, Debug)]
enum Op {
    InsertPod {
        pod: u8,
        on: Option<u8>,
    },
    Bind {
        pod: u8,
        node: u8,
    },
    RemovePod(u8),
    MarkDeleting(u8),
    Relabel(u8),
    /// A pod's requests change in place.
    Resize(u8),
    InsertClaim(u8),
    /// A Ready node's allocatable changes.
    Grow(u8),
    Ready(u8),
    Taint(u8),
    DeleteClaim(u8),
    Touch(u8),
    Scale(u8),
    Reconcile,
    View,
    /// A view as running commands leave it: bit `i` of each mask names claim and node `n{i}`.
    HeldView {
        targets: u8,
        replacements: u8,
        terminating: u8,
    },
    /// Marks type `t{n % 2}` cold in the catalog's only zone until a few steps later.
    Ice(u8),
    Pvc(u8),
    Pool(u8),
}

fn op() -> impl Strategy<Value = Op> {
    // Few names, so operations often hit what earlier ones made.
    let pod = 0u8..24;
    let node = 0u8..8;
    prop_oneof![
        (pod.clone(), proptest::option::of(node.clone()))
            .prop_map(|(pod, on)| Op::InsertPod { pod, on }),
        (pod.clone(), node.clone()).prop_map(|(pod, node)| Op::Bind { pod, node }),
        pod.clone().prop_map(Op::RemovePod),
        pod.clone().prop_map(Op::MarkDeleting),
        pod.clone().prop_map(Op::Relabel),
        pod.prop_map(Op::Resize),
        node.clone().prop_map(Op::InsertClaim),
        node.clone().prop_map(Op::Grow),
        node.clone().prop_map(Op::Ready),
        node.clone().prop_map(Op::Taint),
        node.clone().prop_map(Op::DeleteClaim),
        node.prop_map(Op::Touch),
        (0u8..30).prop_map(Op::Scale),
        Just(Op::Reconcile),
        Just(Op::View),
        Just(Op::View),
        (any::<u8>(), any::<u8>(), any::<u8>()).prop_map(|(targets, replacements, terminating)| {
            Op::HeldView {
                targets,
                replacements,
                terminating,
            }
        }),
        (0u8..4).prop_map(Op::Ice),
        (0u8..4).prop_map(Op::Pvc),
        (0u8..4).prop_map(Op::Pool),
    ]
}

fn pod_key(i: u8) -> String {
    format!("default/p{i}")
}

fn node_name(i: u8) -> String {
    format!("n{i}")
}

fn apply(c: &mut Cluster, op: &Op, now: Timestamp) {
    match *op {
        Op::InsertPod { pod, on } => c.insert_pod(Pod {
            namespace: "default".into(),
            name: format!("p{pod}"),
            node_name: on.map(node_name),
            template: Arc::new(PodTemplate {
                // Some daemons and some pods of a controller, for the ledger's figures.
                owner: match pod % 4 {
                    0 => Some(OwnerRef {
                        kind: "DaemonSet".into(),
                        name: "agent".into(),
                        controller: true,
                    }),
                    1 => Some(OwnerRef {
                        kind: "ReplicaSet".into(),
                        name: format!("rs{}", pod % 3),
                        controller: true,
                    }),
                    _ => None,
                },
                requests: Resources::new()
                    .with(CPU, i64::from(pod) * 100)
                    .with(MEMORY, i64::from(pod % 5) << 20),
                ..PodTemplate::default()
            }),
            ..Pod::default()
        }),
        Op::Bind { pod, node } => c.bind(&pod_key(pod), &node_name(node), now),
        Op::RemovePod(pod) => {
            c.remove_pod(&pod_key(pod), now);
        }
        Op::MarkDeleting(pod) => {
            if let Some(p) = c.pod_mut(&pod_key(pod)) {
                p.deletion_timestamp = Some(now);
            }
        }
        Op::Relabel(pod) => {
            if let Some(p) = c.pod_mut(&pod_key(pod)) {
                p.labels.insert("v".into(), now.0.to_string());
            }
        }
        Op::Resize(pod) => {
            if let Some(p) = c.pod_mut(&pod_key(pod)) {
                p.requests = Resources::new().with(CPU, now.0 % 7_000);
            }
        }
        Op::Grow(node) => {
            if let Some(n) = c.claim_mut(&node_name(node)).and_then(|c| c.node.as_mut()) {
                n.allocatable = Resources::new()
                    .with(CPU, now.0 % 11_000)
                    .with(MEMORY, (now.0 % 13) << 20);
            }
        }
        Op::InsertClaim(node) => {
            let name = node_name(node);
            c.insert_claim(
                &name,
                SimClaim {
                    claim: NodeClaim {
                        name: name.clone(),
                        creation_timestamp: now,
                        ..NodeClaim::default()
                    },
                    instance: None,
                    node: None,
                    launched_at: None,
                    terminating: None,
                    deleted_at: None,
                    reason: String::new(),
                },
            );
        }
        Op::Ready(node) => {
            let name = node_name(node);
            if let Some(claim) = c.claim_mut(&name) {
                claim.claim.node_name = Some(name.clone());
                claim.node = Some(Node {
                    name,
                    ready: true,
                    creation_timestamp: now,
                    ..Node::default()
                });
            }
        }
        Op::Taint(node) => {
            if let Some(n) = c.claim_mut(&node_name(node)).and_then(|c| c.node.as_mut()) {
                n.taints
                    .push(Taint::new("example.com/t", "", TaintEffect::NoSchedule));
            }
        }
        Op::DeleteClaim(node) => {
            if let Some(claim) = c.claim_mut(&node_name(node)) {
                claim.deleted_at = Some(now);
                claim.claim.deletion_timestamp = Some(now);
            }
        }
        Op::Touch(node) => c.touch(&node_name(node), now),
        Op::Scale(replicas) => {
            let w = Workload::new(WorkloadKind::Deployment, "apps", "web", replicas.into(), {
                Pod::default()
            });
            match c.workloads.get_mut(&("apps".into(), "web".into())) {
                Some(have) => have.update_from(w),
                None => {
                    c.workloads.insert(("apps".into(), "web".into()), w);
                }
            }
        }
        Op::Reconcile => {
            c.reconcile(now);
        }
        Op::View => {
            let fresh = format!("{:?}", c.snapshot(now));
            assert_eq!(format!("{:?}", c.view(now)), fresh);
            room_matches_a_sum(c);
            ledger_matches_a_scan(c);
        }
        Op::HeldView {
            targets,
            replacements,
            terminating,
        } => {
            let names = |mask: u8| -> BTreeSet<String> {
                (0..8u8)
                    .filter(|i| mask & (1 << i) != 0)
                    .map(node_name)
                    .collect()
            };
            let held = InFlight {
                targets: names(targets),
                replacements: names(replacements),
                terminating: names(terminating),
                ..InFlight::default()
            };
            let fresh = c.snapshot(now);
            let expected = format!("{:?}", held.view(&fresh));
            assert_eq!(format!("{:?}", c.view_held(now, &held).1), expected);
        }
        Op::Ice(n) => {
            if c.catalog.is_empty() {
                let types: Vec<InstanceType> =
                    (0..2).map(|i| instance_type(&format!("t{i}"))).collect();
                c.catalog.insert("default".into(), Arc::new(types));
            }
            // Marked so that the mark runs out `n + 1` seconds from now.
            let ttl = c.cloud.config().unavailable_ttl.as_millis() as i64;
            let at = Timestamp(now.0 + 1_000 * i64::from(n + 1) - ttl);
            c.cloud
                .mark_unavailable(&format!("t{}", n % 2), "z", CapacityType::OnDemand, at);
        }
        Op::Pvc(n) => {
            c.pvcs.insert(
                ("default".into(), format!("v{n}")),
                PersistentVolumeClaim {
                    namespace: "default".into(),
                    name: format!("v{n}"),
                    ..PersistentVolumeClaim::default()
                },
            );
        }
        Op::Pool(n) => {
            c.nodepools.retain(|p| p.name != format!("np{}", n % 2));
            c.nodepools.push(NodePool {
                name: format!("np{}", n % 2),
                weight: i32::from(n),
                ..NodePool::default()
            });
        }
    }
}

/// The kept room of every Ready node, its columns and the Ready nodes' cpu, against sums
/// over every node's pods.
fn room_matches_a_sum(c: &mut Cluster) {
    let summed: Vec<Resources> = c.ready_nodes().map(|(_, n)| c.free(n)).collect();
    let room = c.room(&[CPU, MEMORY]);
    let kept: Vec<Resources> = (0..room.len()).map(|i| room.free(i).clone()).collect();
    assert_eq!(kept, summed);
    for (i, free) in summed.iter().enumerate() {
        for name in [CPU, MEMORY] {
            let column = room.column(name).unwrap();
            let amount = free.get(name);
            assert!(room.fits(i, &[(column, amount)]), "{name} of node {i}");
            assert!(!room.fits(i, &[(column, amount + 1)]), "{name} of node {i}");
        }
    }
    let mut cpu = ReadyCpu::default();
    for (_, n) in c.ready_nodes() {
        cpu.nodes += 1;
        cpu.allocatable += n.allocatable.get(CPU);
        cpu.requested += c.pods_on(&n.name).map(|p| p.requests.get(CPU)).sum::<i64>();
    }
    c.sync_free();
    assert_eq!(c.ready_cpu(), cpu);
}

/// The ledger's figures against a scan of every pod.
fn ledger_matches_a_scan(c: &mut Cluster) {
    let scanned: Vec<String> = c.pending_pods().iter().map(|p| p.key()).collect();
    let kept: Vec<String> = c.pending_keys().iter().cloned().collect();
    assert_eq!(kept, scanned);
    assert_eq!(c.pending_count(), scanned.len());
    let workload = c.pods().values().filter(|p| !p.is_daemonset_pod()).count();
    assert_eq!(c.workload_pods(), workload);
    let mut controlled: BTreeMap<(String, String), (usize, usize)> = BTreeMap::new();
    for p in c.pods().values() {
        if let Some(o) = p.owner.as_ref().filter(|o| o.controller) {
            let e = controlled
                .entry((p.namespace.clone(), o.name.clone()))
                .or_default();
            e.0 += 1;
            e.1 += usize::from(p.deletion_timestamp.is_none());
        }
    }
    for owner in ["rs0", "rs1", "rs2", "agent", "web"] {
        for ns in ["default", "apps"] {
            let k = (ns.to_string(), owner.to_string());
            assert_eq!(
                c.ledger.controlled(&k),
                controlled.get(&k).copied().unwrap_or_default(),
                "{k:?}"
            );
        }
    }
}

fn instance_type(name: &str) -> InstanceType {
    let offering = testkit::offering("z", CapacityType::OnDemand, 1.0);
    testkit::instance_type(name, Resources::new(), vec![offering])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_maintained_snapshot_equals_a_fresh_one(ops in proptest::collection::vec(op(), 1..120)) {
        let mut c = Cluster::default();
        for (i, op) in ops.iter().enumerate() {
            let now = Timestamp(1_000 * (i as i64 + 1));
            apply(&mut c, op, now);
        }
        let now = Timestamp(1_000_000);
        let fresh = format!("{:?}", c.snapshot(now));
        prop_assert_eq!(format!("{:?}", c.view(now)), fresh);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Two views of one generation are the same snapshot but for its time, whatever changed
    /// in between (pods, claims, the small lists, ICE marks running out).
    #[test]
    fn one_generation_is_one_snapshot(ops in proptest::collection::vec(op(), 1..120)) {
        let mut c = Cluster::default();
        let mut last: Option<(u64, String)> = None;
        for (i, op) in ops.iter().enumerate() {
            let now = Timestamp(1_000 * (i as i64 + 1));
            apply(&mut c, op, now);
            let (generation, view) = c.view_stamped(now);
            let mut timeless = view.clone();
            timeless.now = Timestamp(0);
            let text = format!("{timeless:?}");
            if let Some((g, before)) = &last && *g == generation {
                prop_assert_eq!(before, &text, "generation {} changed after {:?}", g, op);
            }
            last = Some((generation, text));
        }
    }
}

/// A view over an unchanged cluster keeps its generation; any change starts a new one.
#[test]
fn generations_follow_changes() {
    let mut c = Cluster::default();
    apply(&mut c, &Op::InsertPod { pod: 1, on: None }, Timestamp(1));
    let g = c.view_stamped(Timestamp(2)).0;
    assert_eq!(c.view_stamped(Timestamp(3)).0, g, "time alone is no change");
    apply(&mut c, &Op::Relabel(1), Timestamp(4));
    let g2 = c.view_stamped(Timestamp(5)).0;
    assert_ne!(g2, g);
    apply(&mut c, &Op::Pvc(0), Timestamp(6));
    let g3 = c.view_stamped(Timestamp(7)).0;
    assert_ne!(g3, g2);
    apply(&mut c, &Op::Ice(0), Timestamp(8));
    let g4 = c.view_stamped(Timestamp(9)).0;
    assert_ne!(g4, g3);
    assert_eq!(c.view_stamped(Timestamp(10)).0, g4, "still cold");
    assert_ne!(c.view_stamped(Timestamp(20_000)).0, g4, "the mark ran out");
}

/// A Node's version in the view moves with every write to its claim and only then, in the
/// kept view and a fresh snapshot alike.
#[test]
fn node_versions_move_with_writes_to_their_claims() {
    let mut c = Cluster::default();
    for i in 0..3u8 {
        apply(&mut c, &Op::InsertClaim(i), Timestamp(1));
        apply(&mut c, &Op::Ready(i), Timestamp(1));
    }
    let versions = |c: &mut Cluster| -> Vec<String> {
        let of = |s: &nodewright_core::model::Snapshot| -> Vec<String> {
            s.nodes.iter().map(|n| n.resource_version.clone()).collect()
        };
        let fresh = of(&c.snapshot(Timestamp(2)));
        let kept = of(c.view(Timestamp(2)));
        assert_eq!(fresh, kept);
        kept
    };
    let before = versions(&mut c);
    assert_eq!(before.len(), 3);
    assert!(before.iter().all(|v| !v.is_empty()));
    apply(
        &mut c,
        &Op::InsertPod {
            pod: 1,
            on: Some(1),
        },
        Timestamp(3),
    );
    assert_eq!(versions(&mut c), before, "a pod is no write to the Node");
    apply(&mut c, &Op::Grow(1), Timestamp(4));
    let after = versions(&mut c);
    assert_eq!((&after[0], &after[2]), (&before[0], &before[2]));
    assert_ne!(after[1], before[1]);
}

/// A long quiet stretch after a bulk change: the in-place path (few changes over many pods)
/// must be the one taken and still agree.
#[test]
fn few_changes_over_many_pods_patch_in_place() {
    let mut c = Cluster::default();
    for i in 0..100u8 {
        apply(&mut c, &Op::InsertPod { pod: i, on: None }, Timestamp(1));
    }
    for i in 0..8u8 {
        apply(&mut c, &Op::InsertClaim(i), Timestamp(2));
        apply(&mut c, &Op::Ready(i), Timestamp(3));
    }
    let _ = c.view(Timestamp(4));
    let steps = [
        Op::Bind { pod: 3, node: 1 },
        Op::RemovePod(7),
        Op::InsertPod {
            pod: 200,
            on: Some(2),
        },
        Op::Relabel(50),
        Op::Taint(4),
        Op::DeleteClaim(6),
        Op::Touch(1),
    ];
    for (i, op) in steps.iter().enumerate() {
        let now = Timestamp(10 + i as i64);
        apply(&mut c, op, now);
        apply(&mut c, &Op::View, now);
    }
}

/// A pod event on a node writes its NodeClaim's status, not the Node: the Node keeps its
/// `resourceVersion`, so what decisions keep per Node version stays good.
#[test]
fn a_pod_event_moves_the_claim_not_the_node_version() {
    let mut c = Cluster::default();
    let t = |s: i64| Timestamp(s * 1_000);
    apply(&mut c, &Op::InsertClaim(1), t(0));
    apply(&mut c, &Op::Ready(1), t(1));
    let node_version = |c: &mut Cluster, now| c.view(now).nodes[0].resource_version.clone();
    let before = node_version(&mut c, t(2));
    assert!(!before.is_empty());
    apply(&mut c, &Op::Touch(1), t(3));
    assert_eq!(node_version(&mut c, t(4)), before);
    assert_eq!(c.view(t(4)).node_claims[0].last_pod_event_time, Some(t(3)));
    // A change to the Node itself moves it.
    apply(&mut c, &Op::Taint(1), t(5));
    assert_ne!(node_version(&mut c, t(6)), before);
}

proptest! {
    /// Whatever mix of replacements, inserts and removals, the patched lists are the
    /// sorted entries of the map they mirror.
    #[test]
    fn patching_gives_the_lists_of_the_changed_map(
        before in prop::collection::btree_map(0u8..40, 0u32..5, 0..30),
        edits in prop::collection::btree_map(0u8..40, prop::option::of(5u32..9), 0..20),
    ) {
        let name = |k: u8| format!("k{k:02}");
        let mut keys: Vec<String> = before.keys().map(|&k| name(k)).collect();
        let mut items: Vec<u32> = before.values().copied().collect();
        let mut after: BTreeMap<String, u32> =
            before.iter().map(|(&k, &v)| (name(k), v)).collect();
        for (&k, v) in &edits {
            match v {
                Some(v) => after.insert(name(k), *v),
                None => after.remove(&name(k)),
            };
        }
        let dirty: BTreeSet<String> = edits.keys().map(|&k| name(k)).collect();
        // Spare buffers holding stale entries: none of them may come back.
        let mut spare = (vec!["stale".to_string()], vec![99]);
        patch(&mut keys, &mut items, &dirty, (&mut spare.0, &mut spare.1), |k| {
            after.get(k).copied()
        });
        prop_assert_eq!(keys, after.keys().cloned().collect::<Vec<_>>());
        prop_assert_eq!(items, after.values().copied().collect::<Vec<_>>());
    }
}
