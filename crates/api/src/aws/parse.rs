//! Reading node classes from JSON values with errors that name the field: a value of the
//! wrong type is reported at its path (`spec.kubelet.maxPods: must be of type integer`), found
//! by walking the v1 CRD schema, instead of serde's path-less message.

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{crd, v1, v1alpha1, v1beta1};
use crate::error::{FieldError, Path};

/// A v1 EC2NodeClass, or what is wrong with its shape.
pub fn ec2nodeclass(value: &Value) -> Result<v1::EC2NodeClass, Vec<FieldError>> {
    typed(value, Some(&crd::ec2nodeclass_schema()))
}

/// A v1beta1 EC2NodeClass. Its fields have the same types as v1's, so the v1 schema locates
/// type errors in the fields they share.
pub fn ec2nodeclass_v1beta1(value: &Value) -> Result<v1beta1::EC2NodeClass, Vec<FieldError>> {
    typed(value, Some(&crd::ec2nodeclass_schema()))
}

/// A v1alpha1 AWSNodeTemplate.
pub fn awsnodetemplate(value: &Value) -> Result<v1alpha1::AWSNodeTemplate, Vec<FieldError>> {
    typed(value, None)
}

fn typed<T: DeserializeOwned>(value: &Value, schema: Option<&Value>) -> Result<T, Vec<FieldError>> {
    crate::decode::decode(value, &Path::default()).map_err(|e| {
        let mut errs = Vec::new();
        if let Some(schema) = schema {
            type_errors(schema, value, &Path::default(), &mut errs);
        }
        if errs.is_empty() {
            errs.push(e);
        }
        errs
    })
}

/// Every value whose JSON type differs from what `schema` declares, with its path.
pub fn type_errors(schema: &Value, value: &Value, path: &Path, errs: &mut Vec<FieldError>) {
    let int_or_string = schema.get("x-kubernetes-int-or-string").is_some();
    let ok = match schema.get("type").and_then(Value::as_str) {
        _ if int_or_string => value.is_i64() || value.is_string(),
        Some("object") => value.is_object(),
        Some("array") => value.is_array(),
        Some("string") => value.is_string(),
        Some("integer") => value.is_i64() || value.is_u64(),
        Some("number") => value.is_number(),
        Some("boolean") => value.is_boolean(),
        _ => true,
    };
    if !ok {
        let expected = schema
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("integer or string");
        errs.push(path.error(format!(
            "must be of type {expected}, got {}",
            json_type(value)
        )));
        return;
    }
    if let Some(map) = value.as_object() {
        let props = schema.get("properties").and_then(Value::as_object);
        for (k, v) in map {
            if let Some(s) = props.and_then(|p| p.get(k)) {
                type_errors(s, v, &path.field(k), errs);
            } else if let Some(s) = schema.get("additionalProperties") {
                type_errors(s, v, &path.key(k), errs);
            }
        }
    }
    if let (Some(items_schema), Some(items)) = (schema.get("items"), value.as_array()) {
        for (i, item) in items.iter().enumerate() {
            type_errors(items_schema, item, &path.index(i), errs);
        }
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn wrong_types_are_reported_at_their_path() {
        let value = json!({
            "spec": {
                "kubelet": {"maxPods": "many"},
                "subnetSelectorTerms": [{"tags": {"a": 1}}],
                "metadataOptions": {"httpPutResponseHopLimit": "2"},
            }
        });
        let errs: Vec<String> = ec2nodeclass(&value)
            .unwrap_err()
            .iter()
            .map(|e| e.to_string())
            .collect();
        assert_eq!(
            errs,
            [
                "spec.kubelet.maxPods: must be of type integer, got string",
                "spec.subnetSelectorTerms[0].tags[a]: must be of type string, got integer",
                "spec.metadataOptions.httpPutResponseHopLimit: must be of type integer, got string",
            ]
        );
    }

    #[test]
    fn well_typed_objects_read() {
        let nc = ec2nodeclass(&json!({"spec": {"role": "r"}})).unwrap();
        assert_eq!(nc.spec.role.as_deref(), Some("r"));
        let err = awsnodetemplate(&json!({"spec": {"amiSelector": "x"}})).unwrap_err();
        assert_eq!(err.len(), 1);
        assert_eq!(
            err[0].to_string(),
            r#"spec.amiSelector: invalid type: string "x", expected an object"#
        );
    }
}
