//! Checks an object against a CRD's OpenAPI v3 schema the way the API server does before CEL:
//! types, required fields, enums, patterns, lengths, bounds, list sets, and defaults (applied
//! first, so a missing field with a default is not an error). Fields the schema does not know
//! are reported as warnings, because the API server drops them.
//!
//! Running the very schema we publish keeps the offline check and the CRDs in agreement.

use std::collections::BTreeMap;
use std::sync::Mutex;

use regex::Regex;
use serde_json::Value;

use crate::error::{FieldError, Path};

#[derive(Debug, Default)]
pub struct Outcome {
    pub errors: Vec<FieldError>,
    pub warnings: Vec<FieldError>,
}

/// Checks `value` against `schema`, applying defaults to `value` in place.
pub fn check(schema: &Value, value: &mut Value) -> Outcome {
    let mut out = Outcome::default();
    walk(schema, value, &Path::default(), &mut out);
    out
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_ok(expected: &str, v: &Value) -> bool {
    match expected {
        "number" => v.is_number(),
        "integer" => type_name(v) == "integer",
        other => type_name(v) == other,
    }
}

/// Compiled patterns, shared across calls (schemas reuse the same few dozen).
fn regex(pattern: &str) -> Option<Regex> {
    static CACHE: Mutex<BTreeMap<String, Option<Regex>>> = Mutex::new(BTreeMap::new());
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    cache
        .entry(pattern.to_string())
        .or_insert_with(|| Regex::new(pattern).ok())
        .clone()
}

fn quoted(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

fn walk(schema: &Value, value: &mut Value, path: &Path, out: &mut Outcome) {
    let Some(s) = schema.as_object() else { return };
    let int_or_string = s.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true);
    if int_or_string {
        if !matches!(type_name(value), "integer" | "string") {
            out.errors.push(path.error(format!(
                "must be an integer or a string, got {}",
                type_name(value)
            )));
            return;
        }
    } else if let Some(t) = s.get("type").and_then(Value::as_str)
        && !type_ok(t, value)
    {
        out.errors
            .push(path.error(format!("must be of type {t}, got {}", type_name(value))));
        return;
    }
    if let Some(allowed) = s.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let list: Vec<String> = allowed.iter().map(quoted).collect();
        out.errors.push(path.error(format!(
            "unsupported value {}: supported values: {}",
            quoted(value),
            list.join(", ")
        )));
    }
    match value {
        Value::String(text) => check_string(s, text, path, out),
        Value::Number(n) => check_number(s, n, path, out),
        Value::Array(items) => check_array(s, items, path, out),
        Value::Object(_) => check_object(s, value, path, out),
        _ => {}
    }
}

fn check_string(s: &serde_json::Map<String, Value>, text: &str, path: &Path, out: &mut Outcome) {
    let len = text.chars().count() as u64;
    if let Some(max) = s.get("maxLength").and_then(Value::as_u64)
        && len > max
    {
        out.errors
            .push(path.error(format!("may not be longer than {max} characters")));
    }
    if let Some(min) = s.get("minLength").and_then(Value::as_u64)
        && len < min
    {
        out.errors
            .push(path.error(format!("must be at least {min} characters long")));
    }
    if let Some(p) = s.get("pattern").and_then(Value::as_str)
        && let Some(re) = regex(p)
        && !re.is_match(text)
    {
        out.errors
            .push(path.error(format!("invalid value {text:?}: must match '{p}'")));
    }
}

fn check_number(
    s: &serde_json::Map<String, Value>,
    n: &serde_json::Number,
    path: &Path,
    out: &mut Outcome,
) {
    let v = n.as_f64().unwrap_or(0.0);
    if let Some(min) = s.get("minimum").and_then(Value::as_f64)
        && v < min
    {
        out.errors
            .push(path.error(format!("must be greater than or equal to {min}")));
    }
    if let Some(max) = s.get("maximum").and_then(Value::as_f64)
        && v > max
    {
        out.errors
            .push(path.error(format!("must be less than or equal to {max}")));
    }
    if s.get("format").and_then(Value::as_str) == Some("int32")
        && n.as_i64().is_none_or(|i| i32::try_from(i).is_err())
    {
        out.errors.push(path.error("must fit in a 32-bit integer"));
    }
}

fn check_array(
    s: &serde_json::Map<String, Value>,
    items: &mut [Value],
    path: &Path,
    out: &mut Outcome,
) {
    if let Some(max) = s.get("maxItems").and_then(Value::as_u64)
        && items.len() as u64 > max
    {
        out.errors
            .push(path.error(format!("must have at most {max} items")));
    }
    if let Some(min) = s.get("minItems").and_then(Value::as_u64)
        && (items.len() as u64) < min
    {
        out.errors
            .push(path.error(format!("must have at least {min} items")));
    }
    if s.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("set") {
        for (i, item) in items.iter().enumerate() {
            if items[..i].contains(item) {
                out.errors.push(
                    path.index(i)
                        .error(format!("duplicate value {}", quoted(item))),
                );
            }
        }
    }
    if let Some(item_schema) = s.get("items") {
        for (i, item) in items.iter_mut().enumerate() {
            walk(item_schema, item, &path.index(i), out);
        }
    }
}

fn check_object(
    s: &serde_json::Map<String, Value>,
    value: &mut Value,
    path: &Path,
    out: &mut Outcome,
) {
    let Some(obj) = value.as_object_mut() else {
        return;
    };
    let props = s.get("properties").and_then(Value::as_object);
    // The API server treats null like an absent field (and then defaults it).
    obj.retain(|_, v| !v.is_null());
    if let Some(props) = props {
        for (name, prop) in props {
            if !obj.contains_key(name)
                && let Some(d) = prop.get("default")
            {
                obj.insert(name.clone(), d.clone());
            }
        }
    }
    if let Some(max) = s.get("maxProperties").and_then(Value::as_u64)
        && obj.len() as u64 > max
    {
        out.errors
            .push(path.error(format!("must have at most {max} properties")));
    }
    if let Some(req) = s.get("required").and_then(Value::as_array) {
        for name in req.iter().filter_map(Value::as_str) {
            if !obj.contains_key(name) {
                out.errors
                    .push(path.field(name).error("required field is missing"));
            }
        }
    }
    let additional = s.get("additionalProperties");
    let preserve = s
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true);
    for (name, child) in obj.iter_mut() {
        if let Some(p) = props.and_then(|p| p.get(name)) {
            walk(p, child, &path.field(name), out);
        } else if let Some(a) = additional.filter(|a| a.is_object()) {
            walk(a, child, &path.key(name), out);
        } else if !preserve && props.is_some() {
            out.warnings.push(
                path.field(name)
                    .error("unknown field, the API server drops it"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema;
    use serde_json::json;

    #[test]
    fn defaults_types_and_unknown_fields() {
        let s = schema::object()
            .prop("a", schema::string().default(json!("x")))
            .prop("n", schema::int32().minimum(1).maximum(100))
            .prop("e", schema::string().enumerate(&["A", "B"]))
            .prop("set", schema::array(schema::string()).list_type("set"))
            .required(&["a", "n"])
            .into_value();
        let mut v = json!({"n": 101, "e": "C", "zz": 1, "set": ["q", "q"]});
        let out = check(&s, &mut v);
        assert_eq!(v["a"], "x");
        let errs: Vec<String> = out.errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(
            errs,
            [
                "n: must be less than or equal to 100",
                "e: unsupported value \"C\": supported values: \"A\", \"B\"",
                "set[1]: duplicate value \"q\"",
            ]
        );
        assert_eq!(
            out.warnings[0].to_string(),
            "zz: unknown field, the API server drops it"
        );
        let mut v = json!({"n": "1"});
        assert_eq!(
            check(&s, &mut v).errors[0].to_string(),
            "n: must be of type integer, got string"
        );
    }
}
