//! The agent's own writes stand over a lagging watch's cache until it shows them, and are
//! forgotten once it does.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use nodewright_testkit::json::merge;
use nodewright_testkit::k8s;
use serde_json::{Value, json};

use super::{NodeWrites, overlay};
use crate::kwok::{KeptPod, keep_pod};

fn cached(name: &str, extra: Value) -> Arc<KeptPod> {
    let pod = merge(
        k8s::pod("web", name),
        json!({"metadata": {"resourceVersion": "1"}, "spec": {"nodeName": "n"},
            "status": {"qosClass": "BestEffort"}}),
    );
    Arc::new(keep_pod(serde_json::from_value(merge(pod, extra)).unwrap()))
}

#[test]
fn the_agents_own_writes_stand_until_the_watch_shows_them() {
    let mut started = BTreeMap::from([
        (
            "uid-a".to_string(),
            cached("a", json!({"status": {"phase": "Running"}})),
        ),
        (
            "uid-b".to_string(),
            cached("b", json!({"status": {"phase": "Running"}})),
        ),
        (
            "uid-gone".to_string(),
            cached("gone", json!({"status": {"phase": "Running"}})),
        ),
    ]);
    let mut deleted = BTreeSet::from(["uid-c".to_string(), "uid-left".to_string()]);
    let watch = vec![
        // Started by the agent, not yet Running in the cache: the written pod stands.
        cached("a", json!({})),
        // Started, and then evicted: the cache's deletion is newer.
        cached(
            "b",
            json!({"metadata": {"deletionTimestamp": "2023-11-14T22:13:20Z"}}),
        ),
        // Deleted by the agent, still in the cache: left out.
        cached("c", json!({"status": {"phase": "Running"}})),
        cached("d", json!({})),
    ];
    let out = overlay(watch, &mut started, &mut deleted);
    let phases: Vec<(String, String, bool)> = out
        .iter()
        .map(|p| {
            (
                p.reference().name,
                p.phase().unwrap().to_string(),
                p.deleting(),
            )
        })
        .collect();
    assert_eq!(
        phases,
        [
            ("a".to_string(), "Running".to_string(), false),
            ("b".to_string(), "Pending".to_string(), true),
            ("d".to_string(), "Pending".to_string(), false),
        ]
    );
    // Writes the cache caught up with, or whose pods left it, are forgotten.
    assert_eq!(started.keys().collect::<Vec<_>>(), ["uid-a"]);
    assert_eq!(deleted.iter().collect::<Vec<_>>(), ["uid-c"]);
}

#[test]
fn a_pod_the_agent_finished_is_left_out_until_the_watch_shows_it_finished() {
    let mut started = BTreeMap::new();
    let mut done = BTreeSet::from(["uid-a".to_string(), "uid-b".to_string()]);
    let running = json!({"status": {"phase": "Running"}});
    // The watch lags: `a` still shows Running and must not be finished again.
    let out = overlay(
        vec![cached("a", running.clone()), cached("b", running.clone())],
        &mut started,
        &mut done,
    );
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(done.len(), 2);
    // The watch caught up with `a` (a watch without the field selector shows it finished).
    let out = overlay(
        vec![
            cached("a", json!({"status": {"phase": "Succeeded"}})),
            cached("b", running),
        ],
        &mut started,
        &mut done,
    );
    assert_eq!(out.len(), 1);
    assert_eq!(done.iter().collect::<Vec<_>>(), ["uid-b"]);
}

fn names(n: &[&str]) -> BTreeSet<String> {
    n.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_node_the_agent_created_counts_as_registered_until_the_watch_shows_it() {
    let mut w = NodeWrites::default();
    w.created("new");
    // The watch lags: the new Node is not in it yet.
    assert_eq!(w.registered(names(&["old"])), names(&["new", "old"]));
    assert_eq!(w.registered(names(&["old"])), names(&["new", "old"]));
    // The watch shows it; the creation is forgotten, so when the watch later shows the
    // Node deleted (by someone else), it is gone for the agent too.
    assert_eq!(w.registered(names(&["new", "old"])), names(&["new", "old"]));
    assert_eq!(w.registered(names(&["old"])), names(&["old"]));
}

#[test]
fn a_node_the_agent_deleted_is_gone_even_while_the_watch_still_shows_it() {
    let mut w = NodeWrites::default();
    w.deleted("old");
    assert_eq!(w.registered(names(&["old", "kept"])), names(&["kept"]));
    assert_eq!(w.registered(names(&["old", "kept"])), names(&["kept"]));
    // The watch shows the deletion; a Node of that name the watch shows later is registered.
    assert_eq!(w.registered(names(&["kept"])), names(&["kept"]));
    assert_eq!(
        w.registered(names(&["old", "kept"])),
        names(&["old", "kept"])
    );
}

#[test]
fn a_node_created_and_deleted_before_the_watch_caught_up_is_gone() {
    let mut w = NodeWrites::default();
    w.created("brief");
    w.deleted("brief");
    assert_eq!(w.registered(names(&[])), names(&[]));
    // The watch never showed it: nothing of it is left to stand.
    assert_eq!(w.registered(names(&[])), names(&[]));
    // A creation whose Node a later write found missing is forgotten as well.
    w.created("lost");
    assert_eq!(w.registered(names(&[])), names(&["lost"]));
    w.gone("lost");
    assert_eq!(w.registered(names(&[])), names(&[]));
}
