//! The queue's rules: which commands wait, when targets go, when a command is rolled back.

use std::collections::BTreeSet;

use super::*;
use crate::disruption::command::{Method, Replacement as Planned_};

fn command(method: Method, claims: &[&str], replacements: usize) -> Command {
    let replacement = Planned_ {
        nodepool: "default".into(),
        requirements: Vec::new(),
        instance_types: vec!["medium".into()],
        price: 0.2,
    };
    Command::new(
        method,
        claims.iter().map(|c| Target::for_claim(c)).collect(),
        vec![replacement; replacements],
    )
}

fn at(secs: u64) -> Timestamp {
    Timestamp(secs as i64 * 1000)
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn drift_and_forceful_commands_start_at_once_the_rest_wait_for_their_recheck() {
    let mut q = Queue::default();
    let mut expired = command(Method::Expiration, &["e"], 0);
    expired.forceful = true;
    let drift = command(Method::Drift, &["d"], 1);
    let single = command(Method::SingleNodeConsolidation, &["s"], 1);
    let (now, planned) = q.plan(vec![single.clone(), expired.clone(), drift.clone()]);
    assert_eq!(now, vec![expired, drift]);
    assert_eq!(planned, Planned::AwaitingValidation);
    assert_eq!(q.awaiting(), std::slice::from_ref(&single));

    // A later round's commands replace those still waiting.
    let (now, planned) = q.plan(Vec::new());
    assert!(now.is_empty());
    assert_eq!(planned, Planned::Nothing);
    assert!(q.take_awaiting().is_empty());
}

#[test]
fn targets_go_once_every_replacement_is_initialized_and_stay_held_while_they_drain() {
    let mut q = Queue::default();
    let c = command(Method::MultiNodeConsolidation, &["a", "b"], 2);
    assert!(q.started(c.clone(), names(&["r1", "r2"]), at(0)).is_empty());
    assert_eq!(
        q.busy_nodes(),
        BTreeSet::from(["n-a".to_string(), "n-b".to_string()])
    );

    let one_ready = |n: &str| match n {
        "r1" => Replacement::Initialized,
        _ => Replacement::Launching,
    };
    let effects = q.progress(at(30), one_ready, |_| false);
    assert_eq!(effects, vec![Effect::Waiting(names(&["r2"]))]);
    assert_eq!(q.running().len(), 1);

    let effects = q.progress(at(60), |_| Replacement::Initialized, |_| false);
    let [Effect::Terminate(done)] = effects.as_slice() else {
        panic!("expected the targets to go, got {effects:?}");
    };
    assert_eq!(done.command, c);
    assert!(q.running().is_empty() && q.busy_nodes().is_empty());
    // Finished, its targets still draining: targets deleting, replacements reserved.
    let held = q.in_flight(BTreeSet::new());
    assert!(held.targets.contains("a") && held.replacements.contains("r2"));

    q.progress(at(90), |_| Replacement::Initialized, |_| true);
    assert!(q.in_flight(BTreeSet::new()).is_empty());
}

#[test]
fn a_forceful_command_deletes_its_targets_without_waiting() {
    let mut q = Queue::default();
    let mut c = command(Method::Expiration, &["a"], 1);
    c.forceful = true;
    let effects = q.started(c, names(&["r1"]), at(0));
    assert!(matches!(effects.as_slice(), [Effect::Terminate(_)]));
    assert!(q.running().is_empty());
    assert!(q.in_flight(BTreeSet::new()).replacements.contains("r1"));
}

#[test]
fn a_replacement_gone_before_it_initialized_rolls_the_command_back() {
    let mut q = Queue::default();
    q.started(
        command(Method::SingleNodeConsolidation, &["a"], 2),
        names(&["r1", "r2"]),
        at(0),
    );
    let effects = q.progress(
        at(5),
        |n| match n {
            "r2" => Replacement::Gone,
            _ => Replacement::Initialized,
        },
        |_| false,
    );
    let [Effect::RollBack(r, why)] = effects.as_slice() else {
        panic!("expected a roll-back, got {effects:?}");
    };
    assert_eq!(*why, Failure::ReplacementGone("r2".into()));
    // The shells print the failure as it is: which replacement was lost.
    assert!(why.to_string().contains("replacement r2 "), "{why}");
    assert_eq!(r.replacements, names(&["r1", "r2"]));
    // A rolled-back command holds nothing: its targets are candidates again.
    assert!(q.in_flight(BTreeSet::new()).is_empty());
}

#[test]
fn a_command_whose_replacements_never_initialize_times_out() {
    let mut q = Queue::default();
    q.started(command(Method::Drift, &["a"], 1), names(&["r1"]), at(100));
    let limit = 100 + COMMAND_TIMEOUT.as_secs();
    let effects = q.progress(at(limit - 1), |_| Replacement::Launching, |_| false);
    assert_eq!(effects, vec![Effect::Waiting(names(&["r1"]))]);
    let effects = q.progress(at(limit), |_| Replacement::Launching, |_| false);
    assert!(matches!(
        effects.as_slice(),
        [Effect::RollBack(_, Failure::TimedOut)]
    ));
    assert!(q.running().is_empty());
}

#[test]
fn an_interrupted_target_drops_its_command() {
    let mut q = Queue::default();
    q.started(command(Method::Drift, &["a"], 1), names(&["r1"]), at(0));
    q.started(command(Method::Drift, &["b"], 1), names(&["r2"]), at(0));
    let dropped = q.drop_targeting("a");
    assert_eq!(dropped.len(), 1);
    assert_eq!(q.busy_nodes(), BTreeSet::from(["n-b".to_string()]));
}

#[test]
fn terminating_nodes_are_in_flight() {
    let q = Queue::default();
    let held = q.in_flight(BTreeSet::from(["n-x".to_string()]));
    assert!(held.terminating.contains("n-x") && !held.is_empty());
}
