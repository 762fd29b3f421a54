//! Invalid EC2NodeClasses: one per validation rule, each the valid base with a few fields
//! changed.

use serde_json::{Value, json};

use super::Case;
use crate::json::with;
use crate::valid::ec2nodeclass;

mod identity;
mod launch;
mod selectors;

use identity::identity_rows;
use launch::launch_rows;
use selectors::selector_rows;

/// Every EC2NodeClass case.
pub fn ec2nodeclass_cases() -> Vec<Case> {
    rows()
        .into_iter()
        .map(|r| Case::new(r.name, r.object, r.printed.unwrap_or(vec![r.rule])))
        .collect()
}

/// For each EC2NodeClass case, by name, an error the EC2NodeClass rules
/// (`nodewright_api::aws::validate::ec2nodeclass`) report when run on their own, as
/// `path: reason`. `validate` runs the CRD schema first and drops a rule's error at a path the
/// schema already rejected, so where the two word a check differently (`should match` against
/// `must match`, say) only the schema's wording is printed; this keeps the rules' own wording
/// tested.
pub fn ec2nodeclass_rule_errors() -> Vec<(String, String)> {
    rows()
        .into_iter()
        .map(|r| (r.name.to_string(), r.rule))
        .collect()
}

/// One case: the base with `changes` applied, the rules' own error, and what `validate` prints
/// when that is not just the rules' error.
struct Row {
    name: &'static str,
    object: Value,
    rule: String,
    printed: Option<Vec<String>>,
}

/// A case `validate` reports with just the rules' error.
fn row(name: &'static str, changes: Vec<(&str, Value)>, path: &str, reason: &str) -> Row {
    Row {
        name,
        object: with(ec2nodeclass(), &changes),
        rule: format!("{path}: {reason}"),
        printed: None,
    }
}

/// A case `validate` reports with `printed`: the schema's wording, or more errors.
fn row_printing(
    name: &'static str,
    changes: Vec<(&str, Value)>,
    path: &str,
    reason: &str,
    printed: &[&str],
) -> Row {
    Row {
        printed: Some(printed.iter().map(|e| e.to_string()).collect()),
        ..row(name, changes, path, reason)
    }
}

fn many(n: usize, item: Value) -> Value {
    Value::Array(vec![item; n])
}

fn tags(n: usize) -> Value {
    Value::Object((0..n).map(|i| (format!("k{i}"), json!("v"))).collect())
}

fn rows() -> Vec<Row> {
    let mut rows = identity_rows();
    rows.extend(selector_rows());
    rows.extend(launch_rows());
    rows
}
