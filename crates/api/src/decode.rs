//! Typed reads of JSON values whose errors name the field: `spec.limits: expected an object,
//! found string "eu-north-1c"` rather than serde's path-less `expected struct Limits`.
//!
//! Every typed read of user input in this crate goes through [`decode`], so a value of the
//! wrong type is reported where it is, however deep.

use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_path_to_error::Segment;

use crate::error::{FieldError, Path};

/// `value` as a `T`; on failure, the path of the offending field below `base` and why.
pub fn decode<T: DeserializeOwned>(value: &Value, base: &Path) -> Result<T, FieldError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let mut path = base.clone();
        for segment in e.path() {
            path = match segment {
                Segment::Seq { index } => path.index(*index),
                Segment::Map { key } if is_field_name(key) => path.field(key),
                Segment::Map { key } => path.key(key),
                Segment::Enum { .. } | Segment::Unknown => path,
            };
        }
        path.error(plain(&e.inner().to_string()))
    })
}

/// Field names are plain words; anything else (label keys, resource names) is a map key.
fn is_field_name(key: &str) -> bool {
    !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// serde's wording in the words of a manifest: objects and lists, not structs and sequences.
fn plain(message: &str) -> String {
    let message = message.replace("expected a sequence", "expected a list");
    let message = message.replace("expected a map", "expected an object");
    match message.find("expected struct ") {
        Some(at) => format!("{}expected an object", &message[..at]),
        None => message,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Outer {
        spec: Inner,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Inner {
        limits: Option<Limits>,
        terms: Option<Vec<BTreeMap<String, u32>>>,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Limits {
        cpu: Option<String>,
    }

    fn error(value: Value) -> String {
        decode::<Outer>(&value, &Path::default())
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn type_errors_name_their_field() {
        assert_eq!(
            error(json!({"spec": {"limits": "eu-north-1c"}})),
            r#"spec.limits: invalid type: string "eu-north-1c", expected an object"#
        );
        assert_eq!(
            error(json!({"spec": {"terms": {"id": 1}}})),
            "spec.terms: invalid type: map, expected a list"
        );
        assert_eq!(
            error(json!({"spec": {"terms": [{"a": 1}, {"x.io/y": "z"}]}})),
            r#"spec.terms[1][x.io/y]: invalid type: string "z", expected u32"#
        );
        assert_eq!(error(json!({})), "missing field `spec`");
    }

    #[test]
    fn paths_start_at_the_base() {
        let e = decode::<Limits>(&json!({"cpu": 1}), &Path::root("spec").field("limits"));
        assert_eq!(
            e.unwrap_err().to_string(),
            "spec.limits.cpu: invalid type: integer `1`, expected a string"
        );
    }
}
