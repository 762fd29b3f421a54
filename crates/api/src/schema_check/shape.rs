//! The OpenAPI part of object validation: types, required fields, enums, patterns, bounds,
//! formats, list uniqueness and fields the schema does not declare.

use std::collections::HashMap;

use serde_json::Value;

use super::correlate;
use super::keyword::{count, flag, get, has_type, number, properties, strings, text, type_of};
use crate::error::{FieldError, Path};

/// Collects shape errors; `type_error` records whether any was a type mismatch, which (as in
/// the API server) stops the CEL rules from running.
#[derive(Default)]
pub(crate) struct Shape {
    pub(crate) errors: Vec<FieldError>,
    pub(crate) type_error: bool,
    /// Inside an `anyOf`/`oneOf`/`allOf`/`not` branch: branches only constrain values.
    in_branch: bool,
    patterns: HashMap<String, Result<regex::Regex, String>>,
}

impl Shape {
    fn push(&mut self, path: &Path, reason: impl Into<String>) {
        self.errors.push(path.error(reason));
    }

    /// Validates `value` at `path`; `root` enables the special handling of the object root
    /// (`apiVersion`, `kind` and `metadata` belong to the server, not to the schema).
    pub(crate) fn node(
        &mut self,
        schema: &Value,
        value: &Value,
        old: Option<&Value>,
        path: &Path,
        root: bool,
    ) {
        // Ratcheting: what an update leaves unchanged is not validated again.
        if old == Some(value) {
            return;
        }
        if value.is_null() {
            let untyped_ok =
                get(schema, "type").is_none() && !flag(schema, "x-kubernetes-int-or-string");
            if !(flag(schema, "nullable") || self.in_branch && untyped_ok) {
                let want = text(schema, "type").unwrap_or("a non-null value");
                self.type_mismatch(path, want, value);
            }
            return;
        }
        if flag(schema, "x-kubernetes-int-or-string")
            && !matches!(type_of(value), "integer" | "string")
        {
            self.type_mismatch(path, "integer or string", value);
            return;
        }
        if let Some(t) = text(schema, "type")
            && !has_type(t, value)
        {
            self.type_mismatch(path, t, value);
            return;
        }
        self.enumeration(schema, value, path);
        match value {
            Value::String(s) => self.string(schema, s, path),
            Value::Number(_) => self.number(schema, value, path),
            Value::Array(items) => self.array(schema, items, old, path),
            Value::Object(map) => self.object(schema, map, old, path, root),
            _ => {}
        }
        self.combinators(schema, value, path);
    }

    fn type_mismatch(&mut self, path: &Path, want: &str, value: &Value) {
        if !self.in_branch {
            self.type_error = true;
        }
        self.push(
            path,
            format!("must be of type {want}, got {}", type_of(value)),
        );
    }

    fn enumeration(&mut self, schema: &Value, value: &Value, path: &Path) {
        let Some(allowed) = get(schema, "enum").and_then(Value::as_array) else {
            return;
        };
        if !allowed.contains(value) {
            let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
            self.push(
                path,
                format!(
                    "Unsupported value: {value}: supported values: {}",
                    list.join(", ")
                ),
            );
        }
    }

    fn string(&mut self, schema: &Value, s: &str, path: &Path) {
        let len = s.chars().count() as u64;
        if let Some(max) = count(schema, "maxLength")
            && len > max
        {
            self.push(path, format!("Too long: may not be longer than {max}"));
        }
        if let Some(min) = count(schema, "minLength")
            && len < min
        {
            self.push(path, format!("should be at least {min} chars long"));
        }
        if let Some(pattern) = text(schema, "pattern") {
            let compiled = self
                .patterns
                .entry(pattern.to_string())
                .or_insert_with(|| super::re2::compile(pattern).map_err(|e| e.to_string()));
            match compiled {
                Ok(re) if re.is_match(s) => {}
                Ok(_) => self.push(
                    path,
                    format!("Invalid value: {:?}: should match '{pattern}'", s),
                ),
                Err(e) => {
                    let msg = format!("pattern '{pattern}' does not compile: {e}");
                    self.push(path, msg)
                }
            }
        }
        match text(schema, "format") {
            Some("date-time") if !is_date_time(s) => self.push(
                path,
                format!("Invalid value: {s:?}: must be a date-time (RFC 3339)"),
            ),
            Some("date") if !is_date(s) => self.push(
                path,
                format!("Invalid value: {s:?}: must be a date (YYYY-MM-DD)"),
            ),
            _ => {}
        }
    }

    fn number(&mut self, schema: &Value, value: &Value, path: &Path) {
        let Some(n) = value.as_f64() else { return };
        if let Some(min) = number(schema, "minimum") {
            if flag(schema, "exclusiveMinimum") && n <= min {
                self.push(
                    path,
                    format!("Invalid value: {value}: should be greater than {min}"),
                );
            } else if n < min {
                self.push(
                    path,
                    format!("Invalid value: {value}: should be greater than or equal to {min}"),
                );
            }
        }
        if let Some(max) = number(schema, "maximum") {
            if flag(schema, "exclusiveMaximum") && n >= max {
                self.push(
                    path,
                    format!("Invalid value: {value}: should be less than {max}"),
                );
            } else if n > max {
                self.push(
                    path,
                    format!("Invalid value: {value}: should be less than or equal to {max}"),
                );
            }
        }
        if let Some(step) = number(schema, "multipleOf")
            && step > 0.0
            && (n / step).fract() != 0.0
        {
            self.push(
                path,
                format!("Invalid value: {value}: should be a multiple of {step}"),
            );
        }
    }

    fn array(&mut self, schema: &Value, items: &[Value], old: Option<&Value>, path: &Path) {
        let n = items.len() as u64;
        if let Some(max) = count(schema, "maxItems")
            && n > max
        {
            self.push(
                path,
                format!("Too many: {n}: must have at most {max} items"),
            );
        }
        if let Some(min) = count(schema, "minItems")
            && n < min
        {
            self.push(path, format!("should have at least {min} items"));
        }
        match text(schema, "x-kubernetes-list-type") {
            Some("set") => {
                for (i, item) in items.iter().enumerate() {
                    if items[..i].contains(item) {
                        self.push(&path.index(i), format!("Duplicate value: {item}"));
                    }
                }
            }
            Some("map") => {
                let keys = strings(schema, "x-kubernetes-list-map-keys");
                let key_of = |item: &Value| {
                    keys.iter()
                        .map(|k| get(item, k).cloned())
                        .collect::<Vec<_>>()
                };
                for (i, item) in items.iter().enumerate() {
                    let key = key_of(item);
                    if items[..i].iter().any(|earlier| key_of(earlier) == key) {
                        let shown: Vec<String> = keys
                            .iter()
                            .zip(&key)
                            .map(|(k, v)| {
                                format!(
                                    "{k}={}",
                                    v.as_ref().map_or("<none>".into(), Value::to_string)
                                )
                            })
                            .collect();
                        self.push(
                            &path.index(i),
                            format!("Duplicate value: {{{}}}", shown.join(", ")),
                        );
                    }
                }
            }
            _ => {}
        }
        if let Some(item_schema) = get(schema, "items") {
            for (i, item) in items.iter().enumerate() {
                self.node(
                    item_schema,
                    item,
                    correlate::list_item(schema, item, old),
                    &path.index(i),
                    false,
                );
            }
        }
    }

    fn object(
        &mut self,
        schema: &Value,
        map: &serde_json::Map<String, Value>,
        old: Option<&Value>,
        path: &Path,
        root: bool,
    ) {
        if root_metadata(path, root) {
            return;
        }
        let n = map.len() as u64;
        if let Some(max) = count(schema, "maxProperties")
            && n > max
        {
            self.push(
                path,
                format!("Too many: {n}: must have at most {max} properties"),
            );
        }
        if let Some(min) = count(schema, "minProperties")
            && n < min
        {
            self.push(path, format!("should have at least {min} properties"));
        }
        for name in strings(schema, "required") {
            if !map.contains_key(name) {
                self.push(&path.field(name), "Required value");
            }
        }
        let props = properties(schema);
        let additional = get(schema, "additionalProperties");
        let open = self.in_branch
            || flag(schema, "x-kubernetes-preserve-unknown-fields")
            || additional.is_some_and(|a| a.as_bool() == Some(true));
        let embedded = flag(schema, "x-kubernetes-embedded-resource");
        for (key, child) in map {
            if let Some(prop) = props.and_then(|p| p.get(key)) {
                self.node(
                    prop,
                    child,
                    correlate::entry(old, key),
                    &path.field(key),
                    false,
                );
            } else if let Some(values) = additional.filter(|a| a.is_object()) {
                self.node(
                    values,
                    child,
                    correlate::entry(old, key),
                    &path.key(key),
                    false,
                );
            } else if !open
                && !((root || embedded)
                    && matches!(key.as_str(), "apiVersion" | "kind" | "metadata"))
            {
                self.push(&path.field(key), "field not declared in schema");
            }
        }
    }

    /// `anyOf`, `oneOf`, `allOf` and `not`: value constraints checked in isolation.
    fn combinators(&mut self, schema: &Value, value: &Value, path: &Path) {
        let branch_errors = |me: &mut Shape, branch: &Value| {
            let mut sub = Shape {
                in_branch: true,
                ..Shape::default()
            };
            sub.patterns = std::mem::take(&mut me.patterns);
            sub.node(branch, value, None, path, false);
            me.patterns = std::mem::take(&mut sub.patterns);
            sub.errors
        };
        if let Some(all) = get(schema, "allOf").and_then(Value::as_array) {
            for branch in all {
                let errs = branch_errors(self, branch);
                self.errors.extend(errs);
            }
        }
        if let Some(any) = get(schema, "anyOf").and_then(Value::as_array)
            && !any.is_empty()
            && any.iter().all(|b| !branch_errors(self, b).is_empty())
        {
            self.push(path, "must validate at least one schema (anyOf)");
        }
        if let Some(one) = get(schema, "oneOf").and_then(Value::as_array) {
            let passing = one
                .iter()
                .filter(|b| branch_errors(self, b).is_empty())
                .count();
            if !one.is_empty() && passing != 1 {
                self.push(path, "must validate one and only one schema (oneOf)");
            }
        }
        if let Some(not) = get(schema, "not")
            && branch_errors(self, not).is_empty()
        {
            self.push(path, "must not validate the schema (not)");
        }
    }
}

/// The root's `metadata` is validated by the server as ObjectMeta, not by the CRD schema.
fn root_metadata(path: &Path, root: bool) -> bool {
    !root && path.as_str() == "metadata"
}

fn is_date(s: &str) -> bool {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| {
        regex::Regex::new(r"^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$")
            .expect("valid date regex")
    })
    .is_match(s)
}

fn is_date_time(s: &str) -> bool {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| {
        regex::Regex::new(
            r"^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[Tt]([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$",
        )
        .expect("valid date-time regex")
    })
    .is_match(s)
}
