//! EC2NodeClass status: the cloud provider resolves each class (subnets, security groups,
//! AMIs, instance profile, conditions) and the result is written to the status subresource.
//! A class is resolved again when its generation changes, when a NodePool naming it is
//! created, changed or deleted (the provider validates the class with a launch of such a
//! pool, as upstream's class controller watches NodePools), and at least once a minute, so
//! changes in the cloud (a new AMI, a deleted subnet) show up without an edit.
//!
//! The provider also says which annotations the class itself should carry (its drift hash);
//! those that differ from what is stored are written in one merge patch of the metadata.
//!
//! Condition transition times are ours: a condition keeps its time while its status holds,
//! whatever the provider sent. A provider that says the class cannot be ready gets a `Ready`
//! condition of `False` with its reason; a failed cloud call leaves the status as it was.

use std::collections::BTreeMap;
use std::time::Duration;

use nodewright_api::aws::common::Condition as ClassCondition;
use nodewright_api::aws::v1::{EC2NodeClass, EC2NodeClassStatus};
use nodewright_api::stable_hash::fnv1a64;
use nodewright_api::v1::nodepool::NodePool;
use nodewright_api::v1::shared::Condition;
use nodewright_cloud::{CloudError, ReconciledNodeClass};
use nodewright_core::time::Timestamp;

use super::{StatusController, Written, record};
use crate::conditions::{self as cond, READY};
use crate::state::lock;
use crate::write::MetaPatch;

/// How long a resolved class is trusted before asking the provider again.
pub const RESOLVE_EVERY: Duration = Duration::from_secs(60);

/// The class's conditions in the shape the condition helpers take (the same JSON).
pub fn class_conditions(conds: &[ClassCondition]) -> Vec<Condition> {
    conds.iter().filter_map(recode).collect()
}

fn recode<A: serde::Serialize, B: serde::de::DeserializeOwned>(a: &A) -> Option<B> {
    serde_json::to_value(a)
        .ok()
        .and_then(|v| serde_json::from_value(v).ok())
}

fn to_class_conditions(conds: &[Condition]) -> Vec<ClassCondition> {
    conds.iter().filter_map(recode).collect()
}

/// `resolved`'s conditions applied over `stored`'s, so unchanged conditions keep their
/// transition times; conditions the provider no longer reports are dropped.
pub fn merge_conditions(
    stored: &[Condition],
    resolved: &[Condition],
    now: Timestamp,
) -> Vec<Condition> {
    let mut out: Vec<Condition> = stored
        .iter()
        .filter(|c| resolved.iter().any(|r| r.type_ == c.type_))
        .cloned()
        .collect();
    for r in resolved {
        cond::set(
            &mut out,
            &r.type_,
            &r.status,
            r.reason.as_deref().unwrap_or_default(),
            r.message.as_deref().unwrap_or_default(),
            now,
        );
    }
    out
}

/// The annotation patch that brings `class` to `wanted`; `None` when it already carries them.
/// Keys the provider does not mention are left alone.
pub fn annotation_patch(
    class: &EC2NodeClass,
    wanted: &BTreeMap<String, String>,
) -> Option<MetaPatch> {
    let stored = class.metadata.annotations.clone().unwrap_or_default();
    let annotations: BTreeMap<String, Option<String>> = wanted
        .iter()
        .filter(|(k, v)| stored.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), Some(v.clone())))
        .collect();
    (!annotations.is_empty()).then(|| MetaPatch {
        annotations,
        ..MetaPatch::default()
    })
}

/// The status to store for `class` given the provider's answer.
pub fn desired(
    class: &EC2NodeClass,
    resolved: Result<EC2NodeClassStatus, CloudError>,
    now: Timestamp,
) -> Option<EC2NodeClassStatus> {
    let stored = class.status.clone().unwrap_or_default();
    let stored_conds = class_conditions(stored.conditions.as_deref().unwrap_or_default());
    match resolved {
        Ok(mut status) => {
            let conds = merge_conditions(
                &stored_conds,
                &class_conditions(status.conditions.as_deref().unwrap_or_default()),
                now,
            );
            status.conditions = Some(to_class_conditions(&conds));
            Some(status)
        }
        Err(CloudError::NodeClassNotReady { reason, .. }) => {
            let mut status = stored;
            let mut conds = stored_conds;
            cond::set(
                &mut conds,
                READY,
                "False",
                "NodeClassNotReady",
                &reason,
                now,
            );
            status.conditions = Some(to_class_conditions(&conds));
            Some(status)
        }
        Err(_) => None,
    }
}

/// The NodePools whose template names the EC2NodeClass `class`: the provider validates the
/// class with a launch one of them could make.
pub fn pools_using(pools: &[NodePool], class: &str) -> Vec<NodePool> {
    pools
        .iter()
        .filter(|np| {
            let r = &np.spec.template.spec.node_class_ref;
            r.name == class && r.kind == "EC2NodeClass"
        })
        .cloned()
        .collect()
}

/// What a class was last resolved with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resolved {
    generation: Option<i64>,
    at: Timestamp,
    /// [`pools_fingerprint`] of the pools that named the class.
    pools: u64,
}

/// A digest of what the provider reads from the pools naming a class (name, template, being
/// deleted), whatever their order: it differs after any create, update or delete of one.
pub fn pools_fingerprint(users: &[NodePool]) -> u64 {
    let mut parts: Vec<String> = users
        .iter()
        .map(|np| {
            format!(
                "{}|{}|{}",
                np.metadata.name.as_deref().unwrap_or_default(),
                serde_json::to_string(&np.spec.template).unwrap_or_default(),
                np.metadata.deletion_timestamp.is_some()
            )
        })
        .collect();
    parts.sort();
    fnv1a64(parts.join("\n").as_bytes())
}

impl StatusController {
    fn class_due(&self, class: &EC2NodeClass, pools: u64, now: Timestamp) -> bool {
        let name = class.metadata.name.clone().unwrap_or_default();
        let seen = self
            .classes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&name)
            .copied();
        match seen {
            None => true,
            Some(seen) => {
                seen.generation != class.metadata.generation
                    || seen.pools != pools
                    || now.since(seen.at) >= RESOLVE_EVERY
                    || class.status.is_none()
            }
        }
    }

    pub(super) async fn reconcile_nodeclasses(&self, out: &mut Written) {
        let (classes, pools): (Vec<EC2NodeClass>, Vec<NodePool>) = {
            let s = lock(&self.state);
            (
                s.nodeclasses
                    .values()
                    .filter(|c| c.metadata.deletion_timestamp.is_none())
                    .cloned()
                    .collect(),
                s.nodepools.values().cloned().collect(),
            )
        };
        for class in classes {
            let now = self.clock.now();
            let name = class.metadata.name.clone().unwrap_or_default();
            let users = pools_using(&pools, &name);
            let fingerprint = pools_fingerprint(&users);
            if !self.class_due(&class, fingerprint, now) {
                continue;
            }
            let resolved = self.cloud.reconcile_node_class_for(&class, &users).await;
            if let Err(e) = &resolved
                && !matches!(e, CloudError::NodeClassNotReady { .. })
            {
                out.errors
                    .push(format!("resolving EC2NodeClass {name}: {e}"));
                continue;
            }
            let (resolved, annotations) = match resolved {
                Ok(ReconciledNodeClass {
                    status,
                    annotations,
                }) => (Ok(status), annotations),
                Err(e) => (Err(e), BTreeMap::new()),
            };
            if let Some(patch) = annotation_patch(&class, &annotations) {
                let r = self.writer.patch_nodeclass_meta(&name, &patch).await;
                if record(out, "EC2NodeClass", &name, r) {
                    out.nodeclass_meta.push(name.clone());
                }
            }
            let Some(status) = desired(&class, resolved, now) else {
                continue;
            };
            if class.status.as_ref() != Some(&status) {
                let r = self.writer.patch_nodeclass_status(&name, &status).await;
                if !record(out, "EC2NodeClass", &name, r) {
                    continue;
                }
                out.nodeclass_status.push(name.clone());
            }
            self.classes
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(
                    name,
                    Resolved {
                        generation: class.metadata.generation,
                        at: now,
                        pools: fingerprint,
                    },
                );
        }
    }
}
