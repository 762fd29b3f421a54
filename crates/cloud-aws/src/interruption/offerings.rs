//! Interruption warnings as capacity signals: EC2 reclaims spot capacity (or a capacity
//! reservation) pool by pool, so the pool an interrupted claim ran in is kept out of launches
//! and the replacement goes elsewhere. As upstream, the pool is read from the claim's labels
//! by the controller, so only instances this cluster runs a claim on mark anything.

use nodewright_cloud::{InterruptedOffering, InterruptionKind};
use nodewright_core::model::CapacityType;
use nodewright_core::time::Timestamp;

use crate::cloud::AwsCloud;

/// What an interruption marked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Marked {
    /// `(capacity type, instance type, zone)` unavailable for the usual three minutes.
    Offering(CapacityType, String, String),
    /// The reservation counts as full until EC2 reports its free count again.
    Reservation(String),
    Nothing,
}

/// Marks the pool of `offering` at `now`: a spot interruption marks the spot offering, a
/// capacity-reservation interruption marks the reservation (or, without a reservation id, the
/// reserved offering). Other kinds and unlabelled claims mark nothing.
pub fn mark_interrupted_offering(
    cloud: &AwsCloud,
    offering: &InterruptedOffering,
    now: Timestamp,
) -> Marked {
    let capacity = match offering.kind {
        InterruptionKind::SpotInterrupted => CapacityType::Spot,
        InterruptionKind::CapacityReservationInterrupted => {
            if let Some(id) = offering.reservation_id.as_deref().filter(|i| !i.is_empty()) {
                cloud.launch.reservations().exhausted(id);
                tracing::info!(capacity_reservation_id = %id, "marking a capacity reservation full after an interruption warning");
                return Marked::Reservation(id.to_string());
            }
            CapacityType::Reserved
        }
        _ => return Marked::Nothing,
    };
    if offering.instance_type.is_empty() || offering.zone.is_empty() {
        return Marked::Nothing;
    }
    cloud.launch.unavailable().mark_offering(
        capacity,
        &offering.instance_type,
        &offering.zone,
        now,
    );
    tracing::info!(instance_type = %offering.instance_type, zone = %offering.zone, capacity_type = capacity.as_str(), "removing offering from offerings after an interruption warning");
    Marked::Offering(
        capacity,
        offering.instance_type.clone(),
        offering.zone.clone(),
    )
}
