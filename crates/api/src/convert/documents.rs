//! Converting a whole input at once. Each document is parsed and, if it is an older
//! generation, converted to v1. A NodePool's kubelet settings move into the EC2NodeClass it
//! references when that class is converted in the same input; otherwise they are kept in the
//! compatibility annotation and a warning says so.

use serde_json::Value;

use super::v1beta1::NodePoolConversion;
use super::{DEFAULT_NODE_CLASS_KIND, KUBELET_COMPATIBILITY_ANNOTATION};
use crate::aws;
use crate::conversion::Converted;
use crate::document::Document;
use crate::error::{FieldError, Path};
use crate::object::{Object, Report, validate_value};
use crate::v1;

/// What became of one document.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Not in a Karpenter API group (a Deployment, say); left alone.
    NotKarpenter,
    /// Could not be read.
    Failed(FieldError),
    /// Already v1.
    Current(Object),
    /// Converted from an older generation.
    Converted {
        object: Object,
        warnings: Vec<String>,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Item {
    pub doc: Document,
    pub outcome: Outcome,
    /// Errors of the v1 form that come from a cluster-wide setting the old generation relied
    /// on (v1alpha1's `aws.defaultInstanceProfile`): `(path, reason, explanation)`. The object
    /// was valid as written; [`Item::validate`] reports these as warnings.
    pub setting_gaps: Vec<(String, String, String)>,
}

/// Settings older generations took from the cluster rather than the object.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ConvertOptions {
    /// The old global `aws.defaultInstanceProfile`, for AWSNodeTemplates that name none.
    pub default_instance_profile: Option<String>,
}

impl Item {
    /// Validates the v1 form. `None` when there is no v1 object (not Karpenter, or unreadable).
    pub fn validate(&self) -> Option<Report> {
        let mut report = match &self.outcome {
            Outcome::Current(_) => validate_value(&self.doc.value)?,
            Outcome::Converted { object, .. } => object.validate(),
            _ => return None,
        };
        let (gaps, errors): (Vec<_>, Vec<_>) = report.errors.into_iter().partition(|e| {
            self.setting_gaps
                .iter()
                .any(|(p, r, _)| *p == e.path && *r == e.reason)
        });
        report.errors = errors;
        report.errors.extend(self.moved_kubelet_errors());
        for e in gaps {
            let note = self
                .setting_gaps
                .iter()
                .find(|(p, r, _)| *p == e.path && *r == e.reason)
                .map(|(_, _, n)| n.as_str())
                .unwrap_or_default();
            report
                .warnings
                .push(FieldError::new(e.path, format!("{}; {note}", e.reason)));
        }
        Some(report)
    }

    /// What is wrong with the kubelet settings of a converted NodePool or Provisioner: v1
    /// moves them into an EC2NodeClass (or an annotation), so the v1 NodePool's own checks
    /// never see them. Reported where they are in the older object.
    fn moved_kubelet_errors(&self) -> Vec<FieldError> {
        if !matches!(self.outcome, Outcome::Converted { .. }) {
            return Vec::new();
        }
        let (pointer, path) = match (self.doc.api_version(), self.doc.kind()) {
            ("karpenter.sh/v1beta1", "NodePool") => (
                "/spec/template/spec/kubelet",
                Path::root("spec")
                    .field("template")
                    .field("spec")
                    .field("kubelet"),
            ),
            ("karpenter.sh/v1alpha5", "Provisioner") => (
                "/spec/kubeletConfiguration",
                Path::root("spec").field("kubeletConfiguration"),
            ),
            _ => return Vec::new(),
        };
        match self.doc.value.pointer(pointer) {
            Some(kubelet) if !kubelet.is_null() => aws::validate::kubelet_value(kubelet, &path),
            _ => Vec::new(),
        }
    }

    /// The v1 object, if there is one.
    pub fn object(&self) -> Option<&Object> {
        match &self.outcome {
            Outcome::Current(o) | Outcome::Converted { object: o, .. } => Some(o),
            _ => None,
        }
    }
}

/// A NodePool conversion waiting for its kubelet settings to find a home.
struct PendingPool {
    index: usize,
    conversion: NodePoolConversion,
    /// Set once an EC2NodeClass of the input took the kubelet settings.
    moved_to: Option<String>,
}

impl PendingPool {
    /// Whether this pool references the (AWS) node class `name`.
    fn references(&self, name: &str) -> bool {
        let r = &self
            .conversion
            .nodepool
            .object
            .spec
            .template
            .spec
            .node_class_ref;
        r.group == aws::GROUP && r.kind == DEFAULT_NODE_CLASS_KIND && r.name == name
    }
}

/// `kind: List` documents (what `kubectl get -o yaml` prints) become one document per item,
/// named `file[i].items[j]`.
fn expand_lists(docs: Vec<Document>) -> Vec<Document> {
    let mut out = Vec::with_capacity(docs.len());
    for doc in docs {
        let items = doc.value.get("items").and_then(Value::as_array);
        match items {
            Some(items) if doc.kind().ends_with("List") => {
                let source = format!("{}[{}].items", doc.source, doc.index);
                for (index, value) in items.iter().enumerate() {
                    out.push(Document {
                        source: source.clone(),
                        index,
                        value: value.clone(),
                    });
                }
            }
            _ => out.push(doc),
        }
    }
    out
}

pub fn convert_documents(docs: Vec<Document>, options: &ConvertOptions) -> Vec<Item> {
    let docs = expand_lists(docs);
    let mut outcomes: Vec<Option<Outcome>> = Vec::with_capacity(docs.len());
    let mut pools: Vec<PendingPool> = Vec::new();
    let mut classes: Vec<(usize, Object)> = Vec::new();
    for (index, doc) in docs.iter().enumerate() {
        let outcome = match Object::parse(doc) {
            Err(e) => Some(Outcome::Failed(e)),
            Ok(None) => Some(Outcome::NotKarpenter),
            Ok(Some(Object::NodePoolV1beta1(np))) => {
                let conversion = super::v1beta1::convert(&np);
                pools.push(PendingPool {
                    index,
                    conversion,
                    moved_to: None,
                });
                None
            }
            Ok(Some(Object::Provisioner(p))) => {
                let conversion = super::v1alpha5::convert(&p);
                pools.push(PendingPool {
                    index,
                    conversion,
                    moved_to: None,
                });
                None
            }
            Ok(Some(o @ (Object::EC2NodeClassV1beta1(_) | Object::AWSNodeTemplate(_)))) => {
                classes.push((index, o));
                None
            }
            Ok(Some(o)) => Some(Outcome::Current(o)),
        };
        outcomes.push(outcome);
    }

    let mut gaps: Vec<Vec<(String, String, String)>> = vec![Vec::new(); docs.len()];
    for (index, class) in classes {
        let name = class.name().to_string();
        let kubelet = take_kubelet(&name, &mut pools);
        let converted = match &class {
            Object::EC2NodeClassV1beta1(c) => aws::convert::from_v1beta1(c, kubelet),
            Object::AWSNodeTemplate(t) => {
                let profile = options.default_instance_profile.as_deref();
                if t.spec.instance_profile.is_none() && profile.is_none() {
                    gaps[index].push((
                        "spec".to_string(),
                        aws::rules::ROLE_XOR_INSTANCE_PROFILE.to_string(),
                        "v1alpha1 took the instance profile from the cluster's aws.defaultInstanceProfile setting; convert with --default-instance-profile NAME (or set spec.role) to get a valid v1 EC2NodeClass".to_string(),
                    ));
                }
                aws::convert::from_v1alpha1_with_default_profile(t, kubelet, profile)
            }
            _ => unreachable!("only older node classes are collected"),
        };
        outcomes[index] = Some(Outcome::Converted {
            object: Object::EC2NodeClass(Box::new(converted.object)),
            warnings: converted.warnings,
        });
    }

    for pool in pools {
        let mut converted = pool.conversion.nodepool;
        match (pool.conversion.kubelet, pool.moved_to) {
            (Some(_), Some(class)) => converted.warn(format!(
                "kubelet settings moved to EC2NodeClass {class:?} (spec.kubelet), where v1 keeps them"
            )),
            (Some(kubelet), None) => keep_kubelet(&mut converted, kubelet),
            (None, _) => {}
        }
        outcomes[pool.index] = Some(Outcome::Converted {
            object: Object::NodePool(Box::new(converted.object)),
            warnings: converted.warnings,
        });
    }
    docs.into_iter()
        .zip(outcomes)
        .zip(gaps)
        .map(|((doc, outcome), setting_gaps)| Item {
            doc,
            outcome: outcome.unwrap_or(Outcome::NotKarpenter),
            setting_gaps,
        })
        .collect()
}

/// The kubelet settings for node class `name`: those of the first pool referencing it. Pools
/// with the same settings share the class; pools with different ones keep theirs in the
/// annotation (one class can hold one kubelet configuration).
fn take_kubelet(name: &str, pools: &mut [PendingPool]) -> Option<Value> {
    let mut chosen: Option<Value> = None;
    for pool in pools.iter_mut().filter(|p| p.references(name)) {
        let Some(k) = &pool.conversion.kubelet else {
            continue;
        };
        match &chosen {
            None => chosen = Some(k.clone()),
            Some(c) if c == k => {}
            Some(_) => continue,
        }
        pool.moved_to = Some(name.to_string());
    }
    chosen
}

/// Keeps kubelet settings that found no node class in the compatibility annotation.
fn keep_kubelet(np: &mut Converted<v1::NodePool>, kubelet: Value) {
    let class = np.object.spec.template.spec.node_class_ref.name.clone();
    let text = serde_json::to_string(&kubelet).unwrap_or_default();
    np.object
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(KUBELET_COMPATIBILITY_ANNOTATION.to_string(), text);
    np.warn(format!(
        "kubelet settings belong to the EC2NodeClass in v1, but no older-generation EC2NodeClass {class:?} in this input can take them (or another NodePool's differing settings went there); they are kept in annotation {KUBELET_COMPATIBILITY_ANNOTATION}"
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::parse_documents;

    #[test]
    fn lists_are_expanded() {
        let docs = parse_documents(
            "l.yaml",
            "apiVersion: v1\nkind: List\nitems:\n- apiVersion: karpenter.sh/v1\n  kind: NodePool\n  metadata: {name: a}\n  spec:\n    template:\n      spec:\n        requirements: []\n        nodeClassRef: {group: g, kind: k, name: n}\n",
        )
        .unwrap();
        let items = convert_documents(docs, &ConvertOptions::default());
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].doc.describe(), "l.yaml[0].items[0] NodePool/a");
        assert!(matches!(
            items[0].outcome,
            Outcome::Current(Object::NodePool(_))
        ));
    }
}
