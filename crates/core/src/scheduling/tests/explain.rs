//! `explain_pod`: the solve's outcome for one pod, and each NodePool's and node's answer for
//! it alone, from the engine's own checks.

use crate::labels;
use crate::model::*;
use crate::requirements::Operator;
use crate::scheduling::Options;
use crate::scheduling::explain::{Outcome, explain_pod};
use crate::testkit::*;
use std::sync::Arc;

fn zonal(name: &str, zone: &str) -> NodePool {
    let mut np = pool(name);
    np.template
        .requirements
        .push(req(labels::ZONE, Operator::In, &[zone]));
    np
}

#[test]
fn each_nodepool_names_its_refusal_or_the_types_that_remain() {
    let mut p = pod("p", 3000, 1);
    p.node_selector.insert(labels::ZONE.into(), "zone-b".into());
    let mut tainted = zonal("tainted", "zone-b");
    tainted.template.taints.push(taint("dedicated", "gpu"));
    let s = snapshot(
        vec![
            zonal("a-only", "zone-a"),
            zonal("b-only", "zone-b"),
            tainted,
        ],
        catalog(4),
        vec![p],
    );
    let e = explain_pod(&s, &Options::default(), "default/p").unwrap();
    let answer = |name: &str| {
        e.nodepools
            .iter()
            .find(|a| a.name == name)
            .unwrap_or_else(|| panic!("no answer for {name}: {e:?}"))
            .verdict
            .clone()
    };
    let refused = answer("a-only").unwrap_err();
    assert!(refused.contains("requirements"), "{refused}");
    assert!(refused.contains(labels::ZONE), "{refused}");
    let refused = answer("tainted").unwrap_err();
    assert!(refused.contains("dedicated"), "{refused}");
    // 3 cpu: it-0 (2 cpu) does not fit, it-1..3 remain, cheapest first.
    assert_eq!(answer("b-only").unwrap(), vec!["it-1", "it-2", "it-3"]);
    match &e.outcome {
        Outcome::NewClaim {
            nodepool,
            instance_types,
            ..
        } => {
            assert_eq!(nodepool, "b-only");
            assert_eq!(instance_types.first().map(String::as_str), Some("it-1"));
        }
        other => panic!("expected a new claim, got {other:?}"),
    }
}

#[test]
fn an_unplaceable_pod_says_why_and_every_pool_refuses() {
    let mut p = pod("p", 500, 1);
    p.node_selector.insert(labels::ZONE.into(), "zone-c".into());
    let s = snapshot(vec![zonal("a-only", "zone-a")], catalog(2), vec![p]);
    let e = explain_pod(&s, &Options::default(), "default/p").unwrap();
    let Outcome::Unplaced(why) = &e.outcome else {
        panic!("expected unplaced: {e:?}")
    };
    assert!(why.contains("NodePool a-only"), "{why}");
    assert!(e.nodepools.iter().all(|a| a.verdict.is_err()), "{e:?}");
}

#[test]
fn nodes_answer_too_and_a_bound_pod_is_asked_as_if_pending() {
    let small = node("small", "zone-a", 1, 4);
    let big = node("big", "zone-a", 8, 32);
    let s = Snapshot {
        nodes: vec![Arc::new(small), Arc::new(big)],
        ..snapshot(
            vec![pool("default")],
            catalog(2),
            vec![running(pod("p", 2000, 1), "big")],
        )
    };
    let e = explain_pod(&s, &Options::default(), "default/p").unwrap();
    assert_eq!(e.outcome, Outcome::Bound("big".into()));
    let small = e.nodes.iter().find(|a| a.name == "small").unwrap();
    let refused = small.verdict.clone().unwrap_err();
    assert!(refused.contains("cpu"), "{refused}");
    assert!(
        e.nodes
            .iter()
            .find(|a| a.name == "big")
            .unwrap()
            .verdict
            .is_ok()
    );
    assert!(e.nodepools[0].verdict.is_ok(), "{e:?}");
}

#[test]
fn unknown_and_ignored_pods() {
    let mut done = pod("done", 500, 1);
    done.phase = PodPhase::Succeeded;
    let s = snapshot(vec![pool("default")], catalog(2), vec![done]);
    assert!(explain_pod(&s, &Options::default(), "default/nope").is_none());
    let e = explain_pod(&s, &Options::default(), "default/done").unwrap();
    assert!(matches!(e.outcome, Outcome::Ignored(_)), "{e:?}");
    assert!(e.nodepools.is_empty());
}
