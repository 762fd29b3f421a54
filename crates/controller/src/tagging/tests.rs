//! Which claims need their instance tagged, and the patch that marks them.

use serde_json::{Value, json};

use super::*;
use crate::state::{Kind, Object};
use crate::tests::{object, state_of};
use nodewright_testkit::json::merge;
use nodewright_testkit::k8s;

fn claim(name: &str, status: Value, annotations: Value, deleting: bool) -> Object {
    let mut v = merge(
        k8s::nodeclaim(name),
        json!({"metadata": {"annotations": annotations}, "status": status}),
    );
    if deleting {
        v["metadata"]["deletionTimestamp"] = json!("2025-12-31T00:00:00Z");
        v["metadata"]["finalizers"] = json!(["karpenter.sh/termination"]);
    }
    object(Kind::NodeClaim, v)
}

fn registered(instance: &str, node: &str) -> Value {
    json!({"providerID": format!("aws:///us-east-1a/{instance}"), "nodeName": node})
}

fn markers() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("example.com/tagged".to_string(), "true".to_string()),
        ("example.com/also".to_string(), "true".to_string()),
    ])
}

fn names(v: &[RegisteredInstance]) -> Vec<&str> {
    v.iter().map(|r| r.nodeclaim.as_str()).collect()
}

#[test]
fn only_registered_live_unmarked_claims_need_tagging() {
    let s = state_of(vec![
        claim("b-ready", registered("i-2", "node-b"), json!({}), false),
        claim("a-ready", registered("i-1", "node-a"), json!(null), false),
        claim(
            "launched",
            json!({"providerID": "aws:///us-east-1a/i-3"}),
            json!({}),
            false,
        ),
        claim("not-launched", json!({}), json!({}), false),
        claim(
            "empty-node",
            json!({"providerID": "aws:///us-east-1a/i-4", "nodeName": ""}),
            json!({}),
            false,
        ),
        claim("deleting", registered("i-5", "node-d"), json!({}), true),
        claim(
            "done",
            registered("i-6", "node-e"),
            json!({"example.com/tagged": "true", "example.com/also": "true"}),
            false,
        ),
        claim(
            "half-done",
            registered("i-7", "node-f"),
            json!({"example.com/tagged": "true"}),
            false,
        ),
        claim(
            "marked-false",
            registered("i-8", "node-g"),
            json!({"example.com/tagged": "false", "example.com/also": "true"}),
            false,
        ),
    ]);
    let todo = untagged(&s, &markers(), &[]);
    assert_eq!(
        names(&todo),
        vec!["a-ready", "b-ready", "half-done", "marked-false"]
    );
    assert_eq!(
        todo[0],
        RegisteredInstance {
            nodeclaim: "a-ready".into(),
            node_name: "node-a".into(),
            provider_id: "aws:///us-east-1a/i-1".into(),
        }
    );
}

/// A registered, unmarked claim whose `nodeClassRef` is (`group`, `kind`).
fn claim_of(name: &str, group: &str, kind: &str) -> Object {
    let mut o = claim(name, registered("i-1", name), json!({}), false);
    if let Object::NodeClaim(c) = &mut o {
        c.spec.node_class_ref.group = group.into();
        c.spec.node_class_ref.kind = kind.into();
    }
    o
}

#[test]
fn only_claims_of_the_providers_node_classes_are_tagged() {
    let s = state_of(vec![
        claim_of("ec2", "karpenter.k8s.aws", "EC2NodeClass"),
        claim_of("kwok", "karpenter.kwok.sh", "KWOKNodeClass"),
        claim_of("other-kind", "karpenter.k8s.aws", "OtherNodeClass"),
        claim_of("other-group", "example.com", "EC2NodeClass"),
    ]);
    let ec2 = [("karpenter.k8s.aws", "EC2NodeClass")];
    assert_eq!(names(&untagged(&s, &markers(), &ec2)), vec!["ec2"]);
    // A provider that names no classes considers every claim.
    assert_eq!(untagged(&s, &markers(), &[]).len(), 4);
}

#[test]
fn a_provider_without_markers_tags_nothing() {
    let s = state_of(vec![claim(
        "a",
        registered("i-1", "node-a"),
        json!({}),
        false,
    )]);
    assert!(untagged(&s, &BTreeMap::new(), &[]).is_empty());
}

#[test]
fn the_patch_sets_every_marker() {
    let p = marker_patch(&markers());
    assert_eq!(
        p.to_merge_patch(),
        json!({"metadata": {"annotations": {"example.com/also": "true", "example.com/tagged": "true"}}})
    );
}
