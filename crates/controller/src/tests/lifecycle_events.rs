//! The NodeClaim's condition events (`Launched`, `Registered`, `Initialized`, `Ready`): one
//! per status change, only once the status write has landed.

use std::sync::Arc;

use tokio::sync::watch;

use super::Harness;
use crate::context::Context;
use crate::events::EventType;
use crate::lifecycle::Lifecycle;
use crate::state::{Kind, Object};
use crate::write::{KubeWriter, LeaderGate, WriteError};

fn lifecycle(h: &Harness, writer: Arc<dyn KubeWriter>) -> Lifecycle {
    Lifecycle::new(&Context {
        writer,
        ..h.context()
    })
}

fn messages(h: &Harness, reason: &str) -> Vec<String> {
    h.events
        .with_reason(reason)
        .into_iter()
        .map(|e| e.message)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn launch_registration_and_initialization_are_each_reported_once() {
    let h = Harness::new();
    h.nodepool("default", None);
    h.pending_pod("web-1", "1");
    h.api.mark_synced();
    let w: Arc<dyn KubeWriter> = h.api.clone();
    let prov = h.provisioner();
    let name = prov.provision().await.unwrap().created[0].clone();

    // A standby replica launches nothing and says nothing.
    let (tx, rx) = watch::channel(false);
    let standby =
        lifecycle(&h, Arc::new(LeaderGate::new(h.api.clone(), rx.clone()))).with_leader(rx);
    assert!(standby.reconcile_all().await.is_empty());
    assert!(h.cloud.running().is_empty());
    assert!(messages(&h, "Launched").is_empty());
    // Writes refused mid-pass (the lease lost after the launch) leave no event either.
    let refused = lifecycle(&h, Arc::new(LeaderGate::new(h.api.clone(), tx.subscribe())));
    let r = refused.reconcile_all().await;
    assert_eq!(r[&name], Err(WriteError::NotLeader.to_string()));
    assert!(messages(&h, "Launched").is_empty());
    drop(tx);

    let life = lifecycle(&h, w);
    life.reconcile_all().await;
    assert_eq!(
        messages(&h, "Launched"),
        vec![
            "Status condition transitioned, Type: Launched, Status: Unknown -> True, Reason: Launched"
        ]
    );
    let e = &h.events.with_reason("Launched")[0];
    assert_eq!(e.event_type, EventType::Normal);
    assert_eq!(
        (e.regarding.kind.as_str(), e.regarding.name.as_str()),
        ("NodeClaim", name.as_str())
    );
    assert!(e.regarding.uid.is_some());
    // Registration is still pending: Unknown to Unknown is no transition.
    assert!(messages(&h, "Registered").is_empty());

    h.claim_joins("n1", &name);
    life.reconcile_all().await;
    assert_eq!(
        messages(&h, "Registered"),
        vec![
            "Status condition transitioned, Type: Registered, Status: Unknown -> True, Reason: Registered"
        ]
    );
    assert_eq!(
        messages(&h, "Initialized"),
        vec![
            "Status condition transitioned, Type: Initialized, Status: Unknown -> True, Reason: Initialized"
        ]
    );
    assert_eq!(
        messages(&h, "Ready"),
        vec!["Status condition transitioned, Type: Ready, Status: Unknown -> True, Reason: Ready"]
    );

    // Nothing changes: nothing is said.
    let before = h.events.events().len();
    life.reconcile_all().await;
    assert_eq!(h.events.events().len(), before);
}

#[tokio::test(start_paused = true)]
async fn a_transition_away_from_true_carries_its_message() {
    let h = Harness::new();
    h.nodepool("default", None);
    h.pending_pod("web-1", "1");
    h.api.mark_synced();
    let w: Arc<dyn KubeWriter> = h.api.clone();
    let prov = h.provisioner();
    let name = prov.provision().await.unwrap().created[0].clone();
    let life = lifecycle(&h, w);
    life.reconcile_all().await;
    let Some(Object::NodeClaim(c)) = h.api.get(Kind::NodeClaim, &name) else {
        panic!()
    };
    let pid = c.status.unwrap().provider_id.unwrap();
    // Two nodes claim the same instance: registration is refused with a reason.
    h.node_joins("n1", &pid);
    h.node_joins("n2", &pid);
    life.reconcile_all().await;
    assert_eq!(
        messages(&h, "Registered"),
        vec![
            "Status condition transitioned, Type: Registered, Status: Unknown -> False, Reason: MultipleNodesFound, Message: multiple nodes found for the providerID"
        ]
    );
}
