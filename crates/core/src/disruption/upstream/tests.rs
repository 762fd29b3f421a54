use super::*;
use crate::disruption::engine_simulator::EngineSimulator;
use crate::model::Pod;
use std::sync::Arc;

/// A generated cluster whose NodePool lets every node go in one round.
fn cluster(nodes: usize, pods: usize, seed: u64) -> Snapshot {
    let mut s = crate::disruption::bench::cluster(nodes, pods, seed);
    s.nodepools[0].disruption.budgets[0].nodes = crate::model::BudgetNodes::Percent(100);
    s
}

fn pods_on<'a>(s: &'a Snapshot, node: &str) -> Vec<&'a Pod> {
    s.pods
        .iter()
        .filter(|p| p.node_name.as_deref() == Some(node))
        .map(|p| &**p)
        .collect()
}

/// A generated cluster with the pods of the first `empty` nodes removed.
fn with_empty_nodes(nodes: usize, pods: usize, empty: usize) -> Snapshot {
    let mut s = cluster(nodes, pods, 11);
    let names: Vec<String> = s.nodes[..empty].iter().map(|n| n.name.clone()).collect();
    s.pods
        .retain(|p| p.node_name.as_ref().is_none_or(|n| !names.contains(n)));
    s
}

#[test]
fn emptiness_comes_first_and_takes_every_empty_node() {
    let s = with_empty_nodes(8, 30, 2);
    let cmd = round(&s, &EngineSimulator::default(), Features::default()).unwrap();
    assert_eq!(cmd.method, Method::Emptiness);
    let nodes: Vec<&str> = cmd.targets.iter().map(|t| t.node.as_str()).collect();
    assert_eq!(nodes, ["node-00000", "node-00001"]);
}

#[test]
fn multi_node_takes_the_cheapest_to_disrupt_prefix() {
    // Few pods on many nodes: several nodes can go at once. Empty nodes are dropped so
    // emptiness has nothing to do.
    let mut s = cluster(10, 12, 5);
    let busy: Vec<String> = s.pods.iter().filter_map(|p| p.node_name.clone()).collect();
    s.nodes.retain(|n| busy.contains(&n.name));
    s.node_claims
        .retain(|c| c.node_name.as_ref().is_some_and(|n| busy.contains(n)));
    let cmd = round(&s, &EngineSimulator::default(), Features::default()).unwrap();
    assert_eq!(cmd.method, Method::MultiNodeConsolidation, "{cmd}");
    let sel = select(&s, MethodClass::Graceful);
    let order: Vec<&str> = consolidatable(&sel.candidates)
        .iter()
        .map(|c| c.node.name.as_str())
        .collect();
    let taken: Vec<&str> = cmd.targets.iter().map(|t| t.node.as_str()).collect();
    assert!(taken.len() >= 2);
    assert_eq!(taken, order[..taken.len()], "a prefix of the ranking");
}

#[test]
fn single_node_when_only_one_candidate_remains() {
    let mut s = cluster(3, 6, 2);
    // Protect all but one node; that one can be consolidated only on its own.
    for name in ["node-00000", "node-00001"] {
        let n = s
            .nodes
            .iter_mut()
            .map(Arc::make_mut)
            .find(|n| n.name == name)
            .unwrap();
        Arc::make_mut(&mut n.annotations).insert(
            crate::disruption::candidates::DO_NOT_DISRUPT.into(),
            "true".into(),
        );
    }
    let cmd = round(&s, &EngineSimulator::default(), Features::default()).unwrap();
    assert_eq!(cmd.method, Method::SingleNodeConsolidation, "{cmd}");
    assert_eq!(cmd.targets[0].node, "node-00002");
}

#[test]
fn apply_removes_targets_and_places_their_pods() {
    let s = cluster(6, 20, 3);
    let cmd = round(&s, &EngineSimulator::default(), Features::default()).unwrap();
    let moved: Vec<String> = cmd
        .targets
        .iter()
        .flat_map(|t| t.pods.iter().cloned())
        .collect();
    let after = apply(&s, std::slice::from_ref(&cmd), "r0");
    for t in &cmd.targets {
        assert!(after.nodes.iter().all(|n| n.name != t.node));
        assert!(pods_on(&after, &t.node).is_empty());
    }
    for key in moved {
        let p = after.pods.iter().find(|p| p.key() == key).unwrap();
        assert!(p.node_name.is_some(), "{key} left pending");
    }
    assert!(cluster_cost(&after) < cluster_cost(&s));
}

#[test]
fn both_searches_reach_a_fixed_point_that_saves() {
    let s = cluster(12, 40, 9);
    let sim = EngineSimulator::default();
    for search in [Search::Upstream, Search::Ours] {
        let out = run_to_fixed_point(&s, &sim, search, Settings::default(), 100);
        assert!(out.rounds > 0, "{search:?}");
        assert!(out.cost_after < out.cost_before, "{search:?}");
        assert!(out.nodes_after < out.nodes_before, "{search:?}");
        assert_eq!(out.pending_after, 0, "{search:?}");
        assert_eq!(out.snapshot.pods.len(), s.pods.len());
        if search == Search::Upstream {
            assert_eq!(out.rounds, out.commands, "one command per round");
            assert!(round(&out.snapshot, &sim, Features::default()).is_none());
        }
    }
}
