//! NodeClaim status writes from copies of different ages: every writer's condition survives.

use nodewright_api::v1::nodeclaim::{NodeClaim, NodeClaimStatus};
use nodewright_api::v1::shared::Condition;

use super::Harness;
use super::termination::initialized_node;
use crate::conditions::{self, DISRUPTION_REASON, DRIFTED};
use crate::state::{Kind, Object, lock};
use crate::write::KubeWriter;
use crate::write::claim_status::{rebase, write_status};

fn indexed(h: &Harness, name: &str) -> NodeClaim {
    NodeClaim::clone(lock(&h.state).nodeclaims.get(name).unwrap())
}

fn stored(h: &Harness, name: &str) -> Vec<Condition> {
    let Some(Object::NodeClaim(c)) = h.api.get(Kind::NodeClaim, name) else {
        panic!("no claim {name}")
    };
    c.status.and_then(|s| s.conditions).unwrap_or_default()
}

/// `copy`'s status with condition `type_` set true, as that condition's writer computes it.
fn with_condition(h: &Harness, copy: &NodeClaim, type_: &str) -> NodeClaimStatus {
    let mut status = copy.status.clone().unwrap_or_default();
    let mut conds = status.conditions.take().unwrap_or_default();
    conditions::set(&mut conds, type_, "True", "Test", "", h.clock.now());
    status.conditions = Some(conds);
    status
}

#[tokio::test(start_paused = true)]
async fn two_writers_from_the_same_old_copy_keep_both_conditions() {
    let h = Harness::new();
    let name = initialized_node(&h).await;
    let old = indexed(&h, &name);
    let w: &dyn KubeWriter = h.api.as_ref();
    let writes_before = h.api.log().len();

    write_status(w, &h.state, &old, &with_condition(&h, &old, DRIFTED))
        .await
        .unwrap();
    // The second writer still holds the copy from before the first write.
    write_status(
        w,
        &h.state,
        &old,
        &with_condition(&h, &old, DISRUPTION_REASON),
    )
    .await
    .unwrap();
    let conds = stored(&h, &name);
    assert!(conditions::is_true(&conds, DRIFTED), "{conds:?}");
    assert!(conditions::is_true(&conds, DISRUPTION_REASON), "{conds:?}");
    assert!(conditions::is_true(&conds, "Initialized"), "{conds:?}");
    // The stale write was refused once and written again against the newer version.
    let log = h.api.log().split_off(writes_before);
    assert_eq!(
        log.iter()
            .filter(|l| *l == &format!("conflict NodeClaim {name}"))
            .count(),
        1,
        "{log:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_conflict_the_index_has_not_seen_yet_goes_back_to_the_loop() {
    let h = Harness::new();
    let name = initialized_node(&h).await;
    let old = indexed(&h, &name);
    let w: &dyn KubeWriter = h.api.as_ref();
    // The watch is slow: the first write lands, the index keeps the old claim.
    h.api.hold(Kind::NodeClaim);
    write_status(w, &h.state, &old, &with_condition(&h, &old, DRIFTED))
        .await
        .unwrap();
    let e = write_status(
        w,
        &h.state,
        &old,
        &with_condition(&h, &old, DISRUPTION_REASON),
    )
    .await
    .unwrap_err();
    assert!(e.is_conflict(), "{e:?}");
    assert!(conditions::is_true(&stored(&h, &name), DRIFTED));

    // Its next pass reads the claim as the watch now delivers it.
    h.api.release(Kind::NodeClaim);
    let now = indexed(&h, &name);
    write_status(
        w,
        &h.state,
        &now,
        &with_condition(&h, &now, DISRUPTION_REASON),
    )
    .await
    .unwrap();
    let conds = stored(&h, &name);
    assert!(conditions::is_true(&conds, DRIFTED), "{conds:?}");
    assert!(conditions::is_true(&conds, DISRUPTION_REASON), "{conds:?}");
}

#[test]
fn a_rebase_keeps_the_writers_changes_and_everyone_elses() {
    let c = |t: &str, s: &str| Condition {
        type_: t.into(),
        status: s.into(),
        reason: None,
        message: None,
        last_transition_time: None,
        observed_generation: None,
        extra: Default::default(),
    };
    let before = NodeClaimStatus {
        provider_id: Some("p".into()),
        conditions: Some(vec![c("Launched", "True"), c(DISRUPTION_REASON, "True")]),
        ..Default::default()
    };
    // This writer registered the node and took the disruption reason away.
    let after = NodeClaimStatus {
        node_name: Some("n1".into()),
        provider_id: Some("p".into()),
        conditions: Some(vec![c("Launched", "True"), c("Registered", "True")]),
        ..Default::default()
    };
    // Meanwhile another writer marked the claim drifted and one changed the image.
    let fresh = NodeClaimStatus {
        provider_id: Some("p".into()),
        image_id: Some("ami-2".into()),
        conditions: Some(vec![
            c("Launched", "True"),
            c(DISRUPTION_REASON, "True"),
            c(DRIFTED, "True"),
        ]),
        ..Default::default()
    };
    let out = rebase(&before, &after, &fresh);
    assert_eq!(out.node_name.as_deref(), Some("n1"));
    assert_eq!(out.image_id.as_deref(), Some("ami-2"));
    let types: Vec<&str> = out
        .conditions
        .as_deref()
        .unwrap()
        .iter()
        .map(|c| c.type_.as_str())
        .collect();
    assert_eq!(types, ["Launched", DRIFTED, "Registered"]);
}
