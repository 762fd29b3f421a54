//! Whether a running instance still matches its node class, as Karpenter's AWS provider
//! decides it. Pure: the caller fetches the instance and passes the class as the controller
//! last resolved it (its status), and gets back the first reason found.
//!
//! Order: the class hash first (it needs no API call), then the image, security groups and
//! subnet of the instance, the capacity reservation and the placement group.

use std::collections::{BTreeMap, BTreeSet};

use nodewright_api::aws::common::AmiRequirement;
use nodewright_api::aws::v1::{EC2NodeClass, EC2NodeClassStatus};
use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_core::requirements::Requirement;
use thiserror::Error;

use crate::instances::Ec2Instance;
use crate::nodeclass::amis::image_serves;
use crate::nodeclass::hash::{HASH_ANNOTATION, HASH_VERSION_ANNOTATION};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum DriftReason {
    NodeClass,
    Ami,
    SecurityGroup,
    Subnet,
    CapacityReservation,
    PlacementGroup,
}

impl DriftReason {
    /// The reason as Karpenter writes it into the `Drifted` condition.
    pub fn as_str(self) -> &'static str {
        match self {
            DriftReason::NodeClass => "NodeClassDrift",
            DriftReason::Ami => "AMIDrift",
            DriftReason::SecurityGroup => "SecurityGroupDrift",
            DriftReason::Subnet => "SubnetDrift",
            DriftReason::CapacityReservation => "CapacityReservationDrift",
            DriftReason::PlacementGroup => "PlacementGroupDrift",
        }
    }
}

/// The class status lacks what a check compares against; drift cannot be decided until the
/// class is resolved again.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum DriftError {
    #[error("no AMIs are present in the node class status")]
    NoAmis,
    #[error("no security groups are present in the node class status")]
    NoSecurityGroups,
    #[error("no subnets are present in the node class status")]
    NoSubnets,
}

fn annotation<'a>(m: &'a Option<BTreeMap<String, String>>, key: &str) -> Option<&'a str> {
    m.as_ref().and_then(|m| m.get(key)).map(String::as_str)
}

/// `NodeClassDrift` when the claim's class hash differs from the class's. Compared only when
/// both carry a hash and the same hash version: a hash of another version says nothing.
pub fn static_drift(claim: &NodeClaim, class: &EC2NodeClass) -> Option<DriftReason> {
    let claim_ann = &claim.metadata.annotations;
    let class_ann = &class.metadata.annotations;
    let class_hash = annotation(class_ann, HASH_ANNOTATION)?;
    let class_version = annotation(class_ann, HASH_VERSION_ANNOTATION)?;
    let claim_hash = annotation(claim_ann, HASH_ANNOTATION)?;
    let claim_version = annotation(claim_ann, HASH_VERSION_ANNOTATION)?;
    (class_version == claim_version && class_hash != claim_hash).then_some(DriftReason::NodeClass)
}

/// Whether a node of an instance type described by `type_requirements` may run an image
/// carrying `ami` requirements (see [`image_serves`]).
fn ami_serves(ami: &[AmiRequirement], type_requirements: &[Requirement]) -> bool {
    let image = ami.iter().map(|r| {
        let values = r.values.as_deref().unwrap_or(&[]);
        (r.key.as_str(), r.operator.as_str(), values)
    });
    image_serves(image, type_requirements)
}

/// The first of `AMIDrift`, `SecurityGroupDrift`, `SubnetDrift` that applies to `instance`,
/// judged against `status`. `type_requirements` are the requirements (labels) of the
/// instance's type, which decide which of the status AMIs serve it.
pub fn instance_drift(
    instance: &Ec2Instance,
    type_requirements: &[Requirement],
    status: &EC2NodeClassStatus,
) -> Result<Option<DriftReason>, DriftError> {
    let amis = status.amis.as_deref().unwrap_or(&[]);
    if amis.is_empty() {
        return Err(DriftError::NoAmis);
    }
    let image = instance.instance.image_id.as_deref().unwrap_or_default();
    let served = amis
        .iter()
        .any(|a| a.id == image && ami_serves(&a.requirements, type_requirements));
    if !served {
        return Ok(Some(DriftReason::Ami));
    }

    let groups: BTreeSet<&str> = status
        .security_groups
        .iter()
        .flatten()
        .map(|g| g.id.as_str())
        .collect();
    if groups.is_empty() {
        return Err(DriftError::NoSecurityGroups);
    }
    let attached: BTreeSet<&str> = instance
        .security_groups
        .iter()
        .map(String::as_str)
        .collect();
    if groups != attached {
        return Ok(Some(DriftReason::SecurityGroup));
    }

    let subnets = status.subnets.as_deref().unwrap_or(&[]);
    if subnets.is_empty() {
        return Err(DriftError::NoSubnets);
    }
    let subnet = instance.subnet_id.as_deref().unwrap_or_default();
    if !subnets.iter().any(|s| s.id == subnet) {
        return Ok(Some(DriftReason::Subnet));
    }
    Ok(None)
}

/// `CapacityReservationDrift` when the claim was launched into a capacity reservation the
/// class no longer selects (the selector changed, or the reservation ended and left the
/// status). Claims outside reservations never drift this way.
pub fn reservation_drift(claim: &NodeClaim, status: &EC2NodeClassStatus) -> Option<DriftReason> {
    let labels = claim.metadata.labels.as_ref()?;
    if labels
        .get(nodewright_core::labels::CAPACITY_TYPE)
        .map(String::as_str)
        != Some(nodewright_core::labels::CAPACITY_TYPE_RESERVED)
    {
        return None;
    }
    let id = labels.get(nodewright_core::labels::aws::CAPACITY_RESERVATION_ID)?;
    let selected = status
        .capacity_reservations
        .iter()
        .flatten()
        .any(|r| &r.id == id);
    (!selected).then_some(DriftReason::CapacityReservation)
}

/// `PlacementGroupDrift` when the claim's `placement-group-id` label is not the id of the
/// group the class names now: the selector was added, removed or points elsewhere. When the
/// class names a group that cannot be resolved at the moment (`group` is `None` although
/// `selected`), there is no verdict.
pub fn placement_group_drift(
    claim: &NodeClaim,
    selected: bool,
    group: Option<&nodewright_aws_model::placement::PlacementGroup>,
) -> Option<DriftReason> {
    if selected && group.is_none() {
        return None;
    }
    let label = claim
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(nodewright_core::labels::aws::PLACEMENT_GROUP_ID))
        .map(String::as_str);
    (label != group.map(|g| g.id.as_str())).then_some(DriftReason::PlacementGroup)
}

#[cfg(test)]
mod tests;
