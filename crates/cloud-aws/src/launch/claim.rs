//! What a launch reads from a NodeClaim: requirements, resource requests, taints and labels,
//! parsed once into core types. Anything unreadable is an invalid request naming the field.

use std::collections::BTreeMap;

use nodewright_api::quantity;
use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_api::v1::shared::Taint as ApiTaint;
use nodewright_cloud::CloudError;
use nodewright_core::requirements::{Operator, Requirement};
use nodewright_core::resources::Resources;
use nodewright_core::taints::{Taint, TaintEffect};

pub fn name(claim: &NodeClaim) -> &str {
    claim.metadata.name.as_deref().unwrap_or("")
}

fn invalid(claim: &NodeClaim, field: &str, reason: impl std::fmt::Display) -> CloudError {
    CloudError::InvalidRequest(format!("nodeclaim {}: {field}: {reason}", name(claim)))
}

pub fn requirements(claim: &NodeClaim) -> Result<Vec<Requirement>, CloudError> {
    claim
        .spec
        .requirements
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let operator = Operator::parse(&r.operator).ok_or_else(|| {
                invalid(
                    claim,
                    &format!("spec.requirements[{i}].operator"),
                    format!("unsupported operator {:?}", r.operator),
                )
            })?;
            let min_values = r
                .min_values
                .map(|m| {
                    u32::try_from(m).map_err(|_| {
                        invalid(
                            claim,
                            &format!("spec.requirements[{i}].minValues"),
                            "out of range",
                        )
                    })
                })
                .transpose()?;
            Ok(Requirement {
                key: r.key.clone(),
                operator,
                values: r.values.clone().unwrap_or_default(),
                min_values,
            })
        })
        .collect()
}

pub fn requests(claim: &NodeClaim) -> Result<Resources, CloudError> {
    let mut out = Resources::new();
    let list = claim
        .spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref());
    for (res, q) in list.into_iter().flatten() {
        let v = quantity::parse_resource(res, &q.text())
            .map_err(|e| invalid(claim, &format!("spec.resources.requests.{res}"), e))?;
        out.set(res, v);
    }
    Ok(out)
}

fn taints_of(
    claim: &NodeClaim,
    field: &str,
    list: Option<&Vec<ApiTaint>>,
) -> Result<Vec<Taint>, CloudError> {
    list.into_iter()
        .flatten()
        .enumerate()
        .map(|(i, t)| {
            let effect = TaintEffect::parse(&t.effect).ok_or_else(|| {
                invalid(
                    claim,
                    &format!("{field}[{i}].effect"),
                    format!("unknown effect {:?}", t.effect),
                )
            })?;
            Ok(Taint::new(&t.key, t.value.as_deref().unwrap_or(""), effect))
        })
        .collect()
}

/// The claim's taints and startup taints.
pub fn taints(claim: &NodeClaim) -> Result<(Vec<Taint>, Vec<Taint>), CloudError> {
    Ok((
        taints_of(claim, "spec.taints", claim.spec.taints.as_ref())?,
        taints_of(
            claim,
            "spec.startupTaints",
            claim.spec.startup_taints.as_ref(),
        )?,
    ))
}

/// The labels a node of this claim registers with: the claim's own labels (the NodePool's
/// template labels and `karpenter.sh/nodepool`, copied there by the controller) plus the
/// single-valued `In` requirements on keys outside `kubernetes.io` namespaces the kubelet
/// refuses to set.
pub fn node_labels(claim: &NodeClaim, reqs: &[Requirement]) -> BTreeMap<String, String> {
    let labels = claim
        .metadata
        .labels
        .clone()
        .unwrap_or_default()
        .into_iter()
        .collect();
    node_labels_from(labels, reqs)
}

/// `labels` plus the single-valued `In` requirements of `reqs` the kubelet may set itself
/// (a label already in `labels` wins).
pub fn node_labels_from(
    labels: BTreeMap<String, String>,
    reqs: &[Requirement],
) -> BTreeMap<String, String> {
    let mut out = labels;
    for r in reqs {
        if r.operator == Operator::In && r.values.len() == 1 && kubelet_may_set(&r.key) {
            out.entry(r.key.clone())
                .or_insert_with(|| r.values[0].clone());
        }
    }
    out
}

/// The kubelet may only self-assign labels under `kubernetes.io`/`k8s.io` that are on its
/// allow-list; the controller adds the rest once the node registers.
fn kubelet_may_set(key: &str) -> bool {
    let prefix = key.split_once('/').map(|(p, _)| p).unwrap_or("");
    let restricted = prefix == "kubernetes.io"
        || prefix.ends_with(".kubernetes.io")
        || prefix == "k8s.io"
        || prefix.ends_with(".k8s.io");
    if !restricted {
        return true;
    }
    const ALLOWED: &[&str] = &[
        "kubernetes.io/arch",
        "kubernetes.io/os",
        "node.kubernetes.io/instance-type",
        "topology.kubernetes.io/region",
        "topology.kubernetes.io/zone",
        "node.kubernetes.io/windows-build",
    ];
    let allowed_prefix = |p: &str| prefix == p || prefix.ends_with(&format!(".{p}"));
    ALLOWED.contains(&key)
        || allowed_prefix("kubelet.kubernetes.io")
        || allowed_prefix("node.kubernetes.io")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubelet_label_rules() {
        assert!(kubelet_may_set("team"));
        assert!(kubelet_may_set("karpenter.sh/nodepool"));
        assert!(kubelet_may_set("topology.kubernetes.io/zone"));
        assert!(!kubelet_may_set("node-role.kubernetes.io/worker"));
        assert!(!kubelet_may_set("kubernetes.io/hostname"));
    }
}
