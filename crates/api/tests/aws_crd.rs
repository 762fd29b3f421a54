//! The EC2NodeClass CRD schema, checked the way an API server uses it: a small structural
//! validator (types, required, enum, pattern, bounds, sizes) runs every `x-kubernetes-validations`
//! rule with a CEL interpreter. The seeds and the base object pass; every invalid object of the
//! offline-validation table is rejected by the schema with the same message, so the CRD and the
//! Rust rules agree.

mod aws_support;

use std::sync::Arc;

use aws_support::{apply, base, cases, parse};
use cel::extractors::This;
use nodewright_api::aws::crd::{ec2nodeclass_printer_columns, ec2nodeclass_schema};
use nodewright_api::aws::parse::type_errors;
use nodewright_api::aws::{rules, validate};
use nodewright_api::document::read_documents;
use nodewright_api::error::Path;
use regex::Regex;
use serde_json::{Value, json};

/// One schema violation: path, message, and whether it came from a CEL rule that could not be
/// evaluated (a missing field the rule reads), which an API server reports in its own words.
#[derive(Debug)]
struct Violation {
    path: String,
    message: String,
    eval_error: bool,
}

fn cel_context() -> cel::Context<'static, 'static> {
    let mut ctx = cel::Context::default();
    // Kubernetes' regex library: `find` returns the first match or ''.
    ctx.add_function(
        "find",
        |This(s): This<Arc<String>>, re: Arc<String>| -> Arc<String> {
            let r = Regex::new(&re).expect("rule regex compiles");
            Arc::new(
                r.find(&s)
                    .map(|m| m.as_str().to_string())
                    .unwrap_or_default(),
            )
        },
    )
    .expect("find registers");
    ctx
}

fn check(schema: &Value, value: &Value, old: Option<&Value>, path: &str, out: &mut Vec<Violation>) {
    let mut push = |message: String| {
        out.push(Violation {
            path: path.to_string(),
            message,
            eval_error: false,
        })
    };
    // Types are checked by the reader, with the same wording; stop at the first mismatch.
    let mut type_errs = Vec::new();
    let shallow = json!({"type": schema.get("type"), "x-kubernetes-int-or-string": schema.get("x-kubernetes-int-or-string")});
    let shallow = Value::Object(
        shallow
            .as_object()
            .unwrap()
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    );
    type_errors(&shallow, value, &Path::default(), &mut type_errs);
    if let Some(e) = type_errs.pop() {
        return push(e.reason);
    }
    if let (Some(allowed), Some(s)) = (schema.get("enum").and_then(Value::as_array), value.as_str())
    {
        let allowed: Vec<&str> = allowed.iter().filter_map(Value::as_str).collect();
        if !allowed.contains(&s) {
            push(rules::unsupported_value(s, &allowed));
        }
    }
    if let (Some(p), Some(s)) = (
        schema.get("pattern").and_then(Value::as_str),
        value.as_str(),
    ) && !Regex::new(p).unwrap().is_match(s)
    {
        push(rules::should_match(p));
    }
    if let (Some(max), Some(s)) = (
        schema.get("maxLength").and_then(Value::as_u64),
        value.as_str(),
    ) && s.len() as u64 > max
    {
        push(rules::too_long(max));
    }
    if let Some(n) = value.as_i64() {
        if let Some(min) = schema.get("minimum").and_then(Value::as_i64)
            && n < min
        {
            push(rules::at_least(min));
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_i64)
            && n > max
        {
            push(rules::at_most(max));
        }
    }
    if let Some(items) = value.as_array() {
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
            && (items.len() as u64) < min
        {
            push(rules::too_few(items.len(), min));
        }
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
            && items.len() as u64 > max
        {
            push(rules::too_many(items.len(), max));
        }
    }
    if let (Some(max), Some(map)) = (
        schema.get("maxProperties").and_then(Value::as_u64),
        value.as_object(),
    ) && map.len() as u64 > max
    {
        push(rules::too_many(map.len(), max));
    }
    if let Some(map) = value.as_object() {
        for name in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = name.as_str().unwrap();
            if !map.contains_key(name) {
                out.push(Violation {
                    path: join(path, name),
                    message: rules::REQUIRED.into(),
                    eval_error: false,
                });
            }
        }
        let props = schema.get("properties").and_then(Value::as_object);
        for (k, v) in map {
            let child_old = old.and_then(|o| o.get(k));
            if let Some(s) = props.and_then(|p| p.get(k)) {
                check(s, v, child_old, &join(path, k), out);
            } else if let Some(s) = schema.get("additionalProperties") {
                check(s, v, child_old, &format!("{path}[{k}]"), out);
            } else if schema.get("x-kubernetes-preserve-unknown-fields").is_none()
                && props.is_some()
            {
                out.push(Violation {
                    path: join(path, k),
                    message: "unknown field".into(),
                    eval_error: false,
                });
            }
        }
    }
    if let (Some(items_schema), Some(items)) = (schema.get("items"), value.as_array()) {
        for (i, item) in items.iter().enumerate() {
            check(items_schema, item, None, &format!("{path}[{i}]"), out);
        }
    }
    for rule in schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let text = rule["rule"].as_str().unwrap();
        let message = rule["message"].as_str().unwrap().to_string();
        let transition = text.contains("oldSelf");
        if transition && old.is_none() {
            continue;
        }
        let program = cel::Program::compile(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        let mut ctx = cel_context();
        ctx.add_variable("self", value.clone()).unwrap();
        if let Some(o) = old {
            ctx.add_variable("oldSelf", o.clone()).unwrap();
        }
        match program.execute(&ctx) {
            Ok(cel::Value::Bool(true)) => {}
            Ok(cel::Value::Bool(false)) => out.push(Violation {
                path: path.to_string(),
                message,
                eval_error: false,
            }),
            other => out.push(Violation {
                path: path.to_string(),
                message: format!("{message} (evaluation: {other:?})"),
                eval_error: true,
            }),
        }
    }
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn violations(value: &Value, old: Option<&Value>) -> Vec<Violation> {
    let mut out = Vec::new();
    check(&ec2nodeclass_schema(), value, old, "", &mut out);
    out
}

#[test]
fn every_rule_compiles_as_cel() {
    fn walk(schema: &Value, count: &mut usize) {
        match schema {
            Value::Object(m) => {
                if let Some(Value::Array(rules)) = m.get("x-kubernetes-validations") {
                    for r in rules {
                        let text = r["rule"].as_str().unwrap();
                        cel::Program::compile(text).unwrap_or_else(|e| panic!("{text}: {e}"));
                        let message = r["message"].as_str().unwrap();
                        assert!(!message.is_empty());
                        *count += 1;
                    }
                }
                m.values().for_each(|v| walk(v, count));
            }
            Value::Array(a) => a.iter().for_each(|v| walk(v, count)),
            _ => {}
        }
    }
    let mut count = 0;
    walk(&ec2nodeclass_schema(), &mut count);
    assert!(count >= 50, "only {count} CEL rules");
}

#[test]
fn valid_objects_pass_the_schema() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/seed-manifests/04-nodepool-ec2nodeclass-v1.yaml");
    let seed = read_documents(&path)
        .unwrap()
        .into_iter()
        .find(|d| d.kind() == "EC2NodeClass")
        .unwrap();
    for value in [seed.value, base()] {
        let v = violations(&value, None);
        assert!(v.is_empty(), "{v:?}");
    }
}

#[test]
fn schema_and_rust_reject_each_invalid_object_alike() {
    let mut failures = Vec::new();
    for (what, changes, _, message) in cases() {
        let value = apply(&changes);
        let schema: Vec<Violation> = violations(&value, None);
        let schema_messages: Vec<&str> = schema
            .iter()
            .filter(|v| !v.eval_error)
            .map(|v| v.message.as_str())
            .collect();
        let mut rust: Vec<String> = validate::ec2nodeclass(&parse(&value))
            .into_iter()
            .map(|e| e.reason)
            .collect();
        let mut from_schema: Vec<String> = schema_messages.iter().map(|m| m.to_string()).collect();
        rust.sort();
        rust.dedup();
        from_schema.sort();
        from_schema.dedup();
        if !from_schema.iter().any(|m| m == message) {
            failures.push(format!(
                "{what}: schema does not say {message:?}; it says {schema:?}"
            ));
        } else if rust != from_schema {
            failures.push(format!(
                "{what}: rust says {rust:?}, schema says {from_schema:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn transition_rules_need_the_old_object() {
    let old = base();
    let mut new = base();
    new["spec"]["role"] = json!("OtherRole");
    let v = violations(&new, Some(&old));
    assert_eq!(
        v.iter()
            .map(|v| (v.path.as_str(), v.message.as_str()))
            .collect::<Vec<_>>(),
        [("spec.role", "immutable field changed")]
    );
    assert!(violations(&new, None).is_empty());
    let mut profile = base();
    profile["spec"].as_object_mut().unwrap().remove("role");
    profile["spec"]["instanceProfile"] = json!("p");
    let v = violations(&profile, Some(&old));
    assert!(
        v.iter().any(|v| v.path == "spec"
            && v.message
                .starts_with("changing from 'instanceProfile' to 'role'")),
        "{v:?}"
    );
}

#[test]
fn metadata_options_default_to_the_v1_values() {
    let s = ec2nodeclass_schema();
    let m = &s["properties"]["spec"]["properties"]["metadataOptions"];
    assert_eq!(
        m["default"],
        json!({"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": 1, "httpTokens": "required"})
    );
    assert_eq!(m["properties"]["httpPutResponseHopLimit"]["default"], 1);
    let kubelet = &s["properties"]["spec"]["properties"]["kubelet"];
    assert_eq!(kubelet["x-kubernetes-preserve-unknown-fields"], true);
    assert_eq!(
        s["properties"]["spec"]["required"],
        json!([
            "amiSelectorTerms",
            "securityGroupSelectorTerms",
            "subnetSelectorTerms"
        ])
    );
}

#[test]
fn printer_columns_show_ready_age_and_role() {
    let cols = ec2nodeclass_printer_columns();
    let names: Vec<&str> = cols
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Ready", "Age", "Role"]);
    assert_eq!(cols[2]["priority"], 1);
    assert_eq!(
        cols[0]["jsonPath"],
        ".status.conditions[?(@.type==\"Ready\")].status"
    );
}
