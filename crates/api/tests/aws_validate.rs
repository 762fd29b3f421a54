//! EC2NodeClass validation: the seeds are valid, and each rule rejects an object that breaks it
//! with the expected path and message.

mod aws_support;

use aws_support::{apply, base, cases, parse, set};
use nodewright_api::aws::validate;
use nodewright_api::document::read_documents;
use serde_json::{Value, json};

#[test]
fn seeds_are_valid() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/seed-manifests");
    let docs = read_documents(&dir.join("04-nodepool-ec2nodeclass-v1.yaml")).unwrap();
    let nc = docs.iter().find(|d| d.kind() == "EC2NodeClass").unwrap();
    assert_eq!(validate::ec2nodeclass(&parse(&nc.value)), vec![]);
    assert_eq!(validate::ec2nodeclass(&parse(&base())), vec![]);
}

#[test]
fn each_rule_rejects_its_invalid_object() {
    let mut failures = Vec::new();
    for (what, changes, path, message) in cases() {
        let errs = validate::ec2nodeclass(&parse(&apply(&changes)));
        if !errs.iter().any(|e| e.path == path && e.reason == message) {
            failures.push(format!(
                "{what}: expected {path}: {message}\n  got {errs:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn errors_render_with_their_path() {
    let mut v = base();
    set(&mut v, "/spec/subnetSelectorTerms", json!([{"id": "sn-1"}]));
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
        let mut v = base();
        set(&mut v, "/spec/amiFamily", json!(family));
        assert_eq!(validate::ec2nodeclass(&parse(&v)), vec![], "{family}");
    }
}

#[test]
fn role_is_immutable() {
    let old = parse(&base());
    let mut v = base();
    set(&mut v, "/spec/role", json!("OtherRole"));
    let errs = validate::ec2nodeclass_update(&old, &parse(&v));
    assert_eq!(
        errs.iter().map(|e| e.to_string()).collect::<Vec<_>>(),
        ["spec.role: immutable field changed"]
    );
    assert_eq!(validate::ec2nodeclass_update(&old, &old), vec![]);
}

#[test]
fn role_and_instance_profile_cannot_be_swapped() {
    let old = parse(&base());
    let mut v = base();
    set(&mut v, "/spec/role", Value::Null);
    set(&mut v, "/spec/instanceProfile", json!("profile"));
    let new = parse(&v);
    let expected = "spec: changing from 'instanceProfile' to 'role' is not supported. You must delete and recreate this node class if you want to change this.";
    for errs in [
        validate::ec2nodeclass_update(&old, &new),
        validate::ec2nodeclass_update(&new, &old),
    ] {
        assert_eq!(
            errs.iter().map(|e| e.to_string()).collect::<Vec<_>>(),
            [expected]
        );
    }
}
