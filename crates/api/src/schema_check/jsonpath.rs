//! Printer-column JSONPaths (`.status.conditions[?(@.type=="Ready")].status`): syntax, and
//! whether the fields they name are declared in the schema.

use serde_json::Value;

use super::keyword::{additional_schema, flag, get, properties, text};

#[derive(Debug, PartialEq)]
pub(crate) enum Step {
    Field(String),
    /// `[n]`, `[*]`, slices and filters: any element of a list.
    Element,
    /// `..name`: anywhere below; schema checks stop here.
    Descend,
}

/// Parses the simple JSONPath dialect `kubectl` accepts in printer columns.
pub(crate) fn parse(path: &str) -> Result<Vec<Step>, String> {
    if !path.starts_with('.') {
        return Err("must start with '.'".into());
    }
    if path.contains(['{', '}']) {
        return Err("must not contain '{' or '}'".into());
    }
    let chars: Vec<char> = path.chars().collect();
    let mut steps = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '.' => {
                if chars.get(i + 1) == Some(&'.') {
                    steps.push(Step::Descend);
                    i += 1;
                }
                i += 1;
                let start = i;
                let mut name = String::new();
                while i < chars.len() {
                    let c = chars[i];
                    // `\.` keeps a dot inside a name, as in `.metadata.labels.karpenter\.sh/nodepool`.
                    if c == '\\' && chars.get(i + 1) == Some(&'.') {
                        name.push('.');
                        i += 2;
                    } else if c.is_alphanumeric() || matches!(c, '_' | '-' | '*' | '/') {
                        name.push(c);
                        i += 1;
                    } else {
                        break;
                    }
                }
                if start == i {
                    if i == chars.len() && steps.is_empty() && path == "." {
                        return Ok(steps);
                    }
                    return Err(format!("expected a field name at offset {start}"));
                }
                steps.push(if name == "*" {
                    Step::Element
                } else {
                    Step::Field(name)
                });
            }
            '[' => {
                let close =
                    bracket_end(&chars, i).ok_or_else(|| format!("unclosed '[' at offset {i}"))?;
                let inner: String = chars[i + 1..close].iter().collect();
                steps.push(bracket(inner.trim())?);
                i = close + 1;
            }
            c => return Err(format!("unexpected '{c}' at offset {i}")),
        }
    }
    Ok(steps)
}

/// The index of the `]` closing the `[` at `open`, skipping quoted text and nested brackets.
fn bracket_end(chars: &[char], open: usize) -> Option<usize> {
    let mut depth = 0;
    let mut quote = None;
    for (j, &c) in chars.iter().enumerate().skip(open) {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '[') => depth += 1,
            (None, ']') => {
                depth -= 1;
                if depth == 0 {
                    return Some(j);
                }
            }
            _ => {}
        }
    }
    None
}

fn bracket(inner: &str) -> Result<Step, String> {
    let index = regex::Regex::new(r"^(\*|-?\d+|-?\d*:-?\d*(:-?\d+)?)$").expect("valid index regex");
    let quoted = regex::Regex::new(r#"^('[^']*'|"[^"]*")$"#).expect("valid name regex");
    let filter = regex::Regex::new(
        r#"^\?\(\s*@(\.[A-Za-z0-9_\-/]+)+\s*((==|!=|<=|>=|<|>)\s*("[^"]*"|'[^']*'|-?\d+(\.\d+)?|true|false))?\s*\)$"#,
    )
    .expect("valid filter regex");
    if index.is_match(inner) || filter.is_match(inner) {
        Ok(Step::Element)
    } else if quoted.is_match(inner) {
        Ok(Step::Field(inner[1..inner.len() - 1].to_string()))
    } else {
        Err(format!("unsupported subscript [{inner}]"))
    }
}

/// The first field the path names that the schema does not declare, if any. Paths into the
/// root's `metadata` are the server's business and always accepted.
pub(crate) fn undeclared(schema: &Value, steps: &[Step]) -> Option<String> {
    if matches!(steps.first(), Some(Step::Field(f)) if f == "metadata") {
        return None;
    }
    let mut node = schema;
    for step in steps {
        if flag(node, "x-kubernetes-preserve-unknown-fields") && properties(node).is_none() {
            return None;
        }
        match step {
            Step::Descend => return None,
            Step::Element => match get(node, "items") {
                Some(items) => node = items,
                None if text(node, "type") == Some("array") => return None,
                None => return Some("[]".into()),
            },
            Step::Field(name) => {
                if let Some(p) = properties(node).and_then(|p| p.get(name)) {
                    node = p;
                } else if let Some(values) = additional_schema(node) {
                    node = values;
                } else {
                    return Some(name.clone());
                }
            }
        }
    }
    None
}
