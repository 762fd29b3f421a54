//! Materialising a NodeClaim object from a NodePool and a scheduling decision, as upstream
//! does: `<nodepool>-<5 random lowercase alphanumerics>`, the pool's template labels and
//! annotations, drift hash annotations, the termination finalizer, an owner reference to the
//! NodePool, and requirements that include the instance-type list.

use std::collections::hash_map::RandomState;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use nodewright_api::convert::v1alpha5::PROVISIONER_ANNOTATION;
use nodewright_api::v1::nodeclaim::{NodeClaim, NodeClaimSpec, ResourceRequirements};
use nodewright_api::v1::nodepool::NodePool;
use nodewright_api::v1::shared::{NodeSelectorRequirementWithMinValues, Quantity};
use nodewright_core::labels;
use nodewright_core::requirements::{Operator, Requirement};
use nodewright_core::resources::{Resources, format_amount};

pub const TERMINATION_FINALIZER: &str = "karpenter.sh/termination";

/// The metadata patch that takes our finalizer off once termination is done. `latest` must be
/// the latest read of the object: the list and the version guarding it come from the same
/// read, so a write of the same pass (a taint, a timestamp) that moved the version on does
/// not make the patch conflict, and a finalizer someone else added since is kept.
pub fn release_termination(latest: &ObjectMeta) -> crate::write::MetaPatch {
    let finalizers = latest
        .finalizers
        .iter()
        .flatten()
        .filter(|f| *f != TERMINATION_FINALIZER)
        .cloned()
        .collect();
    crate::write::MetaPatch {
        finalizers: Some(finalizers),
        resource_version: latest.resource_version.clone(),
        ..Default::default()
    }
}
pub use crate::hash::{
    HASH_ANNOTATION as NODEPOOL_HASH, HASH_VERSION,
    HASH_VERSION_ANNOTATION as NODEPOOL_HASH_VERSION,
};

/// Five random characters from `[a-z0-9]`, as Kubernetes' generateName produces.
pub fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut h = RandomState::new().build_hasher();
    h.write_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0),
    );
    let mut x = h.finish();
    (0..5)
        .map(|_| {
            let c = ALPHABET[(x % ALPHABET.len() as u64) as usize] as char;
            x /= ALPHABET.len() as u64;
            c
        })
        .collect()
}

/// What a new claim is: from a provisioning plan or a disruption replacement.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimRequest {
    pub nodepool: String,
    /// Requirements without the instance-type list.
    pub requirements: Vec<Requirement>,
    /// Instance-type names, cheapest first.
    pub instance_types: Vec<String>,
    /// Capacity types of the options' offerings.
    pub capacity_types: Vec<String>,
    pub requests: Resources,
    pub min_values_relaxed: bool,
}

fn api_requirement(r: &Requirement) -> NodeSelectorRequirementWithMinValues {
    NodeSelectorRequirementWithMinValues {
        key: r.key.clone(),
        operator: r.operator.as_str().to_string(),
        values: if r.values.is_empty() {
            None
        } else {
            Some(r.values.clone())
        },
        min_values: r.min_values.map(i64::from),
        extra: Default::default(),
    }
}

/// The claim's requirements: the request's, its instance types as one `In` (keeping the
/// request's `minValues` for them), its capacity types and the NodePool unless given, sorted
/// by key.
fn requirements(request: &ClaimRequest, pool_name: &str) -> Vec<Requirement> {
    let mut reqs: Vec<Requirement> = request
        .requirements
        .iter()
        .filter(|r| r.key != labels::INSTANCE_TYPE)
        .cloned()
        .collect();
    let min_it = request
        .requirements
        .iter()
        .find(|r| r.key == labels::INSTANCE_TYPE)
        .and_then(|r| r.min_values);
    reqs.push(Requirement {
        key: labels::INSTANCE_TYPE.into(),
        operator: Operator::In,
        values: request.instance_types.as_slice().into(),
        min_values: min_it,
    });
    if !reqs.iter().any(|r| r.key == labels::CAPACITY_TYPE) && !request.capacity_types.is_empty() {
        let cts: BTreeSet<&String> = request.capacity_types.iter().collect();
        reqs.push(Requirement {
            key: labels::CAPACITY_TYPE.into(),
            operator: Operator::In,
            values: cts.into_iter().cloned().collect(),
            min_values: None,
        });
    }
    if !reqs.iter().any(|r| r.key == labels::NODEPOOL) {
        reqs.push(Requirement {
            key: labels::NODEPOOL.into(),
            operator: Operator::In,
            values: Arc::from([pool_name.to_string()]),
            min_values: None,
        });
    }
    reqs.sort_by(|a, b| a.key.cmp(&b.key));
    reqs
}

/// The claim's labels: the template's, each custom requirement with one value, the NodePool
/// (and the v1alpha5 Provisioner's name for a converted pool) and the EC2NodeClass.
fn claim_labels(pool: &NodePool, reqs: &[Requirement]) -> BTreeMap<String, String> {
    let pool_name = pool.metadata.name.clone().unwrap_or_default();
    let mut claim_labels: BTreeMap<String, String> = (pool.spec.template.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    // Custom (not well-known, not restricted) keys with one value become labels.
    for r in reqs {
        if r.operator == Operator::In
            && r.values.len() == 1
            && !labels::is_well_known(&r.key)
            && labels::restriction(&r.key).is_none()
        {
            claim_labels.insert(r.key.clone(), r.values[0].clone());
        }
    }
    claim_labels.insert(labels::NODEPOOL.into(), pool_name);
    // A pool converted from a Provisioner also labels its nodes the v1alpha5 way, so workloads
    // that select `karpenter.sh/provisioner-name` still bind to them.
    if let Some(provisioner) = pool
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(PROVISIONER_ANNOTATION))
    {
        claim_labels.insert(labels::LEGACY_PROVISIONER_NAME.into(), provisioner.clone());
    }
    let class = &pool.spec.template.spec.node_class_ref;
    if class.kind == "EC2NodeClass" {
        claim_labels.insert(labels::aws::EC2NODECLASS.into(), class.name.clone());
    }
    claim_labels
}

/// The NodeClaim to create for `request` in `pool`, named `name`.
pub fn build(pool: &NodePool, request: &ClaimRequest, name: &str) -> NodeClaim {
    let pool_name = pool.metadata.name.clone().unwrap_or_default();
    let template = &pool.spec.template;
    let tmeta = template.metadata.clone().unwrap_or_default();

    let reqs = requirements(request, &pool_name);
    let claim_labels = claim_labels(pool, &reqs);
    let class = &template.spec.node_class_ref;

    let mut annotations: BTreeMap<String, String> = tmeta.annotations.clone().unwrap_or_default();
    annotations.extend(crate::hash::annotations(pool));
    if request.min_values_relaxed {
        annotations.insert(
            "karpenter.sh/nodeclaim-min-values-relaxed".into(),
            "true".into(),
        );
    }

    let requests: BTreeMap<String, Quantity> = request
        .requests
        .iter()
        .map(|(k, v)| (k.to_string(), Quantity::String(format_amount(k, v))))
        .collect();

    NodeClaim {
        api_version: "karpenter.sh/v1".into(),
        kind: "NodeClaim".into(),
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(claim_labels),
            annotations: Some(annotations),
            finalizers: Some(vec![TERMINATION_FINALIZER.into()]),
            owner_references: Some(vec![OwnerReference {
                api_version: "karpenter.sh/v1".into(),
                kind: "NodePool".into(),
                name: pool_name,
                uid: pool.metadata.uid.clone().unwrap_or_default(),
                block_owner_deletion: Some(true),
                controller: None,
            }]),
            ..ObjectMeta::default()
        },
        spec: NodeClaimSpec {
            taints: template.spec.taints.clone(),
            startup_taints: template.spec.startup_taints.clone(),
            requirements: reqs.iter().map(api_requirement).collect(),
            resources: Some(ResourceRequirements {
                requests: Some(requests),
                extra: Default::default(),
            }),
            node_class_ref: class.clone(),
            termination_grace_period: template.spec.termination_grace_period.clone(),
            expire_after: template.spec.expire_after.clone(),
            extra: Default::default(),
        },
        status: None,
        extra: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixes_are_five_lowercase_alphanumerics_and_vary() {
        let a = random_suffix();
        assert_eq!(a.len(), 5);
        assert!(
            a.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        );
        let distinct: BTreeSet<String> = (0..50).map(|_| random_suffix()).collect();
        assert!(distinct.len() > 40);
    }
}
