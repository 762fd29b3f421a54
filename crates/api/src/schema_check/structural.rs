//! `check_structural`: what an API server checks when a CustomResourceDefinition is created —
//! names, versions, printer columns, structural schemas, defaults, CEL rules and their
//! estimated cost — reported as `path: problem` strings.
//!
//! Three checks are stricter than the server, because what they catch is always a mistake in
//! a schema we write: `required` naming an undeclared property, printer-column paths naming
//! undeclared fields, and rules calling Kubernetes functions this crate cannot evaluate offline
//! (reported with the [`super::RULE_NOT_EVALUATED`] prefix). The cost estimate approximates the
//! server's (see `rule_check`); a rule near the limit may be judged differently.

use serde_json::Value;

use super::jsonpath;
use super::keyword::{flag, get, strings, text};

mod node;

/// The server's limit on one rule's estimated cost.
pub const RULE_COST_LIMIT: f64 = 10_000_000.0;
/// The server's limit on the estimated cost of all rules of one schema, each multiplied by how
/// many times it can run.
pub const SCHEMA_COST_LIMIT: f64 = 100_000_000.0;

/// Checks a CRD (`apiextensions.k8s.io/v1`) as the API server would on create. Every problem is
/// one string starting with the path of the offending field.
pub fn check_structural(crd: &Value) -> Vec<String> {
    let mut c = Checker::default();
    c.crd(crd);
    c.errors
}

#[derive(Default)]
pub(super) struct Checker {
    pub(super) errors: Vec<String>,
    pub(super) schema_cost: f64,
}

/// Where a schema node sits: what the server's rules about it depend on.
#[derive(Clone, Copy)]
pub(super) struct At {
    pub(super) root: bool,
    pub(super) in_junctor: bool,
    /// The parent is `x-kubernetes-int-or-string`, whose `anyOf` may name types.
    pub(super) int_or_string_parent: bool,
    /// Whether `oldSelf` can be correlated here (not below items of non-map lists).
    pub(super) correlatable: bool,
    /// How many times a rule here can run for one object.
    pub(super) cardinality: f64,
}

fn dns1035(s: &str) -> bool {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    s.len() <= 63
        && RE
            .get_or_init(|| regex::Regex::new(r"^[a-z]([-a-z0-9]*[a-z0-9])?$").expect("valid"))
            .is_match(s)
}

fn dns1123_subdomain(s: &str) -> bool {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    s.len() <= 253
        && RE
            .get_or_init(|| {
                regex::Regex::new(
                    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
                )
                .expect("valid")
            })
            .is_match(s)
}

impl Checker {
    pub(super) fn err(&mut self, path: &str, msg: impl AsRef<str>) {
        self.errors.push(if path.is_empty() {
            msg.as_ref().to_string()
        } else {
            format!("{path}: {}", msg.as_ref())
        });
    }

    fn crd(&mut self, crd: &Value) {
        if text(crd, "apiVersion") != Some("apiextensions.k8s.io/v1") {
            self.err("apiVersion", "must be apiextensions.k8s.io/v1");
        }
        if text(crd, "kind") != Some("CustomResourceDefinition") {
            self.err("kind", "must be CustomResourceDefinition");
        }
        let Some(spec) = get(crd, "spec").filter(|s| s.is_object()) else {
            self.err("spec", "Required value");
            return;
        };
        let group = text(spec, "group").unwrap_or("");
        if !dns1123_subdomain(group) || !group.contains('.') {
            self.err(
                "spec.group",
                format!("Invalid value: {group:?}: should be a domain with at least one dot"),
            );
        }
        let names = get(spec, "names").unwrap_or(&Value::Null);
        let plural = text(names, "plural").unwrap_or("");
        self.names(names);
        let expected = format!("{plural}.{group}");
        let name = get(crd, "metadata")
            .and_then(|m| text(m, "name"))
            .unwrap_or("");
        if name != expected {
            self.err("metadata.name", format!("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group ({expected:?})"));
        }
        match text(spec, "scope") {
            Some("Cluster" | "Namespaced") => {}
            other => self.err(
                "spec.scope",
                format!(
                    "Unsupported value: {other:?}: supported values: \"Cluster\", \"Namespaced\""
                ),
            ),
        }
        if flag(spec, "preserveUnknownFields") {
            self.err(
                "spec.preserveUnknownFields",
                "must be false in apiextensions.k8s.io/v1",
            );
        }
        self.versions(spec);
    }

    fn names(&mut self, names: &Value) {
        let plural = text(names, "plural").unwrap_or("");
        if !dns1035(plural) {
            self.err(
                "spec.names.plural",
                format!("Invalid value: {plural:?}: must be a lowercase DNS-1035 label"),
            );
        }
        if let Some(singular) = text(names, "singular")
            && !dns1035(singular)
        {
            self.err(
                "spec.names.singular",
                format!("Invalid value: {singular:?}: must be a lowercase DNS-1035 label"),
            );
        }
        let kind = text(names, "kind").unwrap_or("");
        if !dns1035(&kind.to_ascii_lowercase()) {
            self.err("spec.names.kind", format!("Invalid value: {kind:?}: may have mixed case, but should otherwise be a DNS-1035 label"));
        }
        if let Some(list_kind) = text(names, "listKind") {
            if !dns1035(&list_kind.to_ascii_lowercase()) {
                self.err("spec.names.listKind", format!("Invalid value: {list_kind:?}: may have mixed case, but should otherwise be a DNS-1035 label"));
            }
            if list_kind == kind {
                self.err("spec.names.listKind", "must not equal kind");
            }
        }
        for key in ["shortNames", "categories"] {
            for (i, v) in strings(names, key).iter().enumerate() {
                if !dns1035(v) {
                    self.err(
                        &format!("spec.names.{key}[{i}]"),
                        format!("Invalid value: {v:?}: must be a lowercase DNS-1035 label"),
                    );
                }
            }
        }
    }

    fn versions(&mut self, spec: &Value) {
        let versions = get(spec, "versions")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        if versions.is_empty() {
            self.err(
                "spec.versions",
                "Required value: must have at least one version",
            );
        }
        let storage = versions.iter().filter(|v| flag(v, "storage")).count();
        if storage != 1 {
            self.err(
                "spec.versions",
                format!("must have exactly one version marked as storage version, found {storage}"),
            );
        }
        let mut seen = Vec::new();
        for (i, v) in versions.iter().enumerate() {
            let at = format!("spec.versions[{i}]");
            let name = text(v, "name").unwrap_or("");
            if !dns1035(name) {
                self.err(
                    &format!("{at}.name"),
                    format!("Invalid value: {name:?}: must be a DNS-1035 label"),
                );
            }
            if seen.contains(&name) {
                self.err(&format!("{at}.name"), format!("Duplicate value: {name:?}"));
            }
            seen.push(name);
            let schema = get(v, "schema").and_then(|s| get(s, "openAPIV3Schema"));
            match schema {
                None => self.err(
                    &format!("{at}.schema.openAPIV3Schema"),
                    "Required value: schemas are required",
                ),
                Some(schema) => {
                    self.schema_cost = 0.0;
                    let path = format!("{at}.schema.openAPIV3Schema");
                    let top = At {
                        root: true,
                        in_junctor: false,
                        int_or_string_parent: false,
                        correlatable: true,
                        cardinality: 1.0,
                    };
                    self.node(schema, &path, top);
                    if self.schema_cost > SCHEMA_COST_LIMIT {
                        self.err(
                            &path,
                            format!(
                                "Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of {:.1}x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)",
                                self.schema_cost / SCHEMA_COST_LIMIT
                            ),
                        );
                    }
                    self.columns(v, schema, &at);
                    self.subresources(v, &at);
                }
            }
        }
    }

    fn columns(&mut self, version: &Value, schema: &Value, at: &str) {
        let Some(columns) = get(version, "additionalPrinterColumns").and_then(Value::as_array)
        else {
            return;
        };
        let mut names = Vec::new();
        for (i, col) in columns.iter().enumerate() {
            let p = format!("{at}.additionalPrinterColumns[{i}]");
            let name = text(col, "name").unwrap_or("");
            if name.is_empty() {
                self.err(&format!("{p}.name"), "Required value");
            } else if names.contains(&name) {
                self.err(&format!("{p}.name"), format!("Duplicate value: {name:?}"));
            }
            names.push(name);
            match text(col, "type") {
                Some("integer" | "number" | "string" | "boolean" | "date") => {}
                other => self.err(&format!("{p}.type"), format!("Unsupported value: {other:?}: supported values: \"integer\", \"number\", \"string\", \"boolean\", \"date\"")),
            }
            if let Some(format) = text(col, "format")
                && !matches!(
                    format,
                    "int32"
                        | "int64"
                        | "float"
                        | "double"
                        | "byte"
                        | "date"
                        | "date-time"
                        | "password"
                )
            {
                self.err(
                    &format!("{p}.format"),
                    format!("Unsupported value: {format:?}"),
                );
            }
            if let Some(priority) = get(col, "priority")
                && priority.as_i64().is_none_or(|n| n < 0)
            {
                self.err(&format!("{p}.priority"), "must be a non-negative integer");
            }
            let path = text(col, "jsonPath").unwrap_or("");
            match jsonpath::parse(path) {
                Err(e) => self.err(
                    &format!("{p}.jsonPath"),
                    format!("Invalid value: {path:?}: {e}"),
                ),
                Ok(steps) => {
                    if let Some(field) = jsonpath::undeclared(schema, &steps) {
                        self.err(&format!("{p}.jsonPath"), format!("Invalid value: {path:?}: field {field:?} is not declared in the schema"));
                    }
                }
            }
        }
    }

    fn subresources(&mut self, version: &Value, at: &str) {
        let Some(sub) = get(version, "subresources") else {
            return;
        };
        if let Some(status) = get(sub, "status")
            && status.as_object().is_none_or(|m| !m.is_empty())
        {
            self.err(
                &format!("{at}.subresources.status"),
                "must be an empty object",
            );
        }
        if let Some(scale) = get(sub, "scale") {
            for (key, prefix, required) in [
                ("specReplicasPath", ".spec.", true),
                ("statusReplicasPath", ".status.", true),
                ("labelSelectorPath", ".status.", false),
            ] {
                match text(scale, key) {
                    Some(p) if p.starts_with(prefix) && jsonpath::parse(p).is_ok() => {}
                    None if !required => {}
                    other => self.err(
                        &format!("{at}.subresources.scale.{key}"),
                        format!("Invalid value: {other:?}: should be a json path under {prefix}"),
                    ),
                }
            }
        }
    }
}
