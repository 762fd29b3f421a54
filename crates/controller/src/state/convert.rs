//! API objects the planner needs that `nodewright-api` does not convert yet (NodeClaims, PDBs,
//! volumes and storage classes) into `core` model types. Nodes and pods reuse `api`'s
//! converters; these add what a live object carries (timestamps, conditions).

use k8s_openapi::api::core::v1 as api;
use k8s_openapi::api::policy::v1::PodDisruptionBudget as ApiPdb;
use k8s_openapi::api::storage::v1::StorageClass as ApiStorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use nodewright_api::error::Path;
use nodewright_api::quantity;
use nodewright_api::v1::nodeclaim::NodeClaim as ApiClaim;
use nodewright_api::v1::shared::{Condition, ResourceList, parse_duration};
use nodewright_core::labels;
use nodewright_core::model::{
    Node, NodeClaim, PersistentVolume, PersistentVolumeClaim, PodDisruptionBudget, StorageClass,
    UnhealthyPodEvictionPolicy,
};
use nodewright_core::requirements::{NodeSelectorTerm, Operator, Requirement};
use nodewright_core::resources::Resources;
use nodewright_core::selector::{LabelSelector, SelectorOperator, SelectorRequirement};
use nodewright_core::taints::{Taint, TaintEffect};

use crate::clock::{from_time, parse_rfc3339};
use crate::conditions;

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

fn condition_since(conds: &[Condition], type_: &str) -> Option<nodewright_core::time::Timestamp> {
    conds
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")
        .and_then(|c| c.last_transition_time.as_deref())
        .and_then(parse_rfc3339)
}

/// A NodeClaim as the scheduler and the disruption planner see it.
pub fn nodeclaim(c: &ApiClaim) -> Result<NodeClaim, String> {
    let name = c.metadata.name.clone().unwrap_or_default();
    let err = |e: String| format!("NodeClaim {name}: {e}");
    let status = c.status.clone().unwrap_or_default();
    let conds = status.conditions.clone().unwrap_or_default();
    let mut requirements = Vec::new();
    for r in &c.spec.requirements {
        let operator = Operator::parse(&r.operator)
            .ok_or_else(|| err(format!("unsupported operator {:?}", r.operator)))?;
        requirements.push(Requirement {
            key: r.key.clone(),
            operator,
            values: r.values().to_vec(),
            min_values: r.min_values.and_then(|m| u32::try_from(m).ok()),
        });
    }
    let labels_map = c.metadata.labels.clone().unwrap_or_default();
    let drifted = conds
        .iter()
        .find(|x| x.type_ == conditions::DRIFTED && x.status == "True")
        .map(|x| x.reason.clone().unwrap_or_else(|| "Drifted".into()));
    Ok(NodeClaim {
        name: name.clone(),
        nodepool: labels_map
            .get(labels::NODEPOOL)
            .cloned()
            .unwrap_or_default(),
        annotations: c.metadata.annotations.clone().unwrap_or_default(),
        taints: taints(c.spec.taints.as_ref()),
        startup_taints: taints(c.spec.startup_taints.as_ref()),
        requirements,
        requests: resources(c.spec.resources.as_ref().and_then(|r| r.requests.as_ref()))
            .map_err(err)?,
        provider_id: status.provider_id.clone(),
        node_name: status.node_name.clone(),
        image_id: status.image_id.clone(),
        capacity: resources(status.capacity.as_ref()).map_err(err)?,
        allocatable: resources(status.allocatable.as_ref()).map_err(err)?,
        launched: conditions::is_true(&conds, conditions::LAUNCHED),
        registered: conditions::is_true(&conds, conditions::REGISTERED),
        initialized: conditions::is_true(&conds, conditions::INITIALIZED),
        creation_timestamp: c
            .metadata
            .creation_timestamp
            .as_ref()
            .map(from_time)
            .unwrap_or_default(),
        deletion_timestamp: c.metadata.deletion_timestamp.as_ref().map(from_time),
        initialized_at: condition_since(&conds, conditions::INITIALIZED),
        last_pod_event_time: status
            .last_pod_event_time
            .as_deref()
            .and_then(parse_rfc3339),
        drifted_at: condition_since(&conds, conditions::DRIFTED),
        drifted,
        expire_after: c
            .spec
            .expire_after
            .as_ref()
            .map(|d| d.duration())
            .transpose()
            .map_err(err)?
            .flatten(),
        termination_grace_period: c
            .spec
            .termination_grace_period
            .as_deref()
            .map(parse_duration)
            .transpose()
            .map_err(err)?,
        labels: labels_map,
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
