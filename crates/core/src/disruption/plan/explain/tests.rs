//! Each method's verdict for one node, on the fixture cluster with the scheduling engine as
//! the simulator, as the controller's round has it.

use std::time::Duration;

use super::*;
use crate::disruption::candidates::DO_NOT_DISRUPT;
use crate::disruption::engine_simulator::EngineSimulator;
use crate::model::{BudgetNodes, PodDisruptionBudget};
use crate::selector::LabelSelector;
use crate::testkit::cluster as fixture;
use crate::time::Timestamp;

fn cluster(nodes: &[(&str, &str, &[i64])]) -> Snapshot {
    fixture::cluster(&["a"], nodes)
}

/// `(code, message)` per method, in order.
fn verdicts(s: &Snapshot, node: &str) -> Vec<(Method, String, String)> {
    explain_node(s, &EngineSimulator::default(), Settings::default(), node)
        .expect("the node exists")
        .methods
        .into_iter()
        .map(|v| (v.method, v.code, v.message))
        .collect()
}

fn of(vs: &[(Method, String, String)], m: Method) -> (String, String) {
    let (_, code, message) = vs.iter().find(|v| v.0 == m).expect("every method answers");
    (code.clone(), message.clone())
}

#[test]
fn every_method_answers_in_karpenters_order() {
    let s = cluster(&[("n1", "large", &[500])]);
    let methods: Vec<Method> = verdicts(&s, "n1").into_iter().map(|v| v.0).collect();
    assert_eq!(
        methods,
        [
            Method::Expiration,
            Method::Drift,
            Method::Emptiness,
            Method::MultiNodeConsolidation,
            Method::SingleNodeConsolidation
        ]
    );
    assert!(explain_node(&s, &EngineSimulator::default(), Settings::default(), "nope").is_none());
}

#[test]
fn an_oversized_node_would_be_replaced_by_a_cheaper_type() {
    let s = cluster(&[("n1", "large", &[500])]);
    let vs = verdicts(&s, "n1");
    assert_eq!(
        of(&vs, Method::SingleNodeConsolidation),
        (
            "consolidatable".into(),
            "would be replaced by small ($0.2000/h, saves $0.2000/h)".into()
        )
    );
    let (code, message) = of(&vs, Method::Emptiness);
    assert_eq!(code, "not-empty");
    assert_eq!(message, "not empty: 1 pod(s) to move (default/n1-0)");
    assert_eq!(of(&vs, Method::Drift).0, "not-drifted");
    assert_eq!(of(&vs, Method::Expiration).0, "never-expires");
    // The round's single-node command takes it.
    assert_eq!(
        of(&vs, Method::MultiNodeConsolidation),
        (
            "taken".into(),
            "this round's single-node-consolidation command takes it".into()
        )
    );
    let e = explain_node(&s, &EngineSimulator::default(), Settings::default(), "n1").unwrap();
    assert_eq!(e.round.map(|v| v.code), Some("disrupted".into()));
    assert_eq!(e.commands.len(), 1);
}

#[test]
fn no_cheaper_replacement_names_the_cheapest_option_and_the_difference() {
    // 1.5 cpu needs a small node at least: the node already is one.
    let s = cluster(&[("n1", "small", &[1500])]);
    let vs = verdicts(&s, "n1");
    let (code, message) = of(&vs, Method::SingleNodeConsolidation);
    assert_eq!(code, "no-cheaper-replacement");
    assert!(message.contains("now $0.2000/h"), "{message}");
    assert!(
        message.contains("small at $0.2000/h (+0.0000 $/h)"),
        "{message}"
    );
}

#[test]
fn a_node_whose_pods_fit_elsewhere_would_be_deleted_and_multi_node_names_its_command() {
    let s = cluster(&[("n1", "large", &[1000]), ("n2", "large", &[1000])]);
    let vs = verdicts(&s, "n1");
    assert_eq!(
        of(&vs, Method::SingleNodeConsolidation),
        (
            "consolidatable".into(),
            "would be deleted, its pods fitting on other nodes (saves $0.4000/h)".into()
        )
    );
    let (code, message) = of(&vs, Method::MultiNodeConsolidation);
    assert_eq!(code, "disrupted");
    assert!(
        message.starts_with("with 1 other node(s): would be replaced by small"),
        "{message}"
    );
}

#[test]
fn a_do_not_disrupt_pod_blocks_the_graceful_methods_and_drift_but_not_expiration() {
    let mut s = cluster(&[("n1", "large", &[500])]);
    s.pod_mut(0)
        .annotations
        .insert(DO_NOT_DISRUPT.into(), "true".into());
    s.nodepools[0].template.expire_after = Some(Duration::from_secs(5 * 3600));
    s.claim_mut(0).creation_timestamp = Timestamp(s.now.0 - 1000);
    let vs = verdicts(&s, "n1");
    for m in [
        Method::Drift,
        Method::Emptiness,
        Method::MultiNodeConsolidation,
        Method::SingleNodeConsolidation,
    ] {
        assert_eq!(
            of(&vs, m),
            (
                "pod-do-not-disrupt".into(),
                "do-not-disrupt pod default/n1-0".into()
            ),
            "{m:?}"
        );
    }
    assert_eq!(
        of(&vs, Method::Expiration),
        (
            "not-expired".into(),
            "expires in 4h59m (expireAfter 5h)".into()
        )
    );
    s.claim_mut(0).creation_timestamp = Timestamp(s.now.0 - 5 * 3600 * 1000);
    assert_eq!(of(&verdicts(&s, "n1"), Method::Expiration).0, "expired");
}

#[test]
fn a_pdb_allowing_no_eviction_names_itself_and_the_pod() {
    let mut s = cluster(&[("n1", "large", &[500])]);
    s.pod_mut(0).labels.insert("app".into(), "web".into());
    s.pdbs.push(PodDisruptionBudget {
        namespace: "default".into(),
        name: "web".into(),
        selector: Some(LabelSelector {
            match_labels: [("app".to_string(), "web".to_string())].into(),
            ..LabelSelector::default()
        }),
        disruptions_allowed: 0,
        ..PodDisruptionBudget::default()
    });
    let (code, message) = of(&verdicts(&s, "n1"), Method::SingleNodeConsolidation);
    assert_eq!(code, "pdb-blocked");
    assert_eq!(
        message,
        "PDB default/web allows 0 evictions (pod default/n1-0)"
    );
}

#[test]
fn consolidate_after_not_passed_blocks_the_graceful_methods_only() {
    let mut s = cluster(&[("n1", "large", &[])]);
    s.nodepools[0].disruption.consolidate_after = Some(Duration::from_secs(300));
    s.claim_mut(0).last_pod_event_time = Some(Timestamp(s.now.0 - 120_000));
    let vs = verdicts(&s, "n1");
    assert_eq!(
        of(&vs, Method::Emptiness),
        (
            "consolidate-after".into(),
            "consolidateAfter not elapsed (180s left)".into()
        )
    );
    assert_eq!(of(&vs, Method::Drift).0, "not-drifted");
    s.claim_mut(0).last_pod_event_time = Some(Timestamp(s.now.0 - 300_000));
    let vs = verdicts(&s, "n1");
    assert_eq!(
        of(&vs, Method::Emptiness),
        ("empty".into(), "empty: would be deleted".into())
    );
    assert_eq!(of(&vs, Method::SingleNodeConsolidation).0, "empty");
}

#[test]
fn a_budget_of_zero_stops_each_method_it_covers() {
    let mut s = cluster(&[("n1", "large", &[])]);
    s.nodepools[0].disruption.budgets[0].nodes = BudgetNodes::Count(0);
    let (code, message) = of(&verdicts(&s, "n1"), Method::Emptiness);
    assert_eq!(code, "budget-exhausted");
    assert_eq!(message, "budget 0 exhausted for reason Empty");
    s.pods = cluster(&[("n1", "large", &[500])]).pods;
    let vs = verdicts(&s, "n1");
    assert_eq!(
        of(&vs, Method::SingleNodeConsolidation),
        (
            "budget-exhausted".into(),
            "budget 0 exhausted for reason Underutilized (consolidating would replace and save $0.2000/h)".into()
        )
    );
    assert_eq!(
        of(&vs, Method::MultiNodeConsolidation),
        (
            "budget-exhausted".into(),
            "budget 0 exhausted for reason Underutilized".into()
        )
    );
}

#[test]
fn a_drifted_node_would_be_replaced_when_its_pods_fit() {
    let mut s = cluster(&[("n1", "large", &[500])]);
    s.claim_mut(0).drifted = Some("AMIDrift".into());
    assert_eq!(
        of(&verdicts(&s, "n1"), Method::Drift),
        (
            "drifted".into(),
            "drifted (AMIDrift): would be replaced by small ($0.2000/h, saves $0.2000/h)".into()
        )
    );
}

#[test]
fn a_when_empty_pool_never_consolidates_a_busy_node() {
    let mut s = cluster(&[("n1", "large", &[500])]);
    s.nodepools[0].disruption.consolidation_policy = crate::model::ConsolidationPolicy::WhenEmpty;
    let vs = verdicts(&s, "n1");
    assert_eq!(
        of(&vs, Method::SingleNodeConsolidation).0,
        "policy-when-empty"
    );
    assert_eq!(
        of(&vs, Method::MultiNodeConsolidation).0,
        "policy-when-empty"
    );
}

#[test]
fn durations_keep_their_two_largest_units() {
    let d = Duration::from_secs;
    assert_eq!(short(d(42)), "42s");
    assert_eq!(short(d(200)), "3m20s");
    assert_eq!(short(d(180)), "3m");
    assert_eq!(short(d(5 * 3600 + 180)), "5h3m");
    assert_eq!(short(d(720 * 3600)), "30d");
    assert_eq!(short(d(720 * 3600 - 1)), "29d23h");
}
