//! NodePool status, as upstream's counter, validation, readiness and hash controllers keep
//! it: `resources` is the summed capacity of the pool's nodes (a claim without a Node yet
//! counts with its launched capacity) plus the `nodes` count, always listing cpu, memory,
//! pods and ephemeral-storage; `nodes` is the count; `ValidationSucceeded` re-runs the
//! runtime rules; `NodeClassReady` mirrors the referenced EC2NodeClass's `Ready`; `Ready` is
//! true when both are; `NodeRegistrationHealthy` reports the pool's recent registrations
//! (core's `registration_health`) and does not count towards `Ready`. The pool's hash
//! annotations are rewritten when the template changes.
//!
//! The status subresource is written with a merge patch, under which a resource key left out
//! would stay as it was; a key that was listed before and has no capacity now is written as
//! zero instead.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Node;
use nodewright_api::quantity;
use nodewright_api::v1::nodepool::{NodePool, NodePoolStatus};
use nodewright_api::v1::shared::{Condition, Quantity, ResourceList};
use nodewright_core::labels;
use nodewright_core::registration_health::{Status, WINDOW};
use nodewright_core::resources::{Resources, format_amount};
use nodewright_core::time::Timestamp;

use super::{StatusController, Written, record};
use crate::conditions::{
    self as cond, NODE_CLASS_READY, NODE_REGISTRATION_HEALTHY, READY, VALIDATION_SUCCEEDED,
};
use crate::hash;
use crate::state::{ClusterState, convert, lock};
use crate::write::MetaPatch;

/// Keys upstream always reports, zero or not.
const BASE: &[&str] = &["cpu", "memory", "pods", "ephemeral-storage", "nodes"];

fn node_capacity(n: &Node) -> Resources {
    let mut r = Resources::new();
    for (k, q) in n
        .status
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .into_iter()
        .flatten()
    {
        if let Ok(v) = quantity::parse_resource(k, &q.0) {
            r.set(k, v);
        }
    }
    r
}

/// Capacity and count of `pool`'s nodes: every claim labelled for it (with its Node's
/// capacity once registered), and every Node labelled for it that no claim accounts for.
pub fn usage(state: &ClusterState, pool: &str) -> (Resources, i64) {
    let in_pool = |l: Option<&BTreeMap<String, String>>| {
        l.and_then(|l| l.get(labels::NODEPOOL))
            .is_some_and(|p| p == pool)
    };
    let mut total = Resources::new();
    let mut count = 0;
    let mut counted_nodes = BTreeSet::new();
    for c in state.all_claims() {
        if !in_pool(c.metadata.labels.as_ref()) {
            continue;
        }
        count += 1;
        let pid = c.status.as_ref().and_then(|s| s.provider_id.as_deref());
        let node = pid.and_then(|p| state.node_by_provider_id(p).into_iter().next());
        match node {
            Some(n) => {
                counted_nodes.insert(n.metadata.name.clone().unwrap_or_default());
                total.add(&node_capacity(n));
            }
            None => {
                let cap = c.status.as_ref().and_then(|s| s.capacity.as_ref());
                if let Ok(r) = convert::resources(cap) {
                    total.add(&r);
                }
            }
        }
    }
    for (name, n) in &state.nodes {
        if in_pool(state.node_labels(name)) && !counted_nodes.contains(name) {
            count += 1;
            total.add(&node_capacity(n));
        }
    }
    (total, count)
}

fn resource_list(total: &Resources, count: i64, before: Option<&ResourceList>) -> ResourceList {
    let listed = before
        .into_iter()
        .flat_map(|b| b.keys().map(String::as_str));
    let mut out: ResourceList = BASE
        .iter()
        .copied()
        .chain(listed)
        .map(|k| (k.to_string(), Quantity::String(format_amount(k, 0))))
        .collect();
    for (k, v) in total.iter() {
        out.insert(k.to_string(), Quantity::String(format_amount(k, v)));
    }
    out.insert("nodes".into(), Quantity::String(count.to_string()));
    out
}

/// `(status, reason, message)` of `NodeClassReady` for `pool`.
pub fn nodeclass_readiness(
    state: &ClusterState,
    pool: &NodePool,
) -> (&'static str, &'static str, String) {
    let r = &pool.spec.template.spec.node_class_ref;
    let class = (r.kind == "EC2NodeClass")
        .then(|| state.nodeclasses.get(&r.name))
        .flatten();
    let Some(class) = class else {
        return (
            "False",
            "NodeClassNotFound",
            "NodeClass not found on cluster".into(),
        );
    };
    if class.metadata.deletion_timestamp.is_some() {
        return (
            "False",
            "NodeClassTerminating",
            "NodeClass is terminating".into(),
        );
    }
    let conds = super::nodeclass::class_conditions(
        class
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_deref())
            .unwrap_or_default(),
    );
    match cond::find(&conds, READY) {
        Some(c) if c.status == "True" => ("True", NODE_CLASS_READY, String::new()),
        Some(c) => (
            "False",
            "NodeClassNotReady",
            c.message
                .clone()
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| "NodeClass not ready".into()),
        ),
        // Not resolved yet (a new class): unknown rather than false, so a fresh cluster does
        // not report a failure it never had.
        None => (
            "Unknown",
            "NodeClassNotReady",
            "NodeClass has not been resolved yet".into(),
        ),
    }
}

/// Upstream's runtime rules plus conversion into the engine's model; the messages of what
/// failed, first ten.
pub fn validation_errors(pool: &NodePool) -> Vec<String> {
    let mut errs: Vec<String> = nodewright_api::validation::nodepool(pool)
        .iter()
        .map(|e| e.to_string())
        .collect();
    if errs.is_empty()
        && let Err(e) = nodewright_api::to_core::nodepool(pool)
    {
        errs.extend(e.iter().map(|e| e.to_string()));
    }
    errs.truncate(10);
    errs
}

/// The status `pool` should have now.
pub fn desired(state: &ClusterState, pool: &NodePool, now: Timestamp) -> NodePoolStatus {
    let name = pool.metadata.name.clone().unwrap_or_default();
    let mut status = pool.status.clone().unwrap_or_default();
    let (total, count) = usage(state, &name);
    status.resources = Some(resource_list(&total, count, status.resources.as_ref()));
    status.nodes = Some(count);
    let class_ref = &pool.spec.template.spec.node_class_ref;
    if let Some(class) = state.nodeclasses.get(&class_ref.name) {
        status.node_class_observed_generation = class.metadata.generation;
    }
    let mut conds = status.conditions.clone().unwrap_or_default();
    let errs = validation_errors(pool);
    if errs.is_empty() {
        cond::set(
            &mut conds,
            VALIDATION_SUCCEEDED,
            "True",
            VALIDATION_SUCCEEDED,
            "",
            now,
        );
    } else {
        cond::set(
            &mut conds,
            VALIDATION_SUCCEEDED,
            "False",
            "NodePoolValidationFailed",
            &errs.join("; "),
            now,
        );
    }
    let (s, reason, message) = nodeclass_readiness(state, pool);
    cond::set(&mut conds, NODE_CLASS_READY, s, reason, &message, now);
    // Informational: not part of `Ready`, as upstream.
    let (s, reason, message) = match state.registration_status(pool) {
        Status::Unknown => (
            "Unknown",
            "AwaitingReconciliation".to_string(),
            "no NodeClaim of this NodePool has registered since it or its node class last changed"
                .to_string(),
        ),
        Status::Healthy => ("True", NODE_REGISTRATION_HEALTHY.to_string(), String::new()),
        Status::Unhealthy { reason, failed } => (
            "False",
            reason,
            format!(
                "{failed} of the last {WINDOW} NodeClaims of this NodePool failed to launch or register"
            ),
        ),
    };
    cond::set(
        &mut conds,
        NODE_REGISTRATION_HEALTHY,
        s,
        &reason,
        &message,
        now,
    );
    let not_true: Vec<&Condition> = [VALIDATION_SUCCEEDED, NODE_CLASS_READY]
        .iter()
        .filter_map(|t| cond::find(&conds, t))
        .filter(|c| c.status != "True")
        .collect();
    match not_true.first() {
        None => {
            cond::set(&mut conds, READY, "True", READY, "", now);
        }
        Some(c) => {
            let (t, st) = (c.type_.clone(), c.status.clone());
            cond::set(
                &mut conds,
                READY,
                &st,
                &format!("{t}NotTrue"),
                &format!("{t} is {st}"),
                now,
            );
        }
    }
    status.conditions = Some(conds);
    status
}

/// The annotation patch that brings `pool`'s hash up to date, if it is not.
pub fn hash_patch(pool: &NodePool) -> Option<MetaPatch> {
    let current = hash::annotations(pool);
    let annotations = pool.metadata.annotations.as_ref();
    let stale = current
        .iter()
        .any(|(k, v)| annotations.and_then(|a| a.get(k)) != Some(v));
    stale.then(|| MetaPatch {
        annotations: current.into_iter().map(|(k, v)| (k, Some(v))).collect(),
        ..MetaPatch::default()
    })
}

impl StatusController {
    pub(super) async fn reconcile_nodepools(&self, out: &mut Written) {
        let now = self.clock.now();
        let work: Vec<(String, Option<MetaPatch>, Option<NodePoolStatus>)> = {
            let s = lock(&self.state);
            s.nodepools
                .values()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .map(|p| {
                    let status = desired(&s, p, now);
                    let changed = p.status.as_ref() != Some(&status);
                    (
                        p.metadata.name.clone().unwrap_or_default(),
                        hash_patch(p),
                        changed.then_some(status),
                    )
                })
                .collect()
        };
        for (name, patch, status) in work {
            if let Some(patch) = patch {
                let r = self.writer.patch_nodepool_meta(&name, &patch).await;
                if record(out, "NodePool", &name, r) {
                    out.nodepool_hash.push(name.clone());
                }
            }
            if let Some(status) = status {
                let r = self.writer.update_nodepool_status(&name, &status).await;
                if record(out, "NodePool", &name, r) {
                    out.nodepool_status.push(name);
                }
            }
        }
    }
}
