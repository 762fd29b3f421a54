//! A small builder for OpenAPI v3 structural schemas with Kubernetes extensions
//! (`x-kubernetes-validations`, list types, int-or-string, preserved unknown fields).
//!
//! CRDs are written with it so every rule upstream puts in its schemas is stated once, in
//! Rust, next to the offline validation that must agree with it.

use serde_json::{Map, Value, json};

#[derive(Clone, Debug, PartialEq)]
pub struct Schema(Map<String, Value>);

fn typed(t: &str) -> Schema {
    let mut m = Map::new();
    m.insert("type".into(), Value::String(t.into()));
    Schema(m)
}

pub fn object() -> Schema {
    typed("object")
}

pub fn string() -> Schema {
    typed("string")
}

pub fn boolean() -> Schema {
    typed("boolean")
}

pub fn number() -> Schema {
    typed("number")
}

pub fn integer() -> Schema {
    typed("integer")
}

pub fn int32() -> Schema {
    typed("integer").set("format", json!("int32"))
}

pub fn int64() -> Schema {
    typed("integer").set("format", json!("int64"))
}

pub fn array(items: Schema) -> Schema {
    typed("array").set("items", items.into_value())
}

/// An object with arbitrary keys whose values follow `values`.
pub fn map_of(values: Schema) -> Schema {
    object().set("additionalProperties", values.into_value())
}

/// A Kubernetes resource quantity (`"500m"`, `2`, `"1Gi"`).
pub fn quantity() -> Schema {
    Schema(Map::new())
        .set("anyOf", json!([{"type": "integer"}, {"type": "string"}]))
        .set(
            "pattern",
            json!(
                r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
            ),
        )
        .set("x-kubernetes-int-or-string", json!(true))
}

impl Schema {
    /// Sets any schema keyword.
    pub fn set(mut self, key: &str, value: Value) -> Schema {
        self.0.insert(key.to_string(), value);
        self
    }

    pub fn description(self, d: &str) -> Schema {
        self.set("description", json!(d))
    }

    /// Adds a property to an object schema.
    pub fn prop(mut self, name: &str, schema: Schema) -> Schema {
        let props = self
            .0
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()))
            .as_object_mut()
            .expect("properties is an object");
        props.insert(name.to_string(), schema.into_value());
        self
    }

    pub fn required(self, names: &[&str]) -> Schema {
        self.set("required", json!(names))
    }

    pub fn default(self, v: Value) -> Schema {
        self.set("default", v)
    }

    pub fn enumerate(self, values: &[&str]) -> Schema {
        self.set("enum", json!(values))
    }

    pub fn pattern(self, p: &str) -> Schema {
        self.set("pattern", json!(p))
    }

    pub fn min_length(self, n: u64) -> Schema {
        self.set("minLength", json!(n))
    }

    pub fn max_length(self, n: u64) -> Schema {
        self.set("maxLength", json!(n))
    }

    pub fn minimum(self, n: i64) -> Schema {
        self.set("minimum", json!(n))
    }

    pub fn maximum(self, n: i64) -> Schema {
        self.set("maximum", json!(n))
    }

    pub fn min_items(self, n: u64) -> Schema {
        self.set("minItems", json!(n))
    }

    pub fn max_items(self, n: u64) -> Schema {
        self.set("maxItems", json!(n))
    }

    pub fn max_properties(self, n: u64) -> Schema {
        self.set("maxProperties", json!(n))
    }

    pub fn format(self, f: &str) -> Schema {
        self.set("format", json!(f))
    }

    /// `x-kubernetes-list-type` (`atomic`, `set` or `map`).
    pub fn list_type(self, t: &str) -> Schema {
        self.set("x-kubernetes-list-type", json!(t))
    }

    /// `x-kubernetes-list-map-keys`, for `list_type("map")`.
    pub fn list_map_keys(self, keys: &[&str]) -> Schema {
        self.set("x-kubernetes-list-map-keys", json!(keys))
    }

    pub fn preserve_unknown_fields(self) -> Schema {
        self.set("x-kubernetes-preserve-unknown-fields", json!(true))
    }

    /// Adds a CEL rule with its message to `x-kubernetes-validations`.
    pub fn rule(self, cel: &str, message: &str) -> Schema {
        self.push_validation(json!({"rule": cel, "message": message}))
    }

    /// Adds a CEL rule that compares with the old object (`oldSelf`); it only runs on update.
    pub fn transition_rule(self, cel: &str, message: &str) -> Schema {
        self.rule(cel, message)
    }

    fn push_validation(mut self, v: Value) -> Schema {
        let list = self
            .0
            .entry("x-kubernetes-validations")
            .or_insert_with(|| Value::Array(vec![]))
            .as_array_mut()
            .expect("validations is a list");
        list.push(v);
        self
    }

    pub fn into_value(self) -> Value {
        Value::Object(self.0)
    }

    pub fn as_map(&self) -> &Map<String, Value> {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_nested_schema() {
        let s = object()
            .prop("name", string().min_length(1))
            .required(&["name"])
            .rule("self.name != 'x'", "name must not be x")
            .into_value();
        assert_eq!(s["properties"]["name"]["minLength"], 1);
        assert_eq!(
            s["x-kubernetes-validations"][0]["message"],
            "name must not be x"
        );
    }
}
