//! What a launch reports when it cannot launch: no offering left, a class not ready, capacity
//! errors recorded against the offerings they name, and the AWS errors that mean a stale
//! template or resolution.

use nodewright_aws_model::launch::FleetOverride;
use nodewright_cloud::CloudError;
use nodewright_core::model::CapacityType;

use super::{FleetCall, FleetFailure};
use crate::error::AwsError;
use crate::nodeclass::ResolvedNodeClass;

/// The error for a CreateFleet that launched nothing and named no offering to avoid.
pub(super) fn nothing_launched(errors: &[FleetFailure]) -> CloudError {
    let codes: Vec<String> = errors
        .iter()
        .map(|e| format!("{}: {}", e.code, e.message))
        .collect();
    CloudError::Api {
        operation: "CreateFleet".into(),
        message: if codes.is_empty() {
            "no instance launched and no error reported".into()
        } else {
            codes.join("; ")
        },
        retryable: true,
    }
}

pub(super) fn not_ready_reason(resolved: &ResolvedNodeClass) -> String {
    let bad: Vec<String> = resolved
        .status
        .conditions
        .iter()
        .flatten()
        .filter(|c| c.status != "True" && c.type_ != "Ready")
        .map(|c| {
            format!(
                "{}: {}",
                c.type_,
                c.message.clone().or(c.reason.clone()).unwrap_or_default()
            )
        })
        .collect();
    if bad.is_empty() {
        "not ready".into()
    } else {
        bad.join("; ")
    }
}

pub(super) fn insufficient(
    claim: &str,
    why: &str,
    offerings: Vec<(String, String, String)>,
) -> CloudError {
    let listed: Vec<String> = offerings
        .iter()
        .take(10)
        .map(|(t, z, c)| format!("{c}:{t}:{z}"))
        .collect();
    let message = if listed.is_empty() {
        format!("nodeclaim {claim}: {why}")
    } else {
        format!(
            "nodeclaim {claim}: {why}; unavailable: {}",
            listed.join(", ")
        )
    };
    CloudError::InsufficientCapacity { message, offerings }
}

pub(super) fn is_missing_template(e: &AwsError) -> bool {
    e.code
        .as_deref()
        .is_some_and(|c| c.starts_with("InvalidLaunchTemplate") && c.contains("NotFound"))
}

/// CreateFleet named a subnet, group or image that no longer exists: resolve the class again.
pub(super) fn is_stale_resolution(e: &AwsError) -> bool {
    e.code.as_deref().is_some_and(|c| {
        (c.starts_with("InvalidSubnet")
            || c.starts_with("InvalidGroup")
            || c.starts_with("InvalidAMIID"))
            && c.contains("NotFound")
    })
}

/// The override a CreateFleet error is about: same type, and same subnet or zone when given.
/// Adds the offering `o` of `capacity_type` to the launch's failed offerings, once.
pub(super) fn note_failed(
    failed: &mut Vec<(String, String, String)>,
    o: &FleetOverride,
    capacity_type: CapacityType,
) {
    let entry = (
        o.instance_type.clone(),
        o.zone.clone(),
        capacity_type.as_str().to_string(),
    );
    if !failed.contains(&entry) {
        failed.push(entry);
    }
}

pub(super) fn matching_override<'a>(
    call: &'a FleetCall,
    e: &FleetFailure,
) -> Option<&'a FleetOverride> {
    let ty = e.instance_type.as_deref()?;
    call.overrides().find(|o| {
        o.instance_type == ty
            && e.subnet_id.as_deref().is_none_or(|s| s == o.subnet_id)
            && e.zone.as_deref().is_none_or(|z| z == o.zone)
    })
}
