//! The pods of deleting nodes: which are placed again, and where, when a disruption closes
//! nodes to other pods (`Options::closed`, which no case file sets).

use crate::model::*;
use crate::scheduling::{Options, Target, solve as solve_with};
use crate::testkit::*;
use std::sync::Arc;

#[test]
fn closed_nodes_take_only_the_pods_of_deleting_nodes() {
    let mut s = snapshot(vec![pool("default")], catalog(3), vec![]);
    // "shut" is the tighter fit, so it is visited first.
    s.nodes.push(Arc::new(node("shut", "zone-a", 2, 4)));
    s.nodes.push(Arc::new(node("open", "zone-a", 4, 4)));
    let mut gone = node("gone", "zone-a", 2, 4);
    gone.deletion_timestamp = Some(crate::time::Timestamp(1));
    s.nodes.push(Arc::new(gone));
    // Alike but for where they come from; "a" is first in the queue.
    s.pods = vec![pod("a", 1500, 1), running(pod("e", 1500, 1), "gone")]
        .into_iter()
        .map(Into::into)
        .collect();
    let open = Some(Target::Node("open".into()));
    let shut = Some(Target::Node("shut".into()));

    let plan = solve(&s);
    assert_eq!(
        (target_of(&plan, "a"), target_of(&plan, "e")),
        (shut.clone(), open.clone())
    );

    let closing = |names: &[&str]| Options {
        closed: Arc::new(names.iter().map(|n| n.to_string()).collect()),
        ..Options::default()
    };
    // The deleting node's pod may still land on the closed node; the other may not.
    let plan = solve_with(&s, &closing(&["shut"]));
    assert_eq!((target_of(&plan, "a"), target_of(&plan, "e")), (open, shut));

    // With both nodes closed, "a" needs a new node.
    let plan = solve_with(&s, &closing(&["shut", "open"]));
    assert!(
        matches!(target_of(&plan, "a"), Some(Target::NewClaim(_))),
        "{plan:?}"
    );
    assert_eq!(target_of(&plan, "e"), Some(Target::Node("shut".into())));
}

#[test]
fn terminating_pods_of_deleting_nodes_are_placed_only_for_statefulsets() {
    let mut s = snapshot(vec![pool("default")], catalog(3), vec![]);
    let mut gone = node("gone", "zone-a", 8, 16);
    gone.deletion_timestamp = Some(crate::time::Timestamp(1));
    s.nodes.push(Arc::new(gone));
    let owned = |name: &str, kind: &str, terminating: bool| {
        let mut p = running(pod(name, 1000, 1), "gone");
        p.owner = Some(OwnerRef {
            kind: kind.into(),
            name: "o".into(),
            controller: true,
        });
        if terminating {
            p.deletion_timestamp = Some(crate::time::Timestamp(2));
        }
        p
    };
    s.pods = vec![
        owned("evicted", "ReplicaSet", true).into(),
        owned("moving", "ReplicaSet", false).into(),
        owned("db-0", "StatefulSet", true).into(),
    ];
    let mut placed: Vec<&str> = crate::scheduling::setup::pods_to_schedule(&s)
        .into_iter()
        .map(|i| s.pods[i].name.as_str())
        .collect();
    placed.sort();
    // The evicted pod's ReplicaSet makes a pending replacement: placing both would count it
    // twice.
    assert_eq!(placed, vec!["db-0", "moving"]);
}
