//! The claim-facing result of a launched instance: its labels (the type's single-valued
//! requirements, zone, region, capacity type, reservation), capacity and allocatable, and
//! the image the class gives its type.

use std::collections::BTreeMap;

use nodewright_aws_model::launch::FleetOverride;
use nodewright_aws_model::reservations;
use nodewright_aws_model::resources::EFA;
use nodewright_cloud::{CloudError, Instance, InstanceState, Launched};
use nodewright_core::labels::{self, aws};
use nodewright_core::model::{CapacityType, InstanceType};
use nodewright_core::requirements::Operator;
use nodewright_core::resources::Resources;
use nodewright_core::time::Timestamp;

use super::{FleetCall, FleetInstance};
use crate::nodeclass::amis::image_serves;
use crate::nodeclass::{ResolvedAmi, ResolvedNodeClass};

/// Whether `ami`'s requirements (architecture, GPU/accelerator variant) admit `it`.
pub(crate) fn ami_serves(ami: &ResolvedAmi, it: &InstanceType) -> bool {
    let image = ami.requirements.iter();
    image_serves(
        image.map(|r| (r.key.as_str(), r.operator.as_str(), r.values.as_slice())),
        &it.requirements,
    )
}

/// A reserved launch targets the capacity its reservation holds (`on-demand`,
/// `capacity-block`, or `reserved-capacity` for interruptible reservations); other launches
/// keep the plan's choice.
pub(super) fn reserved_target_type(
    capacity_type: CapacityType,
    planned: &'static str,
    overrides: &[FleetOverride],
    resolved: &ResolvedNodeClass,
) -> &'static str {
    if capacity_type != CapacityType::Reserved {
        return planned;
    }
    // Every override of a reserved plan has one reservation type (the plan filters to it).
    overrides
        .iter()
        .filter_map(|o| o.reservation_id.as_deref())
        .find_map(|id| resolved.capacity_reservations.iter().find(|r| r.id == id))
        .map_or(planned, |r| {
            reservations::fleet_target_capacity_type(r.reservation_type, r.interruptible)
        })
}

fn non_zero(r: &Resources) -> Resources {
    let mut out = Resources::new();
    for (k, v) in r.iter() {
        if v != 0 {
            out.set(k, v);
        }
    }
    out
}

/// The claim-facing result of a launched instance.
pub(super) fn launched(
    call: &FleetCall,
    instance: &FleetInstance,
    types: &[InstanceType],
    resolved: &ResolvedNodeClass,
    region: &str,
    now: Timestamp,
    efa: bool,
) -> Result<Launched, CloudError> {
    // The override tells the zone when the response leaves it out.
    let o = call.overrides().find(|o| {
        o.instance_type == instance.instance_type
            && instance
                .subnet_id
                .as_deref()
                .is_none_or(|s| s == o.subnet_id)
    });
    let zone = instance
        .zone
        .clone()
        .or_else(|| o.map(|o| o.zone.clone()))
        .ok_or_else(|| CloudError::Api {
            operation: "CreateFleet".into(),
            message: format!(
                "instance {} launched in an unknown zone",
                instance.instance_id
            ),
            retryable: false,
        })?;
    let reservation = o
        .and_then(|o| o.reservation_id.as_deref())
        .filter(|_| call.capacity_type == CapacityType::Reserved);
    let found = Instance {
        provider_id: format!("aws:///{zone}/{}", instance.instance_id),
        instance_type: instance.instance_type.clone(),
        zone,
        capacity_type: call.capacity_type,
        image_id: None,
        state: InstanceState::Pending,
        launched_at: Some(now),
        tags: call.tags.clone(),
    };
    describe(found, reservation, types, resolved, region, efa)
}

/// The claim-facing result of an instance of one of `types`: its labels (the type's
/// single-valued requirements, zone, region, capacity type, reservation), capacity and
/// allocatable, and the image the class gives its type when EC2 did not say.
pub(super) fn describe(
    mut instance: Instance,
    reservation: Option<&str>,
    types: &[InstanceType],
    resolved: &ResolvedNodeClass,
    region: &str,
    efa: bool,
) -> Result<Launched, CloudError> {
    let it = types
        .iter()
        .find(|t| t.name == instance.instance_type)
        .ok_or_else(|| CloudError::Api {
            operation: "CreateFleet".into(),
            message: format!(
                "{} has type {:?}, which was not requested",
                instance.provider_id, instance.instance_type
            ),
            retryable: false,
        })?;
    if instance.image_id.is_none() {
        instance.image_id = resolved
            .amis
            .iter()
            .find(|a| ami_serves(a, it))
            .map(|a| a.id.clone());
    }
    let mut node_labels: BTreeMap<String, String> = it
        .requirements
        .iter()
        .filter(|r| r.operator == Operator::In && r.values.len() == 1)
        .map(|r| (r.key.clone(), r.values[0].clone()))
        .collect();
    node_labels.insert(labels::INSTANCE_TYPE.into(), it.name.clone());
    node_labels.insert(labels::ZONE.into(), instance.zone.clone());
    node_labels.insert(labels::REGION.into(), region.to_string());
    node_labels.insert(
        labels::CAPACITY_TYPE.into(),
        instance.capacity_type.as_str().into(),
    );
    if let Some(r) =
        reservation.and_then(|id| resolved.capacity_reservations.iter().find(|r| r.id == id))
    {
        node_labels.insert(aws::CAPACITY_RESERVATION_ID.into(), r.id.clone());
        node_labels.insert(
            aws::CAPACITY_RESERVATION_TYPE.into(),
            r.reservation_type.as_str().into(),
        );
        node_labels.insert(
            aws::CAPACITY_RESERVATION_INTERRUPTIBLE.into(),
            r.interruptible.to_string(),
        );
    }
    if let Some(id) = resolved
        .subnets
        .iter()
        .find(|s| s.zone == instance.zone)
        .and_then(|s| s.zone_id.clone())
    {
        node_labels.insert(aws::ZONE_ID.into(), id);
    }
    // EFA devices count only when the node was launched with EFA interfaces.
    let (mut capacity, mut allocatable) = (non_zero(&it.capacity), non_zero(&it.allocatable()));
    if !efa {
        capacity.set(EFA, 0);
        allocatable.set(EFA, 0);
    }
    Ok(Launched {
        instance,
        capacity,
        allocatable,
        labels: node_labels,
        annotations: BTreeMap::new(),
    })
}
