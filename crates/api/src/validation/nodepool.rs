//! NodePool rules: every CEL rule of the NodePool CRD (same messages) and Karpenter's runtime
//! NodePool validation. Schema-level checks (patterns, enums, bounds) are in the CRD schema and
//! run by [`super::structural`].

use super::labels::{self, KeyContext};
use super::{cron, shared};
use crate::crd::nodepool::{
    MSG_GROUP_IMMUTABLE, MSG_KIND_IMMUTABLE, MSG_SCHEDULE_WITH_DURATION, MSG_STATIC_LIMITS,
    MSG_STATIC_TRANSITION, MSG_STATIC_WEIGHT,
};
use crate::error::{FieldError, Path};
use crate::v1::NodePool;

/// Every rule a single NodePool must satisfy.
pub fn nodepool(np: &NodePool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    shared::object_name(np.metadata.name.as_deref(), &mut errs);
    let spec = Path::root("spec");
    let tmpl = spec.field("template");
    let tspec = tmpl.field("spec");
    let t = &np.spec.template;

    if let Some(lbls) = t.metadata.as_ref().and_then(|m| m.labels.as_ref()) {
        let path = tmpl.field("metadata").field("labels");
        for key in lbls.keys() {
            for reason in labels::key_violations(key, KeyContext::NodePool) {
                errs.push(path.key(key).error(reason));
            }
            if let Some(reason) = labels::qualified_name_error(key) {
                errs.push(path.key(key).error(reason));
            }
        }
    }
    let no_taints = Vec::new();
    shared::taints(
        &[
            (
                tspec.field("taints"),
                t.spec.taints.as_ref().unwrap_or(&no_taints),
            ),
            (
                tspec.field("startupTaints"),
                t.spec.startup_taints.as_ref().unwrap_or(&no_taints),
            ),
        ],
        &mut errs,
    );
    shared::requirements(
        &t.spec.requirements,
        &tspec.field("requirements"),
        KeyContext::NodePool,
        &mut errs,
    );
    shared::node_class_ref(
        &t.spec.node_class_ref,
        &tspec.field("nodeClassRef"),
        &mut errs,
    );

    shared::duration_length(
        t.spec.expire_after.as_ref().map(|d| d.0.as_str()),
        &tspec.field("expireAfter"),
        &mut errs,
    );
    shared::duration_length(
        t.spec.termination_grace_period.as_deref(),
        &tspec.field("terminationGracePeriod"),
        &mut errs,
    );
    if let Some(d) = &np.spec.disruption {
        shared::duration_length(
            d.consolidate_after.as_ref().map(|d| d.0.as_str()),
            &spec.field("disruption").field("consolidateAfter"),
            &mut errs,
        );
    }
    if let Some(budgets) = np.spec.disruption.as_ref().and_then(|d| d.budgets.as_ref()) {
        let path = spec.field("disruption").field("budgets");
        for (i, b) in budgets.iter().enumerate() {
            shared::duration_length(
                b.duration.as_deref(),
                &path.index(i).field("duration"),
                &mut errs,
            );
            if b.schedule.is_some() != b.duration.is_some() {
                errs.push(path.index(i).error(MSG_SCHEDULE_WITH_DURATION));
            }
            if let Some(s) = &b.schedule
                && let Some(reason) = cron::schedule_error(s)
            {
                errs.push(
                    path.index(i)
                        .field("schedule")
                        .error(format!("invalid cron schedule {s:?}: {reason}")),
                );
            }
        }
    }

    if np.spec.replicas.is_some() {
        if let Some(limits) = &np.spec.limits
            && !(limits.is_empty() || (limits.len() == 1 && limits.contains_key("nodes")))
        {
            errs.push(spec.error(MSG_STATIC_LIMITS));
        }
        if np.spec.weight.is_some() {
            errs.push(spec.error(MSG_STATIC_WEIGHT));
        }
    }
    errs
}

/// Rules that compare an update with the stored object.
pub fn nodepool_update(old: &NodePool, new: &NodePool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = Path::root("spec");
    let ncr = spec.field("template").field("spec").field("nodeClassRef");
    let (o, n) = (
        &old.spec.template.spec.node_class_ref,
        &new.spec.template.spec.node_class_ref,
    );
    if o.group != n.group {
        errs.push(ncr.error(MSG_GROUP_IMMUTABLE));
    }
    if o.kind != n.kind {
        errs.push(ncr.error(MSG_KIND_IMMUTABLE));
    }
    if old.spec.replicas.is_some() != new.spec.replicas.is_some() {
        errs.push(spec.error(MSG_STATIC_TRANSITION));
    }
    errs
}
