//! The `v1beta1` schemas the CRDs serve beside `v1`, stated as edits of the v1 schemas: the
//! two versions share most of their shape, and what differs is exactly what
//! [`crate::versions`] converts. Objects are stored as v1; these schemas judge what clients
//! send as v1beta1 and shape what they read back.
//!
//! Karpenter v0.37's v1beta1 rules that v1 dropped are not restated: `consolidateAfter` is
//! accepted with either policy (it converts to v1 unchanged). Fields v1 gained after v1.0
//! (capacity reservations, placement groups, network interfaces, SSM parameter AMI terms, ...)
//! stay in the v1beta1 schemas, so they pass through a v1beta1 client unchanged.

use serde_json::{Map, Value, json};

use super::shared::NILLABLE_DURATION_PATTERN;

/// The properties of the object schema at `path` (property names from the root).
fn props<'a>(schema: &'a mut Value, path: &[&str]) -> &'a mut Map<String, Value> {
    let mut here = schema;
    for key in path {
        here = &mut here["properties"][*key];
        if here["type"] == "array" {
            here = &mut here["items"];
        }
    }
    if !here["properties"].is_object() {
        here["properties"] = json!({});
    }
    here["properties"]
        .as_object_mut()
        .expect("just made an object")
}

fn node(schema: &Value, path: &[&str]) -> Map<String, Value> {
    let mut here = schema;
    for key in path {
        here = &here["properties"][*key];
        if here["type"] == "array" {
            here = &here["items"];
        }
    }
    here.as_object().cloned().unwrap_or_default()
}

fn set(schema: &mut Value, path: &[&str], key: &str, value: Value) {
    let (last, parent) = path.split_last().expect("a path");
    let mut target = props(schema, parent)
        .remove(*last)
        .unwrap_or_else(|| json!({}));
    target[key] = value;
    props(schema, parent).insert(last.to_string(), target);
}

fn remove_key(schema: &mut Value, path: &[&str], key: &str) {
    let (last, parent) = path.split_last().expect("a path");
    if let Some(Value::Object(m)) = props(schema, parent).get_mut(*last) {
        m.remove(key);
    }
}

/// Drops the CEL rules at `path` whose text mentions `word`.
fn drop_rules(schema: &mut Value, path: &[&str], word: &str) {
    let mut here = &mut *schema;
    for key in path {
        here = &mut here["properties"][*key];
        if here["type"] == "array" && !here["items"].is_null() && key != path.last().unwrap() {
            here = &mut here["items"];
        }
    }
    if let Some(Value::Array(rules)) = here.get_mut("x-kubernetes-validations") {
        rules.retain(|r| !r["rule"].as_str().unwrap_or("").contains(word));
        if rules.is_empty()
            && let Some(m) = here.as_object_mut()
        {
            m.remove("x-kubernetes-validations");
        }
    }
}

/// `{apiVersion, kind, name}`, name required, as v1beta1 wrote the node class reference.
fn node_class_ref() -> Value {
    json!({
        "type": "object",
        "description": "The provider node class (for AWS, an EC2NodeClass) nodes are launched with.",
        "properties": {
            "apiVersion": {"type": "string", "description": "API version of the referent"},
            "kind": {"type": "string", "description": "Kind of the referent"},
            "name": {"type": "string", "description": "Name of the referent"},
        },
        "required": ["name"],
    })
}

fn resources() -> Value {
    json!({"type": "object", "description": "Accepted and unused (v1 has no such field).",
           "x-kubernetes-preserve-unknown-fields": true})
}

/// The v1beta1 NodePool schema. `kubelet` is the EC2NodeClass's kubelet schema, which is where
/// those settings live in v1.
pub fn nodepool(v1: &Value, kubelet: &Value) -> Value {
    let mut s = v1.clone();
    let tmpl = ["spec", "template", "spec"];
    let t = props(&mut s, &tmpl);
    t.remove("expireAfter");
    t.remove("terminationGracePeriod");
    t.insert("nodeClassRef".into(), node_class_ref());
    t.insert("kubelet".into(), kubelet.clone());
    t.insert("resources".into(), resources());
    let spec = props(&mut s, &["spec"]);
    spec.remove("replicas");
    drop_rules(&mut s, &["spec"], "replicas");
    let d = props(&mut s, &["spec", "disruption"]);
    d.insert(
        "expireAfter".into(),
        json!({"type": "string", "pattern": NILLABLE_DURATION_PATTERN, "default": "720h",
               "description": "How long a node lives before it is replaced; `Never` disables expiry."}),
    );
    d.insert(
        "consolidationPolicy".into(),
        json!({"type": "string", "enum": ["WhenEmpty", "WhenUnderutilized"], "default": "WhenUnderutilized",
               "description": "Which nodes consolidation may remove or replace."}),
    );
    remove_key(&mut s, &["spec", "disruption"], "required");
    set(
        &mut s,
        &["spec", "disruption"],
        "default",
        json!({"consolidationPolicy": "WhenUnderutilized", "expireAfter": "720h"}),
    );
    props(&mut s, &["spec", "disruption", "budgets"]).remove("reasons");
    s
}

/// The v1beta1 NodeClaim schema.
pub fn nodeclaim(v1: &Value, kubelet: &Value) -> Value {
    let mut s = v1.clone();
    let spec = props(&mut s, &["spec"]);
    spec.remove("expireAfter");
    spec.remove("terminationGracePeriod");
    spec.insert("nodeClassRef".into(), node_class_ref());
    spec.insert("kubelet".into(), kubelet.clone());
    s
}

/// The v1beta1 EC2NodeClass schema: no `kubelet`, no AMI `alias`, the `Ubuntu` family,
/// `amiSelectorTerms` optional, and a metadata hop limit of 2 by default.
pub fn ec2nodeclass(v1: &Value) -> Value {
    let mut s = v1.clone();
    let spec = props(&mut s, &["spec"]);
    spec.remove("kubelet");
    if let Some(Value::Array(families)) = spec.get_mut("amiFamily").and_then(|f| f.get_mut("enum"))
    {
        families.push(json!("Ubuntu"));
    }
    if let Some(Value::Array(required)) = s["properties"]["spec"].get_mut("required") {
        required.retain(|r| r != "amiSelectorTerms");
    }
    drop_rules(&mut s, &["spec"], "amiSelectorTerms");
    props(&mut s, &["spec", "amiSelectorTerms"]).remove("alias");
    drop_rules(&mut s, &["spec", "amiSelectorTerms"], "alias");
    remove_key(&mut s, &["spec", "amiSelectorTerms"], "minItems");
    let hop = ["spec", "metadataOptions", "httpPutResponseHopLimit"];
    set(
        &mut s,
        &hop,
        "default",
        json!(crate::aws::v1beta1::DEFAULT_HOP_LIMIT),
    );
    let mo = ["spec", "metadataOptions"];
    let mut default = node(&s, &mo).get("default").cloned().unwrap_or_default();
    default["httpPutResponseHopLimit"] = json!(crate::aws::v1beta1::DEFAULT_HOP_LIMIT);
    set(&mut s, &mo, "default", default);
    s
}
