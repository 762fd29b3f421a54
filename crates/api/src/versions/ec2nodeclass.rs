//! EC2NodeClass between `karpenter.k8s.aws/v1beta1` and `v1`.
//!
//! v1beta1 → v1: a family without AMI selector terms selected its latest EKS-optimized AMI,
//! which v1 states as an alias term (`al2023@latest`, the family left to it); `Ubuntu`, which v1 does not have,
//! becomes `AL2` with Ubuntu's root volume (as Karpenter v1.0 converted it). v1 → v1beta1: an
//! alias becomes the family it names, without terms, and `kubelet` (which lived on the NodePool
//! in v1beta1) is parked in an annotation. Every other field, `metadataOptions` included (each
//! version's schema fills its own defaults), passes as it is.

use serde_json::{Map, Value, json};

use super::fields::{self, Form, Part};
use super::{NODE_CLASS_KUBELET, V1_AMI_SELECTION, V1BETA1_AMI_SELECTION};
use crate::aws::v1::ALIAS_FAMILIES;

const AMI: Part<'static> = Part {
    parent: &["spec"],
    keys: &["amiFamily", "amiSelectorTerms", "blockDeviceMappings"],
};

pub fn up(obj: &mut Value) {
    fields::exchange(
        obj,
        &AMI,
        V1BETA1_AMI_SELECTION,
        V1_AMI_SELECTION,
        ami_up,
        ami_down,
    );
    fields::unpark(obj, &["spec", "kubelet"], NODE_CLASS_KUBELET, Form::Json);
}

pub fn down(obj: &mut Value) {
    fields::park(obj, &["spec", "kubelet"], NODE_CLASS_KUBELET, Form::Json);
    fields::exchange(
        obj,
        &AMI,
        V1_AMI_SELECTION,
        V1BETA1_AMI_SELECTION,
        ami_down,
        ami_up,
    );
}

fn family(part: &Map<String, Value>) -> Option<&str> {
    part.get("amiFamily").and_then(Value::as_str)
}

fn no_terms(part: &Map<String, Value>) -> bool {
    match part.get("amiSelectorTerms") {
        None => true,
        Some(Value::Array(terms)) => terms.is_empty(),
        Some(_) => false,
    }
}

fn ami_up(part: &Map<String, Value>) -> Map<String, Value> {
    let mut out = part.clone();
    match family(part) {
        Some("Ubuntu") if !no_terms(part) => {
            out.insert("amiFamily".into(), json!("AL2"));
            out.entry("blockDeviceMappings").or_insert_with(|| {
                json!([{"deviceName": "/dev/sda1", "rootVolume": true,
                        "ebs": {"encrypted": true, "volumeType": "gp3", "volumeSize": "20Gi"}}])
            });
        }
        Some(f) if no_terms(part) => {
            if let Some((alias, _)) = ALIAS_FAMILIES.iter().find(|(_, fam)| *fam == f) {
                // The alias implies the family, as v1 classes usually leave it.
                out.remove("amiFamily");
                out.insert(
                    "amiSelectorTerms".into(),
                    json!([{"alias": format!("{alias}@latest")}]),
                );
            }
        }
        _ => {}
    }
    out
}

fn ami_down(part: &Map<String, Value>) -> Map<String, Value> {
    let mut out = part.clone();
    let alias = match part.get("amiSelectorTerms") {
        Some(Value::Array(terms)) if terms.len() == 1 => {
            terms[0].get("alias").and_then(Value::as_str)
        }
        _ => None,
    };
    let Some(alias) = alias else { return out };
    let name = alias.split('@').next().unwrap_or_default();
    if let Some((_, fam)) = ALIAS_FAMILIES.iter().find(|(a, _)| *a == name) {
        out.remove("amiSelectorTerms");
        if family(part).is_none() {
            out.insert("amiFamily".into(), json!(fam));
        }
    }
    out
}
