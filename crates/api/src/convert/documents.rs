//! Converting a whole input at once. Each document is parsed and, if it is an older
//! generation, converted to v1. A NodePool's kubelet settings move into the EC2NodeClass it
//! references when that class is converted in the same input; otherwise they are kept in the
//! compatibility annotation and a warning says so.

use std::collections::BTreeMap;

use serde_json::Value;

use super::KUBELET_COMPATIBILITY_ANNOTATION;
use super::v1beta1::NodePoolConversion;
use crate::document::Document;
use crate::error::FieldError;
use crate::object::Object;
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
}

impl Item {
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
}

pub fn convert_documents(docs: Vec<Document>) -> Vec<Item> {
    let mut outcomes: Vec<Option<Outcome>> = Vec::with_capacity(docs.len());
    let mut pools: Vec<PendingPool> = Vec::new();
    let mut classes: BTreeMap<String, usize> = BTreeMap::new();
    for (index, doc) in docs.iter().enumerate() {
        let outcome = match Object::parse(doc) {
            Err(e) => Some(Outcome::Failed(e)),
            Ok(None) => Some(Outcome::NotKarpenter),
            Ok(Some(Object::NodePoolV1beta1(np))) => {
                pools.push(PendingPool {
                    index,
                    conversion: super::v1beta1::convert(&np),
                });
                None
            }
            Ok(Some(Object::Provisioner(p))) => {
                pools.push(PendingPool {
                    index,
                    conversion: super::v1alpha5::convert(&p),
                });
                None
            }
            Ok(Some(o)) => {
                if let Some(class) = old_node_class_name(&o) {
                    classes.insert(class, index);
                }
                Some(Outcome::Current(o))
            }
        };
        outcomes.push(outcome);
    }
    for pool in pools {
        let mut converted = pool.conversion.nodepool;
        if let Some(kubelet) = pool.conversion.kubelet {
            keep_kubelet(&mut converted, kubelet, &classes);
        }
        outcomes[pool.index] = Some(Outcome::Converted {
            object: Object::NodePool(Box::new(converted.object)),
            warnings: converted.warnings,
        });
    }
    docs.into_iter()
        .zip(outcomes)
        .map(|(doc, outcome)| Item {
            doc,
            outcome: outcome.unwrap_or(Outcome::NotKarpenter),
        })
        .collect()
}

/// The name of an older-generation node class that can take kubelet settings on conversion.
fn old_node_class_name(_object: &Object) -> Option<String> {
    None
}

/// Keeps kubelet settings that found no node class in the compatibility annotation.
fn keep_kubelet(
    np: &mut crate::conversion::Converted<v1::NodePool>,
    kubelet: Value,
    _classes: &BTreeMap<String, usize>,
) {
    let class = np.object.spec.template.spec.node_class_ref.name.clone();
    let text = serde_json::to_string(&kubelet).unwrap_or_default();
    np.object
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(KUBELET_COMPATIBILITY_ANNOTATION.to_string(), text);
    np.warn(format!(
        "kubelet settings belong to the EC2NodeClass in v1, but no older-generation node class named {class:?} is in this input to take them; they are kept in annotation {KUBELET_COMPATIBILITY_ANNOTATION}"
    ));
}
