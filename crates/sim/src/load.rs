//! From a parsed [`Scenario`] to the engine's input: Karpenter objects (any supported
//! apiVersion) converted to v1 and then to core NodePools, each with the instance types its
//! EC2NodeClass gives it from the embedded AWS catalog, and workloads turned into pod
//! templates with replica counts.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use nodewright_api::convert::documents::{ConvertOptions, Outcome, convert_documents};
use nodewright_api::document::Document;
use nodewright_api::object::Object;
use nodewright_aws_model::{
    AmiFamily, Catalog, EvictionSignal, NodeClassInput, Settings, SpotPrices, Zone,
};
use nodewright_core::cadence::{BatchWindow, DisruptionTimings};
use nodewright_core::labels;
use nodewright_core::model::{InstanceType, NodePool};
use nodewright_core::requirements::Operator;
use serde_json::Value;

use crate::cluster::WorkloadKind;
use crate::engine::{EngineInput, SimAction, TimedAction};
use crate::scenario::{Action, Scenario, ScenarioError, limits};

mod workload;

/// The annotation that says how long a Job's pods run before they succeed.
pub const RUN_FOR_ANNOTATION: &str = "sim.nodewright.io/run-for";

/// How long a run lasts after its last step when the scenario gives no `until`.
pub const SETTLE: Duration = Duration::from_secs(15 * 60);

struct Loader<'a> {
    scenario: &'a Scenario,
    catalog: &'a Catalog,
    spot: SpotPrices,
    /// EC2NodeClass name → instance types.
    classes: BTreeMap<String, Arc<Vec<InstanceType>>>,
}

impl Loader<'_> {
    fn err(&self, path: String, reason: String) -> ScenarioError {
        ScenarioError {
            file: self.scenario.file.clone(),
            path,
            reason,
        }
    }

    fn instance_types(&self, input: &NodeClassInput) -> Arc<Vec<InstanceType>> {
        if let Some(file) = &self.scenario.cloud.instance_types {
            return file.types.clone();
        }
        let zones: Vec<Zone> = self
            .scenario
            .cloud
            .zones
            .iter()
            .map(|z| Zone::new(z))
            .collect();
        Arc::new(self.catalog.instance_types(
            &self.scenario.cloud.region,
            &zones,
            &Settings::default(),
            input,
            &self.spot,
        ))
    }

    /// The EC2NodeClass settings that shape instance types: the AMI family and the kubelet's
    /// pod density, reservations and hard eviction thresholds.
    fn node_class_input(
        &self,
        family: AmiFamily,
        kubelet: Option<&nodewright_api::aws::v1::KubeletConfiguration>,
        describe: &str,
        at: &str,
    ) -> Result<NodeClassInput, ScenarioError> {
        let mut input = NodeClassInput::new(family);
        let Some(k) = kubelet else {
            return Ok(input);
        };
        let bad = |field: &str, why: String| {
            self.err(
                at.into(),
                format!("{describe}: spec.kubelet.{field}: {why}"),
            )
        };
        let count = |field: &str, v: Option<i64>| -> Result<Option<u32>, ScenarioError> {
            v.map(|n| u32::try_from(n).map_err(|_| bad(field, format!("{n} is out of range"))))
                .transpose()
        };
        input.max_pods = count("maxPods", k.max_pods)?;
        input.pods_per_core = count("podsPerCore", k.pods_per_core)?;
        for (field, map, out) in [
            ("kubeReserved", &k.kube_reserved, &mut input.kube_reserved),
            (
                "systemReserved",
                &k.system_reserved,
                &mut input.system_reserved,
            ),
        ] {
            for (name, q) in map.iter().flatten() {
                let v = nodewright_api::quantity::parse_resource(name, q)
                    .map_err(|e| bad(&format!("{field}[{name}]"), e.to_string()))?;
                out.insert(name.clone(), v);
            }
        }
        for (signal, q) in k.eviction_hard.iter().flatten() {
            let parsed = match q.strip_suffix('%') {
                Some(p) => p.trim().parse::<f64>().ok().map(EvictionSignal::Percent),
                None => nodewright_api::quantity::parse_resource("memory", q)
                    .ok()
                    .map(EvictionSignal::Bytes),
            }
            .ok_or_else(|| {
                bad(
                    &format!("evictionHard[{signal}]"),
                    format!("{q:?} is neither a quantity nor a percentage"),
                )
            })?;
            match signal.as_str() {
                "memory.available" => input.eviction_hard_memory = Some(parsed),
                "nodefs.available" => input.eviction_hard_nodefs = Some(parsed),
                _ => {}
            }
        }
        Ok(input)
    }

    /// Turns one batch of documents (applied together) into actions.
    fn documents(&mut self, docs: &[Document], at: &str) -> Result<Vec<SimAction>, ScenarioError> {
        let mut out = Vec::new();
        let items = convert_documents(docs.to_vec(), &ConvertOptions::default());
        let mut pools = Vec::new();
        for item in &items {
            let object = match &item.outcome {
                Outcome::NotKarpenter => {
                    match item.doc.kind() {
                        "PodDisruptionBudget" => out.push(self.pdb(&item.doc, at)?),
                        "StorageClass" => out.push(self.storage_class(&item.doc, at)?),
                        _ => out.extend(self.workload(&item.doc, at)?),
                    }
                    continue;
                }
                Outcome::Failed(e) => {
                    return Err(self.err(at.into(), format!("{}: {e}", item.doc.describe())));
                }
                Outcome::Current(o) | Outcome::Converted { object: o, .. } => o,
            };
            if let Some(report) = item.validate()
                && let Some(e) = report.errors.first()
            {
                return Err(self.err(at.into(), format!("{}: {e}", item.doc.describe())));
            }
            match object {
                Object::EC2NodeClass(nc) => {
                    let name = nc.metadata.name.clone().unwrap_or_default();
                    let family_name = nc.spec.resolved_ami_family().unwrap_or("AL2023".into());
                    let family = AmiFamily::from_name(&family_name).ok_or_else(|| {
                        self.err(
                            at.into(),
                            format!(
                                "{}: spec.amiFamily: {family_name:?} is not a known AMI family",
                                item.doc.describe()
                            ),
                        )
                    })?;
                    let input = self.node_class_input(
                        family,
                        nc.spec.kubelet.as_ref(),
                        &item.doc.describe(),
                        at,
                    )?;
                    self.classes.insert(name, self.instance_types(&input));
                }
                Object::NodePool(np) => pools.push((item.doc.describe(), np.clone())),
                _ => {}
            }
        }
        for (describe, np) in pools {
            let pool = nodewright_api::to_core::nodepool(&np).map_err(|errs| {
                let first = errs.first().map(|e| e.to_string()).unwrap_or_default();
                self.err(at.into(), format!("{describe}: {first}"))
            })?;
            let class = &pool.template.node_class.name;
            let types = self.classes.get(class).cloned().ok_or_else(|| {
                self.err(
                    at.into(),
                    format!(
                        "{describe}: spec.template.spec.nodeClassRef: EC2NodeClass {class:?} is not in the scenario (apply it first or in the same step)"
                    ),
                )
            })?;
            let mut pool = pool;
            pool.ready = true;
            let types = Arc::new(allowed_types(&pool, &types));
            out.push(SimAction::ApplyNodePool(pool, types));
        }
        Ok(out)
    }

    /// A `policy/v1` PodDisruptionBudget; its status is the simulated cluster's to compute.
    fn pdb(&self, doc: &Document, at: &str) -> Result<SimAction, ScenarioError> {
        let bad = |why: String| self.err(at.into(), format!("{}: {why}", doc.describe()));
        if doc.value.get("apiVersion").and_then(Value::as_str) != Some("policy/v1") {
            return Err(bad(
                "apiVersion: PodDisruptionBudgets are read as policy/v1".into(),
            ));
        }
        let manifest: k8s_openapi::api::policy::v1::PodDisruptionBudget =
            nodewright_api::decode::decode(&doc.value, &nodewright_api::error::Path::default())
                .map_err(|e| bad(e.to_string()))?;
        let pdb = crate::disruption_budget::SimPdb::new(manifest).map_err(bad)?;
        Ok(SimAction::ApplyPdb(Box::new(pdb)))
    }

    /// A StorageClass, read as a cluster object is.
    fn storage_class(&self, doc: &Document, at: &str) -> Result<SimAction, ScenarioError> {
        let s = nodewright_api::cluster::read_cluster(
            vec![doc.clone()],
            Vec::new(),
            nodewright_core::time::Timestamp(0),
        )
        .map_err(|e| self.err(at.into(), e.to_string()))?;
        let sc = s.storage_classes.into_iter().next().ok_or_else(|| {
            self.err(at.into(), format!("{}: not a StorageClass", doc.describe()))
        })?;
        if !matches!(
            sc.volume_binding_mode.as_str(),
            "WaitForFirstConsumer" | "Immediate"
        ) {
            return Err(self.err(
                at.into(),
                format!(
                    "{}: volumeBindingMode: {:?} is neither WaitForFirstConsumer nor Immediate",
                    doc.describe(),
                    sc.volume_binding_mode
                ),
            ));
        }
        Ok(SimAction::ApplyStorageClass(sc))
    }
}

/// The instance types a NodePool's requirements leave possible. The scheduler would drop the
/// others on every solve; dropping them once here keeps each solve (and each consolidation
/// simulation) from compiling a catalog the NodePool can never use. A requirement on a label
/// the instance type says nothing about keeps the type, as in the scheduler.
fn allowed_types(pool: &NodePool, types: &[InstanceType]) -> Vec<InstanceType> {
    let offering_keys = [labels::ZONE, labels::CAPACITY_TYPE];
    types
        .iter()
        .filter(|it| {
            let mut known: BTreeMap<String, String> = BTreeMap::new();
            let mut absent: BTreeSet<&str> = BTreeSet::new();
            for r in &it.requirements {
                match r.operator {
                    Operator::In if r.values.len() == 1 => {
                        known.insert(r.key.clone(), r.values[0].clone());
                    }
                    Operator::DoesNotExist => {
                        absent.insert(r.key.as_str());
                    }
                    _ => {}
                }
            }
            let labels_ok = pool.template.requirements.iter().all(|r| {
                if let Some(v) = known.get(&r.key) {
                    r.admits(Some(v))
                } else if absent.contains(r.key.as_str()) {
                    r.admits(None)
                } else {
                    true
                }
            });
            let offering_reqs: Vec<_> = pool
                .template
                .requirements
                .iter()
                .filter(|r| offering_keys.contains(&r.key.as_str()))
                .collect();
            labels_ok
                && it.offerings.iter().any(|o| {
                    let l = BTreeMap::from([
                        (labels::ZONE.to_string(), o.zone.clone()),
                        (
                            labels::CAPACITY_TYPE.to_string(),
                            o.capacity_type.as_str().to_string(),
                        ),
                    ]);
                    offering_reqs.iter().all(|r| r.admits_labels(&l))
                })
        })
        .cloned()
        .collect()
}

/// Builds the engine input for `scenario` over `catalog` (or over the scenario's catalog
/// file). The embedded catalog's spot prices are synthetic.
pub fn engine_input(scenario: &Scenario, catalog: &Catalog) -> Result<EngineInput, ScenarioError> {
    let mut loader = Loader {
        scenario,
        catalog,
        spot: SpotPrices::synthetic(),
        classes: BTreeMap::new(),
    };
    let mut actions = Vec::new();
    let mut known = Known::new();
    let initial = loader.documents(&scenario.manifests, "manifests")?;
    check_references(scenario, &mut known, &initial, "manifests")?;
    for a in initial {
        actions.push(TimedAction {
            at: Duration::ZERO,
            step: None,
            action: a,
        });
    }
    for step in &scenario.steps {
        let path = format!("steps[{}]", step.index);
        let sim: Vec<SimAction> = match &step.action {
            Action::Apply(docs) => loader.documents(docs, &format!("{path}.apply"))?,
            Action::Delete(r) => vec![SimAction::Delete(
                r.kind.clone(),
                r.namespace.clone().unwrap_or_else(|| {
                    if matches!(
                        r.kind.as_str(),
                        "NodePool" | "EC2NodeClass" | "StorageClass"
                    ) {
                        String::new()
                    } else {
                        "default".into()
                    }
                }),
                r.name.clone(),
            )],
            Action::Scale {
                namespace,
                name,
                replicas,
            } => vec![SimAction::Scale {
                namespace: namespace.clone(),
                name: name.clone(),
                replicas: *replicas,
            }],
            Action::Interrupt(t) => vec![SimAction::Interrupt(t.clone())],
            Action::Advance => vec![SimAction::Advance],
        };
        check_references(scenario, &mut known, &sim, &path)?;
        for a in sim {
            actions.push(TimedAction {
                at: step.at,
                step: Some(step.index),
                action: a,
            });
        }
    }
    let last = scenario.steps.last().map_or(Duration::ZERO, |s| s.at);
    Ok(EngineInput {
        name: scenario.name.clone(),
        seed: scenario.seed,
        until: scenario.until.unwrap_or(last + SETTLE),
        cloud: scenario.cloud.clone(),
        actions,
        batch: BatchWindow::default(),
        disruption: DisruptionTimings::default(),
        spot_price_note: match &scenario.cloud.instance_types {
            Some(file) => format!(
                "instance types and prices (spot included) are those of the catalog file {}",
                file.name
            ),
            None => loader.spot.provenance().to_string(),
        },
    })
}

/// The objects that exist after each step, by kind, namespace and name, with the pods each
/// workload wants.
type Known = BTreeMap<(String, String, String), u64>;

/// Tracks which objects exist as steps apply and delete them, so a step that scales or deletes
/// something the scenario never created is an error at load time, not a silent no-op; and how
/// many pods they want at once, which the simulator bounds.
fn check_references(
    scenario: &Scenario,
    known: &mut Known,
    actions: &[SimAction],
    path: &str,
) -> Result<(), ScenarioError> {
    references(scenario, known, actions, path)?;
    let pods: u64 = known.values().sum();
    match limits::too_many_pods_at_once(pods) {
        Some(reason) => Err(ScenarioError {
            file: scenario.file.clone(),
            path: path.to_string(),
            reason,
        }),
        None => Ok(()),
    }
}

fn references(
    scenario: &Scenario,
    known: &mut Known,
    actions: &[SimAction],
    path: &str,
) -> Result<(), ScenarioError> {
    let err = |field: &str, reason: String| ScenarioError {
        file: scenario.file.clone(),
        path: format!("{path}.{field}"),
        reason,
    };
    for a in actions {
        match a {
            SimAction::ApplyNodePool(p, _) => {
                known.insert(("NodePool".into(), String::new(), p.name.clone()), 0);
            }
            SimAction::ApplyWorkload(w) => {
                let kind = match w.kind {
                    WorkloadKind::Deployment => "Deployment",
                    WorkloadKind::StatefulSet => "StatefulSet",
                    WorkloadKind::Pod => "Pod",
                    WorkloadKind::Job => "Job",
                };
                known.insert(
                    (kind.into(), w.namespace.clone(), w.name.clone()),
                    w.wanted().into(),
                );
            }
            SimAction::ApplyDaemonSet(d) => {
                known.insert(("DaemonSet".into(), d.namespace.clone(), d.name.clone()), 0);
            }
            SimAction::ApplyPdb(b) => {
                known.insert(
                    (
                        "PodDisruptionBudget".into(),
                        b.namespace().to_string(),
                        b.name().to_string(),
                    ),
                    0,
                );
            }
            SimAction::ApplyStorageClass(c) => {
                known.insert(("StorageClass".into(), String::new(), c.name.clone()), 0);
            }
            SimAction::Scale {
                namespace,
                name,
                replicas,
            } => {
                let found = ["Deployment", "StatefulSet"]
                    .iter()
                    .map(|k| (k.to_string(), namespace.clone(), name.clone()))
                    .find(|key| known.contains_key(key));
                if let Some(pods) = found.and_then(|key| known.get_mut(&key)) {
                    *pods = u64::from(*replicas);
                } else {
                    return Err(err(
                        "scale",
                        format!(
                            "no Deployment or StatefulSet {namespace}/{name} exists at this step"
                        ),
                    ));
                }
            }
            SimAction::Delete(kind, ns, name) => {
                let stored = kind.as_str();
                if known
                    .remove(&(stored.to_string(), ns.clone(), name.clone()))
                    .is_none()
                    && kind != "EC2NodeClass"
                {
                    return Err(err(
                        "delete",
                        format!(
                            "no {kind} {}{name} exists at this step",
                            if ns.is_empty() {
                                String::new()
                            } else {
                                format!("{ns}/")
                            }
                        ),
                    ));
                }
            }
            SimAction::Interrupt(_) | SimAction::Advance => {}
        }
    }
    Ok(())
}
