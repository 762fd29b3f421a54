//! The CRDs: the committed chart files are current, and every schema is one a Kubernetes 1.30+
//! API server accepts: structural (a type on every node, junctors only for int-or-string),
//! defaults that pass their own schema, list types with valid items and keys, patterns that
//! compile, and CEL rules that parse, each with a message.

mod common;

use nodewright_api::crd;
use nodewright_api::validation::structural;
use serde_json::{Map, Value};

#[test]
fn committed_chart_crds_are_current() {
    let dir = common::repo_root().join("charts/nodewright/crds");
    for (name, value) in crd::all() {
        let path = dir.join(name);
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            on_disk == crd::to_yaml(&value),
            "{} is stale; regenerate with `cargo run -p nodewright-cli -- crds --output-dir charts/nodewright/crds`",
            path.display()
        );
    }
    let files = std::fs::read_dir(&dir).unwrap().count();
    assert_eq!(
        files,
        crd::all().len(),
        "unexpected files in {}",
        dir.display()
    );
}

#[test]
fn printed_stream_has_every_crd() {
    let docs = nodewright_api::document::parse_documents("crds", &crd::all_yaml()).unwrap();
    let names: Vec<&str> = docs.iter().map(|d| d.name()).collect();
    assert_eq!(
        names,
        [
            "nodepools.karpenter.sh",
            "nodeclaims.karpenter.sh",
            "ec2nodeclasses.karpenter.k8s.aws"
        ]
    );
    for d in &docs {
        assert_eq!(d.api_version(), "apiextensions.k8s.io/v1");
        let versions = d.value["spec"]["versions"].as_array().unwrap();
        assert_eq!(versions.len(), 1, "only v1 is served");
        assert_eq!(versions[0]["name"], "v1");
        assert_eq!(versions[0]["storage"], true);
        assert_eq!(d.value["spec"]["scope"], "Cluster");
        assert_eq!(
            d.value["spec"]["names"]["categories"],
            serde_json::json!(["karpenter"])
        );
    }
    let np = &docs[0].value["spec"];
    assert_eq!(
        np["versions"][0]["subresources"]["scale"]["specReplicasPath"],
        ".spec.replicas"
    );
    assert_eq!(
        np["versions"][0]["subresources"]["scale"]["statusReplicasPath"],
        ".status.nodes"
    );
    assert_eq!(
        docs[2].value["spec"]["names"]["shortNames"],
        serde_json::json!(["ec2nc", "ec2ncs"])
    );
}

const KNOWN_KEYS: &[&str] = &[
    "type",
    "description",
    "properties",
    "additionalProperties",
    "items",
    "required",
    "enum",
    "pattern",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "format",
    "default",
    "anyOf",
    "allOf",
    "oneOf",
    "not",
    "nullable",
    "x-kubernetes-validations",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-map-type",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "uniqueItems",
    "x-kubernetes-embedded-resource",
];

fn is_int_or_string_any_of(v: &Value) -> bool {
    v == &serde_json::json!([{"type": "integer"}, {"type": "string"}])
}

/// Checks one schema node and everything under it; problems are pushed with their location.
fn check_node(s: &Map<String, Value>, at: &str, problems: &mut Vec<String>) {
    for k in s.keys() {
        if !KNOWN_KEYS.contains(&k.as_str()) {
            problems.push(format!("{at}: unknown schema keyword {k}"));
        }
    }
    let int_or_string = s.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    let preserve = s.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    let ty = s.get("type").and_then(Value::as_str);
    if ty.is_none() && !int_or_string && !preserve {
        problems.push(format!("{at}: no type (not structural)"));
    }
    for j in ["anyOf", "allOf", "oneOf", "not"] {
        if let Some(v) = s.get(j)
            && !(j == "anyOf" && int_or_string && is_int_or_string_any_of(v))
        {
            problems.push(format!("{at}: {j} is only used for int-or-string here"));
        }
    }
    if s.contains_key("properties") && s.contains_key("additionalProperties") {
        problems.push(format!(
            "{at}: properties and additionalProperties together"
        ));
    }
    if let Some(p) = s.get("pattern").and_then(Value::as_str)
        && regex::Regex::new(p).is_err()
    {
        problems.push(format!("{at}: pattern does not compile: {p}"));
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array)
        && ty == Some("string")
        && !e.iter().all(Value::is_string)
    {
        problems.push(format!("{at}: enum values are not strings"));
    }
    if let Some(d) = s.get("default") {
        let mut v = d.clone();
        let out = structural::check(&Value::Object(s.clone()), &mut v);
        if !out.errors.is_empty() {
            problems.push(format!(
                "{at}: default {d} fails its schema: {:?}",
                out.errors
            ));
        }
    }
    if let Some(rules) = s.get("x-kubernetes-validations").and_then(Value::as_array) {
        for r in rules {
            let rule = r["rule"].as_str().unwrap_or("");
            let message = r["message"].as_str().unwrap_or("");
            if message.is_empty() {
                problems.push(format!("{at}: rule without message: {rule}"));
            }
            if let Err(e) = cel::Program::compile(rule) {
                problems.push(format!("{at}: CEL does not parse: {rule}: {e}"));
            }
        }
    }
    match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
        None | Some("atomic") => {}
        Some("set") => {
            let item_type = s["items"]["type"].as_str();
            if !matches!(item_type, Some("string" | "integer" | "number" | "boolean")) {
                problems.push(format!("{at}: set items must be scalars"));
            }
        }
        Some("map") => {
            let keys = s
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array);
            let required = s["items"]["required"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            match keys {
                Some(keys) if !keys.is_empty() => {
                    for k in keys {
                        let has_default = s["items"]["properties"][k.as_str().unwrap_or("")]
                            .get("default")
                            .is_some();
                        if !required.contains(k) && !has_default {
                            problems.push(format!(
                                "{at}: map key {k} is neither required nor defaulted"
                            ));
                        }
                    }
                }
                _ => problems.push(format!("{at}: list-type map without keys")),
            }
        }
        Some(other) => problems.push(format!("{at}: unknown list type {other}")),
    }
    if let Some(props) = s.get("properties").and_then(Value::as_object) {
        for (name, p) in props {
            match p.as_object() {
                Some(p) => check_node(p, &format!("{at}.{name}"), problems),
                None => problems.push(format!("{at}.{name}: not a schema")),
            }
        }
    }
    if let Some(a) = s.get("additionalProperties").and_then(Value::as_object) {
        check_node(a, &format!("{at}[*]"), problems);
    }
    if let Some(i) = s.get("items").and_then(Value::as_object) {
        check_node(i, &format!("{at}[]"), problems);
    }
}

#[test]
fn schemas_are_structural_with_valid_rules() {
    let mut problems = Vec::new();
    for (name, value) in crd::all() {
        let schema = &value["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        check_node(schema.as_object().unwrap(), name, &mut problems);
        let meta = &schema["properties"]["metadata"];
        assert_eq!(
            meta,
            &serde_json::json!({"type": "object"}),
            "{name}: metadata is left to the server"
        );
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_checker_finds_broken_schemas() {
    let broken = serde_json::json!({
        "type": "object",
        "properties": {
            "a": {"description": "no type"},
            "b": {"type": "string", "x-kubernetes-validations": [{"rule": "self.size( > 1", "message": "m"}]},
            "c": {"type": "string", "pattern": "(", "default": 1}
        }
    });
    let mut problems = Vec::new();
    check_node(broken.as_object().unwrap(), "t", &mut problems);
    assert_eq!(problems.len(), 4, "{problems:?}");
}

#[test]
fn cel_messages_match_the_rust_rules() {
    use nodewright_api::crd::shared::{MSG_IN_NEEDS_VALUES, MSG_MIN_VALUES, MSG_NUMERIC_OPERATOR};
    let text = crd::all_yaml();
    for m in [MSG_IN_NEEDS_VALUES, MSG_MIN_VALUES, MSG_NUMERIC_OPERATOR] {
        assert!(text.contains(m), "{m}");
    }
    assert!(
        text.contains("label domain \\\"karpenter.sh\\\" is restricted")
            || text.contains("label domain \"karpenter.sh\" is restricted")
    );
}
