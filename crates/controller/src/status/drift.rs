//! NodeClaim drift stamps and the `Drifted` condition, as upstream's hash and drift
//! controllers keep them (with `Consolidatable`, written in the same status write).
//!
//! A claim stamped with another hash version (one made by Karpenter, or by an older release
//! of this program) is re-stamped with its pool's current hash and is not drifted: a version
//! change means the hash is computed differently, not that the template changed. A launched
//! claim whose hash differs from its pool's current one is `Drifted` with reason
//! `NodePoolDrifted`; otherwise the cloud provider is asked (at most every five minutes per
//! claim) and its reason, if any, is used. A claim that is no longer drifted loses the
//! condition. The disruption engine reads the condition as the claim's drift reason.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use nodewright_api::aws::v1::EC2NodeClass;
use nodewright_api::v1::nodeclaim::{NodeClaim, NodeClaimStatus};
use nodewright_api::v1::nodepool::NodePool;
use nodewright_core::labels;
use nodewright_core::time::Timestamp;

use super::{StatusController, Written, record};
use crate::conditions::{self as cond, DRIFTED, LAUNCHED};
use crate::hash::{self, HASH_VERSION};
use crate::state::lock;
use crate::write::MetaPatch;
use crate::write::claim_status::write_status;

/// Upstream re-checks a claim's drift every five minutes; the hash comparison is free and runs
/// every pass, the provider is asked at this cadence.
pub const PROVIDER_DRIFT_EVERY: Duration = Duration::from_secs(5 * 60);

pub const NODEPOOL_DRIFTED: &str = "NodePoolDrifted";

/// What to do about one claim's hash stamp: `Some(patch)` re-stamps it.
pub fn restamp(claim: &NodeClaim, pool: &NodePool) -> Option<MetaPatch> {
    let (_, version) = hash::stamped(claim.metadata.annotations.as_ref());
    (version != Some(HASH_VERSION)).then(|| MetaPatch {
        annotations: hash::annotations(pool)
            .into_iter()
            .map(|(k, v)| (k, Some(v)))
            .collect(),
        ..MetaPatch::default()
    })
}

/// `NodePoolDrifted` when the claim's stamp (at the current version) differs from the
/// pool's current hash.
pub fn static_drift(claim: &NodeClaim, pool: &NodePool) -> Option<String> {
    match hash::stamped(claim.metadata.annotations.as_ref()) {
        (Some(h), Some(v)) if v == HASH_VERSION && h != hash::nodepool_hash(pool) => {
            Some(NODEPOOL_DRIFTED.to_string())
        }
        _ => None,
    }
}

/// The claim's conditions with `Drifted` set to `reason` (or removed); `None` when nothing
/// changes.
pub fn drift_conditions(
    claim: &NodeClaim,
    reason: Option<&str>,
    now: Timestamp,
) -> Option<Vec<nodewright_api::v1::shared::Condition>> {
    let mut conds = claim
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let changed = match reason {
        Some(r) => cond::set(&mut conds, DRIFTED, "True", r, "", now),
        None => cond::remove(&mut conds, DRIFTED),
    };
    changed.then_some(conds)
}

struct Item {
    claim: Arc<NodeClaim>,
    pool: Arc<NodePool>,
    class: Option<Arc<EC2NodeClass>>,
}

impl StatusController {
    /// The provider's drift reason for `claim`, asked at most every
    /// [`PROVIDER_DRIFT_EVERY`]; a failed call counts as not drifted until the next ask.
    async fn provider_drift(
        &self,
        claim: &NodeClaim,
        class: Option<&EC2NodeClass>,
        now: Timestamp,
    ) -> Option<String> {
        let uid = claim.metadata.uid.clone().unwrap_or_default();
        let cached = self
            .provider_drift
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&uid)
            .cloned();
        if let Some((at, reason)) = cached
            && now.since(at) < PROVIDER_DRIFT_EVERY
        {
            return reason;
        }
        let reason = self.cloud.is_drifted(claim, class).await.ok().flatten();
        self.provider_drift
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(uid, (now, reason.clone()));
        reason
    }

    pub(super) async fn reconcile_drift(&self, out: &mut Written) {
        let items: Vec<Item> = {
            let s = lock(&self.state);
            // Each pool and class copied once a pass, shared by its claims.
            let pools: BTreeMap<&str, Arc<NodePool>> = s
                .nodepools
                .iter()
                .map(|(name, p)| (name.as_str(), Arc::new(p.clone())))
                .collect();
            let classes: BTreeMap<&str, Arc<EC2NodeClass>> = s
                .nodeclasses
                .iter()
                .map(|(name, c)| (name.as_str(), Arc::new(c.clone())))
                .collect();
            s.nodeclaims
                .values()
                .filter(|c| c.metadata.deletion_timestamp.is_none())
                .filter_map(|c| {
                    let pool_name = c.metadata.labels.as_ref()?.get(labels::NODEPOOL)?;
                    Some(Item {
                        claim: c.clone(),
                        pool: pools.get(pool_name.as_str())?.clone(),
                        class: classes.get(c.spec.node_class_ref.name.as_str()).cloned(),
                    })
                })
                .collect()
        };
        let live: std::collections::HashSet<String> = items
            .iter()
            .filter_map(|i| i.claim.metadata.uid.clone())
            .collect();
        self.provider_drift
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|uid, _| live.contains(uid));

        // Each NodePool as the engine sees it, converted once per pass.
        let mut engine_pools: std::collections::HashMap<
            String,
            Option<nodewright_core::model::NodePool>,
        > = std::collections::HashMap::new();
        for Item { claim, pool, class } in items {
            let name = claim.metadata.name.clone().unwrap_or_default();
            let now = self.clock.now();
            if let Some(patch) = restamp(&claim, &pool) {
                let r = self.writer.patch_nodeclaim_meta(&name, &patch).await;
                if record(out, "NodeClaim", &name, r) {
                    out.nodeclaim_hash.push(name.clone());
                }
                continue;
            }
            let launched = claim
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_deref())
                .is_some_and(|c| cond::is_true(c, LAUNCHED));
            let reason = if !launched {
                None
            } else if let Some(r) = static_drift(&claim, &pool) {
                Some(r)
            } else {
                self.provider_drift(&claim, class.as_deref(), now).await
            };
            let drifted = drift_conditions(&claim, reason.as_deref(), now);
            let mut conds = drifted.clone().unwrap_or_else(|| {
                claim
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.clone())
                    .unwrap_or_default()
            });
            let engine_pool = engine_pools
                .entry(pool.metadata.name.clone().unwrap_or_default())
                .or_insert_with(|| nodewright_api::to_core::nodepool(&pool).ok());
            let consolidatable =
                super::consolidatable::update(&claim, &mut conds, engine_pool.as_ref(), now);
            if drifted.is_none() && !consolidatable {
                continue;
            }
            let status = NodeClaimStatus {
                conditions: Some(conds),
                ..NodeClaimStatus::default()
            };
            let r = write_status(&*self.writer, &self.state, &claim, &status).await;
            if record(out, "NodeClaim", &name, r) {
                out.nodeclaim_drift.push(name);
            }
        }
    }
}
