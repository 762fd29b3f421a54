//! Defaulting as the API server does it before validation: missing properties take their
//! `default`, and `null` in a non-nullable property is replaced by its default or dropped.
//! Defaults are applied top-down, so a defaulted object gets its own nested defaults too.

use serde_json::Value;

use super::keyword::{additional_schema, flag, get, properties};

pub(crate) fn apply(schema: &Value, value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(props) = properties(schema) {
                for (name, prop) in props {
                    let default = get(prop, "default");
                    match map.get(name) {
                        None => {
                            if let Some(d) = default {
                                map.insert(name.clone(), d.clone());
                            }
                        }
                        Some(Value::Null) if !flag(prop, "nullable") => match default {
                            Some(d) => {
                                map.insert(name.clone(), d.clone());
                            }
                            None => {
                                map.shift_remove(name);
                            }
                        },
                        Some(_) => {}
                    }
                    if let Some(child) = map.get_mut(name) {
                        apply(prop, child);
                    }
                }
            }
            if let Some(values) = additional_schema(schema) {
                let declared = properties(schema);
                let is_extra = |k: &String| declared.is_none_or(|p| !p.contains_key(k));
                if !flag(values, "nullable") {
                    map.retain(|k, v| !(v.is_null() && is_extra(k)));
                }
                for (k, v) in map.iter_mut() {
                    if is_extra(k) {
                        apply(values, v);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = get(schema, "items") {
                for item in items {
                    apply(item_schema, item);
                }
            }
        }
        _ => {}
    }
}
