//! Invalid Karpenter objects, one per validation rule, with the exact errors `validate` reports
//! for each (`nodewright_api::object::validate_value`: `path: reason`, in its order), and
//! updates with the errors of the update rules. Each case is a valid base from
//! [`crate::valid`] with one thing broken, so a kube-apiserver given nodewright's CRDs must
//! reject it exactly when `validate` does.
//!
//! `nodewright validate` prints these errors, prefixed with the document, except where the
//! object cannot be decoded at all (a required field of the typed object missing, a field of
//! the wrong type): there it prints only the decoding error today.

mod ec2nodeclass;
mod nodeclaim;
mod nodepool;
mod update;

use serde_json::{Value, json};

pub use ec2nodeclass::{ec2nodeclass_cases, ec2nodeclass_rule_errors};
pub use nodeclaim::nodeclaim_cases;
pub use nodepool::nodepool_cases;
pub use update::update_cases;

/// One invalid object (or update) and what is wrong with it.
#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    /// What is broken, unique within its kind.
    pub name: String,
    /// The object as written (or, for an update, the new object).
    pub object: Value,
    /// For an update, the stored object `object` replaces.
    pub old: Option<Value>,
    /// Every error, as `path: reason`, in the order they are reported. Empty for an update the
    /// rules allow.
    pub errors: Vec<String>,
}

impl Case {
    fn new(name: &str, object: Value, errors: Vec<String>) -> Case {
        Case {
            name: name.to_string(),
            object,
            old: None,
            errors,
        }
    }
}

/// A node selector requirement.
fn req(key: &str, op: &str, values: &[&str]) -> Value {
    json!({"key": key, "operator": op, "values": values})
}

/// A taint, with a value when `value` is given.
fn taint(key: &str, value: Option<&str>, effect: &str) -> Value {
    let mut t = json!({"key": key, "effect": effect});
    if let Some(v) = value {
        t["value"] = json!(v);
    }
    t
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn names_are_unique_and_every_invalid_object_has_an_error() {
        for cases in [nodepool_cases(), nodeclaim_cases(), ec2nodeclass_cases()] {
            let names: BTreeSet<&str> = cases.iter().map(|c| c.name.as_str()).collect();
            assert_eq!(names.len(), cases.len());
            for c in &cases {
                assert!(c.old.is_none(), "{}", c.name);
                assert!(!c.errors.is_empty(), "{}", c.name);
            }
        }
        let updates = update_cases();
        let names: BTreeSet<&str> = updates.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names.len(), updates.len());
        assert!(updates.iter().all(|c| c.old.is_some()));
    }

    #[test]
    fn cases_are_deterministic() {
        assert_eq!(nodepool_cases(), nodepool_cases());
        assert_eq!(ec2nodeclass_cases(), ec2nodeclass_cases());
    }
}
