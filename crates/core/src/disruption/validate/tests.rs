//! The consolidation re-check: upstream's rules on the number of new nodes a fresh
//! simulation asks for, first as a table over canned simulations, then on small clusters
//! through the scheduling engine.

use super::*;
use crate::disruption::command::{Decision, Replacement};
use crate::disruption::engine_simulator::EngineSimulator;
use crate::disruption::plan::{Settings, plan};
use crate::disruption::simulate::{ReplacementOption, SimulatedClaim};
use crate::model::CapacityType;
use crate::resources::CPU;
use crate::testkit::cluster as fixture;
use std::sync::Arc;

fn claim(types: &[&str]) -> SimulatedClaim {
    SimulatedClaim {
        nodepool: "default".into(),
        requirements: Vec::new(),
        options: types
            .iter()
            .map(|t| ReplacementOption {
                instance_type: t.to_string(),
                cheapest_price: 0.1,
                worst_launch_price: 0.1,
                spot_price: None,
                on_demand_price: Some(0.1),
            })
            .collect(),
        capacity_types: vec![CapacityType::OnDemand],
    }
}

fn command(replacement: Option<&[&str]>) -> Command {
    let target = crate::disruption::command::Target {
        node: "n1".into(),
        nodeclaim: "c-n1".into(),
        nodepool: "default".into(),
        instance_type: "large".into(),
        zone: "a".into(),
        capacity_type: "on-demand".into(),
        price: 0.4,
        pods: Vec::new(),
    };
    let replacements = replacement
        .map(|types| Replacement {
            nodepool: "default".into(),
            requirements: Vec::new(),
            instance_types: types.iter().map(|t| t.to_string()).collect(),
            price: 0.1,
        })
        .into_iter()
        .collect();
    Command::new(Method::SingleNodeConsolidation, vec![target], replacements)
}

fn sim(claims: Vec<SimulatedClaim>) -> Simulation {
    Simulation {
        failures: Vec::new(),
        new_claims: claims,
    }
}

#[test]
fn a_delete_must_still_need_no_new_node() {
    let delete = command(None);
    assert_eq!(same_outcome(&delete, &sim(vec![])), Ok(()));
    let err = same_outcome(&delete, &sim(vec![claim(&["small"])])).unwrap_err();
    assert_eq!(err.kind(), "scheduling", "{err}");
}

#[test]
fn a_replace_whose_pods_fit_without_a_new_node_is_rejected() {
    let replace = command(Some(&["small"]));
    let err = same_outcome(&replace, &sim(vec![])).unwrap_err();
    assert_eq!(err.kind(), "scheduling");
    assert!(err.to_string().contains("without a new node"), "{err}");
}

#[test]
fn a_replace_needs_exactly_one_new_node_offering_every_planned_type() {
    let replace = command(Some(&["small", "medium"]));
    // The fresh simulation does no price filtering: more options than planned is fine.
    let wider = claim(&["large", "medium", "small"]);
    assert_eq!(same_outcome(&replace, &sim(vec![wider.clone()])), Ok(()));
    let err = same_outcome(&replace, &sim(vec![claim(&["medium", "large"])])).unwrap_err();
    assert_eq!(err.kind(), "churn");
    assert!(err.to_string().contains("small"), "{err}");
    let err = same_outcome(&replace, &sim(vec![wider.clone(), wider])).unwrap_err();
    assert_eq!(err.kind(), "scheduling");
    assert!(err.to_string().contains("need 2 new nodes"), "{err}");
}

#[test]
fn a_pod_that_no_longer_fits_rejects_any_command() {
    let mut failed = sim(vec![]);
    failed
        .failures
        .push(("default/p".into(), "no node has room".into()));
    for c in [command(None), command(Some(&["small"]))] {
        let err = same_outcome(&c, &failed).unwrap_err();
        assert!(err.to_string().contains("default/p"), "{err}");
    }
}

/// One `large` node with a 500m pod: single-node consolidation replaces it with a `small`.
fn replace_planned() -> (Snapshot, Command) {
    let s = fixture::cluster(&["a"], &[("n1", "large", &[500])]);
    let p = plan(&s, &EngineSimulator::default(), Settings::default());
    let c = p.commands.first().expect("a command").clone();
    assert_eq!(c.decision, Decision::Replace, "{c}");
    assert_eq!(c.replacements[0].instance_types, vec!["small".to_string()]);
    assert_eq!(validate(&c, &s, &EngineSimulator::default()), Ok(()));
    (s, c)
}

#[test]
fn a_replace_is_rejected_once_a_node_with_room_joined() {
    let (_, c) = replace_planned();
    // A busy node with room for n1's pod joined while the command waited.
    let fresh = fixture::cluster(&["a"], &[("n1", "large", &[500]), ("n2", "large", &[1000])]);
    let err = validate(&c, &fresh, &EngineSimulator::default()).unwrap_err();
    assert_eq!(err.kind(), "scheduling");
    assert!(err.to_string().contains("without a new node"), "{err}");
}

#[test]
fn a_node_joining_inside_consolidate_after_takes_no_moving_pod() {
    let (_, c) = replace_planned();
    // The node with room is still inside its NodePool's minute: n1's pod may not move there,
    // so the planned replacement still stands.
    let mut fresh = fixture::cluster(&["a"], &[("n1", "large", &[500]), ("n2", "large", &[1000])]);
    fresh.nodepools[0].disruption.consolidate_after = Some(std::time::Duration::from_secs(60));
    for claim in fresh.node_claims.iter_mut().map(Arc::make_mut) {
        let ago = if claim.name == "c-n2" {
            20_000
        } else {
            600_000
        };
        claim.last_pod_event_time = Some(crate::time::Timestamp(fresh.now.0 - ago));
    }
    assert_eq!(validate(&c, &fresh, &EngineSimulator::default()), Ok(()));
    // A minute later it is open to them, and the replacement is no longer needed.
    fresh.now = crate::time::Timestamp(fresh.now.0 + 60_000);
    let err = validate(&c, &fresh, &EngineSimulator::default()).unwrap_err();
    assert_eq!(err.kind(), "scheduling");
}

#[test]
fn a_replace_is_rejected_once_its_pods_outgrow_the_planned_type() {
    let (mut fresh, c) = replace_planned();
    // n1's pod now asks for more than a small node holds.
    fresh.pod_mut(0).requests = fresh.pods[0].requests.clone().with(CPU, 3000);
    let err = validate(&c, &fresh, &EngineSimulator::default()).unwrap_err();
    assert_eq!(err.kind(), "churn");
    assert!(err.to_string().contains("small"), "{err}");
}

#[test]
fn a_consolidation_is_rejected_once_pending_pods_need_the_capacity() {
    let (mut fresh, c) = replace_planned();
    // A pod arrived while the command waited: with n1 gone nothing holds it, so a new node
    // comes for it and the command would only empty n1 for that node.
    let pending = crate::testkit::pod("pending", 3000, 1);
    fresh.pods.push(Arc::new(pending));
    let err = validate(&c, &fresh, &EngineSimulator::default()).unwrap_err();
    assert_eq!(err.kind(), "scheduling");
    assert_eq!(
        err.to_string(),
        "scheduling changed: 1 pending pod needs 1 new node"
    );
    // One that fits nowhere launches nothing and holds nothing back.
    fresh.pod_mut(1).requests = fresh.pods[1].requests.clone().with(CPU, 9000);
    assert_eq!(validate(&c, &fresh, &EngineSimulator::default()), Ok(()));
}
