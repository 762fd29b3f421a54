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
    #[error("{0}")]
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
    let mut requirements = Vec::new();
    for (i, r) in tspec
        .get("requirements")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let p = tp.field("requirements").index(i);
        let op = string(r, "operator", &p)?;
        let operator = Operator::parse(op).ok_or_else(|| {
            p.field("operator")
                .error(format!("unknown operator {op:?}"))
        })?;
        let values = r
            .get("values")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let min_values = r.get("minValues").and_then(Value::as_u64).map(|m| m as u32);
        requirements.push(Requirement {
            key: string(r, "key", &p)?.to_string(),
            operator,
            values,
            min_values,
        });
    }
    let labels: BTreeMap<String, String> = spec
        .pointer("/template/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect()
        })
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
            limits.set(
                k,
                quantity::parse_resource(k, &s).map_err(|e| p.error(e.to_string()))?,
            );
        }
    }
    let weight = spec.get("weight").and_then(Value::as_i64).unwrap_or(0) as i32;
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
        let api_pod: api::Pod =
            serde_json::from_value(p.clone()).map_err(|e| err(path.error(e.to_string())))?;
        let pod = workload::pod_from_api(&api_pod)
            .map_err(|e| err(FieldError::new(format!("{path}.{}", e.path), e.reason)))?;
        s.pods.push(pod);
    }
    for (i, n) in v
        .get("nodes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let path = Path::root("nodes").index(i);
        let api_node: api::Node =
            serde_json::from_value(n.clone()).map_err(|e| err(path.error(e.to_string())))?;
        s.nodes.push(node(&api_node, &path).map_err(&err)?);
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
            serde_json::from_value(d.clone()).map_err(|e| err(path.error(e.to_string())))?;
        s.daemonsets.push(
            workload::daemonset_pod(&ds)
                .map_err(|e| err(FieldError::new(format!("{path}.{}", e.path), e.reason)))?,
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
                let n: api::Node = serde_json::from_value(d.value.clone()).map_err(|e| {
                    InterchangeError::Field {
                        source_name: d.describe(),
                        error: FieldError::new("", e.to_string()),
                    }
                })?;
                s.nodes.push(
                    node(&n, &Path::default()).map_err(|e| InterchangeError::Field {
                        source_name: d.describe(),
                        error: e,
                    })?,
                );
            }
            _ => match workload::expand_document(d)? {
                Some(Workload::Pods(p)) => s.pods.extend(p),
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

fn round(x: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (x * f).round() / f
}

/// The output document of the interchange format.
pub fn write_output(plan: &Plan, solve_seconds: f64) -> Value {
    let per: Vec<Value> = plan
        .new_claims
        .iter()
        .map(|c| {
            let cheapest = c.cheapest();
            json!({
                "nodePool": c.nodepool,
                "instanceTypes": c.instance_types.iter().take(5).map(|o| plan.name_of(o)).collect::<Vec<_>>(),
                "instanceTypeCount": c.instance_types.len(),
                "pods": c.pods.len(),
                "cheapestPrice": cheapest.map(|o| round(o.price, 6)),
                "cheapestInstanceType": cheapest.map(|o| plan.name_of(o)),
                "cheapestZone": cheapest.map(|o| plan.zone_of(o)),
                "cheapestCapacityType": cheapest.map(|o| o.capacity_type.as_str()),
                "requestedCpu": round(c.requests.get(resources::CPU) as f64 / 1000.0, 3),
                "requestedMemoryMiB": round(c.requests.get(resources::MEMORY) as f64 / MIB, 3),
                "requirements": c.requirements.iter().filter(|r| !r.starts_with(labels::INSTANCE_TYPE)).collect::<Vec<_>>(),
                "podNames": c.pods,
            })
        })
        .collect();
    let errors: Vec<Value> = plan
        .unplaced
        .iter()
        .map(|u| json!({"pod": u.pod, "reason": u.reason}))
        .collect();
    let existing: Vec<Value> = plan
        .placements
        .iter()
        .filter_map(|p| match &p.target {
            nodewright_core::scheduling::Target::Node(n) => Some(json!({"pod": p.pod, "node": n})),
            nodewright_core::scheduling::Target::InFlight(n) => {
                Some(json!({"pod": p.pod, "nodeClaim": n}))
            }
            nodewright_core::scheduling::Target::NewClaim(_) => None,
        })
        .collect();
    json!({
        "pods": plan.pods,
        "scheduled": plan.placements.len(),
        "podErrors": plan.unplaced.len(),
        "nodeClaims": plan.new_claims.len(),
        "totalCheapestPricePerHour": round(plan.cost, 6),
        "lowerBoundPricePerHour": round(plan.lower_bound, 6),
        "gap": round(plan.gap(), 6),
        "solveSeconds": round(solve_seconds, 6),
        "perNodeClaim": per,
        "existingPlacements": existing,
        "errors": errors,
    })
}

fn quantity_string(name: &str, amount: i64) -> String {
    if name == resources::CPU {
        if amount % 1000 == 0 {
            format!("{}", amount / 1000)
        } else {
            format!("{amount}m")
        }
    } else if amount % (1 << 20) == 0 && amount != 0 {
        format!("{}Mi", amount >> 20)
    } else {
        amount.to_string()
    }
}

fn selector_json(s: &nodewright_core::selector::LabelSelector) -> Value {
    let exprs: Vec<Value> = s
        .match_expressions
        .iter()
        .map(|e| {
            let op = match e.operator {
                nodewright_core::selector::SelectorOperator::In => "In",
                nodewright_core::selector::SelectorOperator::NotIn => "NotIn",
                nodewright_core::selector::SelectorOperator::Exists => "Exists",
                nodewright_core::selector::SelectorOperator::DoesNotExist => "DoesNotExist",
            };
            json!({"key": e.key, "operator": op, "values": e.values})
        })
        .collect();
    let mut v = json!({"matchLabels": s.match_labels});
    if !exprs.is_empty() {
        v["matchExpressions"] = Value::Array(exprs);
    }
    v
}

fn term_json(t: &nodewright_core::model::PodAffinityTerm) -> Value {
    let mut v = json!({"topologyKey": t.topology_key});
    if let Some(s) = &t.label_selector {
        v["labelSelector"] = selector_json(s);
    }
    if !t.namespaces.is_empty() {
        v["namespaces"] = json!(t.namespaces);
    }
    v
}

fn node_term_json(t: &nodewright_core::requirements::NodeSelectorTerm) -> Value {
    json!({"matchExpressions": t.match_expressions.iter().map(|r| json!({
        "key": r.key, "operator": r.operator.as_str(), "values": r.values})).collect::<Vec<_>>()})
}

/// A `core` pod as a `core/v1` Pod document (the fields the scheduler reads).
pub fn pod_json(p: &nodewright_core::model::Pod) -> Value {
    let requests: serde_json::Map<String, Value> = p
        .requests
        .iter()
        .filter(|(k, _)| *k != resources::PODS)
        .map(|(k, v)| (k.to_string(), Value::String(quantity_string(k, v))))
        .collect();
    let mut spec = json!({
        "containers": [{"name": "main", "image": "public.ecr.aws/eks-distro/kubernetes/pause:3.2",
                        "resources": {"requests": requests}}]
    });
    if !p.node_selector.is_empty() {
        spec["nodeSelector"] = json!(p.node_selector);
    }
    if let Some(n) = &p.node_name {
        spec["nodeName"] = json!(n);
    }
    if !p.topology_spread.is_empty() {
        spec["topologySpreadConstraints"] = p
            .topology_spread
            .iter()
            .map(|c| {
                let mut v = json!({
                    "maxSkew": c.max_skew,
                    "topologyKey": c.topology_key,
                    "whenUnsatisfiable": match c.when_unsatisfiable {
                        nodewright_core::model::WhenUnsatisfiable::DoNotSchedule => "DoNotSchedule",
                        nodewright_core::model::WhenUnsatisfiable::ScheduleAnyway => "ScheduleAnyway",
                    },
                });
                if let Some(s) = &c.label_selector {
                    v["labelSelector"] = selector_json(s);
                }
                if let Some(m) = c.min_domains {
                    v["minDomains"] = json!(m);
                }
                v
            })
            .collect();
    }
    let mut affinity = serde_json::Map::new();
    let mut node_aff = serde_json::Map::new();
    if !p.required_node_affinity.is_empty() {
        node_aff.insert(
            "requiredDuringSchedulingIgnoredDuringExecution".into(),
            json!({"nodeSelectorTerms": p.required_node_affinity.iter().map(node_term_json).collect::<Vec<_>>()}),
        );
    }
    if !p.preferred_node_affinity.is_empty() {
        node_aff.insert(
            "preferredDuringSchedulingIgnoredDuringExecution".into(),
            p.preferred_node_affinity
                .iter()
                .map(|w| json!({"weight": w.weight, "preference": node_term_json(&w.term)}))
                .collect(),
        );
    }
    if !node_aff.is_empty() {
        affinity.insert("nodeAffinity".into(), Value::Object(node_aff));
    }
    for (name, req, pref) in [
        ("podAffinity", &p.pod_affinity, &p.preferred_pod_affinity),
        (
            "podAntiAffinity",
            &p.pod_anti_affinity,
            &p.preferred_pod_anti_affinity,
        ),
    ] {
        let mut m = serde_json::Map::new();
        if !req.is_empty() {
            m.insert(
                "requiredDuringSchedulingIgnoredDuringExecution".into(),
                req.iter().map(term_json).collect(),
            );
        }
        if !pref.is_empty() {
            m.insert(
                "preferredDuringSchedulingIgnoredDuringExecution".into(),
                pref.iter()
                    .map(|w| json!({"weight": w.weight, "podAffinityTerm": term_json(&w.term)}))
                    .collect(),
            );
        }
        if !m.is_empty() {
            affinity.insert(name.into(), Value::Object(m));
        }
    }
    if !affinity.is_empty() {
        spec["affinity"] = Value::Object(affinity);
    }
    let created = k8s_openapi::jiff::Timestamp::from_millisecond(p.creation_timestamp.0)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default();
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": p.name, "namespace": p.namespace, "uid": p.uid, "labels": p.labels,
                     "creationTimestamp": created},
        "spec": spec,
        "status": {"phase": if p.node_name.is_some() { "Running" } else { "Pending" }}
    })
}

/// A `core` node as a `core/v1` Node document (labels, taints, capacity, allocatable).
pub fn node_json(n: &Node) -> Value {
    let q = |r: &Resources| -> serde_json::Map<String, Value> {
        r.iter()
            .map(|(k, v)| (k.to_string(), Value::String(quantity_string(k, v))))
            .collect()
    };
    let taints: Vec<Value> = n
        .taints
        .iter()
        .map(|t| json!({"key": t.key, "value": t.value, "effect": t.effect.as_str()}))
        .collect();
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": n.name, "labels": n.labels},
        "spec": {"taints": taints, "unschedulable": n.unschedulable},
        "status": {"capacity": q(&n.capacity), "allocatable": q(&n.allocatable),
                   "conditions": [{"type": "Ready", "status": if n.ready { "True" } else { "False" }}]}
    })
}

/// A snapshot (one NodePool, its catalog, pending pods) as an interchange input document.
pub fn write_input(s: &Snapshot, meta: Value) -> Value {
    let np = s.nodepools.first();
    let its = np
        .and_then(|np| s.instance_types.get(&np.name))
        .map(|v| v.as_slice())
        .unwrap_or(&[]);
    let types: Vec<Value> = its
        .iter()
        .map(|it| {
            let a = it.allocatable();
            let arch = it
                .requirements
                .iter()
                .find(|r| r.key == labels::ARCH)
                .and_then(|r| r.values.first().cloned())
                .unwrap_or_else(|| "amd64".into());
            json!({
                "name": it.name,
                "cpu": a.get(resources::CPU) as f64 / 1000.0,
                "memoryMiB": a.get(resources::MEMORY) as f64 / MIB,
                "pods": a.get(resources::PODS),
                "arch": arch,
                "offerings": it.offerings.iter().map(|o| json!({
                    "zone": o.zone, "capacityType": o.capacity_type.as_str(), "price": o.price, "available": o.available
                })).collect::<Vec<_>>(),
                "capacityCpu": it.capacity.get(resources::CPU) as f64 / 1000.0,
                "capacityMemoryMiB": it.capacity.get(resources::MEMORY) as f64 / MIB,
                "overheadCpu": it.overhead.total().get(resources::CPU) as f64 / 1000.0,
                "overheadMemoryMiB": it.overhead.total().get(resources::MEMORY) as f64 / MIB,
            })
        })
        .collect();
    let node_pool = np.map(|np| {
        let limits: serde_json::Map<String, Value> =
            np.limits.iter().map(|(k, v)| (k.to_string(), Value::String(quantity_string(k, v)))).collect();
        json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": np.name},
            "spec": {"template": {"spec": {"requirements": [],
                        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}},
                     "limits": limits}
        })
    });
    json!({
        "meta": meta,
        "instanceTypes": types,
        "pods": s.pods.iter().map(pod_json).collect::<Vec<_>>(),
        "nodes": s.nodes.iter().map(node_json).collect::<Vec<_>>(),
        "nodePool": node_pool,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_type_allocatable_is_exact() {
        let v = json!({"name": "it", "cpu": 0.9, "memoryMiB": 2038, "pods": 10, "capacityCpu": 1, "capacityMemoryMiB": 2048,
            "offerings": [{"zone": "z1", "capacityType": "spot", "price": 0.31, "available": true}]});
        let it = instance_type(&v, &Path::root("instanceTypes").index(0)).unwrap();
        let a = it.allocatable();
        assert_eq!(a.get("cpu"), 900);
        assert_eq!(a.get("memory"), 2038 << 20);
        assert_eq!(it.capacity.get("cpu"), 1000);
        assert_eq!(it.offerings[0].capacity_type, CapacityType::Spot);
    }

    #[test]
    fn bad_offering_names_its_path() {
        let v = json!({"instanceTypes": [{"name": "it", "cpu": 1, "memoryMiB": 1,
            "offerings": [{"zone": "z", "capacityType": "cheap", "price": 1}]}], "pods": []});
        let e = read_input("in.json", &v.to_string()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "in.json: instanceTypes[0].offerings[0].capacityType: unknown capacity type \"cheap\""
        );
    }

    #[test]
    fn nodepool_fields() {
        let np = nodepool(&json!({"metadata": {"name": "gpu"}, "spec": {"weight": 10,
            "limits": {"cpu": "10M", "memory": "1000Gi"},
            "template": {"metadata": {"labels": {"team": "a"}}, "spec": {
                "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"], "minValues": 1}],
                "taints": [{"key": "gpu", "effect": "NoSchedule"}]}}}}))
        .unwrap();
        assert_eq!(np.name, "gpu");
        assert_eq!(np.weight, 10);
        assert_eq!(np.limits.get("cpu"), 10_000_000_000);
        assert_eq!(np.template.requirements[0].min_values, Some(1));
        assert_eq!(np.template.taints[0].effect, TaintEffect::NoSchedule);
        assert_eq!(
            np.template.labels.get("team").map(String::as_str),
            Some("a")
        );
    }
}

#[cfg(test)]
mod sample_tests {
    use super::*;
    use nodewright_core::scheduling::{Options, solve};

    fn sample() -> String {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/bench/sample-diverse-100.json"
        );
        std::fs::read_to_string(path).expect("fixture present")
    }

    #[test]
    fn sample_plans_without_errors() {
        let s = read_input("sample-diverse-100.json", &sample()).unwrap();
        assert_eq!(s.pods.len(), 100);
        let plan = solve(&s, &Options::default());
        assert!(plan.unplaced.is_empty(), "{:?}", plan.unplaced.first());
        assert_eq!(plan.placements.len(), 100);
        // Twenty hostname anti-affinity pods need twenty nodes.
        assert_eq!(plan.new_claims.len(), 20);
        let out = write_output(&plan, 0.1);
        assert_eq!(out["podErrors"], 0);
        assert_eq!(out["scheduled"], 100);
        assert!(
            out["lowerBoundPricePerHour"].as_f64().unwrap()
                <= out["totalCheapestPricePerHour"].as_f64().unwrap()
        );
    }

    #[test]
    fn written_inputs_read_back_the_same() {
        let s = read_input("sample-diverse-100.json", &sample()).unwrap();
        let again = read_input("again", &write_input(&s, json!({})).to_string()).unwrap();
        assert_eq!(
            again.pods,
            s.pods
                .iter()
                .map(|p| {
                    let mut p = p.clone();
                    p.owner = None;
                    p
                })
                .collect::<Vec<_>>()
        );
        let a = solve(&s, &Options::default());
        let b = solve(&again, &Options::default());
        assert_eq!(a.cost, b.cost);
    }
}

#[cfg(test)]
mod manifest_tests {
    use super::*;
    use crate::document::parse_documents;
    use nodewright_core::scheduling::{Options, solve};

    const MANIFESTS: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  limits: {cpu: "100"}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: kube-system}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: a, resources: {requests: {cpu: 200m, memory: 128Mi}}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 4
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: w, resources: {requests: {cpu: "1", memory: 1Gi}}}]
"#;

    #[test]
    fn manifests_plan_with_their_nodepool_and_daemons() {
        let docs = parse_documents("cluster.yaml", MANIFESTS).unwrap();
        let catalog = read_catalog(
            "catalog",
            &json!({"instanceTypes": [
                {"name": "small", "cpu": 2, "memoryMiB": 4096, "pods": 20,
                 "offerings": [{"zone": "z1", "capacityType": "on-demand", "price": 0.1},
                               {"zone": "z1", "capacityType": "spot", "price": 0.03}]},
                {"name": "large", "cpu": 8, "memoryMiB": 16384, "pods": 50,
                 "offerings": [{"zone": "z1", "capacityType": "on-demand", "price": 0.4}]}
            ]}),
        )
        .unwrap();
        let s = read_manifests(&docs, catalog).unwrap();
        assert_eq!(s.pods.len(), 4);
        assert_eq!(s.daemonsets.len(), 1);
        assert_eq!(s.nodepools[0].name, "general");
        let plan = solve(&s, &Options::default());
        assert!(plan.unplaced.is_empty(), "{:?}", plan.unplaced);
        // The NodePool allows on-demand only, and every claim carries the daemon's 200m.
        for c in &plan.new_claims {
            assert_eq!(
                c.cheapest().unwrap().capacity_type,
                nodewright_core::model::CapacityType::OnDemand
            );
            assert!(c.requests.get("cpu") >= 1200, "daemon overhead is included");
        }
    }
}
