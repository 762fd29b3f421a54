//! A running cluster's objects into one [`Snapshot`] for disruption planning.
//!
//! The input is what `kubectl get -o json|yaml` prints (Lists are expanded) or plain manifests:
//! Nodes, Pods, NodeClaims, NodePools of any supported generation (converted to v1 first),
//! PodDisruptionBudgets, DaemonSets, Namespaces, PersistentVolumes, PersistentVolumeClaims and
//! StorageClasses. Pods are taken as they are: the controllers that own them (Deployments,
//! ReplicaSets, StatefulSets, Jobs) are not expanded again, since their pods are in the input.
//! Every other kind is ignored. An object that cannot be read is an error naming its file,
//! document index, kind/name, field path and reason.
//!
//! The interchange format reaches the same path: [`interchange_documents`] turns its arrays
//! into documents.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1 as api;
use k8s_openapi::api::policy::v1 as policy;
use k8s_openapi::api::storage::v1 as storage;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use nodewright_core::labels;
use nodewright_core::model::{
    InstanceType, NodeClaim, PersistentVolume, PersistentVolumeClaim, Pod, PodDisruptionBudget,
    Snapshot, StorageClass, UnhealthyPodEvictionPolicy,
};
use nodewright_core::requirements::NodeSelectorTerm;
use nodewright_core::resources::Resources;
use nodewright_core::time::Timestamp;
use serde_json::Value;
use thiserror::Error;

use crate::convert::{ConvertOptions, Outcome, convert_documents};
use crate::document::Document;
use crate::error::{FieldError, Path};
use crate::object::Object;
use crate::workload::{self, Workload};
use crate::{interchange, quantity, to_core, v1};

/// One object that could not be read: `file[index] Kind/name: field: reason`.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("{object}: {error}")]
pub struct ClusterError {
    pub object: String,
    pub error: FieldError,
}

fn located(doc: &Document) -> impl Fn(FieldError) -> ClusterError + '_ {
    move |error| ClusterError {
        object: doc.describe(),
        error,
    }
}

fn decode<T: serde::de::DeserializeOwned>(doc: &Document) -> Result<T, ClusterError> {
    crate::decode::decode(&doc.value, &crate::error::Path::default()).map_err(|error| {
        ClusterError {
            object: doc.describe(),
            error,
        }
    })
}

/// An RFC 3339 instant (`2026-01-01T00:00:00Z`).
pub fn parse_time(text: &str) -> Result<Timestamp, String> {
    text.parse::<k8s_openapi::jiff::Timestamp>()
        .map(|t| Timestamp(t.as_millisecond()))
        .map_err(|e| format!("invalid RFC 3339 time {text:?}: {e}"))
}

/// `t` as RFC 3339 in UTC; the raw milliseconds when out of range.
pub fn format_time(t: Timestamp) -> String {
    k8s_openapi::jiff::Timestamp::from_millisecond(t.0)
        .map(|ts| ts.to_string())
        .unwrap_or_else(|_| format!("{}ms", t.0))
}

fn meta_time(
    t: &Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
) -> Option<Timestamp> {
    t.as_ref().map(|t| Timestamp(t.0.as_millisecond()))
}

/// Reads a cluster's documents. `catalog` is every NodePool's instance types; `now` is the
/// instant the snapshot describes.
pub fn read_cluster(
    docs: Vec<Document>,
    catalog: Vec<InstanceType>,
    now: Timestamp,
) -> Result<Snapshot, ClusterError> {
    let mut s = Snapshot {
        now,
        ..Snapshot::default()
    };
    let mut pdbs: Vec<(Document, policy::PodDisruptionBudget)> = Vec::new();
    for item in convert_documents(docs, &ConvertOptions::default()) {
        let doc = &item.doc;
        match &item.outcome {
            Outcome::Failed(e) => return Err(located(doc)(e.clone())),
            Outcome::Current(o) | Outcome::Converted { object: o, .. } => match o {
                Object::NodePool(np) => {
                    if let Some(e) = item.validate().and_then(|r| r.errors.into_iter().next()) {
                        return Err(located(doc)(e));
                    }
                    s.nodepools
                        .push(to_core::nodepool(np).map_err(|errs| located(doc)(errs[0].clone()))?);
                }
                Object::NodeClaim(nc) => {
                    let c = nodeclaim(nc).map_err(located(doc))?;
                    // A dump's claim must say its NodePool, or the plan cannot place its
                    // replacements; a running controller treats such a claim as unmanaged.
                    if c.nodepool.is_empty() {
                        let path = Path::root("metadata").field("labels").key(labels::NODEPOOL);
                        let why =
                            "a NodeClaim needs its NodePool label (or a NodePool owner reference)";
                        return Err(located(doc)(path.error(why)));
                    }
                    s.node_claims.push(Arc::new(c));
                }
                _ => {}
            },
            Outcome::NotKarpenter => match doc.kind() {
                "Node" => {
                    let n: api::Node = decode(doc)?;
                    s.nodes.push(Arc::new(node(&n).map_err(located(doc))?));
                }
                "Pod" | "DaemonSet" => {
                    match workload::expand_document(doc).map_err(|e| ClusterError {
                        object: e.object,
                        error: e.error,
                    })? {
                        Some(Workload::Pods(p)) => s.pods.extend(p.into_iter().map(Arc::new)),
                        Some(Workload::DaemonSet(ds)) => s.daemonsets.push(*ds),
                        None => {}
                    }
                }
                "PodDisruptionBudget" => {
                    let p: policy::PodDisruptionBudget = decode(doc)?;
                    pdbs.push((doc.clone(), p));
                }
                "Namespace" => {
                    let n: api::Namespace = decode(doc)?;
                    s.namespaces.insert(
                        n.metadata.name.clone().unwrap_or_default(),
                        n.metadata.labels.clone().unwrap_or_default(),
                    );
                }
                "PersistentVolumeClaim" => {
                    let c: api::PersistentVolumeClaim = decode(doc)?;
                    s.persistent_volume_claims.push(pvc(&c));
                }
                "PersistentVolume" => {
                    let v: api::PersistentVolume = decode(doc)?;
                    s.persistent_volumes.push(pv(&v).map_err(located(doc))?);
                }
                "StorageClass" => {
                    let c: storage::StorageClass = decode(doc)?;
                    s.storage_classes
                        .push(storage_class(&c).map_err(located(doc))?);
                }
                _ => {}
            },
        }
    }
    // Budgets without a status are computed from the pods, so they need every pod first.
    for (doc, p) in &pdbs {
        s.pdbs.push(pdb(p, &s.pods).map_err(located(doc))?);
    }
    check_references(&s)?;
    let its = Arc::new(catalog);
    for np in &s.nodepools {
        s.instance_types.insert(np.name.clone(), its.clone());
    }
    Ok(s)
}

/// Names used twice would make the plan ambiguous.
fn check_references(s: &Snapshot) -> Result<(), ClusterError> {
    let dup = |kind: &str, names: Vec<&str>| {
        let mut seen = std::collections::BTreeSet::new();
        for n in names {
            if !seen.insert(n) {
                return Err(ClusterError {
                    object: format!("{kind}/{n}"),
                    error: FieldError::new("metadata.name", "appears more than once"),
                });
            }
        }
        Ok(())
    };
    dup("Node", s.nodes.iter().map(|n| n.name.as_str()).collect())?;
    dup(
        "NodeClaim",
        s.node_claims.iter().map(|c| c.name.as_str()).collect(),
    )?;
    dup(
        "NodePool",
        s.nodepools.iter().map(|p| p.name.as_str()).collect(),
    )?;
    let keys: Vec<String> = s.pods.iter().map(|p| p.key()).collect();
    dup("Pod", keys.iter().map(String::as_str).collect())
}

fn condition<'a>(nc: &'a v1::NodeClaim, type_: &str) -> Option<&'a v1::shared::Condition> {
    nc.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == type_))
}

/// A resource list (capacity, allocatable, requests, limits) as core's resources, every
/// quantity parsed; an error names the resource under `path`.
pub fn resource_list(
    list: Option<&v1::shared::ResourceList>,
    path: &Path,
) -> Result<Resources, FieldError> {
    let mut r = Resources::new();
    for (k, q) in list.into_iter().flatten() {
        let amount =
            quantity::parse_resource(k, &q.text()).map_err(|e| path.key(k).error(e.to_string()))?;
        r.set(k, amount);
    }
    Ok(r)
}

fn time_field(text: Option<&String>, path: &Path) -> Result<Option<Timestamp>, FieldError> {
    text.map(|t| parse_time(t).map_err(|e| path.error(e)))
        .transpose()
}

/// A `karpenter.sh/v1` NodeClaim with its status: lifecycle conditions, node, capacity. The
/// one conversion of a NodeClaim, for files and for the running controller alike. Its
/// NodePool is its label, else its NodePool owner, else empty (a claim no NodePool manages).
pub fn nodeclaim(nc: &v1::NodeClaim) -> Result<NodeClaim, FieldError> {
    let md = &nc.metadata;
    let name = md.name.clone().unwrap_or_default();
    let labels_map = md.labels.clone().unwrap_or_default();
    let nodepool = nodepool_of(md, &labels_map);
    let spec = Path::root("spec");
    let mut errs = Vec::new();
    let taints = to_core::taints(nc.spec.taints.as_deref(), &spec.field("taints"), &mut errs);
    let startup_taints = to_core::taints(
        nc.spec.startup_taints.as_deref(),
        &spec.field("startupTaints"),
        &mut errs,
    );
    let requirements = to_core::requirements(
        &nc.spec.requirements,
        &spec.field("requirements"),
        &mut errs,
    );
    if let Some(e) = errs.into_iter().next() {
        return Err(e);
    }
    let (expire_after, termination_grace_period) = lifetimes(&nc.spec, &spec)?;
    let status = nc.status.clone().unwrap_or_default();
    let sp = Path::root("status");
    let is_true = |t: &str| condition(nc, t).is_some_and(|c| c.status == "True");
    let drifted = condition(nc, "Drifted")
        .filter(|c| c.status == "True")
        .map(|c| c.reason.clone().unwrap_or_else(|| "Drifted".to_string()));
    let requests = resource_list(
        nc.spec.resources.as_ref().and_then(|r| r.requests.as_ref()),
        &spec.field("resources").field("requests"),
    )?;
    Ok(NodeClaim {
        name,
        nodepool,
        labels: labels_map.into(),
        annotations: md.annotations.clone().unwrap_or_default().into(),
        taints,
        startup_taints,
        requirements,
        requests,
        provider_id: status.provider_id.clone(),
        node_name: status.node_name.clone(),
        image_id: status.image_id.clone(),
        capacity: resource_list(status.capacity.as_ref(), &sp.field("capacity"))?,
        allocatable: resource_list(status.allocatable.as_ref(), &sp.field("allocatable"))?,
        launched: is_true("Launched"),
        registered: is_true("Registered"),
        initialized: is_true("Initialized"),
        creation_timestamp: meta_time(&md.creation_timestamp).unwrap_or_default(),
        deletion_timestamp: meta_time(&md.deletion_timestamp),
        initialized_at: true_since(nc, "Initialized")?,
        last_pod_event_time: time_field(
            status.last_pod_event_time.as_ref(),
            &sp.field("lastPodEventTime"),
        )?,
        drifted,
        drifted_at: true_since(nc, "Drifted")?,
        expire_after,
        termination_grace_period,
    })
}

/// A claim's NodePool: its label, else its NodePool owner, else empty.
fn nodepool_of(md: &ObjectMeta, claim_labels: &BTreeMap<String, String>) -> String {
    claim_labels
        .get(labels::NODEPOOL)
        .cloned()
        .or_else(|| {
            md.owner_references
                .iter()
                .flatten()
                .find(|o| o.kind == "NodePool")
                .map(|o| o.name.clone())
        })
        .unwrap_or_default()
}

/// The claim's `expireAfter` and `terminationGracePeriod`; errors name the field under `spec`.
fn lifetimes(
    spec: &v1::nodeclaim::NodeClaimSpec,
    path: &Path,
) -> Result<(Option<Duration>, Option<Duration>), FieldError> {
    let expire_after = match &spec.expire_after {
        None => None,
        Some(d) => d
            .duration()
            .map_err(|e| path.field("expireAfter").error(e))?,
    };
    let termination_grace_period = spec
        .termination_grace_period
        .as_deref()
        .map(|d| {
            v1::shared::parse_duration(d).map_err(|e| path.field("terminationGracePeriod").error(e))
        })
        .transpose()?;
    Ok((expire_after, termination_grace_period))
}

/// When condition `t` of the claim last turned True, if it is True.
fn true_since(nc: &v1::NodeClaim, t: &str) -> Result<Option<Timestamp>, FieldError> {
    let Some(c) = condition(nc, t).filter(|c| c.status == "True") else {
        return Ok(None);
    };
    let i = nc
        .status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .position(|c| c.type_ == t)
        .unwrap_or(0);
    let path = Path::root("status").field("conditions").index(i);
    time_field(
        c.last_transition_time.as_ref(),
        &path.field("lastTransitionTime"),
    )
}

/// A Node with what disruption reads beyond scheduling: annotations and creation time.
pub fn node(n: &api::Node) -> Result<nodewright_core::model::Node, FieldError> {
    let mut out = interchange::node(n, &Path::default())?;
    if out.name.is_empty() {
        return Err(Path::root("metadata").field("name").error("required"));
    }
    out.annotations = n.metadata.annotations.clone().unwrap_or_default().into();
    out.creation_timestamp = meta_time(&n.metadata.creation_timestamp).unwrap_or_default();
    Ok(out)
}

/// How many pods an `IntOrString` budget stands for, rounding up as the disruption controller
/// does.
fn scaled(v: &IntOrString, total: i32, path: &Path) -> Result<i32, FieldError> {
    match v {
        IntOrString::Int(i) if *i >= 0 => Ok(*i),
        IntOrString::Int(_) => Err(path.error("must not be negative")),
        IntOrString::String(s) => {
            let pct: i64 = s
                .strip_suffix('%')
                .and_then(|p| p.parse().ok())
                .filter(|p| (0..=100).contains(p))
                .ok_or_else(|| {
                    path.error(format!("invalid value {s:?}: an integer or a percentage"))
                })?;
            Ok(((pct * i64::from(total) + 99) / 100) as i32)
        }
    }
}

/// A PodDisruptionBudget. `status.disruptionsAllowed` is used when present; otherwise it is
/// computed from the pods in the input the way the disruption controller would (healthy =
/// Ready, expected = every non-terminal selected pod).
pub fn pdb(
    p: &policy::PodDisruptionBudget,
    pods: &[Arc<Pod>],
) -> Result<PodDisruptionBudget, FieldError> {
    let namespace = p
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".to_string());
    let spec = p.spec.clone().unwrap_or_default();
    let sp = Path::root("spec");
    let selector = spec
        .selector
        .as_ref()
        .map(|s| workload::label_selector(s, &sp.field("selector")))
        .transpose()?;
    let policy = match spec.unhealthy_pod_eviction_policy.as_deref() {
        None | Some("IfHealthyBudget") => UnhealthyPodEvictionPolicy::IfHealthyBudget,
        Some("AlwaysAllow") => UnhealthyPodEvictionPolicy::AlwaysAllow,
        Some(other) => {
            return Err(sp
                .field("unhealthyPodEvictionPolicy")
                .error(format!("unsupported policy {other:?}")));
        }
    };
    let fully_blocking = match (&spec.max_unavailable, &spec.min_available) {
        (Some(IntOrString::Int(0)), _) => true,
        (Some(IntOrString::String(s)), _) if s == "0%" => true,
        (None, Some(IntOrString::String(s))) if s == "100%" => true,
        _ => false,
    };
    let allowed = match p.status.as_ref() {
        Some(st) => st.disruptions_allowed,
        None => {
            let selected: Vec<&Pod> = pods
                .iter()
                .filter(|q| q.namespace == namespace && !q.is_terminal())
                .filter(|q| selector.as_ref().is_some_and(|s| s.matches(&q.labels)))
                .map(|q| &**q)
                .collect();
            let expected = selected.len() as i32;
            let healthy = selected.iter().filter(|q| q.ready).count() as i32;
            let desired = match (&spec.max_unavailable, &spec.min_available) {
                (Some(m), _) => expected - scaled(m, expected, &sp.field("maxUnavailable"))?,
                (None, Some(m)) => scaled(m, expected, &sp.field("minAvailable"))?,
                (None, None) => expected,
            };
            (healthy - desired).max(0)
        }
    };
    Ok(PodDisruptionBudget {
        namespace,
        name: p.metadata.name.clone().unwrap_or_default(),
        selector,
        disruptions_allowed: allowed,
        unhealthy_pod_eviction_policy: policy,
        fully_blocking,
    })
}

pub fn pvc(c: &api::PersistentVolumeClaim) -> PersistentVolumeClaim {
    let spec = c.spec.clone().unwrap_or_default();
    PersistentVolumeClaim {
        namespace: c
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_string()),
        name: c.metadata.name.clone().unwrap_or_default(),
        volume_name: spec.volume_name.filter(|v| !v.is_empty()),
        storage_class: spec.storage_class_name,
    }
}

/// `matchFields` (node names) cannot constrain a new node; they are dropped, not refused.
fn terms(list: &[api::NodeSelectorTerm], path: &Path) -> Result<Vec<NodeSelectorTerm>, FieldError> {
    list.iter()
        .enumerate()
        .map(|(i, t)| {
            let mut t = t.clone();
            t.match_fields = None;
            workload::node_selector_term(&t, &path.index(i))
        })
        .collect()
}

pub fn pv(v: &api::PersistentVolume) -> Result<PersistentVolume, FieldError> {
    let spec = v.spec.clone().unwrap_or_default();
    let required = spec
        .node_affinity
        .as_ref()
        .and_then(|a| a.required.as_ref())
        .map(|r| r.node_selector_terms.clone())
        .unwrap_or_default();
    Ok(PersistentVolume {
        name: v.metadata.name.clone().unwrap_or_default(),
        node_affinity: terms(
            &required,
            &Path::root("spec")
                .field("nodeAffinity")
                .field("required")
                .field("nodeSelectorTerms"),
        )?,
        local_or_host_path: spec.local.is_some() || spec.host_path.is_some(),
    })
}

pub fn storage_class(c: &storage::StorageClass) -> Result<StorageClass, FieldError> {
    let topologies: Vec<api::NodeSelectorTerm> = c
        .allowed_topologies
        .iter()
        .flatten()
        .map(|t| api::NodeSelectorTerm {
            match_expressions: Some(
                t.match_label_expressions
                    .iter()
                    .flatten()
                    .map(|e| api::NodeSelectorRequirement {
                        key: e.key.clone(),
                        operator: "In".to_string(),
                        values: Some(e.values.clone()),
                    })
                    .collect(),
            ),
            match_fields: None,
        })
        .collect();
    Ok(StorageClass {
        name: c.metadata.name.clone().unwrap_or_default(),
        provisioner: c.provisioner.clone(),
        volume_binding_mode: c
            .volume_binding_mode
            .clone()
            .unwrap_or_else(|| "Immediate".to_string()),
        allowed_topologies: terms(&topologies, &Path::root("allowedTopologies"))?,
    })
}

/// The arrays of an interchange document that describe a cluster, each element a document
/// named `<source>:<array>[i]`: `nodes`, `nodeClaims`, `nodePools` (or one `nodePool`),
/// `pods`, `daemonSets`, `podDisruptionBudgets`, `namespaces`, `persistentVolumes`,
/// `persistentVolumeClaims`, `storageClasses`. A missing `apiVersion`/`kind` is filled in.
pub fn interchange_documents(source: &str, v: &Value) -> Vec<Document> {
    const ARRAYS: &[(&str, &str, &str)] = &[
        ("nodePools", "karpenter.sh/v1", "NodePool"),
        ("nodeClaims", "karpenter.sh/v1", "NodeClaim"),
        ("nodes", "v1", "Node"),
        ("pods", "v1", "Pod"),
        ("daemonSets", "apps/v1", "DaemonSet"),
        ("podDisruptionBudgets", "policy/v1", "PodDisruptionBudget"),
        ("namespaces", "v1", "Namespace"),
        ("persistentVolumes", "v1", "PersistentVolume"),
        ("persistentVolumeClaims", "v1", "PersistentVolumeClaim"),
        ("storageClasses", "storage.k8s.io/v1", "StorageClass"),
    ];
    let mut docs = Vec::new();
    let mut push = |array: &str, index: usize, item: &Value, api_version: &str, kind: &str| {
        let mut value = item.clone();
        if let Some(o) = value.as_object_mut() {
            o.entry("apiVersion")
                .or_insert_with(|| Value::String(api_version.to_string()));
            o.entry("kind")
                .or_insert_with(|| Value::String(kind.to_string()));
        }
        docs.push(Document {
            source: format!("{source}:{array}"),
            index,
            value,
        });
    };
    if let Some(np) = v.get("nodePool").filter(|n| !n.is_null()) {
        push("nodePool", 0, np, "karpenter.sh/v1", "NodePool");
    }
    for (array, api_version, kind) in ARRAYS {
        for (i, item) in v
            .get(*array)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            push(array, i, item, api_version, kind);
        }
    }
    docs
}

#[cfg(test)]
mod tests;
