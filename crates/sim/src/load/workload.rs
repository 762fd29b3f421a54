//! Workloads (Deployments, StatefulSets, Jobs and the rest, as the API crate expands them)
//! into the engine's pod templates: their counts, a Job's run time, a StatefulSet's volume
//! claim templates.

use std::time::Duration;

use nodewright_api::document::Document;
use nodewright_api::workload::{Workload as ApiWorkload, expand_document};
use serde_json::Value;

use super::{Loader, RUN_FOR_ANNOTATION};
use crate::cluster::{JobSpec, Workload, WorkloadKind};
use crate::engine::SimAction;
use crate::scenario::{ScenarioError, limits};
use crate::volumes::ClaimTemplate;

impl Loader<'_> {
    /// A StatefulSet's `spec.volumeClaimTemplates`.
    fn claim_templates(
        &self,
        doc: &Document,
        at: &str,
    ) -> Result<Vec<ClaimTemplate>, ScenarioError> {
        let Some(list) = doc.value.pointer("/spec/volumeClaimTemplates") else {
            return Ok(Vec::new());
        };
        let bad = |field: String, why: &str| {
            self.err(
                at.into(),
                format!(
                    "{}: spec.volumeClaimTemplates{field}: {why}",
                    doc.describe()
                ),
            )
        };
        let items = list
            .as_array()
            .ok_or_else(|| bad(String::new(), "expected a list"))?;
        items
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let name = t
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .filter(|n| !n.is_empty())
                    .ok_or_else(|| bad(format!("[{i}].metadata.name"), "required"))?;
                let storage_class = match t.pointer("/spec/storageClassName") {
                    None | Some(Value::Null) => None,
                    Some(Value::String(c)) => Some(c.clone()),
                    Some(_) => {
                        return Err(bad(
                            format!("[{i}].spec.storageClassName"),
                            "expected a string",
                        ));
                    }
                };
                Ok(ClaimTemplate {
                    name: name.to_string(),
                    storage_class,
                })
            })
            .collect()
    }

    pub(super) fn workload(
        &self,
        doc: &Document,
        at: &str,
    ) -> Result<Vec<SimAction>, ScenarioError> {
        let located = |reason: String| self.err(at.into(), reason);
        let namespace = doc
            .value
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("default")
            .to_string();
        let name = doc.name().to_string();
        let mut job = None;
        let count = |field: &str, default: u32| spec_count(doc, field, default).map_err(&located);
        let (kind, replicas) = match doc.kind() {
            "Deployment" => (WorkloadKind::Deployment, count("replicas", 1)?),
            "StatefulSet" => (WorkloadKind::StatefulSet, count("replicas", 1)?),
            "Job" => {
                let parallelism = count("parallelism", 1)?;
                let completions = count("completions", parallelism)?;
                job = Some(JobSpec {
                    completions,
                    run_for: self.run_for(doc, at)?,
                    succeeded: 0,
                });
                (WorkloadKind::Job, parallelism)
            }
            "Pod" => (WorkloadKind::Pod, 1),
            "DaemonSet" => {
                return match expand_document(doc).map_err(|e| located(e.to_string()))? {
                    Some(ApiWorkload::DaemonSet(ds)) => Ok(vec![SimAction::ApplyDaemonSet(*ds)]),
                    _ => Err(located(format!("{}: not a DaemonSet", doc.describe()))),
                };
            }
            other => {
                return Err(located(format!(
                    "{}: kind {other:?} is not a workload the simulator runs",
                    doc.describe()
                )));
            }
        };
        // Expand one replica for the template, whatever the real count is.
        let mut one = doc.clone();
        for pointer in ["/spec/replicas", "/spec/parallelism", "/spec/completions"] {
            if let Some(v) = one.value.pointer_mut(pointer) {
                *v = Value::from(1);
            }
        }
        let template = match expand_document(&one).map_err(|e| located(e.to_string()))? {
            Some(ApiWorkload::Pods(mut pods)) if !pods.is_empty() => pods.remove(0),
            _ => return Err(located(format!("{}: no pod template", doc.describe()))),
        };
        let mut w = Workload::new(kind, &namespace, &name, replicas, template);
        w.job = job;
        if kind == WorkloadKind::StatefulSet {
            w.claim_templates = self.claim_templates(doc, at)?;
        }
        Ok(vec![SimAction::ApplyWorkload(w)])
    }

    /// A Job's `sim.nodewright.io/run-for` annotation (on the Job or its pod template): how
    /// long each pod runs before it succeeds.
    fn run_for(&self, doc: &Document, at: &str) -> Result<Option<Duration>, ScenarioError> {
        for (pointer, field) in [
            ("/metadata/annotations", "metadata.annotations"),
            (
                "/spec/template/metadata/annotations",
                "spec.template.metadata.annotations",
            ),
        ] {
            let Some(v) = doc
                .value
                .pointer(pointer)
                .and_then(|a| a.get(RUN_FOR_ANNOTATION))
            else {
                continue;
            };
            let bad = |why: String| {
                self.err(
                    at.into(),
                    format!("{}: {field}[{RUN_FOR_ANNOTATION}]: {why}", doc.describe()),
                )
            };
            let text = v
                .as_str()
                .ok_or_else(|| bad(format!("expected a duration string, found {v}")))?;
            let d = nodewright_core::time::parse_go_duration(text)
                .ok_or_else(|| bad(format!("{text:?} is not a duration such as 10m or 1h30m")))?;
            return Ok(Some(d));
        }
        Ok(None)
    }
}

/// A workload's `spec.<field>` count (replicas, parallelism, completions): `default` when
/// absent; a non-negative integer within the simulator's pod limit otherwise.
fn spec_count(doc: &Document, field: &str, default: u32) -> Result<u32, String> {
    let at = format!("{}: spec.{field}", doc.describe());
    match doc.value.pointer(&format!("/spec/{field}")) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => match v.as_u64() {
            Some(n) => match limits::too_many_pods(n) {
                Some(reason) => Err(format!("{at}: {reason}")),
                None => Ok(n as u32),
            },
            None => Err(format!("{at}: expected a non-negative integer, found {v}")),
        },
    }
}
