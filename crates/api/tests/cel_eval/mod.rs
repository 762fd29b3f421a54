//! Evaluates the `x-kubernetes-validations` CEL rules of our CRD schemas on an object, the way
//! the API server does (after defaulting), so tests can check that the CEL rules and the Rust
//! rules reject the same objects with the same messages.

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::Arc;

use cel::extractors::This;
use cel::{Context, Program, Value as Cel};
use serde_json::Value;

use nodewright_api::validation::structural;

fn to_cel(v: &Value) -> Cel {
    match v {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Cel::Int(i),
            None => Cel::Float(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => Cel::String(Arc::new(s.clone())),
        Value::Array(a) => Cel::List(Arc::new(a.iter().map(to_cel).collect())),
        Value::Object(o) => {
            let m: HashMap<String, Cel> = o.iter().map(|(k, v)| (k.clone(), to_cel(v))).collect();
            Cel::from(m)
        }
    }
}

/// Kubernetes' `string.find(regex)`: the first match, or the empty string.
fn find(This(this): This<Arc<String>>, re: Arc<String>) -> String {
    regex::Regex::new(&re)
        .ok()
        .and_then(|re| re.find(&this).map(|m| m.as_str().to_string()))
        .unwrap_or_default()
}

/// One rule's verdict: `Err(message)` when it rejects (or fails to evaluate, which the API
/// server also treats as a rejection).
fn eval(rule: &str, message: &str, self_: &Value, old: Option<&Value>) -> Result<(), String> {
    let program = Program::compile(rule).map_err(|e| format!("compile {rule}: {e}"))?;
    let mut ctx = Context::default();
    ctx.add_function("find", find).expect("find registers");
    ctx.add_variable_from_value("self", to_cel(self_));
    if let Some(o) = old {
        ctx.add_variable_from_value("oldSelf", to_cel(o));
    }
    match program.execute(&ctx) {
        Ok(Cel::Bool(true)) => Ok(()),
        Ok(_) => Err(message.to_string()),
        Err(_) => Err(message.to_string()),
    }
}

/// Every CEL failure on `value` (defaulted first), as `(path, message)`. With `old`, transition
/// rules (those naming `oldSelf`) run where the old object has the same node.
pub fn failures(schema: &Value, value: &Value, old: Option<&Value>) -> Vec<(String, String)> {
    let mut v = value.clone();
    structural::check(schema, &mut v);
    let old = old.map(|o| {
        let mut o = o.clone();
        structural::check(schema, &mut o);
        o
    });
    let mut out = Vec::new();
    walk(schema, &v, old.as_ref(), "", &mut out);
    out
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

fn walk(
    schema: &Value,
    v: &Value,
    old: Option<&Value>,
    path: &str,
    out: &mut Vec<(String, String)>,
) {
    if let Some(rules) = schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
    {
        for r in rules {
            let rule = r["rule"].as_str().unwrap_or_default();
            let message = r["message"].as_str().unwrap_or_default();
            let transition = rule.contains("oldSelf");
            if transition && old.is_none() {
                continue;
            }
            if let Err(m) = eval(rule, message, v, if transition { old } else { None }) {
                out.push((path.to_string(), m));
            }
        }
    }
    match v {
        Value::Object(o) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties");
            for (k, child) in o {
                let child_old = old.and_then(|o| o.get(k));
                if let Some(p) = props.and_then(|p| p.get(k)) {
                    walk(p, child, child_old, &join(path, k), out);
                } else if let Some(a) = additional.filter(|a| a.is_object()) {
                    walk(a, child, child_old, &format!("{path}[{k}]"), out);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                // Items of atomic lists are not correlated with old items.
                for (i, item) in items.iter().enumerate() {
                    walk(item_schema, item, None, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}
