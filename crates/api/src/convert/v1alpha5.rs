//! `karpenter.sh/v1alpha5` Provisioner → `karpenter.sh/v1` NodePool.
//!
//! Behaviour is preserved, not just fields: the requirement defaults v1alpha5 added implicitly
//! are written out, a Provisioner that never removed empty nodes gets `consolidateAfter: Never`,
//! and one whose nodes never expired gets `expireAfter: Never`. Each such choice is a warning.

use std::collections::BTreeMap;

use nodewright_core::labels;
use serde_json::Value;

use super::v1beta1::{NodePoolConversion, node_class_ref};
use crate::conversion::Converted;
use crate::v1::shared::format_seconds;
use crate::v1::{self, NillableDuration, NodeSelectorRequirementWithMinValues as Req};
use crate::v1alpha5::{Provisioner, ProvisionerSpec};

/// The node label that named a node's Provisioner; v1 uses `karpenter.sh/nodepool`.
pub const PROVISIONER_NAME_LABEL: &str = labels::LEGACY_PROVISIONER_NAME;

/// Marks a NodePool converted from a Provisioner, with the Provisioner's name: the controller
/// labels that pool's nodes with [`PROVISIONER_NAME_LABEL`] as well, so workloads that still
/// select it (`nodeSelector: {karpenter.sh/provisioner-name: default}`) keep binding.
pub const PROVISIONER_ANNOTATION: &str = "nodewright.io/provisioner-name";

/// Where a workload (any document that is not a Karpenter object) selects nodes by
/// [`PROVISIONER_NAME_LABEL`]: the field paths of node selectors and selector terms naming it.
pub fn legacy_selector_paths(value: &Value) -> Vec<String> {
    fn walk(v: &Value, path: &mut Vec<String>, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if m.get("key").and_then(Value::as_str) == Some(PROVISIONER_NAME_LABEL) {
                    out.push(path.join("."));
                }
                for (k, child) in m {
                    if k == PROVISIONER_NAME_LABEL {
                        out.push(path.join("."));
                        continue;
                    }
                    path.push(k.clone());
                    walk(child, path, out);
                    path.pop();
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    match path.last_mut() {
                        Some(last) => {
                            let saved = last.clone();
                            *last = format!("{saved}[{i}]");
                            walk(child, path, out);
                            *path.last_mut().expect("just set") = saved;
                        }
                        None => walk(child, path, out),
                    }
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(value, &mut Vec::new(), &mut out);
    out
}

fn rename_key(key: &str) -> String {
    if key == PROVISIONER_NAME_LABEL {
        labels::NODEPOOL.to_string()
    } else {
        key.to_string()
    }
}

/// Requirements v1alpha5 applied when the Provisioner left a key unconstrained (neither a
/// requirement nor a label on it).
fn implicit_requirements(reqs: &[Req], node_labels: Option<&BTreeMap<String, String>>) -> Vec<Req> {
    let constrained = |k: &str| {
        reqs.iter().any(|r| labels::normalize_key(&r.key) == k)
            || node_labels.is_some_and(|l| l.keys().any(|l| labels::normalize_key(l) == k))
    };
    let picks_instances = constrained(labels::INSTANCE_TYPE)
        || constrained(labels::aws::INSTANCE_FAMILY)
        || constrained(labels::aws::INSTANCE_CATEGORY)
        || constrained(labels::aws::INSTANCE_GENERATION);
    let mut out = Vec::new();
    // Category and generation defaults only applied when no requirement chose instance types;
    // adding them next to an explicit instance-type list could make the pool unsatisfiable.
    if !picks_instances {
        out.push(Req::new(
            labels::aws::INSTANCE_CATEGORY,
            "In",
            &["c", "m", "r"],
        ));
        out.push(Req::new(labels::aws::INSTANCE_GENERATION, "Gt", &["2"]));
    }
    if !constrained(labels::CAPACITY_TYPE) {
        out.push(Req::new(labels::CAPACITY_TYPE, "In", &["on-demand"]));
    }
    if !constrained(labels::OS) {
        out.push(Req::new(labels::OS, "In", &["linux"]));
    }
    if !constrained(labels::ARCH) {
        out.push(Req::new(labels::ARCH, "In", &["amd64"]));
    }
    out
}

fn describe(r: &Req) -> String {
    format!("{} {} [{}]", r.key, r.operator, r.values().join(", "))
}

pub fn convert(old: &Provisioner) -> NodePoolConversion {
    let mut w = Vec::new();
    let s = &old.spec;
    let requirements = requirements(s, &mut w);
    let metadata = template_metadata(s, &mut w);
    let node_class_ref = provider_ref(s, &mut w);
    let kubelet = kubelet(s, &mut w);
    let disruption = disruption(s, &mut w);
    let expire_after = expire_after(s, &mut w);
    let limits = s.limits.as_ref().and_then(|l| {
        if !l.extra.is_empty() {
            let keys: Vec<&String> = l.extra.keys().collect();
            w.push(format!(
                "spec.limits fields {keys:?} have no v1 home and are dropped"
            ));
        }
        l.resources.clone()
    });
    if old.status.is_some() {
        w.push("status is not converted; the controller rebuilds it".to_string());
    }

    let mut pool_metadata = old.metadata.clone();
    if let Some(name) = &old.metadata.name {
        pool_metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(PROVISIONER_ANNOTATION.to_string(), name.clone());
    }
    let nodepool = v1::NodePool {
        api_version: v1::API_VERSION.to_string(),
        kind: "NodePool".to_string(),
        metadata: pool_metadata,
        spec: v1::NodePoolSpec {
            template: v1::NodeClaimTemplate {
                metadata,
                spec: v1::NodeClaimTemplateSpec {
                    taints: s.taints.clone(),
                    startup_taints: s.startup_taints.clone(),
                    requirements,
                    node_class_ref,
                    termination_grace_period: None,
                    expire_after: Some(expire_after),
                    extra: Default::default(),
                },
                extra: Default::default(),
            },
            disruption: Some(disruption),
            limits,
            weight: s.weight,
            replicas: None,
            extra: s.extra.clone(),
        },
        status: None,
        extra: old.extra.clone(),
    };
    NodePoolConversion {
        nodepool: Converted {
            object: nodepool,
            warnings: w,
        },
        kubelet,
    }
}

/// The requirements with v1alpha5's label keys renamed, and the ones v1alpha5 added on its
/// own written out, so the NodePool launches the same nodes.
fn requirements(s: &ProvisionerSpec, w: &mut Vec<String>) -> Vec<Req> {
    let mut requirements: Vec<Req> = s.requirements.clone().unwrap_or_default();
    for (i, r) in requirements.iter_mut().enumerate() {
        let key = rename_key(&r.key);
        if key != r.key {
            w.push(format!(
                "spec.requirements[{i}].key {:?} is now {key:?}",
                r.key
            ));
            r.key = key;
        }
    }
    let implicit = implicit_requirements(&requirements, s.labels.as_ref());
    if !implicit.is_empty() {
        let list: Vec<String> = implicit.iter().map(describe).collect();
        w.push(format!(
            "v1alpha5 added these requirements implicitly; they are now explicit so the NodePool launches the same nodes: {}",
            list.join("; ")
        ));
        requirements.extend(implicit);
    }
    requirements
}

/// The template's labels (keys renamed) and annotations, when there are any.
fn template_metadata(s: &ProvisionerSpec, w: &mut Vec<String>) -> Option<v1::TemplateMetadata> {
    let labels = s.labels.as_ref().map(|l| {
        l.iter()
            .map(|(k, v)| {
                let key = rename_key(k);
                if key != *k {
                    w.push(format!("spec.labels key {k:?} is now {key:?}"));
                }
                (key, v.clone())
            })
            .collect()
    });
    (labels.is_some() || s.annotations.is_some()).then(|| v1::TemplateMetadata {
        labels,
        annotations: s.annotations.clone(),
        extra: Default::default(),
    })
}

/// `providerRef` as v1's `nodeClassRef`; inline `provider` settings have nowhere to go.
fn provider_ref(s: &ProvisionerSpec, w: &mut Vec<String>) -> v1::NodeClassReference {
    let node_class_ref = match &s.provider_ref {
        Some(r) => node_class_ref(
            r.api_version.as_deref(),
            r.kind.as_deref(),
            &r.name,
            &r.extra,
            "spec.providerRef",
            w,
        ),
        None => {
            w.push(
                "spec.providerRef is missing; v1 requires a nodeClassRef (the converted NodePool will not validate)"
                    .to_string(),
            );
            node_class_ref(None, None, "", &Default::default(), "", w)
        }
    };
    if s.provider.is_some() {
        w.push(
            "spec.provider (inline AWS settings) has no v1 home and is dropped; write an EC2NodeClass with those settings"
                .to_string(),
        );
    }
    node_class_ref
}

/// The kubelet configuration, for the EC2NodeClass, without what v1beta1 removed.
fn kubelet(s: &ProvisionerSpec, w: &mut Vec<String>) -> Option<Value> {
    let mut kubelet = s.kubelet_configuration.clone();
    if let Some(Value::Object(k)) = kubelet.as_mut()
        && let Some(cr) = k.remove("containerRuntime")
    {
        w.push(format!(
                "spec.kubeletConfiguration.containerRuntime ({cr}) was removed in v1beta1 and is dropped; containerd is always used"
            ));
    }
    kubelet
}

/// `consolidation.enabled` and `ttlSecondsAfterEmpty` as a policy and `consolidateAfter`.
fn disruption(s: &ProvisionerSpec, w: &mut Vec<String>) -> v1::Disruption {
    let enabled = s.consolidation.as_ref().and_then(|c| c.enabled) == Some(true);
    if let Some(c) = &s.consolidation
        && !c.extra.is_empty()
    {
        let keys: Vec<&String> = c.extra.keys().collect();
        w.push(format!(
            "spec.consolidation fields {keys:?} have no v1 home and are dropped"
        ));
    }
    let (policy, after) = match (enabled, s.ttl_seconds_after_empty) {
        (true, ttl) => {
            if ttl.is_some() {
                w.push(
                    "spec.ttlSecondsAfterEmpty is superseded by consolidation.enabled: empty nodes are consolidated immediately"
                        .to_string(),
                );
            }
            ("WhenEmptyOrUnderutilized", "0s".to_string())
        }
        (false, Some(ttl)) => ("WhenEmpty", format_seconds(ttl.max(0) as u64)),
        (false, None) => {
            w.push(
                "the Provisioner neither consolidated nor removed empty nodes; consolidateAfter: Never keeps that (remove it to let nodewright consolidate)"
                    .to_string(),
            );
            ("WhenEmpty", "Never".to_string())
        }
    };
    v1::Disruption {
        consolidate_after: Some(NillableDuration(after)),
        consolidation_policy: Some(policy.to_string()),
        budgets: None,
        extra: Default::default(),
    }
}

/// `ttlSecondsUntilExpired` as `expireAfter`; none was "never", which v1 must say.
fn expire_after(s: &ProvisionerSpec, w: &mut Vec<String>) -> NillableDuration {
    match s.ttl_seconds_until_expired {
        Some(ttl) => NillableDuration::new(&format_seconds(ttl.max(0) as u64)),
        None => {
            w.push(
                "the Provisioner's nodes never expired; expireAfter: Never keeps that (the v1 default is 720h)".to_string(),
            );
            NillableDuration::never()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provisioner(spec: serde_json::Value) -> Provisioner {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner",
            "metadata": {"name": "p"}, "spec": spec
        }))
        .unwrap()
    }

    fn keys(c: &NodePoolConversion) -> Vec<String> {
        c.nodepool
            .object
            .spec
            .template
            .spec
            .requirements
            .iter()
            .map(|r| r.key.clone())
            .collect()
    }

    #[test]
    fn the_pool_remembers_its_provisioner_and_workloads_selecting_it_are_found() {
        let c = convert(&provisioner(
            serde_json::json!({"providerRef": {"name": "d"}}),
        ));
        let annotations = c.nodepool.object.metadata.annotations.clone().unwrap();
        let name = c.nodepool.object.metadata.name.clone().unwrap();
        assert_eq!(annotations.get(PROVISIONER_ANNOTATION), Some(&name));

        let deployment = serde_json::json!({"spec": {"template": {"spec": {
            "nodeSelector": {"karpenter.sh/provisioner-name": "default"},
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                    {"key": "karpenter.sh/provisioner-name", "operator": "In", "values": ["spot"]}]}]}}}}}}});
        assert_eq!(
            legacy_selector_paths(&deployment),
            [
                "spec.template.spec.nodeSelector",
                "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[1]",
            ]
        );
        let unrelated =
            serde_json::json!({"spec": {"nodeSelector": {"karpenter.sh/nodepool": "x"}}});
        assert!(legacy_selector_paths(&unrelated).is_empty());
    }

    #[test]
    fn labels_and_instance_types_suppress_implicit_defaults() {
        let c = convert(&provisioner(serde_json::json!({
            "providerRef": {"name": "d"},
            "labels": {"kubernetes.io/arch": "arm64"},
            "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["t4g.large"]}]
        })));
        assert_eq!(
            keys(&c),
            [
                "node.kubernetes.io/instance-type",
                "karpenter.sh/capacity-type",
                "kubernetes.io/os"
            ]
        );
    }

    #[test]
    fn ttls_consolidation_kubelet_and_provider() {
        let c = convert(&provisioner(serde_json::json!({
            "providerRef": {"apiVersion": "karpenter.k8s.aws/v1alpha1", "kind": "AWSNodeTemplate", "name": "d"},
            "ttlSecondsAfterEmpty": 30,
            "ttlSecondsUntilExpired": 604800,
            "kubeletConfiguration": {"maxPods": 20, "containerRuntime": "dockerd"},
            "provider": {"subnetSelector": {"a": "b"}},
            "requirements": [{"key": "karpenter.sh/provisioner-name", "operator": "Exists"}],
            "weight": 5
        })));
        let np = &c.nodepool.object;
        let d = np.spec.disruption.as_ref().unwrap();
        assert_eq!(d.consolidation_policy.as_deref(), Some("WhenEmpty"));
        assert_eq!(d.consolidate_after, Some(NillableDuration::new("30s")));
        assert_eq!(
            np.spec.template.spec.expire_after,
            Some(NillableDuration::new("168h"))
        );
        assert_eq!(np.spec.template.spec.node_class_ref.kind, "EC2NodeClass");
        assert_eq!(
            np.spec.template.spec.node_class_ref.group,
            "karpenter.k8s.aws"
        );
        assert_eq!(
            np.spec.template.spec.requirements[0].key,
            "karpenter.sh/nodepool"
        );
        assert_eq!(np.spec.weight, Some(5));
        assert_eq!(c.kubelet, Some(serde_json::json!({"maxPods": 20})));
        let w = c.nodepool.warnings.join("\n");
        assert!(w.contains("containerRuntime"), "{w}");
        assert!(w.contains("spec.provider (inline AWS settings)"), "{w}");
        assert!(
            w.contains("\"karpenter.sh/provisioner-name\" is now \"karpenter.sh/nodepool\""),
            "{w}"
        );

        let c = convert(&provisioner(
            serde_json::json!({"providerRef": {"name": "d"}, "consolidation": {"enabled": true}}),
        ));
        let d = c.nodepool.object.spec.disruption.unwrap();
        assert_eq!(
            d.consolidation_policy.as_deref(),
            Some("WhenEmptyOrUnderutilized")
        );
        assert_eq!(d.consolidate_after, Some(NillableDuration::new("0s")));
    }
}
