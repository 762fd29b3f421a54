//! The schema half of `check_structural`: one schema node at a time, as the API server's
//! structural-schema and CRD validation judge it.

use serde_json::Value;

use super::{At, Checker, RULE_COST_LIMIT};
use crate::error::Path;
use crate::schema_check::cel_env::{mentions_old_self, parse};
use crate::schema_check::keyword::{
    additional_schema, flag, get, has_type, properties, strings, text, type_of,
};
use crate::schema_check::rule_check::analyse;
use crate::schema_check::rules::join_field_path;
use crate::schema_check::validate::validate_value;

const TYPES: &[&str] = &["object", "array", "string", "integer", "number", "boolean"];
const FORBIDDEN: &[&str] = &[
    "$ref",
    "$schema",
    "id",
    "definitions",
    "dependencies",
    "patternProperties",
    "additionalItems",
];
const RULE_REASONS: &[&str] = &[
    "FieldValueInvalid",
    "FieldValueForbidden",
    "FieldValueRequired",
    "FieldValueDuplicate",
];

impl Checker {
    pub(super) fn node(&mut self, s: &Value, path: &str, at: At) {
        let Some(map) = s.as_object() else {
            self.err(path, "must be a schema object");
            return;
        };
        for key in FORBIDDEN {
            if map.contains_key(*key) {
                self.err(
                    &format!("{path}.{key}"),
                    "Forbidden: not allowed in structural schemas",
                );
            }
        }
        if flag(s, "uniqueItems") {
            self.err(&format!("{path}.uniqueItems"), "Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic");
        }
        let int_or_string = flag(s, "x-kubernetes-int-or-string");
        let preserve = flag(s, "x-kubernetes-preserve-unknown-fields");
        if map
            .get("x-kubernetes-preserve-unknown-fields")
            .is_some_and(|v| v != &Value::Bool(true))
        {
            self.err(
                &format!("{path}.x-kubernetes-preserve-unknown-fields"),
                "must be true or undefined",
            );
        }
        let ty = text(s, "type");
        self.types(s, path, at, ty, int_or_string, preserve);
        if at.in_junctor {
            for key in [
                "description",
                "default",
                "additionalProperties",
                "nullable",
                "x-kubernetes-validations",
            ] {
                if map.contains_key(key) {
                    self.err(
                        &format!("{path}.{key}"),
                        "Forbidden: must not be used inside anyOf, allOf, oneOf or not",
                    );
                }
            }
        }
        if properties(s).is_some() && map.contains_key("additionalProperties") {
            self.err(
                &format!("{path}.additionalProperties"),
                "Forbidden: additionalProperties and properties are mutual exclusive",
            );
        }
        if get(s, "additionalProperties") == Some(&Value::Bool(false)) {
            self.err(
                &format!("{path}.additionalProperties"),
                "Forbidden: additionalProperties cannot be set to false",
            );
        }
        if properties(s).is_some() && ty.is_some_and(|t| t != "object") {
            self.err(
                &format!("{path}.properties"),
                format!(
                    "Forbidden: properties may only be set for type object, not {}",
                    ty.unwrap_or("")
                ),
            );
        }
        if let Some(items) = get(s, "items")
            && !items.is_object()
        {
            self.err(
                &format!("{path}.items"),
                "must be a single schema (tuples are not supported)",
            );
        }
        if at.root {
            self.root(s, path);
        }
        self.required(s, path, preserve);
        self.enumeration(s, path, ty, int_or_string);
        if let Some(pattern) = text(s, "pattern")
            && let Err(e) = crate::schema_check::re2::compile(pattern)
        {
            self.err(
                &format!("{path}.pattern"),
                format!("Invalid value: {pattern:?}: does not compile: {e}"),
            );
        }
        self.lists(s, path, ty);
        if let Some(mt) = text(s, "x-kubernetes-map-type")
            && (!matches!(mt, "granular" | "atomic") || ty != Some("object"))
        {
            self.err(
                &format!("{path}.x-kubernetes-map-type"),
                "must be granular or atomic, on type object",
            );
        }
        if flag(s, "x-kubernetes-embedded-resource") && ty != Some("object") {
            self.err(
                &format!("{path}.type"),
                "must be object if x-kubernetes-embedded-resource is true",
            );
        }
        self.default_value(s, path, at);
        self.rules(s, path, at);
        self.children(s, path, at, int_or_string);
    }

    fn types(
        &mut self,
        s: &Value,
        path: &str,
        at: At,
        ty: Option<&str>,
        int_or_string: bool,
        preserve: bool,
    ) {
        match ty {
            Some(t) if !TYPES.contains(&t) => {
                self.err(&format!("{path}.type"), format!("Unsupported value: {t:?}"))
            }
            Some(_) if at.in_junctor && !at.int_or_string_parent => self.err(
                &format!("{path}.type"),
                "Forbidden: must be empty inside anyOf, allOf, oneOf or not",
            ),
            Some(_) if int_or_string => self.err(
                &format!("{path}.type"),
                "Forbidden: must be empty if x-kubernetes-int-or-string is true",
            ),
            None if !at.in_junctor && !int_or_string && !preserve => self.err(
                &format!("{path}.type"),
                "Required value: must not be empty for specified fields",
            ),
            _ => {}
        }
        if ty == Some("array") && get(s, "items").is_none() {
            self.err(
                &format!("{path}.items"),
                "Required value: must be specified for type array",
            );
        }
        if int_or_string {
            for junctor in ["anyOf", "allOf"] {
                if let Some(branches) = get(s, junctor) {
                    let expected = serde_json::json!([{"type": "integer"}, {"type": "string"}]);
                    if branches != &expected {
                        self.err(&format!("{path}.{junctor}"), "must be [{type: integer}, {type: string}] with x-kubernetes-int-or-string");
                    }
                }
            }
        }
    }

    fn root(&mut self, s: &Value, path: &str) {
        if text(s, "type") != Some("object") {
            self.err(
                &format!("{path}.type"),
                "Invalid value: must be object at the root",
            );
        }
        if let Some(meta) = properties(s).and_then(|p| p.get("metadata")) {
            let allowed = meta.as_object().is_some_and(|m| {
                m.keys().all(|k| k == "type" || k == "properties")
                    && properties(meta)
                        .is_none_or(|p| p.keys().all(|k| k == "name" || k == "generateName"))
            });
            if !allowed {
                self.err(
                    &format!("{path}.properties[metadata]"),
                    "Forbidden: must not specify anything other than name and generateName",
                );
            }
        }
    }

    fn required(&mut self, s: &Value, path: &str, preserve: bool) {
        let Some(props) = properties(s) else { return };
        if preserve || additional_schema(s).is_some() {
            return;
        }
        for name in strings(s, "required") {
            if !props.contains_key(name) {
                self.err(
                    &format!("{path}.required"),
                    format!("Invalid value: {name:?}: not a declared property"),
                );
            }
        }
    }

    fn enumeration(&mut self, s: &Value, path: &str, ty: Option<&str>, int_or_string: bool) {
        let Some(values) = get(s, "enum").and_then(Value::as_array) else {
            return;
        };
        for (i, v) in values.iter().enumerate() {
            let fits = match (v, ty) {
                (Value::Null, _) => flag(s, "nullable"),
                (_, Some(t)) => has_type(t, v),
                (_, None) if int_or_string => matches!(type_of(v), "integer" | "string"),
                _ => true,
            };
            if !fits {
                self.err(
                    &format!("{path}.enum[{i}]"),
                    format!(
                        "Invalid value: {v}: must be of type {}",
                        ty.unwrap_or("integer or string")
                    ),
                );
            }
        }
    }

    fn lists(&mut self, s: &Value, path: &str, ty: Option<&str>) {
        let list_type = text(s, "x-kubernetes-list-type");
        let keys = get(s, "x-kubernetes-list-map-keys");
        if let Some(lt) = list_type {
            if ty != Some("array") {
                self.err(
                    &format!("{path}.x-kubernetes-list-type"),
                    "must only be used on type array",
                );
            }
            if !matches!(lt, "atomic" | "set" | "map") {
                self.err(
                    &format!("{path}.x-kubernetes-list-type"),
                    format!(
                        "Unsupported value: {lt:?}: supported values: \"atomic\", \"set\", \"map\""
                    ),
                );
            }
        }
        let items = get(s, "items").unwrap_or(&Value::Null);
        if list_type == Some("set")
            && matches!(text(items, "type"), Some("object" | "array"))
            && text(items, "x-kubernetes-map-type") != Some("atomic")
            && text(items, "x-kubernetes-list-type") != Some("atomic")
        {
            self.err(
                &format!("{path}.items"),
                "Invalid value: set lists must have scalar or atomic items",
            );
        }
        if keys.is_some() && list_type != Some("map") {
            self.err(
                &format!("{path}.x-kubernetes-list-map-keys"),
                "Forbidden: only allowed with x-kubernetes-list-type map",
            );
        }
        if list_type != Some("map") {
            return;
        }
        if text(items, "type") != Some("object") {
            self.err(
                &format!("{path}.items.type"),
                "Invalid value: map lists must have object items",
            );
        }
        let key_names = strings(s, "x-kubernetes-list-map-keys");
        if key_names.is_empty() {
            self.err(
                &format!("{path}.x-kubernetes-list-map-keys"),
                "Required value: must not be empty if x-kubernetes-list-type is map",
            );
        }
        let required = strings(items, "required");
        for (i, key) in key_names.iter().enumerate() {
            if key_names[..i].contains(key) {
                self.err(
                    &format!("{path}.x-kubernetes-list-map-keys[{i}]"),
                    format!("Duplicate value: {key:?}"),
                );
            }
            match properties(items).and_then(|p| p.get(*key)) {
                None => self.err(
                    &format!("{path}.x-kubernetes-list-map-keys[{i}]"),
                    format!("Invalid value: {key:?}: entries must all be names of item properties"),
                ),
                Some(prop) => {
                    if matches!(text(prop, "type"), Some("object" | "array") | None) {
                        self.err(
                            &format!("{path}.items.properties[{key}].type"),
                            "must be a scalar type if this field is a map-key",
                        );
                    }
                    if !required.contains(key) && get(prop, "default").is_none() {
                        self.err(
                            &format!("{path}.items.properties[{key}]"),
                            "Invalid value: map keys must be required or have a default value",
                        );
                    }
                }
            }
        }
    }

    fn default_value(&mut self, s: &Value, path: &str, at: At) {
        let Some(default) = get(s, "default") else {
            return;
        };
        if at.root {
            self.err(
                &format!("{path}.default"),
                "Forbidden: must not be set at the root",
            );
            return;
        }
        if default.is_null() && !flag(s, "nullable") {
            self.err(
                &format!("{path}.default"),
                "Invalid value: null: must not be null for a non-nullable field",
            );
            return;
        }
        for e in validate_value(s, default) {
            let at_field = if e.path.is_empty() {
                format!("{path}.default")
            } else {
                format!("{path}.default.{}", e.path)
            };
            self.err(&at_field, &e.reason);
        }
    }

    fn rules(&mut self, s: &Value, path: &str, at: At) {
        let Some(list) = get(s, "x-kubernetes-validations") else {
            return;
        };
        let Some(list) = list.as_array() else {
            self.err(
                &format!("{path}.x-kubernetes-validations"),
                "must be a list",
            );
            return;
        };
        for (i, rule) in list.iter().enumerate() {
            let p = format!("{path}.x-kubernetes-validations[{i}]");
            let Some(source) = text(rule, "rule").filter(|r| !r.trim().is_empty()) else {
                self.err(&format!("{p}.rule"), "Required value");
                continue;
            };
            let transition = mentions_old_self(source);
            if transition && !at.correlatable {
                self.err(&format!("{p}.rule"), "Forbidden: oldSelf cannot be used on the uncorrelatable portion of the schema within items of lists that are not x-kubernetes-list-type map");
            }
            if flag(rule, "optionalOldSelf") && !transition {
                self.err(
                    &format!("{p}.optionalOldSelf"),
                    "Forbidden: may not be set if the rule does not use oldSelf",
                );
            }
            if let Some(message) = text(rule, "message")
                && message.contains(['\n', '\r'])
            {
                self.err(
                    &format!("{p}.message"),
                    "Invalid value: message must not contain line breaks",
                );
            }
            if let Some(reason) = text(rule, "reason")
                && !RULE_REASONS.contains(&reason)
            {
                self.err(
                    &format!("{p}.reason"),
                    format!("Unsupported value: {reason:?}"),
                );
            }
            if let Some(field_path) = text(rule, "fieldPath") {
                let target = join_field_path(&Path::default(), field_path);
                if !field_path.starts_with(['.', '[']) || !declares(s, target.as_str()) {
                    self.err(
                        &format!("{p}.fieldPath"),
                        format!(
                            "Invalid value: {field_path:?}: does not refer to a declared field"
                        ),
                    );
                }
            }
            if let Some(expr) = text(rule, "messageExpression")
                && let Err(e) = parse(expr)
            {
                self.err(
                    &format!("{p}.messageExpression"),
                    format!("Invalid value: compilation failed: {e}"),
                );
            }
            match parse(source) {
                Err(e) => self.err(
                    &format!("{p}.rule"),
                    format!("Invalid value: compilation failed: {e}"),
                ),
                Ok(expr) => {
                    let facts = analyse(&expr, s, at.root);
                    for e in facts.errors {
                        self.err(
                            &format!("{p}.rule"),
                            format!("Invalid value: compilation failed: {e}"),
                        );
                    }
                    for f in facts.unevaluable {
                        self.err(
                            &format!("{p}.rule"),
                            format!(
                                "{}: calls {f}, which is not available offline",
                                crate::schema_check::RULE_NOT_EVALUATED
                            ),
                        );
                    }
                    if facts.cost > RULE_COST_LIMIT {
                        self.err(
                            &format!("{p}.rule"),
                            format!(
                                "Forbidden: estimated rule cost exceeds budget by factor of {:.1}x (try adding maxLength, maxItems, or maxProperties)",
                                facts.cost / RULE_COST_LIMIT
                            ),
                        );
                    }
                    self.schema_cost += facts.cost * at.cardinality;
                }
            }
        }
    }

    fn children(&mut self, s: &Value, path: &str, at: At, int_or_string: bool) {
        let child = At {
            root: false,
            int_or_string_parent: false,
            ..at
        };
        if let Some(props) = properties(s) {
            for (name, prop) in props {
                self.node(prop, &format!("{path}.properties[{name}]"), child);
            }
        }
        if let Some(values) = additional_schema(s) {
            let many = At {
                cardinality: at.cardinality * crate::schema_check::rule_check::max_size(s),
                ..child
            };
            self.node(values, &format!("{path}.additionalProperties"), many);
        }
        if let Some(items) = get(s, "items").filter(|i| i.is_object()) {
            let map_list = text(s, "x-kubernetes-list-type") == Some("map");
            let many = At {
                cardinality: at.cardinality * crate::schema_check::rule_check::max_size(s),
                correlatable: at.correlatable && map_list,
                ..child
            };
            self.node(items, &format!("{path}.items"), many);
        }
        for junctor in ["anyOf", "allOf", "oneOf"] {
            if let Some(branches) = get(s, junctor).and_then(Value::as_array) {
                for (i, b) in branches.iter().enumerate() {
                    let inner = At {
                        in_junctor: true,
                        int_or_string_parent: int_or_string,
                        ..child
                    };
                    self.junctor_branch(s, b, &format!("{path}.{junctor}[{i}]"));
                    self.node(b, &format!("{path}.{junctor}[{i}]"), inner);
                }
            }
        }
        if let Some(not) = get(s, "not") {
            self.junctor_branch(s, not, &format!("{path}.not"));
            self.node(
                not,
                &format!("{path}.not"),
                At {
                    in_junctor: true,
                    ..child
                },
            );
        }
    }

    /// Fields and items named inside a junctor must also be specified outside it.
    fn junctor_branch(&mut self, outer: &Value, branch: &Value, path: &str) {
        if let Some(props) = properties(branch) {
            for name in props.keys() {
                if properties(outer).is_none_or(|p| !p.contains_key(name)) {
                    self.err(
                        &format!("{path}.properties[{name}]"),
                        "Required value: must be specified outside of the junctor as well",
                    );
                }
            }
        }
        if get(branch, "items").is_some() && get(outer, "items").is_none() {
            self.err(
                &format!("{path}.items"),
                "Required value: must be specified outside of the junctor as well",
            );
        }
    }
}

/// Whether a dotted path (`a.b[key]`) names fields declared under `schema`.
fn declares(schema: &Value, path: &str) -> bool {
    let mut node = schema;
    let normalised = path.replace('[', ".[");
    for part in normalised.split('.').filter(|p| !p.is_empty()) {
        if part.starts_with('[') {
            if let Some(items) = get(node, "items") {
                node = items;
            } else if let Some(values) = additional_schema(node) {
                node = values;
            } else {
                return false;
            }
        } else if let Some(p) = properties(node).and_then(|p| p.get(part)) {
            node = p;
        } else {
            return false;
        }
    }
    true
}
