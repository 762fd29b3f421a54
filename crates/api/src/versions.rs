//! Conversion between the versions the CRDs serve, `v1beta1` and `v1`, for the conversion
//! webhook: NodePool and NodeClaim (`karpenter.sh`) and EC2NodeClass (`karpenter.k8s.aws`).
//!
//! Unlike [`crate::convert`] (one way, for files, with warnings), this conversion is lossless
//! both ways: converting to the other version and back gives the object that went in. What one
//! version has no field for is kept in an annotation of the other (the keys below), and taken
//! back out on the return trip. It works on JSON as the API server sends it, so fields it does
//! not know pass through untouched, and it never fails on a field's shape: only an object that
//! is not a Karpenter object of a served version is refused.

mod ec2nodeclass;
mod fields;
mod nodeclaim;
mod nodepool;
#[cfg(test)]
mod tests;

use serde_json::Value;
use thiserror::Error;

/// The kubelet settings of a v1beta1 NodePool or NodeClaim, as JSON, on its v1 form (the key
/// Karpenter v1.0's webhook used).
pub const KUBELET: &str = crate::convert::KUBELET_COMPATIBILITY_ANNOTATION;
/// A v1beta1 NodePool template's `resources`, as JSON (v1 has no such field).
pub const RESOURCES: &str = "compatibility.nodewright.io/v1beta1-resources";
/// A v1beta1 `nodeClassRef` that v1's `group` form cannot give back as written (no
/// `apiVersion` or `kind`, or a version other than v1beta1), as JSON.
pub const V1BETA1_NODE_CLASS_REF: &str = "compatibility.nodewright.io/v1beta1-node-class-ref";
/// A v1 `nodeClassRef` that v1beta1's `apiVersion` form cannot give back, as JSON.
pub const V1_NODE_CLASS_REF: &str = "compatibility.nodewright.io/v1-node-class-ref";
/// A v1 `terminationGracePeriod` (NodePool template, NodeClaim), as written.
pub const TERMINATION_GRACE_PERIOD: &str =
    "compatibility.nodewright.io/v1-termination-grace-period";
/// A v1 NodeClaim's `expireAfter`, as written (a v1beta1 NodeClaim has none).
pub const EXPIRE_AFTER: &str = "compatibility.nodewright.io/v1-expire-after";
/// A v1 NodePool's `replicas` (static NodePools), as JSON.
pub const REPLICAS: &str = "compatibility.nodewright.io/v1-replicas";
/// The `reasons` of a v1 NodePool's budgets, one entry per budget (`null` for none), as JSON.
pub const BUDGET_REASONS: &str = "compatibility.nodewright.io/v1-budget-reasons";
/// A v1 EC2NodeClass's `kubelet`, as JSON (a v1beta1 class has none).
pub const NODE_CLASS_KUBELET: &str = "compatibility.nodewright.io/v1-kubelet";
/// A v1beta1 EC2NodeClass's `amiFamily`, `amiSelectorTerms` and `blockDeviceMappings` when the
/// v1 form (an alias for a family without terms, Ubuntu as AL2) cannot give them back, as JSON.
pub const V1BETA1_AMI_SELECTION: &str = "compatibility.nodewright.io/v1beta1-ami-selection";
/// The same for a v1 EC2NodeClass (a pinned alias, or an alias with `amiFamily: Custom`).
pub const V1_AMI_SELECTION: &str = "compatibility.nodewright.io/v1-ami-selection";

/// Every annotation key this conversion writes.
pub const ANNOTATIONS: &[&str] = &[
    KUBELET,
    RESOURCES,
    V1BETA1_NODE_CLASS_REF,
    V1_NODE_CLASS_REF,
    TERMINATION_GRACE_PERIOD,
    EXPIRE_AFTER,
    REPLICAS,
    BUDGET_REASONS,
    NODE_CLASS_KUBELET,
    V1BETA1_AMI_SELECTION,
    V1_AMI_SELECTION,
];

/// The versions served beside each other; `v1` is stored.
pub const SERVED: &[&str] = &["v1beta1", "v1"];

/// Why an object cannot be converted.
#[derive(Debug, Error, PartialEq)]
pub enum VersionError {
    #[error("objects[{index}]: expected a JSON object, found {found}")]
    NotAnObject { index: usize, found: &'static str },
    #[error("{object}: {field} is missing or not a string")]
    Missing { object: String, field: &'static str },
    #[error("{object}: apiVersion {api_version:?} is not served here (served: {served})")]
    NotServed {
        object: String,
        api_version: String,
        served: String,
    },
    #[error("{object}: kind {kind:?} of group {group} is not converted here")]
    UnknownKind {
        object: String,
        kind: String,
        group: String,
    },
    #[error("{object}: cannot convert group {from} to {to}")]
    GroupMismatch {
        object: String,
        from: String,
        to: String,
    },
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Version {
    V1beta1,
    V1,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    NodePool,
    NodeClaim,
    EC2NodeClass,
}

/// Converts one object to `desired` (an apiVersion such as `karpenter.sh/v1beta1`). `index`
/// is the object's place in the review, for messages.
pub fn convert(object: &Value, desired: &str, index: usize) -> Result<Value, VersionError> {
    let Value::Object(map) = object else {
        return Err(VersionError::NotAnObject {
            index,
            found: type_name(object),
        });
    };
    let name = map
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind_text = map.get("kind").and_then(Value::as_str);
    let label = format!("objects[{index}] ({} {name:?})", kind_text.unwrap_or("?"));
    let missing = |field| VersionError::Missing {
        object: label.clone(),
        field,
    };
    let from_text = map
        .get("apiVersion")
        .and_then(Value::as_str)
        .ok_or_else(|| missing("apiVersion"))?;
    let kind_text = kind_text.ok_or_else(|| missing("kind"))?;
    let (from_group, from) = split(from_text, &label)?;
    let (to_group, to) = split(desired, &label)?;
    if from_group != to_group {
        return Err(VersionError::GroupMismatch {
            object: label,
            from: from_group.into(),
            to: to_group.into(),
        });
    }
    let kind = match (from_group, kind_text) {
        ("karpenter.sh", "NodePool") => Kind::NodePool,
        ("karpenter.sh", "NodeClaim") => Kind::NodeClaim,
        (crate::aws::GROUP, "EC2NodeClass") => Kind::EC2NodeClass,
        (group, kind) => {
            return Err(VersionError::UnknownKind {
                object: label,
                kind: kind.into(),
                group: group.into(),
            });
        }
    };
    let mut out = object.clone();
    if from != to {
        match (kind, to) {
            (Kind::NodePool, Version::V1) => nodepool::up(&mut out),
            (Kind::NodePool, Version::V1beta1) => nodepool::down(&mut out),
            (Kind::NodeClaim, Version::V1) => nodeclaim::up(&mut out),
            (Kind::NodeClaim, Version::V1beta1) => nodeclaim::down(&mut out),
            (Kind::EC2NodeClass, Version::V1) => ec2nodeclass::up(&mut out),
            (Kind::EC2NodeClass, Version::V1beta1) => ec2nodeclass::down(&mut out),
        }
    }
    out["apiVersion"] = Value::String(desired.to_string());
    Ok(out)
}

fn split<'a>(api_version: &'a str, label: &str) -> Result<(&'a str, Version), VersionError> {
    let not_served = || VersionError::NotServed {
        object: label.to_string(),
        api_version: api_version.to_string(),
        served: served_list(),
    };
    let (group, version) = api_version.split_once('/').ok_or_else(not_served)?;
    if group != "karpenter.sh" && group != crate::aws::GROUP {
        return Err(not_served());
    }
    match version {
        "v1" => Ok((group, Version::V1)),
        "v1beta1" => Ok((group, Version::V1beta1)),
        _ => Err(not_served()),
    }
}

fn served_list() -> String {
    ["karpenter.sh", crate::aws::GROUP]
        .iter()
        .flat_map(|g| SERVED.iter().map(move |v| format!("{g}/{v}")))
        .collect::<Vec<_>>()
        .join(", ")
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
