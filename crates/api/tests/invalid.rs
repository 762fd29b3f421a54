//! One invalid object per validation rule, with the exact message `nodewright validate`
//! prints for it. Each case starts from a valid object and breaks one thing.

mod cel_eval;

use std::collections::BTreeSet;

use nodewright_api::crd;
use nodewright_api::object::{Object, validate_value};
use serde_json::{Value, json};

/// Every CEL message in `schema`.
fn cel_messages(schema: &Value, out: &mut BTreeSet<String>) {
    match schema {
        Value::Object(o) => {
            for r in o
                .get("x-kubernetes-validations")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                out.insert(r["message"].as_str().unwrap_or_default().to_string());
            }
            o.values().for_each(|v| cel_messages(v, out));
        }
        Value::Array(a) => a.iter().for_each(|v| cel_messages(v, out)),
        _ => {}
    }
}

fn schema_for(v: &Value) -> Value {
    match v["kind"].as_str() {
        Some("NodeClaim") => crd::nodeclaim_schema(),
        _ => crd::nodepool_schema(),
    }
}

/// The CEL rules (run on the defaulted object, as the API server does) and the Rust rules
/// reject with the same messages: each CEL rejection is a Rust error, and each Rust error that
/// has a CEL rule is a CEL rejection.
fn assert_cel_agrees(
    name: &str,
    v: &Value,
    old: Option<&Value>,
    rust_reasons: &[String],
) -> Result<(), String> {
    let schema = schema_for(v);
    let mut all = BTreeSet::new();
    cel_messages(&schema, &mut all);
    let cel: BTreeSet<String> = cel_eval::failures(&schema, v, old)
        .into_iter()
        .map(|(_, m)| m)
        .collect();
    let rust: BTreeSet<String> = rust_reasons
        .iter()
        .filter(|r| all.contains(*r))
        .cloned()
        .collect();
    if cel != rust {
        return Err(format!(
            "{name}: CEL rejects with {cel:?}, the Rust rules with {rust:?}"
        ));
    }
    Ok(())
}

fn reasons(v: &Value) -> Vec<String> {
    validate_value(v)
        .expect("a v1 kind")
        .errors
        .iter()
        .map(|e| e.reason.clone())
        .collect()
}

fn nodepool() -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {
            "template": {
                "metadata": {"labels": {"example.com/team": "a"}},
                "spec": {
                    "requirements": [
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}
                    ],
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
                }
            },
            "disruption": {"consolidateAfter": "1m"}
        }
    })
}

fn nodeclaim() -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "default-abc"},
        "spec": {
            "requirements": [{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["default"]}],
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
        }
    })
}

/// Sets `pointer` (creating objects on the way); `Value::Null` removes the field.
fn set(mut v: Value, pointer: &str, new: Value) -> Value {
    let (parent, last) = pointer.rsplit_once('/').unwrap();
    let mut cur = &mut v;
    for part in parent.split('/').skip(1) {
        cur = match cur {
            Value::Array(a) => &mut a[part.parse::<usize>().unwrap()],
            Value::Object(o) => o
                .entry(part.replace("~1", "/"))
                .or_insert_with(|| json!({})),
            _ => panic!("{pointer}: not a container"),
        };
    }
    let last = last.replace("~1", "/");
    match cur {
        Value::Array(a) => a[last.parse::<usize>().unwrap()] = new,
        Value::Object(o) if new.is_null() => {
            o.remove(&last);
        }
        Value::Object(o) => {
            o.insert(last, new);
        }
        _ => panic!("{pointer}: not a container"),
    }
    v
}

const REQ: &str = "/spec/template/spec/requirements/0";
const REQS: &str = "spec.template.spec.requirements";

fn req(key: &str, op: &str, values: &[&str]) -> Value {
    json!({"key": key, "operator": op, "values": values})
}

fn errors(v: &Value) -> Vec<String> {
    validate_value(v)
        .expect("a v1 kind")
        .errors
        .iter()
        .map(|e| e.to_string())
        .collect()
}

fn taint(key: &str, value: Option<&str>, effect: &str) -> Value {
    let mut t = json!({"key": key, "effect": effect});
    if let Some(v) = value {
        t["value"] = json!(v);
    }
    t
}

#[test]
fn base_objects_are_valid() {
    assert_eq!(errors(&nodepool()), Vec::<String>::new());
    assert_eq!(errors(&nodeclaim()), Vec::<String>::new());
    assert_cel_agrees("nodepool", &nodepool(), None, &[]).unwrap();
    assert_cel_agrees("nodeclaim", &nodeclaim(), None, &[]).unwrap();
}

#[test]
fn every_nodepool_rule_rejects_its_invalid_case() {
    let np = nodepool;
    let long_key = format!("example.com/{}", "a".repeat(320));
    let many_reqs: Vec<Value> = (0..101)
        .map(|i| req(&format!("example.com/k{i}"), "Exists", &[]))
        .collect();
    let many_labels: serde_json::Map<String, Value> = (0..101)
        .map(|i| (format!("example.com/l{i}"), json!("v")))
        .collect();
    let many_budgets: Vec<Value> = (0..51).map(|_| json!({"nodes": "1"})).collect();
    let cases: Vec<(&str, Value, String)> = vec![
        // Requirement keys: restricted domains and labels.
        ("karpenter.sh domain", set(np(), REQ, req("karpenter.sh/foo", "Exists", &[])),
            format!("{REQS}[0].key: label domain \"karpenter.sh\" is restricted")),
        ("nodepool label", set(np(), REQ, req("karpenter.sh/nodepool", "In", &["a"])),
            format!("{REQS}[0].key: label \"karpenter.sh/nodepool\" is restricted")),
        ("hostname", set(np(), REQ, req("kubernetes.io/hostname", "In", &["a"])),
            format!("{REQS}[0].key: label \"kubernetes.io/hostname\" is restricted")),
        ("kubernetes.io domain", set(np(), REQ, req("kubernetes.io/foo", "Exists", &[])),
            format!("{REQS}[0].key: label domain \"kubernetes.io\" is restricted")),
        ("k8s.io domain", set(np(), REQ, req("foo.k8s.io/bar", "Exists", &[])),
            format!("{REQS}[0].key: label domain \"k8s.io\" is restricted")),
        ("karpenter.k8s.aws domain", set(np(), REQ, req("karpenter.k8s.aws/made-up", "Exists", &[])),
            format!("{REQS}[0].key: label domain \"karpenter.k8s.aws\" is restricted")),
        ("key pattern", set(np(), REQ, req("Bad Key", "Exists", &[])),
            format!("{REQS}[0].key: invalid value \"Bad Key\": must match '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$'")),
        ("key length", set(np(), REQ, req(&long_key, "Exists", &[])),
            format!("{REQS}[0].key: may not be longer than 316 characters")),
        // Operators and values.
        ("operator enum", set(np(), REQ, req("example.com/a", "Like", &["x"])),
            format!("{REQS}[0].operator: unsupported value \"Like\": supported values: \"In\", \"NotIn\", \"Exists\", \"DoesNotExist\", \"Gt\", \"Lt\", \"Gte\", \"Lte\"")),
        ("In needs values", set(np(), REQ, req("example.com/a", "In", &[])),
            format!("{REQS}[0]: requirements with operator 'In' must have a value defined")),
        ("Gt one value", set(np(), REQ, req("example.com/a", "Gt", &["1", "2"])),
            format!("{REQS}[0]: requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value")),
        ("Lt integer", set(np(), REQ, req("example.com/a", "Lt", &["abc"])),
            format!("{REQS}[0]: requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value")),
        ("Gte non-negative", set(np(), REQ, req("example.com/a", "Gte", &["-1"])),
            format!("{REQS}[0]: requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value")),
        ("Lte needs a value", set(np(), REQ, req("example.com/a", "Lte", &[])),
            format!("{REQS}[0]: requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value")),
        ("minValues needs values", set(set(np(), REQ, req("example.com/a", "In", &["x"])), &format!("{REQ}/minValues"), json!(2)),
            format!("{REQS}[0]: requirements with 'minValues' must have at least that many values specified in the 'values' field")),
        ("minValues minimum", set(np(), &format!("{REQ}/minValues"), json!(0)),
            format!("{REQS}[0].minValues: must be greater than or equal to 1")),
        ("minValues maximum", set(np(), &format!("{REQ}/minValues"), json!(51)),
            format!("{REQS}[0].minValues: must be less than or equal to 50")),
        ("value pattern", set(np(), REQ, req("example.com/a", "In", &["bad value"])),
            format!("{REQS}[0].values[0]: invalid value \"bad value\": must match '^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$'")),
        ("known values", set(np(), REQ, req("karpenter.sh/capacity-type", "In", &["cheap"])),
            format!("{REQS}[0].values: no valid value for \"karpenter.sh/capacity-type\": expected one of on-demand, spot, reserved")),
        ("known values and minValues", set(set(np(), REQ, req("karpenter.sh/capacity-type", "In", &["spot", "cheap"])), &format!("{REQ}/minValues"), json!(2)),
            format!("{REQS}[0].values: \"karpenter.sh/capacity-type\" has 1 valid values, fewer than minValues")),
        ("requirements maxItems", set(np(), "/spec/template/spec/requirements", json!(many_reqs)),
            format!("{REQS}: must have at most 100 items")),
        ("requirements required", set(np(), "/spec/template/spec/requirements", Value::Null),
            format!("{REQS}: required field is missing")),
        // Template labels.
        ("label domain", set(np(), "/spec/template/metadata/labels/karpenter.sh~1x", json!("a")),
            String::new()),
        ("label value length", set(np(), "/spec/template/metadata/labels/example.com~1team", json!("a".repeat(64))),
            "spec.template.metadata.labels[example.com/team]: may not be longer than 63 characters".to_string()),
        ("label value pattern", set(np(), "/spec/template/metadata/labels/example.com~1team", json!("-a")),
            "spec.template.metadata.labels[example.com/team]: invalid value \"-a\": must match '^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$'".to_string()),
        ("label key name", set(np(), "/spec/template/metadata/labels/example.com~1bad key", json!("a")),
            "spec.template.metadata.labels[example.com/bad key]: \"example.com/bad key\" is not a qualified name: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character".to_string()),
        ("labels maxProperties", set(np(), "/spec/template/metadata/labels", Value::Object(many_labels)),
            "spec.template.metadata.labels: must have at most 100 properties".to_string()),
        ("nodepool label in labels", set(np(), "/spec/template/metadata/labels/karpenter.sh~1nodepool", json!("a")),
            "spec.template.metadata.labels[karpenter.sh/nodepool]: label \"karpenter.sh/nodepool\" is restricted".to_string()),
        // Taints.
        ("taint effect", set(np(), "/spec/template/spec/taints", json!([taint("example.com/a", None, "Sometimes")])),
            "spec.template.spec.taints[0].effect: unsupported value \"Sometimes\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"".to_string()),
        ("taint key empty", set(np(), "/spec/template/spec/taints", json!([taint("", None, "NoSchedule")])),
            "spec.template.spec.taints[0].key: must be at least 1 characters long".to_string()),
        ("taint key pattern", set(np(), "/spec/template/spec/startupTaints", json!([taint("a b", None, "NoSchedule")])),
            "spec.template.spec.startupTaints[0].key: invalid value \"a b\": must match '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$'".to_string()),
        ("taint value pattern", set(np(), "/spec/template/spec/taints", json!([taint("example.com/a", Some("a b"), "NoSchedule")])),
            "spec.template.spec.taints[0].value: invalid value \"a b\": must match '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$'".to_string()),
        ("taint duplicate", set(set(np(), "/spec/template/spec/taints", json!([taint("example.com/a", Some("x"), "NoSchedule")])), "/spec/template/spec/startupTaints", json!([taint("example.com/a", Some("y"), "NoSchedule")])),
            "spec.template.spec.startupTaints[0]: duplicate taint key/effect pair \"example.com/a:NoSchedule\"".to_string()),
        ("taint effect required", set(np(), "/spec/template/spec/taints", json!([{"key": "example.com/a"}])),
            "spec.template.spec.taints[0].effect: required field is missing".to_string()),
        // nodeClassRef.
        ("nodeClassRef required", set(np(), "/spec/template/spec/nodeClassRef", Value::Null),
            "spec.template.spec.nodeClassRef: required field is missing".to_string()),
        ("group required", set(np(), "/spec/template/spec/nodeClassRef/group", Value::Null),
            "spec.template.spec.nodeClassRef.group: required field is missing".to_string()),
        ("group empty", set(np(), "/spec/template/spec/nodeClassRef/group", json!("")),
            "spec.template.spec.nodeClassRef.group: group may not be empty".to_string()),
        ("kind empty", set(np(), "/spec/template/spec/nodeClassRef/kind", json!("")),
            "spec.template.spec.nodeClassRef.kind: kind may not be empty".to_string()),
        ("name empty", set(np(), "/spec/template/spec/nodeClassRef/name", json!("")),
            "spec.template.spec.nodeClassRef.name: name may not be empty".to_string()),
        ("group pattern", set(np(), "/spec/template/spec/nodeClassRef/group", json!("karpenter.k8s.aws/v1")),
            "spec.template.spec.nodeClassRef.group: invalid value \"karpenter.k8s.aws/v1\": must match '^[^/]*$'".to_string()),
        // Durations.
        ("expireAfter pattern", set(np(), "/spec/template/spec/expireAfter", json!("30d")),
            "spec.template.spec.expireAfter: invalid value \"30d\": must match '^(([0-9]+(s|m|h))+|Never)$'".to_string()),
        ("terminationGracePeriod pattern", set(np(), "/spec/template/spec/terminationGracePeriod", json!("Never")),
            "spec.template.spec.terminationGracePeriod: invalid value \"Never\": must match '^([0-9]+(s|m|h))+$'".to_string()),
        ("consolidateAfter pattern", set(np(), "/spec/disruption/consolidateAfter", json!("soon")),
            "spec.disruption.consolidateAfter: invalid value \"soon\": must match '^(([0-9]+(s|m|h))+|Never)$'".to_string()),
        ("consolidateAfter required", set(np(), "/spec/disruption", json!({"consolidationPolicy": "WhenEmpty"})),
            "spec.disruption.consolidateAfter: required field is missing".to_string()),
        ("consolidationPolicy enum", set(np(), "/spec/disruption/consolidationPolicy", json!("WhenUnderutilized")),
            "spec.disruption.consolidationPolicy: unsupported value \"WhenUnderutilized\": supported values: \"WhenEmpty\", \"WhenEmptyOrUnderutilized\", \"Balanced\"".to_string()),
        // Budgets.
        ("budget nodes pattern", set(np(), "/spec/disruption/budgets", json!([{"nodes": "110%"}])),
            "spec.disruption.budgets[0].nodes: invalid value \"110%\": must match '^((100|[0-9]{1,2})%|[0-9]+)$'".to_string()),
        ("schedule without duration", set(np(), "/spec/disruption/budgets", json!([{"nodes": "0", "schedule": "@daily"}])),
            "spec.disruption.budgets[0]: 'schedule' must be set with 'duration'".to_string()),
        ("duration without schedule", set(np(), "/spec/disruption/budgets", json!([{"nodes": "0", "duration": "1h"}])),
            "spec.disruption.budgets[0]: 'schedule' must be set with 'duration'".to_string()),
        ("budget duration pattern", set(np(), "/spec/disruption/budgets", json!([{"nodes": "0", "schedule": "@daily", "duration": "30s"}])),
            "spec.disruption.budgets[0].duration: invalid value \"30s\": must match '^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$'".to_string()),
        ("budget schedule pattern", set(np(), "/spec/disruption/budgets", json!([{"nodes": "0", "schedule": "daily", "duration": "1h"}])),
            "spec.disruption.budgets[0].schedule: invalid value \"daily\": must match '^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\\s(.+)\\s(.+)\\s(.+)\\s(.+))$'".to_string()),
        ("budget cron", set(np(), "/spec/disruption/budgets", json!([{"nodes": "0", "schedule": "61 * * * *", "duration": "1h"}])),
            "spec.disruption.budgets[0].schedule: invalid cron schedule \"61 * * * *\": minute field \"61\": 61 is out of range 0-59".to_string()),
        ("budget reasons enum", set(np(), "/spec/disruption/budgets", json!([{"nodes": "1", "reasons": ["Expired"]}])),
            "spec.disruption.budgets[0].reasons[0]: unsupported value \"Expired\": supported values: \"Underutilized\", \"Empty\", \"Drifted\"".to_string()),
        ("budget reasons set", set(np(), "/spec/disruption/budgets", json!([{"nodes": "1", "reasons": ["Empty", "Empty"]}])),
            "spec.disruption.budgets[0].reasons[1]: duplicate value \"Empty\"".to_string()),
        ("budgets maxItems", set(np(), "/spec/disruption/budgets", json!(many_budgets)),
            "spec.disruption.budgets: must have at most 50 items".to_string()),
        // Limits, weight, replicas.
        ("limits quantity", set(np(), "/spec/limits", json!({"cpu": "lots"})),
            "spec.limits[cpu]: invalid value \"lots\": must match '^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$'".to_string()),
        ("weight minimum", set(np(), "/spec/weight", json!(0)),
            "spec.weight: must be greater than or equal to 1".to_string()),
        ("weight maximum", set(np(), "/spec/weight", json!(101)),
            "spec.weight: must be less than or equal to 100".to_string()),
        ("weight type", set(np(), "/spec/weight", json!("high")),
            "spec.weight: must be of type integer, got string".to_string()),
        ("replicas minimum", set(np(), "/spec/replicas", json!(-1)),
            "spec.replicas: must be greater than or equal to 0".to_string()),
        ("static weight", set(set(np(), "/spec/replicas", json!(2)), "/spec/weight", json!(10)),
            "spec: 'weight' is not supported on static NodePools".to_string()),
        ("static limits", set(set(np(), "/spec/replicas", json!(2)), "/spec/limits", json!({"cpu": "10"})),
            "spec: only 'limits.nodes' is supported on static NodePools".to_string()),
        // Object shape.
        ("spec required", set(np(), "/spec", Value::Null), "spec: required field is missing".to_string()),
        ("template required", set(np(), "/spec/template", Value::Null),
            "spec.template: required field is missing".to_string()),
        ("name required", set(np(), "/metadata/name", Value::Null),
            "metadata.name: required field is missing".to_string()),
        ("name format", set(np(), "/metadata/name", json!("Default")),
            "metadata.name: invalid name \"Default\": must be a lowercase RFC 1123 subdomain".to_string()),
    ];
    let mut failures = Vec::new();
    for (name, value, expected) in cases {
        let expected = if expected.is_empty() {
            "spec.template.metadata.labels[karpenter.sh/x]: label domain \"karpenter.sh\" is restricted".to_string()
        } else {
            expected
        };
        let got = errors(&value);
        if !got.contains(&expected) {
            failures.push(format!(
                "{name}:\n  expected {expected}\n  got      {got:?}"
            ));
        }
        if let Err(e) = assert_cel_agrees(name, &value, None, &reasons(&value)) {
            failures.push(e);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn nodeclaim_rules() {
    let restricted = set(
        nodeclaim(),
        "/spec/requirements/0",
        req("karpenter.sh/foo", "Exists", &[]),
    );
    assert_eq!(
        errors(&restricted),
        ["spec.requirements[0].key: label domain \"karpenter.sh\" is restricted"]
    );
    let hostname = set(
        nodeclaim(),
        "/spec/requirements/0",
        req("kubernetes.io/hostname", "In", &["a"]),
    );
    assert!(errors(&hostname).contains(
        &"spec.requirements[0].key: label \"kubernetes.io/hostname\" is restricted".to_string()
    ));
    let no_ref = set(nodeclaim(), "/spec/nodeClassRef/name", json!(""));
    assert_eq!(
        errors(&no_ref),
        ["spec.nodeClassRef.name: name may not be empty"]
    );
    let dup = set(
        set(
            nodeclaim(),
            "/spec/taints",
            json!([taint("example.com/a", None, "NoExecute")]),
        ),
        "/spec/startupTaints",
        json!([taint("example.com/a", None, "NoExecute")]),
    );
    assert_eq!(
        errors(&dup),
        ["spec.startupTaints[0]: duplicate taint key/effect pair \"example.com/a:NoExecute\""]
    );
    for (name, v) in [
        ("restricted", &restricted),
        ("hostname", &hostname),
        ("no ref", &no_ref),
        ("dup", &dup),
    ] {
        assert_cel_agrees(name, v, None, &reasons(v)).unwrap();
    }
}

/// Transition rules run by the CEL evaluator give the same verdicts as `validate_update`.
#[test]
fn cel_transition_rules_agree_with_validate_update() {
    let cases = [
        (
            nodepool(),
            set(
                nodepool(),
                "/spec/template/spec/nodeClassRef/group",
                json!("example.com"),
            ),
        ),
        (
            nodepool(),
            set(
                nodepool(),
                "/spec/template/spec/nodeClassRef/kind",
                json!("Other"),
            ),
        ),
        (
            nodepool(),
            set(
                nodepool(),
                "/spec/template/spec/nodeClassRef/name",
                json!("other"),
            ),
        ),
        (nodepool(), set(nodepool(), "/spec/replicas", json!(1))),
        (
            set(nodepool(), "/spec/replicas", json!(1)),
            set(nodepool(), "/spec/replicas", json!(2)),
        ),
        (
            nodeclaim(),
            set(nodeclaim(), "/spec/expireAfter", json!("1h")),
        ),
        (
            nodeclaim(),
            set(nodeclaim(), "/metadata/labels", json!({"a": "b"})),
        ),
    ];
    for (i, (old, new)) in cases.iter().enumerate() {
        let rust: Vec<String> = Object::validate_update(&object(old.clone()), &object(new.clone()))
            .into_iter()
            .map(|e| e.reason)
            .collect();
        assert_cel_agrees(&format!("update case {i}"), new, Some(old), &rust).unwrap();
    }
}

fn object(v: Value) -> Object {
    Object::from_value(&v).unwrap().unwrap()
}

#[test]
fn immutable_fields_on_update() {
    let old = object(nodepool());
    let new = object(set(
        nodepool(),
        "/spec/template/spec/nodeClassRef/group",
        json!("example.com"),
    ));
    let errs: Vec<String> = Object::validate_update(&old, &new)
        .iter()
        .map(|e| e.to_string())
        .collect();
    assert_eq!(
        errs,
        ["spec.template.spec.nodeClassRef: nodeClassRef.group is immutable"]
    );
    let new = object(set(
        nodepool(),
        "/spec/template/spec/nodeClassRef/kind",
        json!("Other"),
    ));
    let errs: Vec<String> = Object::validate_update(&old, &new)
        .iter()
        .map(|e| e.to_string())
        .collect();
    assert_eq!(
        errs,
        ["spec.template.spec.nodeClassRef: nodeClassRef.kind is immutable"]
    );
    let renamed = object(set(
        nodepool(),
        "/spec/template/spec/nodeClassRef/name",
        json!("other"),
    ));
    assert!(
        Object::validate_update(&old, &renamed).is_empty(),
        "the name may change"
    );
    let static_pool = object(set(nodepool(), "/spec/replicas", json!(1)));
    let errs: Vec<String> = Object::validate_update(&old, &static_pool)
        .iter()
        .map(|e| e.to_string())
        .collect();
    assert_eq!(
        errs,
        [
            "spec: Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes"
        ]
    );

    let old = object(nodeclaim());
    let new = object(set(nodeclaim(), "/spec/expireAfter", json!("1h")));
    let errs: Vec<String> = Object::validate_update(&old, &new)
        .iter()
        .map(|e| e.to_string())
        .collect();
    assert_eq!(errs, ["spec: spec is immutable"]);
    let relabelled = object(set(nodeclaim(), "/metadata/labels", json!({"a": "b"})));
    assert!(Object::validate_update(&old, &relabelled).is_empty());
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

/// The evaluator itself: known-bad objects make the CRD's CEL rules fail with their messages.
#[test]
fn cel_evaluator_reports_rule_messages() {
    let schema = crd::nodepool_schema();
    let cases = [
        (
            set(nodepool(), REQ, req("karpenter.sh/foo", "Exists", &[])),
            "label domain \"karpenter.sh\" is restricted",
        ),
        (
            set(nodepool(), REQ, req("example.com/a", "Gte", &["x"])),
            "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",
        ),
        (
            set(
                nodepool(),
                "/spec/template/metadata/labels/kubernetes.io~1hostname",
                json!("a"),
            ),
            "label \"kubernetes.io/hostname\" is restricted",
        ),
        (
            set(
                nodepool(),
                "/spec/disruption/budgets",
                json!([{"nodes": "1", "schedule": "@daily"}]),
            ),
            "'schedule' must be set with 'duration'",
        ),
        (
            set(
                set(nodepool(), "/spec/replicas", json!(1)),
                "/spec/limits",
                json!({"cpu": 1}),
            ),
            "only 'limits.nodes' is supported on static NodePools",
        ),
        (
            set(
                nodepool(),
                "/spec/template/spec/nodeClassRef/name",
                json!(""),
            ),
            "name may not be empty",
        ),
    ];
    for (v, message) in cases {
        let got: Vec<String> = cel_eval::failures(&schema, &v, None)
            .into_iter()
            .map(|(_, m)| m)
            .collect();
        assert!(
            got.iter().any(|m| m == message),
            "expected {message:?}, got {got:?}"
        );
    }
    assert!(cel_eval::failures(&schema, &nodepool(), None).is_empty());
}
