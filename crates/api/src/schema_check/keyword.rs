//! Reading schema keywords out of untyped JSON without repeating `as_object().and_then(...)`.

use serde_json::{Map, Value};

pub(crate) fn get<'a>(schema: &'a Value, key: &str) -> Option<&'a Value> {
    schema.as_object().and_then(|m| m.get(key))
}

pub(crate) fn flag(schema: &Value, key: &str) -> bool {
    get(schema, key).and_then(Value::as_bool).unwrap_or(false)
}

pub(crate) fn text<'a>(schema: &'a Value, key: &str) -> Option<&'a str> {
    get(schema, key).and_then(Value::as_str)
}

pub(crate) fn count(schema: &Value, key: &str) -> Option<u64> {
    get(schema, key).and_then(Value::as_u64)
}

pub(crate) fn number(schema: &Value, key: &str) -> Option<f64> {
    get(schema, key).and_then(Value::as_f64)
}

pub(crate) fn properties(schema: &Value) -> Option<&Map<String, Value>> {
    get(schema, "properties").and_then(Value::as_object)
}

/// `additionalProperties` when it is a schema (not `true`/`false`).
pub(crate) fn additional_schema(schema: &Value) -> Option<&Value> {
    get(schema, "additionalProperties").filter(|a| a.is_object())
}

pub(crate) fn strings<'a>(schema: &'a Value, key: &str) -> Vec<&'a str> {
    get(schema, key)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// The JSON type of a value, in OpenAPI words; integral numbers are `integer`.
pub(crate) fn type_of(v: &Value) -> &'static str {
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

/// Whether `v` has OpenAPI type `t`; every integer is also a number.
pub(crate) fn has_type(t: &str, v: &Value) -> bool {
    let actual = type_of(v);
    actual == t || (t == "number" && actual == "integer")
}
