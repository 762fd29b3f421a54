//! `validate_against_crd`: an object checked against the schema of one version of a CRD, with
//! the identity checks the server makes first (apiVersion, kind, metadata.name).

use serde_json::Value;

use super::keyword::{get, text};
use super::validate::validate_object;
use crate::error::FieldError;

/// Validates `object` (and `old` on update) against version `version` of `crd`.
pub fn validate_against_crd(
    crd: &Value,
    version: &str,
    object: &Value,
    old: Option<&Value>,
) -> Vec<FieldError> {
    let spec = get(crd, "spec").unwrap_or(&Value::Null);
    let group = text(spec, "group").unwrap_or("");
    let kind = get(spec, "names")
        .and_then(|n| text(n, "kind"))
        .unwrap_or("");
    let versions = get(spec, "versions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let Some(found) = versions.iter().find(|v| text(v, "name") == Some(version)) else {
        return vec![FieldError::new(
            "apiVersion",
            format!("version {version:?} is not defined by the CRD"),
        )];
    };
    let Some(schema) = get(found, "schema").and_then(|s| get(s, "openAPIV3Schema")) else {
        return vec![FieldError::new(
            "apiVersion",
            format!("version {version:?} of the CRD has no schema"),
        )];
    };
    let mut errors = Vec::new();
    let api_version = format!("{group}/{version}");
    if text(object, "apiVersion") != Some(api_version.as_str()) {
        errors.push(FieldError::new(
            "apiVersion",
            format!(
                "Invalid value: {}: must be {api_version:?}",
                shown(object, "apiVersion")
            ),
        ));
    }
    if text(object, "kind") != Some(kind) {
        errors.push(FieldError::new(
            "kind",
            format!("Invalid value: {}: must be {kind:?}", shown(object, "kind")),
        ));
    }
    let meta = get(object, "metadata").unwrap_or(&Value::Null);
    match (text(meta, "name"), text(meta, "generateName")) {
        (None, None) => errors.push(FieldError::new("metadata.name", "Required value: name or generateName is required")),
        (Some(name), _) if !is_dns_subdomain(name) => errors.push(FieldError::new(
            "metadata.name",
            format!("Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"),
        )),
        _ => {}
    }
    errors.extend(validate_object(schema, object, old));
    errors
}

fn shown(object: &Value, key: &str) -> String {
    get(object, key).map_or_else(|| "<missing>".to_string(), Value::to_string)
}

fn is_dns_subdomain(s: &str) -> bool {
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
