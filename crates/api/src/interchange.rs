//! The scheduling interchange format (see the planner's benchmark README): one JSON document in
//! (instance types, pods, optional NodePool), one JSON document out (placements and costs).
//! Kubernetes manifests (Pods, controllers, DaemonSets, Nodes, NodePools) plus a separate
//! instance-type catalog are read into the same snapshot.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1 as api;
use nodewright_core::labels;
use nodewright_core::model::{
    CapacityType, InstanceType, Node, NodeClaimTemplate, NodePool, Offering, Overhead, Snapshot,
};
use nodewright_core::requirements::{Operator, Requirement};
use nodewright_core::resources::{self, Resources};
use nodewright_core::scheduling::Plan;
use nodewright_core::taints::{Taint, TaintEffect};
use serde_json::{Value, json};
use thiserror::Error;

use crate::document::Document;
use crate::error::{FieldError, Path};
use crate::quantity;
use crate::workload::{self, Workload};

#[derive(Debug, Error, PartialEq, Eq)]
pub enum InterchangeError {
    #[error("{source_name}: not valid JSON: {message}")]
    Json {
        source_name: String,
        message: String,
    },
    #[error("{source_name}: {error}")]
    Field {
        source_name: String,
        error: FieldError,
    },
    // Transparent: the workload error is the whole message, not a cause to repeat after it.
    #[error(transparent)]
    Workload(#[from] workload::WorkloadError),
    #[error("{source_name}: no instance types: pass a catalog with an `instanceTypes` list")]
    NoInstanceTypes { source_name: String },
}

const MIB: f64 = (1u64 << 20) as f64;

fn num(v: &Value, path: &Path) -> Result<f64, FieldError> {
    v.as_f64()
        .filter(|x| x.is_finite() && *x >= 0.0)
        .ok_or_else(|| path.error("expected a non-negative number"))
}

fn opt_num(obj: &Value, field: &str, path: &Path) -> Result<Option<f64>, FieldError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => num(v, &path.field(field)).map(Some),
    }
}

fn string<'a>(obj: &'a Value, field: &str, path: &Path) -> Result<&'a str, FieldError> {
    obj.get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| path.field(field).error("expected a string"))
}

/// One interchange instance type. `cpu`, `memoryMiB` and `pods` are allocatable; capacity and
/// overhead are kept when given so limits can charge capacity.
pub fn instance_type(v: &Value, path: &Path) -> Result<InstanceType, FieldError> {
    let name = string(v, "name", path)?.to_string();
    let cpu = opt_num(v, "cpu", path)?.ok_or_else(|| path.field("cpu").error("required"))?;
    let mem =
        opt_num(v, "memoryMiB", path)?.ok_or_else(|| path.field("memoryMiB").error("required"))?;
    let pods = opt_num(v, "pods", path)?.unwrap_or(110.0);
    let millis = |c: f64| (c * 1000.0).round() as i64;
    let bytes = |m: f64| (m * MIB).round() as i64;
    let alloc = Resources::new()
        .with(resources::CPU, millis(cpu))
        .with(resources::MEMORY, bytes(mem))
        .with(resources::PODS, pods.round() as i64);
    let mut capacity = alloc.clone();
    if let Some(c) = opt_num(v, "capacityCpu", path)? {
        capacity.set(resources::CPU, millis(c).max(millis(cpu)));
    }
    if let Some(m) = opt_num(v, "capacityMemoryMiB", path)? {
        capacity.set(resources::MEMORY, bytes(m).max(bytes(mem)));
    }
    if let Some(extra) = v.get("resources").and_then(Value::as_object) {
        for (k, q) in extra {
            let p = path.field("resources").key(k);
            let s = match q {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => return Err(p.error("expected a quantity")),
            };
            let amount = quantity::parse_resource(k, &s).map_err(|e| p.error(e.to_string()))?;
            capacity.set(k, amount);
        }
    }
    let mut kube_reserved = capacity.clone();
    kube_reserved.sub(&alloc);
    for (k, _) in capacity.clone().iter() {
        if alloc.get(k) == 0 && !matches!(k, resources::CPU | resources::MEMORY | resources::PODS) {
            kube_reserved.set(k, 0);
        }
    }
    let arch = v.get("arch").and_then(Value::as_str).unwrap_or("amd64");
    let mut requirements = vec![
        Requirement::single(labels::ARCH, arch),
        Requirement::single(labels::OS, "linux"),
    ];
    if let Some(l) = v.get("labels").and_then(Value::as_object) {
        for (k, val) in l {
            let s = match val {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            requirements.push(Requirement::single(k, &s));
        }
    }
    let mut offerings = Vec::new();
    for (i, o) in v
        .get("offerings")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let op = path.field("offerings").index(i);
        let ct = string(o, "capacityType", &op)?;
        let capacity_type = CapacityType::parse(ct).ok_or_else(|| {
            op.field("capacityType")
                .error(format!("unknown capacity type {ct:?}"))
        })?;
        offerings.push(Offering {
            zone: string(o, "zone", &op)?.to_string(),
            capacity_type,
            price: opt_num(o, "price", &op)?.ok_or_else(|| op.field("price").error("required"))?,
            available: o.get("available").and_then(Value::as_bool).unwrap_or(true),
            reservation_id: o
                .get("reservationId")
                .and_then(Value::as_str)
                .map(str::to_string),
            reservation_capacity: o
                .get("reservationCapacity")
                .and_then(Value::as_u64)
                .map(|c| c as u32),
        });
    }
    Ok(InstanceType {
        name,
        requirements,
        capacity,
        overhead: Overhead {
            kube_reserved,
            ..Overhead::default()
        },
        offerings,
    })
}

fn taints(v: Option<&Value>, path: &Path) -> Result<Vec<Taint>, FieldError> {
    let mut out = Vec::new();
    for (i, t) in v
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let p = path.index(i);
        let effect = string(t, "effect", &p)?;
        out.push(Taint {
            key: string(t, "key", &p)?.to_string(),
            value: t
                .get("value")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            effect: TaintEffect::parse(effect).ok_or_else(|| {
                p.field("effect")
                    .error(format!("unknown effect {effect:?}"))
            })?,
        });
    }
    Ok(out)
}

/// An optional field read as a `T`, its type errors at `at`.
fn typed<T: serde::de::DeserializeOwned>(
    v: Option<&Value>,
    at: &Path,
) -> Result<Option<T>, FieldError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(v) => crate::decode::decode(v, at).map(Some),
    }
}

/// The fields of a `karpenter.sh/v1` NodePool the scheduler reads: name, weight, template
/// requirements, labels, taints and startup taints, and limits.
pub fn nodepool(v: &Value) -> Result<NodePool, FieldError> {
    let root = Path::default();
    let name = v
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("default")
        .to_string();
    let spec = v.get("spec").cloned().unwrap_or(Value::Null);
    let sp = root.field("spec");
    let tp = sp.field("template").field("spec");
    let tspec = spec
        .pointer("/template/spec")
        .cloned()
        .unwrap_or(Value::Null);
    let reqs_at = tp.field("requirements");
    let reqs: Vec<crate::v1::NodeSelectorRequirementWithMinValues> =
        typed(tspec.get("requirements"), &reqs_at)?.unwrap_or_default();
    let mut requirements = Vec::with_capacity(reqs.len());
    for (i, r) in reqs.into_iter().enumerate() {
        let p = reqs_at.index(i);
        let operator = Operator::parse(&r.operator).ok_or_else(|| {
            p.field("operator")
                .error(format!("unknown operator {:?}", r.operator))
        })?;
        let min_values = r
            .min_values
            .map(|m| {
                u32::try_from(m)
                    .map_err(|_| p.field("minValues").error(format!("{m} is out of range")))
            })
            .transpose()?;
        requirements.push(Requirement {
            key: r.key,
            operator,
            values: r.values.unwrap_or_default(),
            min_values,
        });
    }
    let labels: BTreeMap<String, String> = typed(
        spec.pointer("/template/metadata/labels"),
        &sp.field("template").field("metadata").field("labels"),
    )?
    .unwrap_or_default();
    let mut limits = Resources::new();
    if let Some(l) = spec.get("limits").and_then(Value::as_object) {
        for (k, q) in l {
            let p = sp.field("limits").key(k);
            let s = match q {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => return Err(p.error("expected a quantity")),
            };
            limits.set_explicit(
                k,
                quantity::parse_resource(k, &s).map_err(|e| p.error(e.to_string()))?,
            );
        }
    }
    let weight: i32 = typed(spec.get("weight"), &sp.field("weight"))?.unwrap_or(0);
    Ok(NodePool {
        name,
        weight,
        template: NodeClaimTemplate {
            labels,
            taints: taints(tspec.get("taints"), &tp.field("taints"))?,
            startup_taints: taints(tspec.get("startupTaints"), &tp.field("startupTaints"))?,
            requirements,
            ..NodeClaimTemplate::default()
        },
        limits,
        ready: true,
        ..NodePool::default()
    })
}

/// A `core/v1` Node: labels, taints, allocatable and capacity.
pub fn node(n: &api::Node, path: &Path) -> Result<Node, FieldError> {
    let q =
        |m: &Option<BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
         f: &str| {
            let mut r = Resources::new();
            for (k, v) in m.iter().flatten() {
                let a = quantity::parse_resource(k, &v.0)
                    .map_err(|e| path.field("status").field(f).key(k).error(e.to_string()))?;
                r.set(k, a);
            }
            Ok::<_, FieldError>(r)
        };
    let status = n.status.clone().unwrap_or_default();
    let spec = n.spec.clone().unwrap_or_default();
    let mut ts = Vec::new();
    for t in spec.taints.iter().flatten() {
        if let Some(effect) = TaintEffect::parse(&t.effect) {
            ts.push(Taint {
                key: t.key.clone(),
                value: t.value.clone().unwrap_or_default(),
                effect,
            });
        }
    }
    Ok(Node {
        name: n.metadata.name.clone().unwrap_or_default(),
        provider_id: spec.provider_id.clone().unwrap_or_default(),
        labels: n.metadata.labels.clone().unwrap_or_default(),
        taints: ts,
        capacity: q(&status.capacity, "capacity")?,
        allocatable: q(&status.allocatable, "allocatable")?,
        ready: status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True"),
        unschedulable: spec.unschedulable.unwrap_or(false),
        deletion_timestamp: n
            .metadata
            .deletion_timestamp
            .as_ref()
            .map(|t| nodewright_core::time::Timestamp(t.0.as_millisecond())),
        ..Node::default()
    })
}

fn field_err(source_name: &str) -> impl Fn(FieldError) -> InterchangeError + '_ {
    move |error| InterchangeError::Field {
        source_name: source_name.to_string(),
        error,
    }
}

/// Instance types from a catalog: an interchange document or a bare list.
pub fn read_catalog(source_name: &str, v: &Value) -> Result<Vec<InstanceType>, InterchangeError> {
    let (list, path) = match v {
        Value::Array(a) => (a.as_slice(), Path::root("")),
        _ => (
            v.get("instanceTypes")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or(&[]),
            Path::root("instanceTypes"),
        ),
    };
    let its = list
        .iter()
        .enumerate()
        .map(|(i, it)| instance_type(it, &path.index(i)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(field_err(source_name))?;
    if its.is_empty() {
        return Err(InterchangeError::NoInstanceTypes {
            source_name: source_name.to_string(),
        });
    }
    Ok(its)
}

fn default_pool() -> NodePool {
    NodePool {
        name: "default".to_string(),
        ready: true,
        ..NodePool::default()
    }
}

fn attach_instance_types(s: &mut Snapshot, its: Vec<InstanceType>) {
    let its = Arc::new(its);
    for np in &s.nodepools {
        s.instance_types.insert(np.name.clone(), its.clone());
    }
}

/// Reads an interchange input document into a snapshot.
pub fn read_input(source_name: &str, text: &str) -> Result<Snapshot, InterchangeError> {
    let v: Value = serde_json::from_str(text).map_err(|e| InterchangeError::Json {
        source_name: source_name.to_string(),
        message: e.to_string(),
    })?;
    let err = field_err(source_name);
    let its = read_catalog(source_name, &v)?;
    let mut s = Snapshot::default();
    for (i, p) in v
        .get("pods")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let path = Path::root("pods").index(i);
        let api_pod: api::Pod = crate::decode::decode(p, &path).map_err(&err)?;
        let pod = workload::pod_from_api(&api_pod)
            .map_err(|e| err(path.append(&e.path).error(e.reason)))?;
        s.pods.push(pod.into());
    }
    for (i, n) in v
        .get("nodes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let path = Path::root("nodes").index(i);
        let api_node: api::Node = crate::decode::decode(n, &path).map_err(&err)?;
        s.nodes
            .push(Arc::new(node(&api_node, &path).map_err(&err)?));
    }
    for (i, d) in v
        .get("daemonSets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let path = Path::root("daemonSets").index(i);
        let ds: k8s_openapi::api::apps::v1::DaemonSet =
            crate::decode::decode(d, &path).map_err(&err)?;
        s.daemonsets.push(
            workload::daemonset_pod(&ds).map_err(|e| err(path.append(&e.path).error(e.reason)))?,
        );
    }
    match (v.get("nodePool"), v.get("nodePools")) {
        (Some(np), _) if !np.is_null() => s.nodepools.push(
            nodepool(np)
                .map_err(|e| err(FieldError::new(format!("nodePool.{}", e.path), e.reason)))?,
        ),
        (_, Some(Value::Array(list))) => {
            for (i, np) in list.iter().enumerate() {
                s.nodepools.push(nodepool(np).map_err(|e| {
                    err(FieldError::new(
                        format!("nodePools[{i}].{}", e.path),
                        e.reason,
                    ))
                })?);
            }
        }
        _ => s.nodepools.push(default_pool()),
    }
    attach_instance_types(&mut s, its);
    Ok(s)
}

/// Reads Kubernetes manifests (workloads, DaemonSets, Nodes, NodePools) plus a catalog.
pub fn read_manifests(
    docs: &[Document],
    catalog: Vec<InstanceType>,
) -> Result<Snapshot, InterchangeError> {
    let mut s = Snapshot::default();
    for d in docs {
        match d.kind() {
            "NodePool" => {
                s.nodepools
                    .push(nodepool(&d.value).map_err(|e| InterchangeError::Field {
                        source_name: d.describe(),
                        error: e,
                    })?)
            }
            "Node" => {
                let n: api::Node =
                    crate::decode::decode(&d.value, &Path::default()).map_err(|error| {
                        InterchangeError::Field {
                            source_name: d.describe(),
                            error,
                        }
                    })?;
                s.nodes
                    .push(Arc::new(node(&n, &Path::default()).map_err(|e| {
                        InterchangeError::Field {
                            source_name: d.describe(),
                            error: e,
                        }
                    })?));
            }
            _ => match workload::expand_document(d)? {
                Some(Workload::Pods(p)) => s.pods.extend(p.into_iter().map(Arc::new)),
                Some(Workload::DaemonSet(ds)) => s.daemonsets.push(*ds),
                None => {}
            },
        }
    }
    if s.nodepools.is_empty() {
        s.nodepools.push(default_pool());
    }
    attach_instance_types(&mut s, catalog);
    Ok(s)
}

mod write;
pub use write::{node_json, pod_json, write_catalog, write_input, write_output};

#[cfg(test)]
mod tests;
