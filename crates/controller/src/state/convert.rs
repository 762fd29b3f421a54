//! API objects the planner needs into `core` model types. NodeClaims, Nodes and pods are
//! `api`'s conversions (the same ones `plan` and `explain` use); the PDBs, volumes and storage
//! classes here still have twins in `api::cluster`, for files, that differ in how they report
//! errors and in computing a missing PDB status from the pods.

use k8s_openapi::api::core::v1 as api;
use k8s_openapi::api::policy::v1::PodDisruptionBudget as ApiPdb;
use k8s_openapi::api::storage::v1::StorageClass as ApiStorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use nodewright_api::error::Path;
use nodewright_api::quantity;
use nodewright_api::v1::nodeclaim::NodeClaim as ApiClaim;
use nodewright_api::v1::shared::ResourceList;
use nodewright_core::model::{
    Node, NodeClaim, PersistentVolume, PersistentVolumeClaim, PodDisruptionBudget, StorageClass,
    UnhealthyPodEvictionPolicy,
};
use nodewright_core::requirements::{NodeSelectorTerm, Operator, Requirement};
use nodewright_core::resources::Resources;
use nodewright_core::selector::{LabelSelector, SelectorOperator, SelectorRequirement};
use nodewright_core::taints::{Taint, TaintEffect};

use crate::clock::from_time;

/// A live Node: `api`'s conversion plus annotations and timestamps.
pub fn node(n: &api::Node) -> Result<Node, String> {
    let name = n.metadata.name.clone().unwrap_or_default();
    let mut out = nodewright_api::interchange::node(n, &Path::root("node"))
        .map_err(|e| format!("Node {name}: {e}"))?;
    out.annotations = n.metadata.annotations.clone().unwrap_or_default();
    out.resource_version = n.metadata.resource_version.clone().unwrap_or_default();
    out.creation_timestamp = n
        .metadata
        .creation_timestamp
        .as_ref()
        .map(from_time)
        .unwrap_or_default();
    Ok(out)
}

pub fn resources(list: Option<&ResourceList>) -> Result<Resources, String> {
    let mut r = Resources::new();
    for (k, q) in list.into_iter().flatten() {
        let v = quantity::parse_resource(k, &q.text()).map_err(|e| format!("{k}: {e}"))?;
        r.set(k, v);
    }
    Ok(r)
}

pub fn taints(list: Option<&Vec<nodewright_api::v1::shared::Taint>>) -> Vec<Taint> {
    list.into_iter()
        .flatten()
        .filter_map(|t| {
            Some(Taint {
                key: t.key.clone(),
                value: t.value.clone().unwrap_or_default(),
                effect: TaintEffect::parse(&t.effect)?,
            })
        })
        .collect()
}

/// A NodeClaim as the scheduler and the disruption planner see it: `api`'s conversion, the
/// same one `plan` and `explain` use on a cluster's objects.
pub fn nodeclaim(c: &ApiClaim) -> Result<NodeClaim, String> {
    nodewright_api::cluster::nodeclaim(c).map_err(|e| {
        let name = c.metadata.name.as_deref().unwrap_or_default();
        format!("NodeClaim {name}: {e}")
    })
}

pub fn label_selector(s: &meta::LabelSelector) -> Result<LabelSelector, String> {
    let mut out = LabelSelector {
        match_labels: s.match_labels.clone().unwrap_or_default(),
        match_expressions: vec![],
    };
    for e in s.match_expressions.iter().flatten() {
        let operator = match e.operator.as_str() {
            "In" => SelectorOperator::In,
            "NotIn" => SelectorOperator::NotIn,
            "Exists" => SelectorOperator::Exists,
            "DoesNotExist" => SelectorOperator::DoesNotExist,
            other => return Err(format!("unsupported selector operator {other:?}")),
        };
        out.match_expressions.push(SelectorRequirement {
            key: e.key.clone(),
            operator,
            values: e.values.clone().unwrap_or_default(),
        });
    }
    Ok(out)
}

fn fully_blocking(p: &ApiPdb) -> bool {
    let Some(spec) = &p.spec else { return false };
    let zero = |v: &IntOrString| match v {
        IntOrString::Int(i) => *i == 0,
        IntOrString::String(s) => s.trim() == "0%" || s.trim() == "0",
    };
    spec.max_unavailable.as_ref().is_some_and(zero)
        || matches!(&spec.min_available, Some(IntOrString::String(s)) if s.trim() == "100%")
}

pub fn pdb(p: &ApiPdb) -> Result<PodDisruptionBudget, String> {
    let name = p.metadata.name.clone().unwrap_or_default();
    let spec = p.spec.clone().unwrap_or_default();
    Ok(PodDisruptionBudget {
        namespace: p.metadata.namespace.clone().unwrap_or_default(),
        selector: spec
            .selector
            .as_ref()
            .map(label_selector)
            .transpose()
            .map_err(|e| format!("PodDisruptionBudget {name}: {e}"))?,
        disruptions_allowed: p
            .status
            .as_ref()
            .map(|s| s.disruptions_allowed)
            .unwrap_or(0),
        unhealthy_pod_eviction_policy: match spec.unhealthy_pod_eviction_policy.as_deref() {
            Some("AlwaysAllow") => UnhealthyPodEvictionPolicy::AlwaysAllow,
            _ => UnhealthyPodEvictionPolicy::IfHealthyBudget,
        },
        fully_blocking: fully_blocking(p),
        name,
    })
}

fn terms(list: Option<&Vec<api::NodeSelectorTerm>>) -> Vec<NodeSelectorTerm> {
    list.into_iter()
        .flatten()
        .map(|t| NodeSelectorTerm {
            match_expressions: t
                .match_expressions
                .iter()
                .flatten()
                .filter_map(|e| {
                    Some(Requirement {
                        key: e.key.clone(),
                        operator: Operator::parse(&e.operator)?,
                        values: e.values.clone().unwrap_or_default(),
                        min_values: None,
                    })
                })
                .collect(),
        })
        .collect()
}

pub fn pv(v: &api::PersistentVolume) -> PersistentVolume {
    let spec = v.spec.clone().unwrap_or_default();
    PersistentVolume {
        name: v.metadata.name.clone().unwrap_or_default(),
        node_affinity: terms(
            spec.node_affinity
                .as_ref()
                .and_then(|a| a.required.as_ref())
                .map(|r| &r.node_selector_terms),
        ),
        local_or_host_path: spec.local.is_some() || spec.host_path.is_some(),
    }
}

pub fn pvc(c: &api::PersistentVolumeClaim) -> PersistentVolumeClaim {
    let spec = c.spec.clone().unwrap_or_default();
    PersistentVolumeClaim {
        namespace: c.metadata.namespace.clone().unwrap_or_default(),
        name: c.metadata.name.clone().unwrap_or_default(),
        volume_name: spec.volume_name.filter(|v| !v.is_empty()),
        storage_class: spec.storage_class_name,
    }
}

pub fn storage_class(s: &ApiStorageClass) -> StorageClass {
    let allowed: Vec<NodeSelectorTerm> = s
        .allowed_topologies
        .iter()
        .flatten()
        .map(|t| NodeSelectorTerm {
            match_expressions: t
                .match_label_expressions
                .iter()
                .flatten()
                .map(|e| Requirement {
                    key: e.key.clone(),
                    operator: Operator::In,
                    values: e.values.clone(),
                    min_values: None,
                })
                .collect(),
        })
        .collect();
    StorageClass {
        name: s.metadata.name.clone().unwrap_or_default(),
        provisioner: s.provisioner.clone(),
        volume_binding_mode: s
            .volume_binding_mode
            .clone()
            .unwrap_or_else(|| "Immediate".into()),
        allowed_topologies: allowed,
    }
}
