//! Every object nodewright reads, by apiVersion and kind, parsed from a [`Document`].
//!
//! Objects outside Karpenter's API groups are not ours (a Deployment in the same file is
//! fine) and parse to `None`; an unknown kind or version inside those groups is an error.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::conversion::Converted;
use crate::convert::Outcome;
use crate::crd;
use crate::document::Document;
use crate::error::FieldError;
use crate::validation::{self, structural};
use crate::{aws, v1, v1alpha5, v1beta1};

/// The API groups whose objects nodewright reads.
pub const GROUPS: &[&str] = &["karpenter.sh", "karpenter.k8s.aws"];

/// The apiVersion/kind pairs nodewright reads.
pub const SUPPORTED: &[(&str, &str)] = &[
    ("karpenter.sh/v1", "NodePool"),
    ("karpenter.sh/v1", "NodeClaim"),
    ("karpenter.sh/v1beta1", "NodePool"),
    ("karpenter.sh/v1alpha5", "Provisioner"),
    ("karpenter.k8s.aws/v1", "EC2NodeClass"),
    ("karpenter.k8s.aws/v1beta1", "EC2NodeClass"),
    ("karpenter.k8s.aws/v1alpha1", "AWSNodeTemplate"),
];

#[derive(Clone, Debug, PartialEq)]
pub enum Object {
    NodePool(Box<v1::NodePool>),
    NodeClaim(Box<v1::NodeClaim>),
    NodePoolV1beta1(Box<v1beta1::NodePool>),
    Provisioner(Box<v1alpha5::Provisioner>),
    EC2NodeClass(Box<aws::v1::EC2NodeClass>),
    EC2NodeClassV1beta1(Box<aws::v1beta1::EC2NodeClass>),
    AWSNodeTemplate(Box<aws::v1alpha1::AWSNodeTemplate>),
}

/// Checks and findings for one object: errors make it invalid, warnings do not.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    pub errors: Vec<FieldError>,
    pub warnings: Vec<FieldError>,
}

fn decode<T: DeserializeOwned>(value: &Value) -> Result<T, FieldError> {
    crate::decode::decode(value, &crate::error::Path::default())
}

fn group_of(api_version: &str) -> &str {
    api_version.split_once('/').map(|(g, _)| g).unwrap_or("")
}

/// Whether a document is meant as a Karpenter object: in one of Karpenter's groups, naming a
/// group with no version (`apiVersion: karpenter.sh`), or of a kind only Karpenter has. A
/// misspelled one is then an error instead of a document quietly left alone.
fn looks_like_karpenter(api_version: &str, kind: &str) -> bool {
    GROUPS.contains(&group_of(api_version))
        || GROUPS.contains(&api_version)
        || SUPPORTED.iter().any(|(_, k)| *k == kind)
}

/// Whether `doc` is (or is meant as) a Karpenter object.
pub fn is_karpenter(doc: &Document) -> bool {
    looks_like_karpenter(doc.api_version(), doc.kind())
}

/// Why `apiVersion`/`kind` is not one nodewright reads, with what it does read.
fn unsupported(api_version: &str, kind: &str) -> FieldError {
    let versions: Vec<&str> = SUPPORTED
        .iter()
        .filter(|(_, k)| *k == kind)
        .map(|(v, _)| *v)
        .collect();
    if !versions.is_empty() {
        return FieldError::new(
            "apiVersion",
            format!(
                "{api_version:?} is not an API version of {kind}; nodewright reads {kind} as {}",
                versions.join(" or ")
            ),
        );
    }
    let list: Vec<String> = SUPPORTED.iter().map(|(v, k)| format!("{v} {k}")).collect();
    FieldError::new(
        "",
        format!(
            "unsupported kind {kind:?} in apiVersion {api_version:?}; supported: {}",
            list.join(", ")
        ),
    )
}

impl Object {
    /// Parses `doc`; `Ok(None)` when it is not a Karpenter object at all.
    pub fn parse(doc: &Document) -> Result<Option<Object>, FieldError> {
        Object::from_value(&doc.value)
    }

    pub fn from_value(value: &Value) -> Result<Option<Object>, FieldError> {
        let api_version = value
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
        if !looks_like_karpenter(api_version, kind) {
            return Ok(None);
        }
        let object = match (api_version, kind) {
            ("karpenter.sh/v1", "NodePool") => Object::NodePool(Box::new(decode(value)?)),
            ("karpenter.sh/v1", "NodeClaim") => Object::NodeClaim(Box::new(decode(value)?)),
            ("karpenter.sh/v1beta1", "NodePool") => {
                Object::NodePoolV1beta1(Box::new(decode(value)?))
            }
            ("karpenter.sh/v1alpha5", "Provisioner") => {
                Object::Provisioner(Box::new(decode(value)?))
            }
            ("karpenter.k8s.aws/v1", "EC2NodeClass") => {
                Object::EC2NodeClass(Box::new(decode(value)?))
            }
            ("karpenter.k8s.aws/v1beta1", "EC2NodeClass") => {
                Object::EC2NodeClassV1beta1(Box::new(decode(value)?))
            }
            ("karpenter.k8s.aws/v1alpha1", "AWSNodeTemplate") => {
                Object::AWSNodeTemplate(Box::new(decode(value)?))
            }
            _ => return Err(unsupported(api_version, kind)),
        };
        Ok(Some(object))
    }

    pub fn api_version(&self) -> &str {
        match self {
            Object::NodePool(o) => &o.api_version,
            Object::NodeClaim(o) => &o.api_version,
            Object::NodePoolV1beta1(o) => &o.api_version,
            Object::Provisioner(o) => &o.api_version,
            Object::EC2NodeClass(o) => &o.api_version,
            Object::EC2NodeClassV1beta1(o) => &o.api_version,
            Object::AWSNodeTemplate(o) => &o.api_version,
        }
    }

    pub fn kind(&self) -> &str {
        match self {
            Object::NodePool(o) => &o.kind,
            Object::NodeClaim(o) => &o.kind,
            Object::NodePoolV1beta1(o) => &o.kind,
            Object::Provisioner(o) => &o.kind,
            Object::EC2NodeClass(o) => &o.kind,
            Object::EC2NodeClassV1beta1(o) => &o.kind,
            Object::AWSNodeTemplate(o) => &o.kind,
        }
    }

    pub fn name(&self) -> &str {
        let meta = match self {
            Object::NodePool(o) => &o.metadata,
            Object::NodeClaim(o) => &o.metadata,
            Object::NodePoolV1beta1(o) => &o.metadata,
            Object::Provisioner(o) => &o.metadata,
            Object::EC2NodeClass(o) => &o.metadata,
            Object::EC2NodeClassV1beta1(o) => &o.metadata,
            Object::AWSNodeTemplate(o) => &o.metadata,
        };
        meta.name.as_deref().unwrap_or("")
    }

    /// True for the served generation (v1); older ones must be converted first.
    pub fn is_current(&self) -> bool {
        matches!(
            self,
            Object::NodePool(_) | Object::NodeClaim(_) | Object::EC2NodeClass(_)
        )
    }

    pub fn to_value(&self) -> Value {
        fn ser<T: Serialize>(t: &T) -> Value {
            serde_json::to_value(t).unwrap_or(Value::Null)
        }
        match self {
            Object::NodePool(o) => ser(o),
            Object::NodeClaim(o) => ser(o),
            Object::NodePoolV1beta1(o) => ser(o),
            Object::Provisioner(o) => ser(o),
            Object::EC2NodeClass(o) => ser(o),
            Object::EC2NodeClassV1beta1(o) => ser(o),
            Object::AWSNodeTemplate(o) => ser(o),
        }
    }

    /// Validates a v1 object with both layers (schema, then rules). Older generations have no
    /// schema of their own: convert them and validate the result.
    pub fn validate(&self) -> Report {
        validate_value(&self.to_value()).unwrap_or_else(|| Report {
            errors: vec![FieldError::new(
                "",
                format!(
                    "{} {} must be converted to v1 before validation",
                    self.api_version(),
                    self.kind()
                ),
            )],
            warnings: vec![],
        })
    }

    /// This object as v1, on its own. A NodePool's kubelet settings need their node class to
    /// move into, so they stay in the compatibility annotation here; convert whole inputs with
    /// [`crate::convert::convert_documents`] to move them.
    pub fn convert(&self) -> Converted<Object> {
        let doc = Document {
            source: String::new(),
            index: 0,
            value: self.to_value(),
        };
        let items = crate::convert::convert_documents(vec![doc], &Default::default());
        match items.into_iter().next().map(|i| i.outcome) {
            Some(Outcome::Converted { object, warnings }) => Converted { object, warnings },
            _ => Converted::new(self.clone()),
        }
    }

    /// Rules that compare an updated object with the stored one (immutable fields).
    pub fn validate_update(old: &Object, new: &Object) -> Vec<FieldError> {
        match (old, new) {
            (Object::NodePool(o), Object::NodePool(n)) => validation::nodepool_update(o, n),
            (Object::NodeClaim(o), Object::NodeClaim(n)) => validation::nodeclaim_update(o, n),
            (Object::EC2NodeClass(o), Object::EC2NodeClass(n)) => {
                aws::validate::ec2nodeclass_update(o, n)
            }
            _ => vec![FieldError::new(
                "",
                "old and new objects are of different kinds",
            )],
        }
    }
}

/// Runs the schema (applying defaults), then the typed rules on the defaulted object. A rule
/// error at a path the schema already rejected is not repeated.
pub fn validate_with(
    schema: &Value,
    mut value: Value,
    rules: impl FnOnce(&Value) -> Result<Vec<FieldError>, FieldError>,
) -> Report {
    let out = structural::check(schema, &mut value);
    let mut errors = out.errors;
    let schema_paths: Vec<String> = errors.iter().map(|e| e.path.clone()).collect();
    match rules(&value) {
        Ok(rule_errors) => {
            errors.extend(
                rule_errors
                    .into_iter()
                    .filter(|e| !schema_paths.contains(&e.path)),
            );
        }
        // A value the schema rejected may not even decode; the schema errors say why.
        Err(e) if errors.is_empty() => errors.push(e),
        Err(_) => {}
    }
    Report {
        errors,
        warnings: out.warnings,
    }
}

/// Validates a raw v1 object (as read, before any typed decoding, so type errors are reported
/// with their paths). `None` when `value` is not a v1 kind nodewright validates.
pub fn validate_value(value: &Value) -> Option<Report> {
    let api_version = value
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
    let report = match (api_version, kind) {
        ("karpenter.sh/v1", "NodePool") => {
            validate_with(&crd::nodepool_schema(), value.clone(), |v| {
                decode::<v1::NodePool>(v).map(|np| validation::nodepool(&np))
            })
        }
        ("karpenter.sh/v1", "NodeClaim") => {
            validate_with(&crd::nodeclaim_schema(), value.clone(), |v| {
                decode::<v1::NodeClaim>(v).map(|nc| validation::nodeclaim(&nc))
            })
        }
        ("karpenter.k8s.aws/v1", "EC2NodeClass") => {
            validate_with(&aws::crd::ec2nodeclass_schema(), value.clone(), |v| {
                decode::<aws::v1::EC2NodeClass>(v).map(|c| aws::validate::ec2nodeclass(&c))
            })
        }
        _ => return None,
    };
    Some(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn single_object_conversion() {
        let p = Object::from_value(&json!({
            "apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner",
            "metadata": {"name": "p"},
            "spec": {"providerRef": {"name": "d"}, "kubeletConfiguration": {"maxPods": 10}}
        }))
        .unwrap()
        .unwrap();
        let c = p.convert();
        let Object::NodePool(np) = &c.object else {
            panic!("not a NodePool")
        };
        assert_eq!(np.api_version, "karpenter.sh/v1");
        let ann = np.metadata.annotations.as_ref().unwrap();
        assert_eq!(
            ann[crate::convert::KUBELET_COMPATIBILITY_ANNOTATION],
            r#"{"maxPods":10}"#
        );
        assert!(
            c.object.validate().errors.is_empty(),
            "{:?}",
            c.object.validate()
        );
        let v1 = c.object.clone();
        assert_eq!(v1.convert().object, v1, "v1 objects convert to themselves");
    }
}
