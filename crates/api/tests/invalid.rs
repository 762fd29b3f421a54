//! Every invalid object of the test kit's corpora gets exactly the errors `nodewright validate`
//! prints for it, and every update case the errors of the update rules.

use nodewright_api::object::{Object, validate_value};
use nodewright_testkit::invalid::{self, Case};
use nodewright_testkit::valid;
use serde_json::{Value, json};

fn errors(v: &Value) -> Vec<String> {
    validate_value(v)
        .expect("a v1 kind")
        .errors
        .iter()
        .map(|e| e.to_string())
        .collect()
}

fn object(v: &Value) -> Object {
    Object::from_value(v).unwrap().unwrap()
}

/// The cases whose errors differ from what `validate` reports, each with what it got.
fn mismatches(cases: Vec<Case>) -> Vec<String> {
    cases
        .into_iter()
        .filter_map(|c| {
            let got = errors(&c.object);
            (got != c.errors)
                .then(|| format!("{}:\n  expected {:?}\n  got      {got:?}", c.name, c.errors))
        })
        .collect()
}

#[test]
fn base_objects_are_valid() {
    assert_eq!(errors(&valid::nodepool()), Vec::<String>::new());
    assert_eq!(errors(&valid::nodeclaim()), Vec::<String>::new());
    assert_eq!(errors(&valid::ec2nodeclass()), Vec::<String>::new());
}

#[test]
fn every_nodepool_rule_rejects_its_invalid_case() {
    let failures = mismatches(invalid::nodepool_cases());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn nodeclaim_rules() {
    let failures = mismatches(invalid::nodeclaim_cases());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_ec2nodeclass_rule_rejects_its_invalid_case() {
    let failures = mismatches(invalid::ec2nodeclass_cases());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The update rules give each update case its errors; both objects are valid on their own, so
/// those rules alone decide.
#[test]
fn immutable_fields_on_update() {
    let mut failures = Vec::new();
    for c in invalid::update_cases() {
        let old = c.old.as_ref().expect("an update case");
        let got: Vec<String> = Object::validate_update(&object(old), &object(&c.object))
            .iter()
            .map(|e| e.to_string())
            .collect();
        if got != c.errors {
            failures.push(format!(
                "{}:\n  expected {:?}\n  got      {got:?}",
                c.name, c.errors
            ));
        }
        for v in [old, &c.object] {
            let alone = errors(v);
            if !alone.is_empty() {
                failures.push(format!("{}: an object is invalid alone: {alone:?}", c.name));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn unknown_kinds_are_clear_errors() {
    let v = json!({"apiVersion": "karpenter.sh/v1", "kind": "Machine", "metadata": {"name": "m"}});
    let e = Object::from_value(&v).unwrap_err().to_string();
    assert!(
        e.starts_with("unsupported kind \"Machine\" in apiVersion \"karpenter.sh/v1\"; supported: karpenter.sh/v1 NodePool, "),
        "{e}"
    );
    let other = json!({"apiVersion": "apps/v1", "kind": "Deployment"});
    assert_eq!(Object::from_value(&other).unwrap(), None);
}
