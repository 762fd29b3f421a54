//! Controllers expanded to the pods they would create: `replicas` pods for Deployments,
//! ReplicaSets and StatefulSets, `parallelism` (capped by `completions`) for Jobs, and one
//! template pod for a DaemonSet.

use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::batch::v1 as batch;
use k8s_openapi::api::core::v1 as api;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use nodewright_core::model::{DaemonSet, OwnerRef, Pod};

use super::WorkloadError;
use super::pod::pod_from_api;
use crate::document::Document;
use crate::error::{FieldError, Path};

/// What one document contributes to a snapshot.
#[derive(Clone, Debug)]
pub enum Workload {
    Pods(Vec<Pod>),
    DaemonSet(Box<DaemonSet>),
}

/// `count` pods from a template, named `<owner>-<i>` and owned by `owner_kind/owner`.
pub fn expand_template(
    owner_kind: &str,
    owner: &ObjectMeta,
    template: &api::PodTemplateSpec,
    count: i64,
    path: &Path,
) -> Result<Vec<Pod>, FieldError> {
    let name = owner.name.clone().unwrap_or_default();
    let mut meta = template.metadata.clone().unwrap_or_default();
    if meta.namespace.is_none() {
        meta.namespace = owner.namespace.clone();
    }
    meta.creation_timestamp = owner.creation_timestamp.clone();
    let api_pod = api::Pod {
        metadata: meta,
        spec: template.spec.clone(),
        status: None,
    };
    let base =
        pod_from_api(&api_pod).map_err(|e| FieldError::new(join(path, &e.path), e.reason))?;
    let uid = owner.uid.clone().unwrap_or_else(|| name.clone());
    Ok((0..count.max(0))
        .map(|i| {
            let mut p = base.clone();
            p.name = format!("{name}-{i}");
            p.uid = format!("{uid}-{i}");
            p.owner = Some(OwnerRef {
                kind: owner_kind.to_string(),
                name: name.clone(),
                controller: true,
            });
            p
        })
        .collect())
}

fn join(path: &Path, rest: &str) -> String {
    let base = path.field("template").as_str().to_string();
    if rest.is_empty() {
        base
    } else {
        format!("{base}.{rest}")
    }
}

/// The pod a DaemonSet runs on every node it matches.
pub fn daemonset_pod(ds: &apps::DaemonSet) -> Result<DaemonSet, FieldError> {
    let spec = ds
        .spec
        .as_ref()
        .ok_or_else(|| FieldError::new("spec", "a DaemonSet needs a spec"))?;
    let mut pods = expand_template(
        "DaemonSet",
        &ds.metadata,
        &spec.template,
        1,
        &Path::root("spec"),
    )?;
    let pod = pods.pop().unwrap_or_default();
    Ok(DaemonSet {
        namespace: ds
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_string()),
        name: ds.metadata.name.clone().unwrap_or_default(),
        pod,
    })
}

fn parse<T: serde::de::DeserializeOwned>(doc: &Document) -> Result<T, WorkloadError> {
    crate::decode::decode(&doc.value, &Path::default()).map_err(|error| WorkloadError {
        object: doc.describe(),
        error,
    })
}

/// A workload's `spec`, which every kind here must have.
fn required<'a, T>(spec: &'a Option<T>, path: &Path) -> Result<&'a T, FieldError> {
    spec.as_ref().ok_or_else(|| path.error("missing"))
}

/// Pods or a DaemonSet from one document; `None` for kinds that are not workloads.
pub fn expand_document(doc: &Document) -> Result<Option<Workload>, WorkloadError> {
    let located = |error: FieldError| WorkloadError {
        object: doc.describe(),
        error,
    };
    let spec = Path::root("spec");
    let out = match doc.kind() {
        "Pod" => {
            let p: api::Pod = parse(doc)?;
            Workload::Pods(vec![pod_from_api(&p).map_err(located)?])
        }
        "Deployment" => {
            let d: apps::Deployment = parse(doc)?;
            let s = required(&d.spec, &spec).map_err(located)?;
            let n = i64::from(s.replicas.unwrap_or(1));
            let pods = expand_template("Deployment", &d.metadata, &s.template, n, &spec);
            Workload::Pods(pods.map_err(located)?)
        }
        "ReplicaSet" => {
            let d: apps::ReplicaSet = parse(doc)?;
            let s = required(&d.spec, &spec).map_err(located)?;
            let t = s.template.clone().unwrap_or_default();
            let n = i64::from(s.replicas.unwrap_or(1));
            let pods = expand_template("ReplicaSet", &d.metadata, &t, n, &spec);
            Workload::Pods(pods.map_err(located)?)
        }
        "StatefulSet" => {
            let d: apps::StatefulSet = parse(doc)?;
            let s = required(&d.spec, &spec).map_err(located)?;
            let n = i64::from(s.replicas.unwrap_or(1));
            let pods = expand_template("StatefulSet", &d.metadata, &s.template, n, &spec);
            Workload::Pods(pods.map_err(located)?)
        }
        "Job" => {
            let d: batch::Job = parse(doc)?;
            let s = required(&d.spec, &spec).map_err(located)?;
            let parallel = i64::from(s.parallelism.unwrap_or(1));
            let n = s
                .completions
                .map_or(parallel, |c| parallel.min(i64::from(c)));
            let pods = expand_template("Job", &d.metadata, &s.template, n, &spec);
            Workload::Pods(pods.map_err(located)?)
        }
        "DaemonSet" => {
            let d: apps::DaemonSet = parse(doc)?;
            Workload::DaemonSet(Box::new(daemonset_pod(&d).map_err(located)?))
        }
        _ => return Ok(None),
    };
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(v: serde_json::Value) -> Document {
        Document {
            source: "test.yaml".into(),
            index: 0,
            value: v,
        }
    }

    #[test]
    fn deployment_expands_to_replicas() {
        let d = doc(serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "inflate", "namespace": "web"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "x"}},
                     "template": {"metadata": {"labels": {"app": "x"}},
                                  "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}
        }));
        let Some(Workload::Pods(pods)) = expand_document(&d).unwrap() else {
            panic!("expected pods")
        };
        assert_eq!(pods.len(), 3);
        assert_eq!(pods[2].name, "inflate-2");
        assert_eq!(pods[0].namespace, "web");
        assert_eq!(pods[0].labels.get("app").map(String::as_str), Some("x"));
        assert_eq!(pods[0].owner.as_ref().unwrap().kind, "Deployment");
        assert_eq!(pods[1].requests.get("cpu"), 1000);
    }

    #[test]
    fn job_parallelism_is_capped_by_completions() {
        let d = doc(serde_json::json!({
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
            "spec": {"parallelism": 5, "completions": 2, "template": {"spec": {"containers": [{"name": "c"}], "restartPolicy": "Never"}}}
        }));
        let Some(Workload::Pods(pods)) = expand_document(&d).unwrap() else {
            panic!("expected pods")
        };
        assert_eq!(pods.len(), 2);
    }

    #[test]
    fn errors_name_the_document_and_field() {
        let d = doc(serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "bad"},
            "spec": {"selector": {}, "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"memory": "x"}}}]}}}
        }));
        let e = expand_document(&d).unwrap_err();
        let text = e.to_string();
        assert!(
            text.starts_with("test.yaml[0] Deployment/bad: spec.template.spec.containers[0]"),
            "{text}"
        );
    }

    #[test]
    fn a_workload_without_spec_is_an_error_at_spec() {
        for kind in ["Deployment", "ReplicaSet", "StatefulSet", "Job"] {
            let api_version = if kind == "Job" { "batch/v1" } else { "apps/v1" };
            let d = doc(serde_json::json!({
                "apiVersion": api_version, "kind": kind, "metadata": {"name": "bare"}
            }));
            let text = expand_document(&d).unwrap_err().to_string();
            assert_eq!(text, format!("test.yaml[0] {kind}/bare: spec: missing"));
        }
    }

    #[test]
    fn pod_affinity_errors_name_the_term() {
        let selector =
            serde_json::json!({"matchExpressions": [{"key": "app", "operator": "Near"}]});
        for (field, list) in [
            (
                "podAffinity",
                "requiredDuringSchedulingIgnoredDuringExecution[1]",
            ),
            (
                "podAntiAffinity",
                "requiredDuringSchedulingIgnoredDuringExecution[1]",
            ),
            (
                "podAntiAffinity",
                "preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm",
            ),
        ] {
            let good = serde_json::json!({"topologyKey": "zone", "labelSelector": {}});
            let bad = serde_json::json!({"topologyKey": "zone", "labelSelector": selector});
            let terms = if list.starts_with("required") {
                serde_json::json!({"requiredDuringSchedulingIgnoredDuringExecution": [good, bad]})
            } else {
                serde_json::json!({"preferredDuringSchedulingIgnoredDuringExecution":
                    [{"weight": 1, "podAffinityTerm": bad}]})
            };
            let d = doc(serde_json::json!({
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "c"}], "affinity": {field: terms}}
            }));
            let text = expand_document(&d).unwrap_err().to_string();
            let at =
                format!("spec.affinity.{field}.{list}.labelSelector.matchExpressions[0].operator");
            assert!(text.contains(&at), "{text} lacks {at}");
        }
    }
}
