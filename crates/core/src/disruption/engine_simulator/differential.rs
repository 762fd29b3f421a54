//! The prepared (incremental) simulation against the full one: for generated clusters, with
//! and without topology constraints, every candidate set gets the same [`Simulation`] both
//! ways, and the incremental path really answers instead of falling back.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::*;
use crate::disruption::bench::cluster;
use crate::disruption::candidates::is_reschedulable;
use crate::model::{
    DaemonSet, InclusionPolicy, Node, NodeClaim, OwnerRef, Pod, PodAffinityTerm, PodTemplate,
    TopologySpreadConstraint, WhenUnsatisfiable,
};
use crate::resources::{CPU, MEMORY, Resources};
use crate::scheduling::prepared::Prepared;
use crate::selector::LabelSelector;
use crate::time::Timestamp;

fn app_selector(app: &str) -> Option<LabelSelector> {
    Some(LabelSelector {
        match_labels: [("app".to_string(), app.to_string())].into_iter().collect(),
        match_expressions: vec![],
    })
}

/// Zone spreads, hostname anti-affinity and node selectors on some apps; a daemonset; an
/// in-flight claim and a node that is not initialized yet.
fn with_topology(mut s: Snapshot) -> Snapshot {
    for p in s.pods.iter_mut().map(Arc::make_mut) {
        let app = p.labels["app"].clone();
        let n: usize = app.trim_start_matches("app-").parse().unwrap();
        match n % 7 {
            0 => p.topology_spread.push(TopologySpreadConstraint {
                max_skew: 1,
                topology_key: labels::ZONE.into(),
                when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
                label_selector: app_selector(&app),
                min_domains: None,
                node_affinity_policy: InclusionPolicy::Honor,
                node_taints_policy: InclusionPolicy::Ignore,
                match_label_keys: vec![],
            }),
            1 => p.pod_anti_affinity.push(PodAffinityTerm {
                label_selector: app_selector(&app),
                namespaces: vec![],
                namespace_selector: None,
                topology_key: labels::HOSTNAME.into(),
                match_label_keys: vec![],
                mismatch_label_keys: vec![],
            }),
            2 => {
                p.node_selector
                    .insert(labels::CAPACITY_TYPE.into(), "on-demand".into());
            }
            3 => p.topology_spread.push(TopologySpreadConstraint {
                max_skew: 2,
                topology_key: labels::HOSTNAME.into(),
                when_unsatisfiable: WhenUnsatisfiable::ScheduleAnyway,
                label_selector: app_selector(&app),
                min_domains: None,
                node_affinity_policy: InclusionPolicy::Honor,
                node_taints_policy: InclusionPolicy::Ignore,
                match_label_keys: vec![],
            }),
            _ => {}
        }
    }
    let pod = Pod {
        namespace: "kube-system".into(),
        name: "agent".into(),
        template: Arc::new(PodTemplate {
            requests: Resources::new().with(CPU, 100).with(MEMORY, 128 << 20),
            owner: Some(OwnerRef {
                kind: "DaemonSet".into(),
                name: "agent".into(),
                controller: true,
            }),
            ..PodTemplate::default()
        }),
        ..Pod::default()
    };
    s.daemonsets.push(DaemonSet {
        namespace: "kube-system".into(),
        name: "agent".into(),
        pod,
    });
    // A node still coming up, and a claim still launching.
    let mut young = Node::clone(&s.nodes[0]);
    young.name = "young".into();
    young.labels.insert(labels::HOSTNAME.into(), "young".into());
    s.nodes.push(Arc::new(young.clone()));
    s.node_claims.push(Arc::new(NodeClaim {
        name: "young-claim".into(),
        nodepool: "default".into(),
        node_name: Some("young".into()),
        launched: true,
        registered: true,
        initialized: false,
        ..NodeClaim::default()
    }));
    s.node_claims.push(Arc::new(NodeClaim {
        name: "launching".into(),
        nodepool: "default".into(),
        allocatable: young.allocatable.clone(),
        requirements: vec![crate::requirements::Requirement::single(
            labels::ZONE,
            "test-zone-2",
        )],
        launched: true,
        ..NodeClaim::default()
    }));
    s
}

/// A label every node carries, first seen on the first node and met on the others only after
/// their hostname: removing that node would reorder ids, so those solves compile the kept
/// targets again.
fn with_shared_label(mut s: Snapshot) -> Snapshot {
    for (i, n) in s.nodes.iter_mut().map(Arc::make_mut).enumerate() {
        n.labels
            .insert("team".into(), if i % 2 == 0 { "a" } else { "b" }.into());
    }
    for p in s.pods.iter_mut().step_by(5).map(Arc::make_mut) {
        p.node_selector.insert("team".into(), "b".into());
    }
    s
}

/// Labels every node carries whose keys sort before the hostname, first seen on the first
/// node (as the lifecycle labels are): removing that node reorders nothing.
fn with_lifecycle_labels(mut s: Snapshot) -> Snapshot {
    for n in s.nodes.iter_mut().map(Arc::make_mut) {
        n.labels.insert(labels::REGISTERED.into(), "true".into());
        n.labels.insert(labels::INITIALIZED.into(), "true".into());
    }
    s
}

/// The strings a fresh compile's targets intern first, in id order.
fn fresh_target_strings(s: &Snapshot) -> Vec<String> {
    let t = crate::scheduling::setup::targets(s);
    let end = t.interner.len() as u32;
    let start = t.fresh.first().map_or(end, |f| f.0);
    (start..end)
        .map(|id| t.interner.name(id).to_string())
        .collect()
}

/// Where the prepared compile says its ids keep their order without `without`, they do: the
/// strings that stay, in the shared compile's id order, are a fresh compile's.
fn check_order(s: &Snapshot, compiled: &Prepared, without: &BTreeSet<String>) -> Option<bool> {
    let keeps = compiled.keeps_order(without);
    if keeps == Some(true) {
        let fresh = fresh_target_strings(&reduced(s, without, &pods_on(s, without)));
        let present: BTreeSet<&String> = fresh.iter().collect();
        let shared: Vec<String> = compiled
            .target_strings()
            .into_iter()
            .filter(|x| present.contains(x))
            .collect();
        assert_eq!(shared, fresh, "without {without:?}");
    }
    keeps
}

fn pods_on<'a>(s: &'a Snapshot, nodes: &BTreeSet<String>) -> Vec<&'a Pod> {
    s.pods
        .iter()
        .filter(|p| p.node_name.as_ref().is_some_and(|n| nodes.contains(n)))
        .filter(|p| is_reschedulable(p))
        .map(|p| &**p)
        .collect()
}

/// Single nodes, then growing prefixes and strided pairs, as the planner asks.
fn candidate_sets(nodes: &[Arc<Node>]) -> Vec<BTreeSet<String>> {
    let names: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
    let mut out: Vec<BTreeSet<String>> = names.iter().map(|n| [n.clone()].into()).collect();
    for k in [2, 3, 5, 8, names.len() / 2, names.len()] {
        out.push(names.iter().take(k).cloned().collect());
    }
    for i in 0..names.len() / 2 {
        out.push([names[i].clone(), names[names.len() - 1 - i].clone()].into());
    }
    out
}

/// Compares both paths on every candidate set; returns how many the incremental path answered
/// and how many of those compiled the kept targets again.
fn compare(s: &Snapshot) -> (usize, usize, usize) {
    let sim = EngineSimulator::default();
    let purpose = Purpose::Consolidation;
    let options = sim.options_for(s, purpose);
    let prepared = sim.prepare(s, purpose).expect("the cluster prepares");
    let compiled = Prepared::new(s).expect("the cluster compiles");
    let (mut answered, mut total, mut recompiled) = (0, 0, 0);
    for without in candidate_sets(&s.nodes) {
        if check_order(s, &compiled, &without) == Some(false) {
            recompiled += 1;
        }
        let pods = pods_on(s, &without);
        let full = sim.simulate(s, purpose, &without, &pods);
        let fast = prepared.simulate(&without, &pods);
        assert_eq!(fast, full, "without {without:?}");
        total += 1;
        if compiled.solve(s, &without, &pods, &options).is_some() {
            answered += 1;
        }
    }
    let jobs: Vec<Job<'_>> = candidate_sets(&s.nodes)
        .into_iter()
        .map(|without| {
            let pods = pods_on(s, &without);
            Job { without, pods }
        })
        .collect();
    let all = prepared.simulate_all(&jobs);
    for (j, got) in jobs.iter().zip(all) {
        assert_eq!(
            got,
            sim.simulate(s, purpose, &j.without, &j.pods),
            "{:?}",
            j.without
        );
    }
    (answered, total, recompiled)
}

#[test]
fn generated_clusters_simulate_the_same_incrementally() {
    for (nodes, pods, seed) in [(8, 60, 1), (20, 150, 2), (30, 400, 3), (40, 200, 4)] {
        let (answered, total, _) = compare(&cluster(nodes, pods, seed));
        assert_eq!(answered, total, "{nodes}/{pods}/{seed}");
    }
}

#[test]
fn clusters_with_topology_simulate_the_same_incrementally() {
    for (nodes, pods, seed) in [(10, 80, 5), (25, 250, 6), (30, 500, 7)] {
        let (answered, total, _) = compare(&with_topology(cluster(nodes, pods, seed)));
        assert_eq!(answered, total, "{nodes}/{pods}/{seed}");
    }
}

#[test]
fn a_shared_first_seen_label_is_compiled_again_and_agrees() {
    let s = with_shared_label(cluster(16, 120, 8));
    let (answered, total, recompiled) = compare(&s);
    assert_eq!(answered, total);
    // Sets with the first node compile the kept targets again, the rest share the compile.
    assert!(recompiled > 0 && recompiled < total, "{recompiled}/{total}");
    let first: BTreeSet<String> = [s.nodes[0].name.clone()].into();
    let c = Prepared::new(&s).unwrap();
    assert_eq!(c.keeps_order(&first), Some(false));
}

#[test]
fn shared_labels_met_before_anything_new_keep_the_shared_compile() {
    for (nodes, pods, seed) in [(16, 120, 13), (24, 300, 14)] {
        let s = with_lifecycle_labels(cluster(nodes, pods, seed));
        let (answered, total, recompiled) = compare(&s);
        assert_eq!((answered, recompiled), (total, 0), "{nodes}/{pods}/{seed}");
    }
    let s = with_shared_label(with_lifecycle_labels(with_topology(cluster(20, 200, 15))));
    let (answered, total, _) = compare(&s);
    assert_eq!(answered, total);
}

#[test]
fn plans_are_the_same_with_and_without_preparation() {
    struct Plain(EngineSimulator);
    impl Simulator for Plain {
        fn simulate(
            &self,
            s: &Snapshot,
            purpose: Purpose,
            w: &BTreeSet<String>,
            p: &[&Pod],
        ) -> Simulation {
            self.0.simulate(s, purpose, w, p)
        }
    }
    for s in [
        cluster(30, 200, 9),
        with_topology(cluster(24, 240, 10)),
        with_shared_label(cluster(20, 160, 11)),
        with_lifecycle_labels(with_topology(cluster(20, 160, 16))),
        with_recent_pod_events(with_topology(cluster(20, 160, 19))),
    ] {
        let settings = crate::disruption::plan::Settings::default();
        let fast = crate::disruption::plan::plan(&s, &EngineSimulator::default(), settings);
        let full = crate::disruption::plan::plan(&s, &Plain(EngineSimulator::default()), settings);
        assert_eq!(fast, full);
    }
}

/// Every NodePool with a 5-minute `consolidateAfter`, and every third claim with a pod event
/// a minute ago: those nodes are closed to a consolidation's moving pods.
fn with_recent_pod_events(mut s: Snapshot) -> Snapshot {
    for np in &mut s.nodepools {
        np.disruption.consolidate_after = Some(std::time::Duration::from_secs(300));
    }
    let (recent, long_ago) = (Timestamp(s.now.0 - 60_000), Timestamp(s.now.0 - 600_000));
    for (i, c) in s.node_claims.iter_mut().map(Arc::make_mut).enumerate() {
        c.last_pod_event_time = Some(if i % 3 == 0 { recent } else { long_ago });
    }
    s
}

#[test]
fn nodes_inside_consolidate_after_are_closed_the_same_incrementally() {
    for s in [
        with_recent_pod_events(cluster(20, 150, 17)),
        with_recent_pod_events(with_topology(cluster(24, 240, 18))),
    ] {
        let closed = closed_nodes(&s);
        assert!(
            !closed.is_empty() && closed.len() < s.nodes.len(),
            "{closed:?}"
        );
        let (answered, total, _) = compare(&s);
        assert_eq!(answered, total);
        // No moving pod lands on a closed node; drift, whose rule this is not, uses them.
        let sim = EngineSimulator::default();
        let on_closed = |purpose, without: &BTreeSet<String>| {
            let pods = pods_on(&s, without);
            let plan =
                scheduling::solve(&reduced(&s, without, &pods), &sim.options_for(&s, purpose));
            plan.placements
                .iter()
                .filter(|p| matches!(&p.target, Target::Node(n) if closed.contains(n)))
                .count()
        };
        let (mut consolidation, mut drift) = (0, 0);
        for without in candidate_sets(&s.nodes) {
            consolidation += on_closed(Purpose::Consolidation, &without);
            drift += on_closed(Purpose::Drift, &without);
        }
        assert_eq!(consolidation, 0);
        assert!(drift > 0);
    }
}

#[test]
fn labels_seen_once_do_not_pin_nodes() {
    let s = cluster(6, 30, 12);
    let c = Prepared::new(&s).unwrap();
    let without: BTreeSet<String> = [s.nodes[0].name.clone()].into();
    let pods = pods_on(&s, &without);
    assert!(c.solve(&s, &without, &pods, &Options::default()).is_some());
}

/// A cluster large enough that a compile splits its node work and its duplicate-key check
/// onto other threads: its incremental answers still equal full solves, and a pod key listed
/// twice is still found (the solve that would move it falls back).
#[test]
fn a_compile_split_over_threads_answers_as_full_solves() {
    let mut s = cluster(300, 5000, 8);
    assert!(
        s.nodes.len() >= 256 && s.pods.len() >= 4096,
        "{}",
        s.pods.len()
    );
    // Pods stay in their node's zone: where they move depends on every node's labels.
    let zones: BTreeMap<String, String> = s
        .nodes
        .iter()
        .map(|n| (n.name.clone(), n.labels[labels::ZONE].clone()))
        .collect();
    for p in s.pods.iter_mut().map(Arc::make_mut) {
        let zone = zones[p.node_name.as_deref().expect("generated pods are bound")].clone();
        p.node_selector.insert(labels::ZONE.into(), zone);
    }
    // The first pod listed twice, on another node, next to itself (pods stay in key order).
    let mut twin = (*s.pods[0]).clone();
    let home = twin.node_name.clone().expect("generated pods are bound");
    twin.node_name = s.nodes.iter().map(|n| n.name.clone()).find(|n| *n != home);
    s.pods.insert(1, twin.into());
    let sim = EngineSimulator::default();
    let compiled = Prepared::new(&s).expect("the cluster compiles");
    let mut answered = 0;
    for node in s.nodes.iter().take(6) {
        let without: BTreeSet<String> = [node.name.clone()].into();
        let pods = pods_on(&s, &without);
        match compiled.solve(&s, &without, &pods, &sim.options) {
            Some(plan) => {
                answered += 1;
                let full = scheduling::solve(&reduced(&s, &without, &pods), &sim.options);
                assert_eq!(plan.placements, full.placements, "without {without:?}");
                assert_eq!(plan.new_claims, full.new_claims, "without {without:?}");
                assert_eq!(plan.unplaced, full.unplaced, "without {without:?}");
            }
            None => assert!(
                pods.iter().any(|p| p.key() == s.pods[0].key()),
                "only the twin's nodes fall back (without {without:?})"
            ),
        }
    }
    assert!(answered >= 4, "{answered}");
    let home: BTreeSet<String> = [home].into();
    let pods = pods_on(&s, &home);
    assert!(compiled.solve(&s, &home, &pods, &sim.options).is_none());
}
