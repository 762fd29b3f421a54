//! Drift: a node no longer matches what its NodePool (or its provider) would launch today.
//!
//! Checked in Karpenter's order, first reason wins: the NodePool template hash changed
//! (`NodePoolDrifted`, only when hash versions agree), the node's labels no longer satisfy the
//! NodePool requirements (`RequirementsDrifted`), the instance type or a compatible offering is
//! gone (`InstanceTypeNotFound`, only for claims older than an hour), or the provider reported
//! drift (its reason).
//!
//! Offers the drift annotations and their stamp; the provider's own drift checks are its own.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::labels;
use crate::model::{InstanceType, Node, NodeClaim, NodePool};
use crate::requirements::{Operator, Requirement};
use crate::time::Timestamp;

/// The annotation holding the hash of the NodePool template a claim was made from.
pub const NODEPOOL_HASH: &str = "karpenter.sh/nodepool-hash";
/// The annotation holding which version of the hash [`NODEPOOL_HASH`] is.
pub const NODEPOOL_HASH_VERSION: &str = "karpenter.sh/nodepool-hash-version";
/// The hash version this build computes; claims stamped with another version are not compared.
/// It is not upstream's (`v3`): the value is computed differently, so claims stamped by
/// Karpenter are re-stamped rather than reported as drifted.
pub const NODEPOOL_HASH_VERSION_CURRENT: &str = "nw1";

/// The drift annotations a claim made now from `pool` carries: its template's hash, at this
/// build's version (none when the pool has no hash).
pub fn stamp(pool: &NodePool) -> BTreeMap<String, String> {
    if pool.hash.is_empty() {
        return BTreeMap::new();
    }
    BTreeMap::from([
        (NODEPOOL_HASH.to_string(), pool.hash.clone()),
        (
            NODEPOOL_HASH_VERSION.to_string(),
            NODEPOOL_HASH_VERSION_CURRENT.to_string(),
        ),
    ])
}

const INSTANCE_TYPE_CHECK_MIN_AGE: Duration = Duration::from_secs(3600);

/// True when a node label (or its absence) satisfies `req`. Absent well-known labels are
/// allowed, as Karpenter allows undefined well-known labels.
pub(crate) fn label_satisfies(req: &Requirement, value: Option<&str>) -> bool {
    let key = labels::normalize_key(&req.key);
    let Some(v) = value else {
        return match req.operator {
            Operator::NotIn | Operator::DoesNotExist => true,
            _ => labels::is_well_known(key),
        };
    };
    req.admits(Some(v))
}

fn label<'a>(labels: &'a BTreeMap<String, String>, key: &str) -> Option<&'a str> {
    labels.get(labels::normalize_key(key)).map(String::as_str)
}

/// Why `claim` (on `node`) has drifted from `nodepool`, if it has.
pub(crate) fn drift_reason(
    claim: &NodeClaim,
    node: &Node,
    nodepool: &NodePool,
    instance_types: &[InstanceType],
    now: Timestamp,
) -> Option<String> {
    drift_reason_with(
        claim,
        node,
        nodepool,
        |name| instance_types.iter().find(|it| it.name == name),
        now,
    )
}

/// [`drift_reason`] with the NodePool's instance types found through `instance_type` (the
/// first of a name, as a scan of the list finds it).
pub(crate) fn drift_reason_with<'t>(
    claim: &NodeClaim,
    node: &Node,
    nodepool: &NodePool,
    instance_type: impl FnOnce(&str) -> Option<&'t InstanceType>,
    now: Timestamp,
) -> Option<String> {
    reason_in_order(
        claim,
        nodepool,
        now,
        || labels_hold(node, nodepool),
        || offering_found(node, instance_type),
    )
}

/// Karpenter's drift reasons in their order, with the two checks that read the node's labels
/// given: `labels_hold` ([`labels_hold`]) and `offering_found` ([`offering_found`]), asked
/// only when the reasons before them did not settle it.
pub(super) fn reason_in_order(
    claim: &NodeClaim,
    nodepool: &NodePool,
    now: Timestamp,
    labels_hold: impl FnOnce() -> bool,
    offering_found: impl FnOnce() -> Option<bool>,
) -> Option<String> {
    let version = claim
        .annotations
        .get(NODEPOOL_HASH_VERSION)
        .map(String::as_str);
    if let Some(hash) = claim.annotations.get(NODEPOOL_HASH)
        && version == Some(NODEPOOL_HASH_VERSION_CURRENT)
        && !nodepool.hash.is_empty()
        && *hash != nodepool.hash
    {
        return Some("NodePoolDrifted".into());
    }
    if !labels_hold() {
        return Some("RequirementsDrifted".into());
    }
    if now.since(claim.creation_timestamp) >= INSTANCE_TYPE_CHECK_MIN_AGE
        && offering_found() == Some(false)
    {
        return Some("InstanceTypeNotFound".into());
    }
    claim.drifted.clone()
}

/// Whether `node`'s labels satisfy every requirement of `nodepool`.
pub(super) fn labels_hold(node: &Node, nodepool: &NodePool) -> bool {
    nodepool
        .template
        .requirements
        .iter()
        .all(|r| label_satisfies(r, label(&node.labels, &r.key)))
}

/// Whether the instance type `node` runs (found through `instance_type`) still offers its zone
/// and capacity type; `None` when the node has no instance-type label (nothing to check).
pub(super) fn offering_found<'t>(
    node: &Node,
    instance_type: impl FnOnce(&str) -> Option<&'t InstanceType>,
) -> Option<bool> {
    let name = node.labels.get(labels::INSTANCE_TYPE)?;
    let zone = node.labels.get(labels::ZONE);
    let ct = node.labels.get(labels::CAPACITY_TYPE);
    Some(instance_type(name).is_some_and(|it| {
        it.offerings.iter().any(|o| {
            zone.is_none_or(|z| *z == o.zone)
                && ct.is_none_or(|c| {
                    c == o.capacity_type.as_str()
                        // a reserved node may fall back to on-demand pricing
                        || (c == labels::CAPACITY_TYPE_RESERVED
                            && o.capacity_type.as_str() == labels::CAPACITY_TYPE_ON_DEMAND)
                })
        })
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::CapacityType;
    use crate::testkit::{instance_type, offering};
    use std::sync::Arc;

    fn setup() -> (NodeClaim, Node, NodePool, Vec<InstanceType>) {
        let claim = NodeClaim {
            annotations: [
                (NODEPOOL_HASH.to_string(), "h1".to_string()),
                (
                    NODEPOOL_HASH_VERSION.to_string(),
                    NODEPOOL_HASH_VERSION_CURRENT.to_string(),
                ),
            ]
            .into_iter()
            .collect::<BTreeMap<_, _>>()
            .into(),
            ..NodeClaim::default()
        };
        let node = Node {
            labels: [
                (labels::INSTANCE_TYPE, "m5.large"),
                (labels::ZONE, "us-east-1a"),
                (labels::CAPACITY_TYPE, "spot"),
                (labels::aws::INSTANCE_GENERATION, "5"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
            ..Node::default()
        };
        let mut pool = NodePool {
            hash: "h1".into(),
            ..NodePool::default()
        };
        pool.template.requirements = vec![Requirement::new(
            labels::aws::INSTANCE_GENERATION,
            Operator::Gt,
            &["2"],
        )];
        let it = instance_type(
            "m5.large",
            Default::default(),
            vec![offering("us-east-1a", CapacityType::Spot, 0.04)],
        );
        (claim, node, pool, vec![it])
    }

    #[test]
    fn each_reason_in_order() {
        let now = Timestamp(10_000_000);
        let (claim, node, mut pool, its) = setup();
        assert_eq!(drift_reason(&claim, &node, &pool, &its, now), None);

        pool.hash = "h2".into();
        assert_eq!(
            drift_reason(&claim, &node, &pool, &its, now).as_deref(),
            Some("NodePoolDrifted")
        );
        let mut old_version = claim.clone();
        Arc::make_mut(&mut old_version.annotations)
            .insert(NODEPOOL_HASH_VERSION.into(), "v2".into());
        assert_eq!(drift_reason(&old_version, &node, &pool, &its, now), None);

        pool.hash = "h1".into();
        pool.template.requirements = vec![Requirement::new(
            labels::aws::INSTANCE_GENERATION,
            Operator::Gt,
            &["5"],
        )];
        assert_eq!(
            drift_reason(&claim, &node, &pool, &its, now).as_deref(),
            Some("RequirementsDrifted")
        );

        pool.template.requirements.clear();
        assert_eq!(
            drift_reason(&claim, &node, &pool, &[], now).as_deref(),
            Some("InstanceTypeNotFound")
        );
        // Young claims are not checked for missing instance types.
        assert_eq!(
            drift_reason(&claim, &node, &pool, &[], Timestamp(60_000)),
            None
        );

        let mut provider = claim.clone();
        provider.drifted = Some("AMIDrift".into());
        assert_eq!(
            drift_reason(&provider, &node, &pool, &its, now).as_deref(),
            Some("AMIDrift")
        );
    }

    #[test]
    fn label_rules() {
        let gte = Requirement::new("example.com/n", Operator::Gte, &["3"]);
        assert!(label_satisfies(&gte, Some("3")));
        assert!(!label_satisfies(&gte, Some("2")));
        assert!(!label_satisfies(&gte, None));
        let zone = Requirement::new(labels::ZONE, Operator::In, &["a"]);
        assert!(label_satisfies(&zone, None));
        assert!(!label_satisfies(&zone, Some("b")));
        assert!(label_satisfies(
            &Requirement::new("x", Operator::DoesNotExist, &[]),
            None
        ));
    }
}
