//! Interruption warnings as capacity signals: EC2 reclaims spot capacity (or a capacity
//! reservation) pool by pool, so the pool an interrupted instance ran in is marked unavailable
//! for the usual three minutes and the replacement launches elsewhere.

use aws_sdk_ec2::types::InstanceLifecycleType;
use nodewright_cloud::{Delivery, InterruptionKind};
use nodewright_core::model::CapacityType;

use crate::cloud::{AwsCloud, now};
use crate::error::AwsError;

/// The capacity type whose offering an interruption of `kind` marks, if any.
fn marked_capacity(kind: InterruptionKind) -> Option<CapacityType> {
    match kind {
        InterruptionKind::SpotInterrupted => Some(CapacityType::Spot),
        InterruptionKind::CapacityReservationInterrupted => Some(CapacityType::Reserved),
        _ => None,
    }
}

/// Marks the offering of every instance a spot or capacity-reservation interruption in
/// `deliveries` names: `(capacity type, instance type, zone)` from DescribeInstances. Lookups
/// that fail are logged and skipped; the notices are delivered either way. Returns the marked
/// `(capacity type, instance type, zone)` triples.
pub async fn mark_interrupted_offerings(
    cloud: &AwsCloud,
    deliveries: &[Delivery],
) -> Vec<(CapacityType, String, String)> {
    let mut wanted: Vec<(String, CapacityType)> = Vec::new();
    for d in deliveries {
        let Ok(m) = &d.message else { continue };
        let Some(capacity) = marked_capacity(m.kind) else {
            continue;
        };
        for id in &m.instance_ids {
            if !wanted.iter().any(|(w, _)| w == id) {
                wanted.push((id.clone(), capacity));
            }
        }
    }
    let mut marked = Vec::new();
    // One call per instance: a single unknown id would fail a batched DescribeInstances.
    for (id, capacity) in wanted {
        match describe(cloud, &id).await {
            Ok(Some((instance_type, zone, lifecycle))) => {
                if capacity == CapacityType::Spot && lifecycle != Some(InstanceLifecycleType::Spot)
                {
                    tracing::debug!(instance = %id, "spot interruption for an instance EC2 does not list as spot");
                }
                cloud
                    .launch
                    .unavailable()
                    .mark_offering(capacity, &instance_type, &zone, now());
                tracing::info!(instance = %id, instance_type = %instance_type, zone = %zone, capacity_type = capacity.as_str(), "removing offering from offerings after an interruption warning");
                marked.push((capacity, instance_type, zone));
            }
            Ok(None) => {
                tracing::debug!(instance = %id, "interrupted instance not found; no offering marked")
            }
            Err(e) => {
                tracing::warn!(instance = %id, error = %e, "looking up an interrupted instance failed; no offering marked")
            }
        }
    }
    marked
}

type Placement = (String, String, Option<InstanceLifecycleType>);

async fn describe(cloud: &AwsCloud, id: &str) -> Result<Option<Placement>, AwsError> {
    let out = cloud
        .clients
        .ec2
        .describe_instances()
        .instance_ids(id)
        .send()
        .await
        .map_err(|e| AwsError::from_sdk("DescribeInstances", e));
    let out = match out {
        Ok(o) => o,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(out
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .filter(|i| i.instance_id() == Some(id))
        .find_map(|i| {
            let instance_type = i.instance_type()?.as_str().to_string();
            let zone = i.placement()?.availability_zone()?.to_string();
            Some((instance_type, zone, i.instance_lifecycle().cloned()))
        }))
}
