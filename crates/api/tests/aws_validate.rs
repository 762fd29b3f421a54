//! EC2NodeClass validation rules on their own (without the CRD schema `validate` runs first):
//! the seeds are valid, and each rule rejects the test kit's object that breaks it with the
//! expected path and message.

use nodewright_api::aws::validate;
use nodewright_api::document::read_documents;
use nodewright_testkit::invalid;
use nodewright_testkit::json::set;
use nodewright_testkit::valid;
use serde_json::{Value, json};

fn parse(v: &Value) -> nodewright_api::aws::v1::EC2NodeClass {
    serde_json::from_value(v.clone()).expect("test object deserializes")
}

#[test]
fn seeds_are_valid() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/seed-manifests");
    let docs = read_documents(&dir.join("04-nodepool-ec2nodeclass-v1.yaml")).unwrap();
    let nc = docs.iter().find(|d| d.kind() == "EC2NodeClass").unwrap();
    assert_eq!(validate::ec2nodeclass(&parse(&nc.value)), vec![]);
    assert_eq!(
        validate::ec2nodeclass(&parse(&valid::ec2nodeclass())),
        vec![]
    );
}

#[test]
fn each_rule_rejects_its_invalid_object() {
    let rule_errors = invalid::ec2nodeclass_rule_errors();
    let cases = invalid::ec2nodeclass_cases();
    assert_eq!(rule_errors.len(), cases.len());
    let mut failures = Vec::new();
    for (case, (name, expected)) in cases.iter().zip(rule_errors) {
        assert_eq!(case.name, name);
        let errs = validate::ec2nodeclass(&parse(&case.object));
        if !errs.iter().any(|e| e.to_string() == expected) {
            failures.push(format!("{name}: expected {expected}\n  got {errs:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn errors_render_with_their_path() {
    let v = set(
        valid::ec2nodeclass(),
        "/spec/subnetSelectorTerms",
        json!([{"id": "sn-1"}]),
    );
    let errs = validate::ec2nodeclass(&parse(&v));
    assert_eq!(errs.len(), 1);
    assert_eq!(
        errs[0].to_string(),
        "spec.subnetSelectorTerms[0].id: should match 'subnet-[0-9a-z]+'"
    );
}

#[test]
fn alias_with_matching_or_custom_family_is_valid() {
    for family in ["AL2023", "Custom"] {
        let v = set(valid::ec2nodeclass(), "/spec/amiFamily", json!(family));
        assert_eq!(validate::ec2nodeclass(&parse(&v)), vec![], "{family}");
    }
}
