//! A case file as data: its schema (every field named, nothing unknown accepted) and its
//! loading into a snapshot, options and expectation. Each error names the field path.

use std::collections::BTreeMap;
use std::path::Path;

use nodewright_api::cluster::{interchange_documents, parse_time, read_cluster};
use nodewright_api::error::Path as FieldPath;
use nodewright_api::interchange::read_catalog;
use nodewright_core::model::Snapshot;
use nodewright_core::scheduling::Options;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CaseFile {
    /// A file of `catalogs/` (without `.yaml`) whose instance types come before the input's.
    catalog: Option<String>,
    #[serde(default)]
    options: CaseOptions,
    /// An interchange document, read as `nodewright plan --disruption --input` reads it.
    input: Value,
    expect: Expect,
}

/// The scheduler's settings a case may change from their defaults.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CaseOptions {
    #[serde(default)]
    ignore_preferences: bool,
    #[serde(default)]
    min_values_best_effort: bool,
    max_instance_types: Option<usize>,
}

/// What the plan must show. A field left out is not checked, except that `unplaced`, when
/// given, is every pod that stays pending, and `claims` every new NodeClaim.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Expect {
    pub new_claims: Option<usize>,
    pub claims: Option<Vec<Claim>>,
    #[serde(default)]
    pub placed: BTreeMap<String, Where>,
    pub unplaced: Option<BTreeMap<String, Reason>>,
    pub pods_per_zone: Option<BTreeMap<String, usize>>,
    pub pods_per_capacity_type: Option<BTreeMap<String, usize>>,
    /// $/h of the new claims' cheapest options, to the cent's hundredth.
    pub cost: Option<f64>,
    /// Groups of pods each placed on one node or claim (which one is not checked).
    #[serde(default)]
    pub together: Vec<Vec<String>>,
    /// Groups of pods placed on as many different nodes or claims as there are pods.
    #[serde(default)]
    pub apart: Vec<Vec<String>>,
}

impl Expect {
    fn states_nothing(&self) -> bool {
        self.new_claims.is_none()
            && self.claims.is_none()
            && self.placed.is_empty()
            && self.unplaced.is_none()
            && self.pods_per_zone.is_none()
            && self.pods_per_capacity_type.is_none()
            && self.cost.is_none()
            && self.together.is_empty()
            && self.apart.is_empty()
    }
}

/// Why a pod stays pending: text its reason contains, or several.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Reason {
    One(String),
    All(Vec<String>),
}

impl Reason {
    pub fn parts(&self) -> &[String] {
        match self {
            Reason::One(s) => std::slice::from_ref(s),
            Reason::All(v) => v,
        }
    }
}

/// A new NodeClaim, known by the pods it holds.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Claim {
    pub pods: Vec<String>,
    pub node_pool: Option<String>,
    /// The cheapest option, the one launched first.
    pub instance_type: Option<String>,
    pub zone: Option<String>,
    pub capacity_type: Option<String>,
    /// Every option, cheapest first.
    pub instance_types: Option<Vec<String>>,
    /// Lines (`key Operator [values]`) the claim's requirements must include.
    pub requirements: Option<Vec<String>>,
    /// Summed requests, daemonset overhead included, as quantities.
    pub requests: Option<BTreeMap<String, String>>,
    pub min_values_relaxed: Option<bool>,
}

/// Where a pod goes: an existing node, an in-flight NodeClaim, or a new claim (any of the
/// last five fields says a new one).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Where {
    pub node: Option<String>,
    pub node_claim: Option<String>,
    pub new_claim: Option<bool>,
    pub node_pool: Option<String>,
    pub instance_type: Option<String>,
    pub zone: Option<String>,
    pub capacity_type: Option<String>,
}

impl Where {
    pub fn on_new_claim(&self) -> bool {
        self.new_claim == Some(true)
            || self.node_pool.is_some()
            || self.instance_type.is_some()
            || self.zone.is_some()
            || self.capacity_type.is_some()
    }
}

pub struct Case {
    pub snapshot: Snapshot,
    pub options: Options,
    pub expect: Expect,
}

/// `name` as the plan writes a pod: `namespace/name`, `default` when none is given.
pub fn pod_key(name: &str) -> String {
    if name.contains('/') {
        name.to_string()
    } else {
        format!("default/{name}")
    }
}

/// The path of a pod's entry under `expect.<section>`, written as the decoder writes it
/// (`expect.placed.p`, `expect.placed[web-0]`).
pub fn pod_at(section: &str, pod: &str) -> String {
    if !pod.is_empty() && pod.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        format!("expect.{section}.{pod}")
    } else {
        format!("expect.{section}[{pod}]")
    }
}

/// Reads a case file; the error is `field path: reason` (the caller adds the file name).
pub fn load(text: &str, catalogs: &Path) -> Result<Case, String> {
    let raw: Value = serde_yaml::from_str(text).map_err(|e| format!("not YAML: {e}"))?;
    let file: CaseFile =
        nodewright_api::decode::decode(&raw, &FieldPath::default()).map_err(|e| e.to_string())?;
    check_input_fields(&file.input)?;
    let mut types = match &file.catalog {
        None => Vec::new(),
        Some(name) => catalog(name, catalogs)?,
    };
    types.extend(
        file.input
            .get("instanceTypes")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
    );
    let its = read_catalog("catalog", &json!({ "instanceTypes": types }))
        .map_err(|e| format!("instance types (the catalog's, then the input's): {e}"))?;
    let now = parse_time("2026-01-01T00:00:00Z")?;
    let snapshot = read_cluster(interchange_documents("input", &file.input), its, now)
        .map_err(|e| e.to_string())?;
    if file.expect.states_nothing() {
        return Err("expect: states nothing, so the case could never fail".into());
    }
    check_pod_names(&file.expect, &snapshot)?;
    check_places(&file.expect)?;
    let defaults = Options::default();
    let options = Options {
        ignore_preferences: file.options.ignore_preferences,
        min_values_best_effort: file.options.min_values_best_effort,
        max_instance_types: file
            .options
            .max_instance_types
            .unwrap_or(defaults.max_instance_types),
        ..defaults
    };
    Ok(Case {
        snapshot,
        options,
        expect: file.expect,
    })
}

fn catalog(name: &str, dir: &Path) -> Result<Vec<Value>, String> {
    let path = dir.join(format!("{name}.yaml"));
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("catalog: {name}: no {}: {e}", path.display()))?;
    let v: Value = serde_yaml::from_str(&text)
        .map_err(|e| format!("catalog: {}: not YAML: {e}", path.display()))?;
    let list = v.get("instanceTypes").and_then(Value::as_array);
    let list = list.ok_or_else(|| format!("catalog: {}: no instanceTypes list", path.display()))?;
    for (i, it) in list.iter().enumerate() {
        instance_type_fields(it, &format!("catalogs/{name}.yaml: instanceTypes[{i}]"))?;
    }
    Ok(list.clone())
}

const INPUT_FIELDS: &[&str] = &[
    "instanceTypes",
    "nodePools",
    "nodeClaims",
    "nodes",
    "pods",
    "daemonSets",
    "podDisruptionBudgets",
    "namespaces",
    "persistentVolumes",
    "persistentVolumeClaims",
    "storageClasses",
];
const INSTANCE_TYPE_FIELDS: &[&str] = &[
    "name",
    "cpu",
    "memoryMiB",
    "pods",
    "capacityCpu",
    "capacityMemoryMiB",
    "resources",
    "arch",
    "labels",
    "offerings",
];
const OFFERING_FIELDS: &[&str] = &[
    "zone",
    "capacityType",
    "price",
    "available",
    "reservationId",
    "reservationCapacity",
];

fn known(obj: &Value, fields: &[&str], path: &str) -> Result<(), String> {
    for k in obj.as_object().into_iter().flat_map(|o| o.keys()) {
        if !fields.contains(&k.as_str()) {
            return Err(format!(
                "{path}.{k}: unknown field, expected one of {fields:?}"
            ));
        }
    }
    Ok(())
}

fn instance_type_fields(it: &Value, path: &str) -> Result<(), String> {
    known(it, INSTANCE_TYPE_FIELDS, path)?;
    let offerings = it.get("offerings").and_then(Value::as_array);
    for (i, o) in offerings.into_iter().flatten().enumerate() {
        known(o, OFFERING_FIELDS, &format!("{path}.offerings[{i}]"))?;
    }
    Ok(())
}

/// The interchange readers skip what they do not know, as the API server drops it; a case
/// must not, or a misspelt field would make a case that tests nothing.
fn check_input_fields(input: &Value) -> Result<(), String> {
    known(input, INPUT_FIELDS, "input")?;
    for (i, it) in array(input, "instanceTypes").iter().enumerate() {
        instance_type_fields(it, &format!("input.instanceTypes[{i}]"))?;
    }
    for doc in interchange_documents("input", input) {
        let at = format!("input.{}[{}]", &doc.source["input:".len()..], doc.index);
        if let Some(report) = nodewright_api::object::validate_value(&doc.value) {
            // Errors are read_cluster's to report; unknown fields are only warnings there,
            // and the schema leaves metadata to the API server.
            if let Some(w) = report.warnings.first() {
                return Err(format!("{at}.{}: {}", w.path, w.reason));
            }
            let meta = doc.value.get("metadata").cloned().unwrap_or_default();
            same_after_round_trip(&meta, "ObjectMeta", &format!("{at}.metadata"))?;
            continue;
        }
        same_after_round_trip(&doc.value, doc.kind(), &at)?;
    }
    Ok(())
}

fn same_after_round_trip(v: &Value, kind: &str, at: &str) -> Result<(), String> {
    let back = round_trip(v, kind).map_err(|e| format!("{at}{}", prefixed(&e.to_string())))?;
    let mut lost = Vec::new();
    unread(v, &back, at, &mut lost);
    match lost.first() {
        Some(field) => Err(format!("{field}: unknown field of a {kind}")),
        None => Ok(()),
    }
}

fn prefixed(error: &str) -> String {
    if error.starts_with(':') {
        error.to_string()
    } else {
        format!(".{error}")
    }
}

fn array<'a>(v: &'a Value, field: &str) -> &'a [Value] {
    v.get(field)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// The document as its Kubernetes type reads and writes it back: what is missing was not read.
fn round_trip(v: &Value, kind: &str) -> Result<Value, nodewright_api::error::FieldError> {
    use k8s_openapi::api::{apps, core::v1 as core, policy, storage};
    fn again<T: serde::de::DeserializeOwned + serde::Serialize>(
        v: &Value,
    ) -> Result<Value, nodewright_api::error::FieldError> {
        let t: T = nodewright_api::decode::decode(v, &FieldPath::default())?;
        Ok(serde_json::to_value(t).unwrap_or(Value::Null))
    }
    match kind {
        "ObjectMeta" => again::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>(v),
        "Pod" => again::<core::Pod>(v),
        "Node" => again::<core::Node>(v),
        "Namespace" => again::<core::Namespace>(v),
        "PersistentVolume" => again::<core::PersistentVolume>(v),
        "PersistentVolumeClaim" => again::<core::PersistentVolumeClaim>(v),
        "DaemonSet" => again::<apps::v1::DaemonSet>(v),
        "PodDisruptionBudget" => again::<policy::v1::PodDisruptionBudget>(v),
        "StorageClass" => again::<storage::v1::StorageClass>(v),
        _ => Ok(v.clone()),
    }
}

/// Every field of `orig` that `back` lacks, as a path below `at`.
fn unread(orig: &Value, back: &Value, at: &str, out: &mut Vec<String>) {
    match (orig, back) {
        (Value::Object(o), Value::Object(b)) => {
            for (k, v) in o {
                let path = format!("{at}.{k}");
                match b.get(k) {
                    None if !v.is_null() => out.push(path),
                    None => {}
                    Some(bv) => unread(v, bv, &path, out),
                }
            }
        }
        (Value::Array(o), Value::Array(b)) => {
            for (i, (v, bv)) in o.iter().zip(b).enumerate() {
                unread(v, bv, &format!("{at}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// An expectation about a pod the input does not have could never fail.
fn check_pod_names(expect: &Expect, s: &Snapshot) -> Result<(), String> {
    let exists = |name: &str| s.pods.iter().any(|p| p.key() == pod_key(name));
    let mut named: Vec<(String, &String)> = Vec::new();
    named.extend(expect.placed.keys().map(|k| (pod_at("placed", k), k)));
    for k in expect.unplaced.iter().flat_map(BTreeMap::keys) {
        named.push((pod_at("unplaced", k), k));
    }
    for (i, c) in expect.claims.iter().flatten().enumerate() {
        for (j, p) in c.pods.iter().enumerate() {
            named.push((format!("expect.claims[{i}].pods[{j}]"), p));
        }
    }
    for (field, groups) in [("together", &expect.together), ("apart", &expect.apart)] {
        for (i, g) in groups.iter().enumerate() {
            if g.len() < 2 {
                return Err(format!(
                    "expect.{field}[{i}]: a group needs two pods or more"
                ));
            }
            for (j, p) in g.iter().enumerate() {
                named.push((format!("expect.{field}[{i}][{j}]"), p));
            }
        }
    }
    match named.into_iter().find(|(_, n)| !exists(n)) {
        Some((path, n)) => Err(format!("{path}: the input has no pod {}", pod_key(n))),
        None => Ok(()),
    }
}

/// A pod goes to one place: a node, an in-flight claim or a new claim.
fn check_places(expect: &Expect) -> Result<(), String> {
    for (pod, w) in &expect.placed {
        let at = pod_at("placed", pod);
        let places = [w.node.is_some(), w.node_claim.is_some(), w.on_new_claim()];
        match places.iter().filter(|x| **x).count() {
            1 => {}
            0 => return Err(format!("{at}: says nothing about where")),
            _ => {
                return Err(format!(
                    "{at}: node, nodeClaim and the new claim's fields exclude each other"
                ));
            }
        }
    }
    Ok(())
}
