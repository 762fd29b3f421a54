//! One `core/v1` Pod into a [`core::model::Pod`]: effective requests (KEP-753 sidecar-aware
//! init-container math plus pod overhead), selectors, affinity, tolerations, spreads, host ports
//! and volume claims.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1 as api;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use nodewright_core::model::{
    HostPort, InclusionPolicy, OwnerRef, Pod, PodAffinityTerm, PodPhase, PodTemplate,
    TopologySpreadConstraint, WeightedNodeSelectorTerm, WeightedPodAffinityTerm, WhenUnsatisfiable,
};
use nodewright_core::requirements::{NodeSelectorTerm, Operator, Requirement};
use nodewright_core::resources::{self, Resources};
use nodewright_core::selector::{LabelSelector, SelectorOperator, SelectorRequirement};
use nodewright_core::taints::{TaintEffect, Toleration, TolerationOperator};
use nodewright_core::time::Timestamp;

use crate::error::{FieldError, Path};
use crate::quantity;

fn quantities(map: &BTreeMap<String, Quantity>, path: &Path) -> Result<Resources, FieldError> {
    let mut r = Resources::new();
    for (k, v) in map {
        let amount =
            quantity::parse_resource(k, &v.0).map_err(|e| path.key(k).error(e.to_string()))?;
        r.set(k, amount);
    }
    Ok(r)
}

/// A container's requests; limits stand in for requests that are not set, as the API server
/// defaults them.
fn container_requests(c: &api::Container, path: &Path) -> Result<Resources, FieldError> {
    let Some(res) = &c.resources else {
        return Ok(Resources::new());
    };
    let mut r = match &res.limits {
        Some(l) => quantities(l, &path.field("resources").field("limits"))?,
        None => Resources::new(),
    };
    if let Some(req) = &res.requests {
        let req = quantities(req, &path.field("resources").field("requests"))?;
        for (k, v) in req.iter() {
            r.set(k, v);
        }
    }
    Ok(r)
}

/// `max(sum(containers) + sidecars, max over init containers of (init + sidecars started
/// before it))`, plus pod overhead, with `pods = 1`.
pub fn effective_requests(spec: &api::PodSpec, path: &Path) -> Result<Resources, FieldError> {
    let mut main = Resources::new();
    for (i, c) in spec.containers.iter().enumerate() {
        main.add(&container_requests(c, &path.field("containers").index(i))?);
    }
    let mut sidecars = Resources::new();
    let mut init_peak = Resources::new();
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let r = container_requests(c, &path.field("initContainers").index(i))?;
        if c.restart_policy.as_deref() == Some("Always") {
            sidecars.add(&r);
            init_peak.max_with(&sidecars);
        } else {
            let mut during = sidecars.clone();
            during.add(&r);
            init_peak.max_with(&during);
        }
    }
    main.add(&sidecars);
    main.max_with(&init_peak);
    if let Some(o) = &spec.overhead {
        main.add(&quantities(o, &path.field("overhead"))?);
    }
    main.set(resources::PODS, 1);
    Ok(main)
}

fn requirement(e: &api::NodeSelectorRequirement, path: &Path) -> Result<Requirement, FieldError> {
    let operator = Operator::parse(&e.operator).ok_or_else(|| {
        path.field("operator")
            .error(format!("unsupported operator {:?}", e.operator))
    })?;
    Ok(Requirement {
        key: e.key.clone(),
        operator,
        values: e.values.as_deref().unwrap_or_default().into(),
        min_values: None,
    })
}

pub fn term(t: &api::NodeSelectorTerm, path: &Path) -> Result<NodeSelectorTerm, FieldError> {
    if t.match_fields.as_ref().is_some_and(|f| !f.is_empty()) {
        return Err(path
            .field("matchFields")
            .error("matchFields is not supported for provisioning"));
    }
    let match_expressions = t
        .match_expressions
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, e)| requirement(e, &path.field("matchExpressions").index(i)))
        .collect::<Result<_, _>>()?;
    Ok(NodeSelectorTerm { match_expressions })
}

pub fn label_selector(s: &meta::LabelSelector, path: &Path) -> Result<LabelSelector, FieldError> {
    let mut out = LabelSelector {
        match_labels: s.match_labels.clone().unwrap_or_default(),
        match_expressions: vec![],
    };
    for (i, e) in s.match_expressions.iter().flatten().enumerate() {
        let operator = match e.operator.as_str() {
            "In" => SelectorOperator::In,
            "NotIn" => SelectorOperator::NotIn,
            "Exists" => SelectorOperator::Exists,
            "DoesNotExist" => SelectorOperator::DoesNotExist,
            other => {
                return Err(path
                    .field("matchExpressions")
                    .index(i)
                    .field("operator")
                    .error(format!("unsupported operator {other:?}")));
            }
        };
        out.match_expressions.push(SelectorRequirement {
            key: e.key.clone(),
            operator,
            values: e.values.clone().unwrap_or_default(),
        });
    }
    Ok(out)
}

fn affinity_term(t: &api::PodAffinityTerm, path: &Path) -> Result<PodAffinityTerm, FieldError> {
    Ok(PodAffinityTerm {
        label_selector: t
            .label_selector
            .as_ref()
            .map(|s| label_selector(s, &path.field("labelSelector")))
            .transpose()?,
        namespaces: t.namespaces.clone().unwrap_or_default(),
        namespace_selector: t
            .namespace_selector
            .as_ref()
            .map(|s| label_selector(s, &path.field("namespaceSelector")))
            .transpose()?,
        topology_key: t.topology_key.clone(),
        match_label_keys: t.match_label_keys.clone().unwrap_or_default(),
        mismatch_label_keys: t.mismatch_label_keys.clone().unwrap_or_default(),
    })
}

/// The required and preferred terms of a `podAffinity` or `podAntiAffinity` at `path`; the
/// two Kubernetes types hold the same fields.
fn affinity_terms(
    required: &Option<Vec<api::PodAffinityTerm>>,
    preferred: &Option<Vec<api::WeightedPodAffinityTerm>>,
    path: &Path,
) -> Result<(Vec<PodAffinityTerm>, Vec<WeightedPodAffinityTerm>), FieldError> {
    let rp = path.field("requiredDuringSchedulingIgnoredDuringExecution");
    let required = required
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, t)| affinity_term(t, &rp.index(i)))
        .collect::<Result<_, _>>()?;
    let preferred = weighted_terms(
        preferred,
        &path.field("preferredDuringSchedulingIgnoredDuringExecution"),
    )?;
    Ok((required, preferred))
}

fn weighted_terms(
    list: &Option<Vec<api::WeightedPodAffinityTerm>>,
    path: &Path,
) -> Result<Vec<WeightedPodAffinityTerm>, FieldError> {
    list.iter()
        .flatten()
        .enumerate()
        .map(|(i, w)| {
            Ok(WeightedPodAffinityTerm {
                weight: w.weight,
                term: affinity_term(
                    &w.pod_affinity_term,
                    &path.index(i).field("podAffinityTerm"),
                )?,
            })
        })
        .collect()
}

fn toleration(t: &api::Toleration, path: &Path) -> Result<Toleration, FieldError> {
    let operator = match t.operator.as_deref() {
        None | Some("Equal") => TolerationOperator::Equal,
        Some("Exists") => TolerationOperator::Exists,
        Some(o) => {
            return Err(path
                .field("operator")
                .error(format!("unsupported operator {o:?}")));
        }
    };
    let effect = match t.effect.as_deref() {
        None | Some("") => None,
        Some(e) => Some(
            TaintEffect::parse(e)
                .ok_or_else(|| path.field("effect").error(format!("unknown effect {e:?}")))?,
        ),
    };
    Ok(Toleration {
        key: t.key.clone().unwrap_or_default(),
        operator,
        value: t.value.clone().unwrap_or_default(),
        effect,
    })
}

fn spread(
    c: &api::TopologySpreadConstraint,
    path: &Path,
) -> Result<TopologySpreadConstraint, FieldError> {
    let policy = |v: &Option<String>, default: InclusionPolicy, field: &str| match v.as_deref() {
        None => Ok(default),
        Some("Honor") => Ok(InclusionPolicy::Honor),
        Some("Ignore") => Ok(InclusionPolicy::Ignore),
        Some(o) => Err(path.field(field).error(format!("unknown policy {o:?}"))),
    };
    let when_unsatisfiable = match c.when_unsatisfiable.as_str() {
        "DoNotSchedule" => WhenUnsatisfiable::DoNotSchedule,
        "ScheduleAnyway" => WhenUnsatisfiable::ScheduleAnyway,
        o => {
            return Err(path
                .field("whenUnsatisfiable")
                .error(format!("unknown value {o:?}")));
        }
    };
    if c.max_skew < 1 {
        return Err(path.field("maxSkew").error("must be at least 1"));
    }
    Ok(TopologySpreadConstraint {
        max_skew: c.max_skew,
        topology_key: c.topology_key.clone(),
        when_unsatisfiable,
        label_selector: c
            .label_selector
            .as_ref()
            .map(|s| label_selector(s, &path.field("labelSelector")))
            .transpose()?,
        min_domains: c.min_domains,
        node_affinity_policy: policy(
            &c.node_affinity_policy,
            InclusionPolicy::Honor,
            "nodeAffinityPolicy",
        )?,
        node_taints_policy: policy(
            &c.node_taints_policy,
            InclusionPolicy::Ignore,
            "nodeTaintsPolicy",
        )?,
        match_label_keys: c.match_label_keys.clone().unwrap_or_default(),
    })
}

fn timestamp(t: &Option<meta::Time>) -> Option<Timestamp> {
    t.as_ref().map(|t| Timestamp(t.0.as_millisecond()))
}

/// Converts a pod as the API serves it. Errors name the field path under the pod.
pub fn pod_from_api(p: &api::Pod) -> Result<Pod, FieldError> {
    let root = Path::default();
    let md = &p.metadata;
    let spec = p
        .spec
        .as_ref()
        .ok_or_else(|| root.field("spec").error("a pod needs a spec"))?;
    let sp = root.field("spec");
    let mut pod = Pod {
        namespace: md
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_string()),
        name: md
            .name
            .clone()
            .or_else(|| md.generate_name.clone())
            .unwrap_or_default(),
        uid: md.uid.clone().unwrap_or_default(),
        template: Arc::new(PodTemplate {
            labels: md.labels.clone().unwrap_or_default(),
            annotations: md.annotations.clone().unwrap_or_default(),
            owner: md
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.controller == Some(true))
                .map(|o| OwnerRef {
                    kind: o.kind.clone(),
                    name: o.name.clone(),
                    controller: true,
                }),
            other_owner_references: md
                .owner_references
                .iter()
                .flatten()
                .filter(|o| o.controller != Some(true))
                .count() as u32,
            requests: effective_requests(spec, &sp)?,
            node_selector: spec.node_selector.clone().unwrap_or_default(),
            tolerations: spec
                .tolerations
                .iter()
                .flatten()
                .enumerate()
                .map(|(i, t)| toleration(t, &sp.field("tolerations").index(i)))
                .collect::<Result<_, _>>()?,
            topology_spread: spec
                .topology_spread_constraints
                .iter()
                .flatten()
                .enumerate()
                .map(|(i, c)| spread(c, &sp.field("topologySpreadConstraints").index(i)))
                .collect::<Result<_, _>>()?,
            priority: spec.priority.unwrap_or(0),
            priority_class_name: spec.priority_class_name.clone().unwrap_or_default(),
            termination_grace_period_seconds: spec.termination_grace_period_seconds,
            ..PodTemplate::default()
        }),
        node_name: spec.node_name.clone().filter(|n| !n.is_empty()),
        creation_timestamp: timestamp(&md.creation_timestamp).unwrap_or_default(),
        deletion_timestamp: timestamp(&md.deletion_timestamp),
        ..Pod::default()
    };
    if let Some(status) = &p.status {
        read_status(&mut pod, status);
    }
    if let Some(aff) = &spec.affinity {
        read_affinity(&mut pod, aff, &sp.field("affinity"))?;
    }
    pod.host_ports = host_ports(spec);
    pod.volume_claims = volume_claims(spec, &pod.name);
    Ok(pod)
}

/// The phase, start time and readiness the pod's status reports.
fn read_status(pod: &mut Pod, status: &api::PodStatus) {
    pod.phase = match status.phase.as_deref() {
        Some("Running") => PodPhase::Running,
        Some("Succeeded") => PodPhase::Succeeded,
        Some("Failed") => PodPhase::Failed,
        Some("Unknown") => PodPhase::Unknown,
        _ => PodPhase::Pending,
    };
    pod.start_time = timestamp(&status.start_time);
    pod.ready = status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True");
}

/// Required and preferred node affinity, pod affinity and anti-affinity; errors name the
/// field under `ap` (the pod's `spec.affinity`).
fn read_affinity(pod: &mut Pod, aff: &api::Affinity, ap: &Path) -> Result<(), FieldError> {
    if let Some(na) = &aff.node_affinity {
        let np = ap.field("nodeAffinity");
        if let Some(req) = &na.required_during_scheduling_ignored_during_execution {
            let rp = np
                .field("requiredDuringSchedulingIgnoredDuringExecution")
                .field("nodeSelectorTerms");
            pod.required_node_affinity = req
                .node_selector_terms
                .iter()
                .enumerate()
                .map(|(i, t)| term(t, &rp.index(i)))
                .collect::<Result<_, _>>()?;
        }
        for (i, w) in na
            .preferred_during_scheduling_ignored_during_execution
            .iter()
            .flatten()
            .enumerate()
        {
            let pp = np
                .field("preferredDuringSchedulingIgnoredDuringExecution")
                .index(i);
            pod.preferred_node_affinity.push(WeightedNodeSelectorTerm {
                weight: w.weight,
                term: term(&w.preference, &pp.field("preference"))?,
            });
        }
    }
    if let Some(pa) = &aff.pod_affinity {
        (pod.pod_affinity, pod.preferred_pod_affinity) = affinity_terms(
            &pa.required_during_scheduling_ignored_during_execution,
            &pa.preferred_during_scheduling_ignored_during_execution,
            &ap.field("podAffinity"),
        )?;
    }
    if let Some(pa) = &aff.pod_anti_affinity {
        (pod.pod_anti_affinity, pod.preferred_pod_anti_affinity) = affinity_terms(
            &pa.required_during_scheduling_ignored_during_execution,
            &pa.preferred_during_scheduling_ignored_during_execution,
            &ap.field("podAntiAffinity"),
        )?;
    }
    Ok(())
}

/// The host ports the pod's containers (init containers too) ask for.
fn host_ports(spec: &api::PodSpec) -> Vec<HostPort> {
    let mut ports = Vec::new();
    for c in spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
    {
        for port in c.ports.iter().flatten() {
            if let Some(hp) = port.host_port.filter(|&p| p > 0) {
                ports.push(HostPort {
                    port: hp,
                    protocol: port.protocol.clone().unwrap_or_else(|| "TCP".to_string()),
                    host_ip: port.host_ip.clone().unwrap_or_default(),
                });
            }
        }
    }
    ports
}

/// The PersistentVolumeClaims the pod mounts: named ones, and those its generic ephemeral
/// volumes create (`<pod>-<volume>`).
fn volume_claims(spec: &api::PodSpec, pod_name: &str) -> Vec<String> {
    let mut claims = Vec::new();
    for v in spec.volumes.iter().flatten() {
        if let Some(pvc) = &v.persistent_volume_claim {
            claims.push(pvc.claim_name.clone());
        } else if v.ephemeral.is_some() {
            claims.push(format!("{}-{}", pod_name, v.name));
        }
    }
    claims
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(json: serde_json::Value) -> Pod {
        let p: api::Pod = serde_json::from_value(json).unwrap();
        pod_from_api(&p).unwrap()
    }

    #[test]
    fn init_containers_and_sidecars() {
        // main 1 cpu; a sidecar of 500m runs alongside; an init container of 2 cpu runs after
        // the sidecar started, so the peak is 2.5 cpu.
        let p = pod(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {
                "containers": [{"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
                "initContainers": [
                    {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}},
                    {"name": "init", "resources": {"requests": {"cpu": "2"}}}
                ],
                "overhead": {"cpu": "100m"}
            }
        }));
        assert_eq!(p.requests.get("cpu"), 2600);
        assert_eq!(p.requests.get("memory"), 1 << 30);
        assert_eq!(p.requests.get("pods"), 1);
        assert_eq!(p.namespace, "default");
    }

    #[test]
    fn limits_default_requests() {
        let p = pod(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "2"}, "requests": {"cpu": "1"}}}]}
        }));
        assert_eq!(p.requests.get("nvidia.com/gpu"), 1);
        assert_eq!(p.requests.get("cpu"), 1000);
    }

    #[test]
    fn match_fields_is_rejected_with_a_path() {
        let p: api::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [], "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}]}}}}
        }))
        .unwrap();
        let e = pod_from_api(&p).unwrap_err();
        assert!(e.path.ends_with("nodeSelectorTerms[0].matchFields"), "{e}");
    }

    #[test]
    fn bad_quantity_names_the_field() {
        let p: api::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "lots"}}}]}
        }))
        .unwrap();
        let e = pod_from_api(&p).unwrap_err();
        assert_eq!(e.path, "spec.containers[0].resources.requests[cpu]");
    }
}
