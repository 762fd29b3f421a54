//! `karpenter.sh/v1beta1` NodePool → `karpenter.sh/v1` NodePool.
//!
//! `disruption.expireAfter` moves into the template, `WhenUnderutilized` becomes
//! `WhenEmptyOrUnderutilized`, `nodeClassRef.apiVersion` becomes `group`, and `kubelet` is handed
//! back to the caller to move into the EC2NodeClass.

use serde_json::Value;

use super::{DEFAULT_NODE_CLASS_GROUP, DEFAULT_NODE_CLASS_KIND, node_class_kind};
use crate::conversion::Converted;
use crate::v1;
use crate::v1beta1;

/// The converted NodePool and the kubelet settings that must move to its node class.
#[derive(Clone, Debug, PartialEq)]
pub struct NodePoolConversion {
    pub nodepool: Converted<v1::NodePool>,
    pub kubelet: Option<Value>,
}

pub fn node_class_ref(
    api_version: Option<&str>,
    kind: Option<&str>,
    name: &str,
    extra: &v1::Extra,
    path: &str,
    out: &mut Vec<String>,
) -> v1::NodeClassReference {
    let group = match api_version {
        Some(av) => match av.split_once('/') {
            Some((g, _)) if !g.is_empty() => g.to_string(),
            _ => {
                out.push(format!(
                    "{path}.apiVersion {av:?} names no API group; using {DEFAULT_NODE_CLASS_GROUP:?}"
                ));
                DEFAULT_NODE_CLASS_GROUP.to_string()
            }
        },
        None => DEFAULT_NODE_CLASS_GROUP.to_string(),
    };
    let kind = node_class_kind(kind.unwrap_or(DEFAULT_NODE_CLASS_KIND)).to_string();
    v1::NodeClassReference {
        group,
        kind,
        name: name.to_string(),
        extra: extra.clone(),
    }
}

pub fn convert(old: &v1beta1::NodePool) -> NodePoolConversion {
    let mut warnings = Vec::new();
    let ospec = &old.spec;
    let otmpl = &ospec.template.spec;

    let node_class_ref = match &otmpl.node_class_ref {
        Some(r) => node_class_ref(
            r.api_version.as_deref(),
            r.kind.as_deref(),
            &r.name,
            &r.extra,
            "spec.template.spec.nodeClassRef",
            &mut warnings,
        ),
        None => {
            warnings.push(
                "spec.template.spec.nodeClassRef is missing; v1 requires one (the converted NodePool will not validate)"
                    .to_string(),
            );
            node_class_ref(None, None, "", &Default::default(), "", &mut warnings)
        }
    };
    if otmpl.resources.is_some() {
        warnings.push(
            "spec.template.spec.resources has no v1 equivalent (NodeClaim requests are computed per launch) and is dropped"
                .to_string(),
        );
    }
    if otmpl.requirements.is_none() {
        warnings.push(
            "spec.template.spec.requirements is missing; written as an empty list".to_string(),
        );
    }

    let mut expire_after = None;
    let disruption = ospec.disruption.as_ref().map(|d| {
        expire_after = d.expire_after.as_deref().map(v1::NillableDuration::new);
        let policy = d.consolidation_policy.as_deref().map(|p| match p {
            "WhenUnderutilized" => "WhenEmptyOrUnderutilized".to_string(),
            other => other.to_string(),
        });
        v1::Disruption {
            // v1 requires consolidateAfter once `disruption` is written; v1beta1's
            // WhenUnderutilized consolidated immediately, which is `0s`.
            consolidate_after: Some(v1::NillableDuration::new(
                d.consolidate_after.as_deref().unwrap_or("0s"),
            )),
            consolidation_policy: policy,
            budgets: d.budgets.clone(),
            extra: d.extra.clone(),
        }
    });

    let nodepool = v1::NodePool {
        api_version: v1::API_VERSION.to_string(),
        kind: "NodePool".to_string(),
        metadata: old.metadata.clone(),
        spec: v1::NodePoolSpec {
            template: v1::NodeClaimTemplate {
                metadata: ospec.template.metadata.clone(),
                spec: v1::NodeClaimTemplateSpec {
                    taints: otmpl.taints.clone(),
                    startup_taints: otmpl.startup_taints.clone(),
                    requirements: otmpl.requirements.clone().unwrap_or_default(),
                    node_class_ref,
                    termination_grace_period: None,
                    expire_after,
                    extra: otmpl.extra.clone(),
                },
                extra: ospec.template.extra.clone(),
            },
            disruption,
            limits: ospec.limits.clone(),
            weight: ospec.weight,
            replicas: None,
            extra: ospec.extra.clone(),
        },
        status: None,
        extra: old.extra.clone(),
    };
    if old.status.is_some() {
        warnings.push("status is not converted; the controller rebuilds it".to_string());
    }
    NodePoolConversion {
        nodepool: Converted {
            object: nodepool,
            warnings,
        },
        kubelet: otmpl.kubelet.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nodepool(spec: Value) -> v1beta1::NodePool {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1beta1", "kind": "NodePool",
            "metadata": {"name": "p"}, "spec": spec
        }))
        .unwrap()
    }

    #[test]
    fn node_class_ref_budgets_and_dropped_fields() {
        let c = convert(&nodepool(json!({
            "template": {"spec": {
                "nodeClassRef": {"apiVersion": "karpenter.k8s.aws/v1beta1", "kind": "EC2NodeClass", "name": "d"},
                "requirements": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"], "minValues": 1}],
                "resources": {"requests": {"cpu": "1"}}
            }},
            "disruption": {
                "consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s", "expireAfter": "Never",
                "budgets": [{"nodes": "0", "schedule": "@daily", "duration": "10m"}]
            },
            "weight": 10
        })));
        let np = &c.nodepool.object;
        let r = &np.spec.template.spec.node_class_ref;
        assert_eq!(
            (r.group.as_str(), r.kind.as_str(), r.name.as_str()),
            ("karpenter.k8s.aws", "EC2NodeClass", "d")
        );
        assert_eq!(np.spec.template.spec.requirements[0].min_values, Some(1));
        assert_eq!(
            np.spec.template.spec.expire_after,
            Some(v1::NillableDuration::never())
        );
        let d = np.spec.disruption.as_ref().unwrap();
        assert_eq!(d.consolidation_policy.as_deref(), Some("WhenEmpty"));
        assert_eq!(d.consolidate_after, Some(v1::NillableDuration::new("30s")));
        assert_eq!(
            d.budgets.as_ref().unwrap()[0].schedule.as_deref(),
            Some("@daily")
        );
        assert_eq!(np.spec.weight, Some(10));
        assert!(
            c.nodepool
                .warnings
                .iter()
                .any(|w| w.contains("spec.template.spec.resources"))
        );
        assert_eq!(c.kubelet, None);
    }

    #[test]
    fn missing_node_class_ref_is_a_warning_and_fails_v1_validation() {
        let c = convert(&nodepool(
            json!({"template": {"spec": {"requirements": []}}}),
        ));
        assert!(
            c.nodepool
                .warnings
                .iter()
                .any(|w| w.contains("nodeClassRef is missing"))
        );
        let errs = crate::validation::nodepool(&c.nodepool.object);
        assert!(errs.iter().any(
            |e| e.to_string() == "spec.template.spec.nodeClassRef.name: name may not be empty"
        ));
        assert_eq!(
            c.nodepool.object.spec.disruption, None,
            "absent disruption keeps v1 defaults"
        );
    }
}
