//! The CEL part of object validation: every `x-kubernetes-validations` rule evaluated with
//! `self` bound to its node, and `oldSelf` to the same node of the old object on update.
//!
//! Transition rules (those naming `oldSelf`) run only where an old value correlates (see
//! `correlate`). Rules are not run on `null` values, and, on update, rules without `oldSelf`
//! are not run on values the update did not change (ratcheting, on by default since 1.30).

use std::collections::HashMap;

use serde_json::Value as Json;

use super::RULE_NOT_EVALUATED;
use super::cel_env::{Compiled, Outcome, mentions_old_self, optional, to_cel};
use super::correlate;
use super::keyword::{additional_schema, get, properties, text};
use crate::error::{FieldError, Path};

#[derive(Default)]
pub(crate) struct Rules {
    pub(crate) errors: Vec<FieldError>,
    compiled: HashMap<String, Compiled>,
}

impl Rules {
    pub(crate) fn node(&mut self, schema: &Json, value: &Json, old: Option<&Json>, path: &Path) {
        if value.is_null() {
            return;
        }
        if let Some(list) = get(schema, "x-kubernetes-validations").and_then(Json::as_array) {
            let this = to_cel(Some(schema), value);
            let old_cel = old
                .filter(|o| !o.is_null())
                .map(|o| to_cel(Some(schema), o));
            // Ratcheting: rules without oldSelf are not re-run on a value the update left alone.
            let unchanged = old == Some(value);
            for rule in list {
                self.rule(rule, &this, old_cel.as_ref(), path, unchanged);
            }
        }
        match value {
            Json::Object(map) => {
                let props = properties(schema);
                for (key, child) in map {
                    let old_child = correlate::entry(old, key);
                    if let Some(prop) = props.and_then(|p| p.get(key)) {
                        self.node(prop, child, old_child, &path.field(key));
                    } else if let Some(values) = additional_schema(schema) {
                        self.node(values, child, old_child, &path.key(key));
                    }
                }
            }
            Json::Array(items) => {
                let Some(item_schema) = get(schema, "items") else {
                    return;
                };
                for (i, item) in items.iter().enumerate() {
                    let old_item = correlate::list_item(schema, item, old);
                    self.node(item_schema, item, old_item, &path.index(i));
                }
            }
            _ => {}
        }
    }

    fn rule(
        &mut self,
        rule: &Json,
        this: &cel::Value,
        old: Option<&cel::Value>,
        path: &Path,
        unchanged: bool,
    ) {
        let Some(source) = text(rule, "rule") else {
            self.errors.push(path.error(format!(
                "{RULE_NOT_EVALUATED}: validation without a rule: {rule}"
            )));
            return;
        };
        let transition = mentions_old_self(source);
        if unchanged && !transition {
            return;
        }
        let old_binding = if transition {
            if get(rule, "optionalOldSelf").and_then(Json::as_bool) == Some(true) {
                match optional(old) {
                    Ok(v) => Some(v),
                    Err(e) => {
                        self.errors.push(path.error(format!(
                            "{RULE_NOT_EVALUATED}: {source}: optional oldSelf: {e}"
                        )));
                        return;
                    }
                }
            } else if let Some(old) = old {
                Some(old.clone())
            } else {
                // A transition rule has nothing to compare with on create.
                return;
            }
        } else {
            None
        };
        let compiled = self
            .compiled
            .entry(source.to_string())
            .or_insert_with(|| Compiled::new(source));
        match compiled.check(this, old_binding.as_ref()) {
            Outcome::Pass => {}
            Outcome::Fail => {
                let message = self.message(rule, source, this, old_binding.as_ref());
                let at = match text(rule, "fieldPath") {
                    Some(relative) => join_field_path(path, relative),
                    None => path.clone(),
                };
                self.errors.push(at.error(message));
            }
            Outcome::Unevaluated(e) => {
                self.errors
                    .push(path.error(format!("{RULE_NOT_EVALUATED}: {source}: {e}")));
            }
        }
    }

    /// `messageExpression` when it evaluates to a non-empty string, else `message`, else the
    /// server's default text.
    fn message(
        &mut self,
        rule: &Json,
        source: &str,
        this: &cel::Value,
        old: Option<&cel::Value>,
    ) -> String {
        if let Some(expr) = text(rule, "messageExpression") {
            let compiled = self
                .compiled
                .entry(expr.to_string())
                .or_insert_with(|| Compiled::new(expr));
            if let Ok(cel::Value::String(s)) = compiled.eval(this, old)
                && !s.trim().is_empty()
            {
                return s.to_string();
            }
        }
        match text(rule, "message") {
            Some(m) if !m.is_empty() => m.to_string(),
            _ => format!("failed rule: {source}"),
        }
    }
}

/// Appends a rule's `fieldPath` (`.spec.x`, `.map['key']`, `.list[2]`) to `path`.
pub(crate) fn join_field_path(path: &Path, relative: &str) -> Path {
    let mut out = path.clone();
    let mut rest = relative;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            out = out.field(&r[..end]);
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']').unwrap_or(r.len());
            let inner = &r[..end];
            let quoted = inner.trim_matches(|c| c == '\'' || c == '"');
            out = match inner.parse::<usize>() {
                Ok(i) if quoted == inner => out.index(i),
                _ => out.key(quoted),
            };
            rest = r.get(end + 1..).unwrap_or("");
        } else {
            let end = rest.find(['.', '[']).unwrap_or(rest.len());
            out = out.field(&rest[..end]);
            rest = &rest[end..];
        }
    }
    out
}
