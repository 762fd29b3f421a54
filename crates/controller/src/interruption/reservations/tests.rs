//! Capacity-block expiry and reserved-to-on-demand demotion as plain data.

use std::collections::BTreeMap;

use nodewright_cloud::{Instance, InstanceState};
use serde_json::{Value, json};

use nodewright_testkit::json::merge;
use nodewright_testkit::k8s;

use super::*;
use crate::state::{Kind, Object};
use crate::tests::{object, state_of};

const END: &str = "2026-01-01T12:00:00Z";

fn end() -> Timestamp {
    parse_rfc3339(END).unwrap()
}

fn claim(name: &str, instance: &str, labels: Value, deleting: bool) -> Object {
    let mut v = merge(
        k8s::nodeclaim(name),
        json!({"metadata": {"labels": labels},
            "status": {"providerID": format!("aws:///us-east-1a/{instance}")}}),
    );
    if deleting {
        v["metadata"]["deletionTimestamp"] = json!("2025-12-31T00:00:00Z");
        v["metadata"]["finalizers"] = json!(["karpenter.sh/termination"]);
    }
    object(Kind::NodeClaim, v)
}

fn node(name: &str, instance: &str, labels: Value) -> Object {
    let v = k8s::node(name, &format!("aws:///us-east-1a/{instance}"));
    object(
        Kind::Node,
        merge(v, json!({"metadata": {"labels": labels}})),
    )
}

fn class(reservations: Value) -> Object {
    Object::from_value(
        Kind::NodeClass,
        json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {"role": "r", "subnetSelectorTerms": [{"id": "subnet-1"}],
                "securityGroupSelectorTerms": [{"id": "sg-1"}], "amiSelectorTerms": [{"alias": "al2023@latest"}]},
            "status": {"capacityReservations": reservations}}),
    )
    .unwrap()
}

fn reserved(id: &str) -> Value {
    json!({"karpenter.sh/capacity-type": "reserved", "karpenter.k8s.aws/capacity-reservation-id": id})
}

#[test]
fn claims_in_a_capacity_block_go_forty_minutes_before_its_end() {
    let s = state_of(vec![
        class(json!([
            {"id": "cr-block", "reservationType": "capacity-block", "endTime": END, "state": "active"},
            {"id": "cr-odcr", "reservationType": "default", "endTime": END, "state": "active"},
        ])),
        claim("in-block", "i-1", reserved("cr-block"), false),
        claim("in-odcr", "i-2", reserved("cr-odcr"), false),
        claim("draining", "i-3", reserved("cr-block"), true),
        claim(
            "plain",
            "i-4",
            json!({"karpenter.sh/capacity-type": "on-demand"}),
            false,
        ),
    ]);
    let window = Duration::from_secs(40 * 60);
    let before = Timestamp(end().0 - window.as_millis() as i64 - 1000);
    assert!(expiring(&s, before).is_empty(), "41 minutes before the end");
    let at = Timestamp(end().0 - window.as_millis() as i64);
    assert_eq!(
        expiring(&s, at),
        [("in-block".to_string(), "cr-block".to_string())]
    );
}

#[test]
fn a_block_the_status_already_calls_expiring_counts_without_an_end_time() {
    let s = state_of(vec![
        class(json!([{"id": "cr-b", "reservationType": "capacity-block", "state": "expiring"}])),
        claim("c", "i-1", reserved("cr-b"), false),
    ]);
    assert_eq!(expiring(&s, Timestamp(0)).len(), 1);
}

fn instance(id: &str, capacity_type: CapacityType) -> Instance {
    Instance {
        provider_id: format!("aws:///us-east-1a/{id}"),
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        capacity_type,
        image_id: None,
        state: InstanceState::Running,
        launched_at: None,
        tags: BTreeMap::new(),
    }
}

#[test]
fn a_reserved_claim_ec2_moved_to_on_demand_is_relabelled_with_its_registered_nodes() {
    let registered =
        json!({"karpenter.sh/registered": "true", "karpenter.sh/capacity-type": "reserved"});
    let s = state_of(vec![
        claim("moved", "i-1", reserved("cr-1"), false),
        node("n-1", "i-1", registered.clone()),
        node(
            "n-1-unregistered",
            "i-1",
            json!({"karpenter.sh/capacity-type": "reserved"}),
        ),
        claim("still", "i-2", reserved("cr-1"), false),
        claim("deleting", "i-3", reserved("cr-1"), true),
        claim(
            "od",
            "i-4",
            json!({"karpenter.sh/capacity-type": "on-demand"}),
            false,
        ),
    ]);
    let got = demoted(
        &s,
        &[
            instance("i-1", CapacityType::OnDemand),
            instance("i-2", CapacityType::Reserved),
            instance("i-3", CapacityType::OnDemand),
            instance("i-4", CapacityType::OnDemand),
            instance("i-9", CapacityType::OnDemand),
        ],
    );
    assert_eq!(
        got,
        [Demoted {
            nodeclaim: "moved".into(),
            nodes: vec!["n-1".into()],
        }]
    );
    let p = on_demand_patch().to_merge_patch();
    assert_eq!(
        p,
        json!({"metadata": {"labels": {
            "karpenter.sh/capacity-type": "on-demand",
            "karpenter.k8s.aws/capacity-reservation-id": null,
        }}})
    );
}

fn block(id: &str) -> Value {
    json!({"karpenter.sh/capacity-type": "reserved",
        "karpenter.k8s.aws/capacity-reservation-id": id,
        "karpenter.k8s.aws/capacity-reservation-type": "capacity-block"})
}

#[test]
fn blocks_no_class_lists_are_looked_up_and_their_claims_expire_too() {
    let s = state_of(vec![
        class(json!([{"id": "cr-listed", "reservationType": "capacity-block", "endTime": END}])),
        claim("listed", "i-1", block("cr-listed"), false),
        claim("orphan", "i-2", block("cr-gone"), false),
        claim("orphan-2", "i-3", block("cr-gone"), false),
        claim("odcr", "i-4", reserved("cr-odcr"), false),
        claim("deleting", "i-5", block("cr-deleting"), true),
    ]);
    assert_eq!(unlisted_blocks(&s), vec!["cr-gone".to_string()]);
    let at = Timestamp(end().0 - EXPIRING_WINDOW.as_millis() as i64);
    // Without the lookup only the listed block is seen.
    assert_eq!(
        expiring(&s, at),
        [("listed".to_string(), "cr-listed".to_string())]
    );
    let gone = |end: Timestamp, capacity_block: bool| ReservationEnd {
        id: "cr-gone".into(),
        capacity_block,
        end: Some(end),
    };
    assert_eq!(
        expiring_with(&s, at, &[gone(end(), true)]),
        [
            ("listed".to_string(), "cr-listed".to_string()),
            ("orphan".to_string(), "cr-gone".to_string()),
            ("orphan-2".to_string(), "cr-gone".to_string()),
        ]
    );
    // A block that ends later, or a reservation that is no block, keeps its claims.
    let later = Timestamp(end().0 + 3_600_000);
    assert_eq!(expiring_with(&s, at, &[gone(later, true)]).len(), 1);
    assert_eq!(expiring_with(&s, at, &[gone(end(), false)]).len(), 1);
}
