use std::collections::BTreeSet;
use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::disruption::bench;
use crate::disruption::candidates::budget_node_counts;
use crate::disruption::command::{Decision, Method};
use crate::disruption::engine_simulator::{EngineSimulator, reduced};
use crate::disruption::plan::{Settings, plan};
use crate::disruption::simulate::{Purpose, Simulator};
use crate::disruption::validate::validate;
use crate::labels;
use crate::model::{Node, NodeClaim, Pod};
use crate::requirements::Requirement;
use crate::resources::{CPU, MEMORY, PODS, Resources};
use crate::scheduling::{self, Options, Target};
use crate::testkit::cluster::{self as fixture, node_labels};
use crate::time::Timestamp;

/// Initialized `large` nodes, each running one pod of `cpu` millicores; a `small` node would
/// do for each of them alone.
fn cluster(nodes: &[(&str, i64)]) -> Snapshot {
    let cpus: Vec<[i64; 1]> = nodes.iter().map(|&(_, cpu)| [cpu]).collect();
    let nodes: Vec<(&str, &str, &[i64])> = nodes
        .iter()
        .zip(&cpus)
        .map(|(&(name, _), cpu)| (name, "large", &cpu[..]))
        .collect();
    fixture::cluster(&["a"], &nodes)
}

/// A replacement claim of type `small` that is launching: no node yet.
fn launching(name: &str) -> NodeClaim {
    NodeClaim {
        name: name.into(),
        nodepool: "default".into(),
        requirements: vec![
            Requirement::single(labels::NODEPOOL, "default"),
            Requirement::single(labels::INSTANCE_TYPE, "small"),
            Requirement::single(labels::ZONE, "a"),
            Requirement::single(labels::CAPACITY_TYPE, "on-demand"),
        ],
        launched: true,
        ..NodeClaim::default()
    }
}

/// `n1` is being replaced by `r1`, which is still launching; `n2` could be replaced too.
fn replace_in_flight() -> (Snapshot, InFlight) {
    let mut s = cluster(&[("n1", 500), ("n2", 500)]);
    s.node_claims.push(Arc::new(launching("r1")));
    let mut running = InFlight::default();
    running.targets.insert("c-n1".into());
    running.replacements.insert("r1".into());
    (s, running)
}

#[test]
fn a_second_replace_is_found_while_the_first_waits_for_its_replacement() {
    let (s, running) = replace_in_flight();
    let view = running.view(&s);
    let p = plan(&view, &EngineSimulator::default(), Settings::default());
    assert_eq!(p.commands.len(), 1, "{:?}", p.verdicts);
    let cmd = &p.commands[0];
    assert_eq!(cmd.method, Method::SingleNodeConsolidation, "{cmd}");
    assert_eq!(cmd.decision, Decision::Replace, "{cmd}");
    assert_eq!(cmd.targets[0].node, "n2");
    assert_eq!(
        cmd.replacements[0].instance_types,
        vec!["small".to_string()]
    );
    // The command holds on the same view after the validation delay.
    assert_eq!(validate(cmd, &view, &EngineSimulator::default()), Ok(()));

    // The same round without the reservation: n2's pod lands on the launching replacement,
    // which is no safe landing spot, and nothing is found.
    let mut unreserved = running.clone();
    unreserved.replacements.clear();
    let p = plan(
        &unreserved.view(&s),
        &EngineSimulator::default(),
        Settings::default(),
    );
    assert!(p.commands.is_empty(), "{:?}", p.commands);
    let n2 = p.verdicts.iter().find(|v| v.node == "n2").unwrap();
    assert!(n2.message.contains("not initialized"), "{n2:?}");
}

#[test]
fn the_targets_keep_their_pods_and_take_no_others() {
    let (s, running) = replace_in_flight();
    let view = running.view(&s);
    // n1 has room for n2's pod, and r1 is empty: neither may take it.
    let pods: Vec<&Pod> = view
        .pods
        .iter()
        .filter(|p| p.name == "n2-0")
        .map(|p| &**p)
        .collect();
    let without: BTreeSet<String> = ["n2".to_string()].into();
    let reduced = reduced(&view, &without, &pods);
    let solved = scheduling::solve(&reduced, &Options::default());
    assert!(solved.unplaced.is_empty(), "{:?}", solved.unplaced);
    assert_eq!(solved.new_claims.len(), 1);
    assert!(
        solved
            .placements
            .iter()
            .all(|p| matches!(p.target, Target::NewClaim(_))),
        "{:?}",
        solved.placements
    );
    // n1's pod is not moved by anyone's simulation: it is still bound to n1.
    let n1_pod = view.pods.iter().find(|p| p.name == "n1-0").unwrap();
    assert_eq!(n1_pod.node_name.as_deref(), Some("n1"));
    let sim = EngineSimulator::default().simulate(&view, Purpose::Consolidation, &without, &pods);
    assert!(sim.failures.is_empty(), "{:?}", sim.failures);
    assert_eq!(sim.new_claims.len(), 1);
}

/// The replacement `r1` registers as the empty, Ready node `r1-node`, `initialized` or not.
fn registered(s: &mut Snapshot, initialized: bool) {
    s.nodes.push(Arc::new(Node {
        name: "r1-node".into(),
        provider_id: "p-r1".into(),
        labels: node_labels("r1-node", "small"),
        allocatable: Resources::new()
            .with(CPU, 2000)
            .with(MEMORY, 16 << 30)
            .with(PODS, 110),
        ready: true,
        ..Node::default()
    }));
    let r1 = s
        .node_claims
        .iter_mut()
        .map(Arc::make_mut)
        .find(|c| c.name == "r1")
        .unwrap();
    r1.node_name = Some("r1-node".into());
    r1.provider_id = Some("p-r1".into());
    r1.registered = true;
    r1.initialized = initialized;
    r1.initialized_at = initialized.then_some(s.now);
}

fn closed(taints: &[Taint]) -> bool {
    taints.iter().any(|t| t.key == DISRUPTED_TAINT)
}

#[test]
fn targets_are_deleting_and_count_against_the_budgets_the_reservation_does_not() {
    let (mut s, running) = replace_in_flight();
    registered(&mut s, false);

    let view = running.view(&s);
    let claim = |name: &str| view.node_claims.iter().find(|c| c.name == name).unwrap();
    let node = |name: &str| view.nodes.iter().find(|n| n.name == name).unwrap();
    assert_eq!(claim("c-n1").deletion_timestamp, Some(s.now));
    assert!(closed(&node("n1").taints));
    assert!(closed(&node("r1-node").taints) && closed(&claim("r1").taints));
    assert!(claim("c-n2").deletion_timestamp.is_none() && !closed(&node("n2").taints));
    // Two initialized nodes, one of them disrupting; the replacement counts for nothing.
    assert_eq!(budget_node_counts(&view)["default"], (2, 1));
    let mut targets_only = running.clone();
    targets_only.replacements.clear();
    assert_eq!(
        budget_node_counts(&view),
        budget_node_counts(&targets_only.view(&s))
    );
    // The replacement is no candidate.
    let p = plan(&view, &EngineSimulator::default(), Settings::default());
    assert!(p.commands.iter().all(|c| c.targets[0].node == "n2"));
    let v = p.verdicts.iter().find(|v| v.node == "r1-node").unwrap();
    assert_eq!(v.code, "not-initialized");
}

#[test]
fn an_initialized_replacement_stays_reserved_until_its_command_finishes() {
    let (mut s, running) = replace_in_flight();
    registered(&mut s, true);
    let view = running.view(&s);
    let r1 = view.node_claims.iter().find(|c| c.name == "r1").unwrap();
    assert!(closed(&r1.taints) && !r1.initialized);
    let r1_node = view.nodes.iter().find(|n| n.name == "r1-node").unwrap();
    assert!(closed(&r1_node.taints));
    // As while it launched: n2's pod needs a node of its own, the replacement is no
    // candidate and the budgets do not count it.
    let p = plan(&view, &EngineSimulator::default(), Settings::default());
    assert_eq!(p.commands.len(), 1, "{:?}", p.verdicts);
    assert_eq!(p.commands[0].targets[0].node, "n2");
    assert_eq!(p.commands[0].decision, Decision::Replace);
    let v = p.verdicts.iter().find(|v| v.node == "r1-node").unwrap();
    assert_eq!(v.code, "not-initialized");
    assert_eq!(budget_node_counts(&view)["default"], (2, 1));

    // Unreserved, the empty replacement is the first thing to go, and n2's pod would move
    // onto the room n1's pod is about to take.
    let mut unreserved = running.clone();
    unreserved.replacements.clear();
    let free = unreserved.view(&s);
    let p = plan(&free, &EngineSimulator::default(), Settings::default());
    assert!(
        p.commands
            .iter()
            .any(|c| c.targets.iter().any(|t| t.node == "r1-node")),
        "{:?}",
        p.commands
    );
    let n2: Vec<&Pod> = free
        .pods
        .iter()
        .filter(|p| p.name == "n2-0")
        .map(|p| &**p)
        .collect();
    let without: BTreeSet<String> = ["n2".to_string()].into();
    let solved = scheduling::solve(&reduced(&free, &without, &n2), &Options::default());
    assert!(
        solved
            .placements
            .iter()
            .any(|p| matches!(&p.target, Target::Node(n) if n == "r1-node")),
        "{:?}",
        solved.placements
    );
}

#[test]
fn idle_rounds_are_left_alone() {
    let (s, _) = replace_in_flight();
    // Nothing in flight: the snapshot itself.
    assert!(matches!(
        InFlight::default().view(&s),
        Cow::Borrowed(b) if std::ptr::eq(b, &s)
    ));
}

#[test]
fn terminating_nodes_leave_the_view() {
    let (s, _) = replace_in_flight();
    let mut running = InFlight::default();
    running.terminating.insert("n1".into());
    let view = running.view(&s);
    assert!(view.nodes.iter().all(|n| n.name != "n1"));
    assert_eq!(budget_node_counts(&view)["default"], (1, 0));
}

/// A cluster of generated nodes with one node's command running: its claim a target, a
/// launching replacement that would fit any moving pod.
fn running_case(nodes: usize, pods: usize, seed: u64, target: usize) -> (Snapshot, InFlight) {
    let mut s = bench::cluster(nodes, pods, seed);
    let biggest = s.instance_types["default"]
        .iter()
        .max_by_key(|it| it.capacity.get(CPU))
        .unwrap()
        .name
        .clone();
    let zone = s.nodes[0].labels[labels::ZONE].clone();
    s.node_claims.push(Arc::new(NodeClaim {
        name: "replacement".into(),
        nodepool: "default".into(),
        requirements: vec![
            Requirement::single(labels::NODEPOOL, "default"),
            Requirement::single(labels::INSTANCE_TYPE, &biggest),
            Requirement::single(labels::ZONE, &zone),
        ],
        launched: true,
        creation_timestamp: s.now,
        ..NodeClaim::default()
    }));
    let mut running = InFlight::default();
    running
        .targets
        .insert(s.node_claims[target % nodes].name.clone());
    running.replacements.insert("replacement".into());
    (s, running)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// Whatever a round plans beside a running command: none of its targets is the running
    /// command's, its simulations put no pod on the reserved replacement or the running
    /// targets (the pods already there are counted once, where they are), and the budgets
    /// are what they would be without the reservation.
    #[test]
    fn rounds_beside_a_running_command_leave_its_nodes_alone(
        seed in 0u64..1000,
        target in 0usize..12,
    ) {
        let (s, running) = running_case(12, 60, seed, target);
        let view = running.view(&s);
        let target_node = s.node_claims[target % 12].node_name.clone().unwrap();
        let mut targets_only = running.clone();
        targets_only.replacements.clear();
        prop_assert_eq!(
            budget_node_counts(&view),
            budget_node_counts(&targets_only.view(&s))
        );
        let p = plan(&view, &EngineSimulator::default(), Settings::default());
        for c in &p.commands {
            for t in &c.targets {
                prop_assert!(t.node != target_node, "{}", c);
                prop_assert!(!running.targets.contains(&t.nodeclaim), "{}", c);
            }
            let without: BTreeSet<String> = c.targets.iter().map(|t| t.node.clone()).collect();
            let pods: Vec<&Pod> = view
                .pods
                .iter()
                .filter(|p| p.node_name.as_ref().is_some_and(|n| without.contains(n)))
                .filter(|p| !p.is_daemonset_pod())
                .map(|p| &**p).collect();
            let solved = scheduling::solve(&reduced(&view, &without, &pods), &Options::default());
            for placed in &solved.placements {
                let on = match &placed.target {
                    Target::Node(n) | Target::InFlight(n) => n.as_str(),
                    Target::NewClaim(_) => continue,
                };
                prop_assert!(on != "replacement" && on != target_node, "{} on {}", placed.pod, on);
            }
        }
    }
}

/// A generated cluster with some claims launching (no node), some already deleting or
/// tainted disrupted, and running commands naming any of them, some nodes terminating.
fn reversible_case(seed: u64, picks: &[(u8, u8)]) -> (Snapshot, InFlight) {
    let mut s = bench::cluster(10, 40, seed);
    let n = s.node_claims.len();
    let mut held = InFlight::default();
    for (i, &(what, state)) in picks.iter().enumerate() {
        let at = i % n;
        let c = s.claim_mut(at);
        match state % 4 {
            0 => {}
            1 => c.initialized = false,
            2 => c.deletion_timestamp = Some(Timestamp(5)),
            _ => c
                .taints
                .push(Taint::new(DISRUPTED_TAINT, "", TaintEffect::NoSchedule)),
        }
        if state.is_multiple_of(3)
            && let Some(node) = s.nodes.get_mut(at).map(Arc::make_mut)
        {
            node.taints
                .push(Taint::new(DISRUPTED_TAINT, "", TaintEffect::NoSchedule));
        }
        let name = s.node_claims[at].name.clone();
        match what % 4 {
            0 => {}
            1 => {
                held.targets.insert(name);
            }
            2 => {
                held.replacements.insert(name);
            }
            _ => {
                held.terminating
                    .insert(s.nodes[at % s.nodes.len()].name.clone());
            }
        }
    }
    s.node_claims.push(Arc::new(launching("launching")));
    if picks.len().is_multiple_of(2) {
        held.replacements.insert("launching".into());
    }
    (s, held)
}

proptest! {
    /// The view applied in place equals the copied one, and reverting gives back exactly the
    /// snapshot it was applied to.
    #[test]
    fn applying_in_place_equals_the_view_and_reverts_exactly(
        seed in 0u64..1000,
        picks in proptest::collection::vec((0u8..8, 0u8..12), 0..14),
    ) {
        let (s, held) = reversible_case(seed, &picks);
        let view = held.view(&s);
        let mut in_place = s.clone();
        let applied = held.apply_reversibly(&mut in_place);
        prop_assert_eq!(&in_place.nodes, &view.nodes);
        prop_assert_eq!(&in_place.node_claims, &view.node_claims);
        prop_assert_eq!(&in_place.pods, &view.pods);
        applied.revert(&mut in_place);
        prop_assert_eq!(&in_place.nodes, &s.nodes);
        prop_assert_eq!(&in_place.node_claims, &s.node_claims);
        prop_assert_eq!(&in_place.pods, &s.pods);
    }
}
