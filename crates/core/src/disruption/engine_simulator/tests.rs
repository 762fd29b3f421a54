//! Consolidation's simulations on the scheduling engine: deletes, replacements, closed nodes.

use super::*;
use crate::disruption::command::{Decision, Method};
use crate::disruption::plan::{Settings, plan};
use crate::testkit::cluster as fixture;
use std::sync::Arc;

fn cluster(nodes: &[(&str, &str, &[i64])]) -> Snapshot {
    fixture::cluster(&["a", "b"], nodes)
}

#[test]
fn pods_that_fit_elsewhere_let_a_node_go() {
    // Together the pods need a large node again, so only deleting one node saves money.
    let s = cluster(&[("n1", "large", &[1500]), ("n2", "large", &[1500])]);
    let p = plan(&s, &EngineSimulator::default(), Settings::default());
    let cmd = p
        .commands
        .iter()
        .find(|c| c.method != Method::Emptiness)
        .expect("a consolidation");
    assert_eq!(cmd.decision, Decision::Delete, "{cmd}");
    assert_eq!(cmd.targets.len(), 1);
}

#[test]
fn two_half_empty_nodes_become_one_small_node() {
    let s = cluster(&[("n1", "large", &[1000]), ("n2", "large", &[1000])]);
    let p = plan(&s, &EngineSimulator::default(), Settings::default());
    let cmd = &p.commands[0];
    assert_eq!(cmd.method, Method::MultiNodeConsolidation, "{cmd}");
    assert_eq!(
        cmd.replacements[0].instance_types,
        vec!["small".to_string()]
    );
    assert!((cmd.savings_per_hour - 0.6).abs() < 1e-9);
}

#[test]
fn an_oversized_node_is_replaced_by_a_cheaper_type() {
    let s = cluster(&[("n1", "large", &[500])]);
    let p = plan(&s, &EngineSimulator::default(), Settings::default());
    assert_eq!(p.commands.len(), 1, "{:?}", p.verdicts);
    let cmd = &p.commands[0];
    assert_eq!(cmd.decision, Decision::Replace);
    assert_eq!(
        cmd.replacements[0].instance_types,
        vec!["small".to_string()]
    );
    assert!((cmd.savings_per_hour - 0.2).abs() < 1e-9);
}

#[test]
fn pods_do_not_move_onto_a_node_inside_consolidate_after() {
    // n1's pod fits beside n2's; n2 had a pod event `ago` before now.
    let plan_with = |ago: i64, drifted: bool| {
        let mut s = cluster(&[("n1", "large", &[500]), ("n2", "large", &[3000])]);
        if drifted {
            s.claim_mut(0).drifted = Some("AMIDrift".into());
        }
        s.nodepools[0].disruption.consolidate_after = Some(std::time::Duration::from_secs(60));
        for c in s.node_claims.iter_mut().map(Arc::make_mut) {
            let at = if c.name == "c-n2" { ago } else { 600_000 };
            c.last_pod_event_time = Some(crate::time::Timestamp(s.now.0 - at));
        }
        plan(&s, &EngineSimulator::default(), Settings::default())
    };
    let settled = plan_with(120_000, false);
    assert_eq!(settled.commands.len(), 1, "{:?}", settled.verdicts);
    assert_eq!(settled.commands[0].decision, Decision::Delete);
    assert_eq!(settled.commands[0].targets[0].node, "n1");
    // Inside n2's minute, the pod needs a node of its own: a cheaper one replaces n1.
    let fresh = plan_with(30_000, false);
    assert_eq!(fresh.commands.len(), 1, "{:?}", fresh.verdicts);
    let cmd = &fresh.commands[0];
    assert_eq!(
        (cmd.decision, cmd.targets[0].node.as_str()),
        (Decision::Replace, "n1")
    );
    assert_eq!(
        cmd.replacements[0].instance_types,
        vec!["small".to_string()]
    );
    // Drift's simulation has no such rule: n1's pod moves to n2 and nothing is launched.
    let drift = plan_with(30_000, true);
    let cmd = &drift.commands[0];
    assert_eq!(
        (cmd.method, cmd.targets[0].node.as_str()),
        (Method::Drift, "n1")
    );
    assert!(cmd.replacements.is_empty(), "{cmd}");
}

/// Two 1.5-cpu pods on a `large` node of 4 cpu at $1/h: one `medium` (3.2 cpu, $0.70/h)
/// takes both, two `small`s (2 cpu, $0.20/h) take them for less.
fn split_would_be_cheaper() -> (Snapshot, BTreeSet<String>) {
    let mut s = cluster(&[("n1", "large", &[1500, 1500])]);
    let its = vec![
        fixture::it("small", 2000, 0.2, &["a", "b"]),
        fixture::it("medium", 3200, 0.7, &["a", "b"]),
        fixture::it("large", 4000, 1.0, &["a", "b"]),
    ];
    s.instance_types.insert("default".into(), Arc::new(its));
    (s, BTreeSet::from(["n1".to_string()]))
}

#[test]
fn a_consolidations_simulation_launches_one_node_and_its_re_check_agrees() {
    let (s, without) = split_would_be_cheaper();
    let moving: Vec<&Pod> = s.pods.iter().map(|p| &**p).collect();
    let sim = EngineSimulator::default();
    let full = sim.simulate(&s, Purpose::Consolidation, &without, &moving);
    let prepared = sim
        .prepare(&s, Purpose::Consolidation)
        .expect("the cluster prepares")
        .simulate(&without, &moving);
    assert_eq!(full.new_claims.len(), 1, "{full:?}");
    assert_eq!(full, prepared);
    // The plan replaces the node with a medium, and the re-check on the same cluster
    // holds it (it used to see the two smalls and reject it, round after round).
    let p = plan(&s, &sim, Settings::default());
    let cmd = &p.commands[0];
    assert_eq!(cmd.decision, Decision::Replace, "{cmd}");
    assert_eq!(cmd.replacements[0].instance_types[0], "medium");
    assert_eq!(crate::disruption::validate(cmd, &s, &sim), Ok(()));
    // Drift may launch several nodes: its simulation splits, by either path.
    let full = sim.simulate(&s, Purpose::Drift, &without, &moving);
    let prepared = sim
        .prepare(&s, Purpose::Drift)
        .expect("the cluster prepares")
        .simulate(&without, &moving);
    assert_eq!(full.new_claims.len(), 2, "{full:?}");
    assert_eq!(full, prepared);
}

#[test]
fn full_nodes_stay_and_say_why() {
    let s = cluster(&[("n1", "small", &[1500]), ("n2", "small", &[1500])]);
    let p = plan(&s, &EngineSimulator::default(), Settings::default());
    assert!(p.commands.is_empty(), "{:?}", p.commands);
    assert!(
        p.verdicts
            .iter()
            .all(|v| v.code == "no-cheaper-replacement"),
        "{:?}",
        p.verdicts
    );
}
