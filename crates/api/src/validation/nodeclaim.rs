//! NodeClaim rules: the CEL rules of the NodeClaim CRD and Karpenter's runtime checks.

use super::labels::KeyContext;
use super::shared;
use crate::crd::nodeclaim::MSG_SPEC_IMMUTABLE;
use crate::error::{FieldError, Path};
use crate::v1::NodeClaim;

pub fn nodeclaim(nc: &NodeClaim) -> Vec<FieldError> {
    let mut errs = Vec::new();
    // NodeClaims are usually created with generateName; a name is still required on the object.
    if nc.metadata.generate_name.is_none() {
        shared::object_name(nc.metadata.name.as_deref(), &mut errs);
    }
    let spec = Path::root("spec");
    let no_taints = Vec::new();
    shared::taints(
        &[
            (
                spec.field("taints"),
                nc.spec.taints.as_ref().unwrap_or(&no_taints),
            ),
            (
                spec.field("startupTaints"),
                nc.spec.startup_taints.as_ref().unwrap_or(&no_taints),
            ),
        ],
        &mut errs,
    );
    shared::requirements(
        &nc.spec.requirements,
        &spec.field("requirements"),
        KeyContext::NodeClaim,
        &mut errs,
    );
    shared::node_class_ref(
        &nc.spec.node_class_ref,
        &spec.field("nodeClassRef"),
        &mut errs,
    );
    shared::duration_length(
        nc.spec.expire_after.as_ref().map(|d| d.0.as_str()),
        &spec.field("expireAfter"),
        &mut errs,
    );
    shared::duration_length(
        nc.spec.termination_grace_period.as_deref(),
        &spec.field("terminationGracePeriod"),
        &mut errs,
    );
    errs
}

/// The whole spec is immutable.
pub fn nodeclaim_update(old: &NodeClaim, new: &NodeClaim) -> Vec<FieldError> {
    if old.spec == new.spec {
        vec![]
    } else {
        vec![Path::root("spec").error(MSG_SPEC_IMMUTABLE)]
    }
}
