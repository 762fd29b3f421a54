//! What one CreateFleet error means for later launches, decided from the error alone: the
//! codes upstream treats as unfulfillable (`InsufficientInstanceCapacity`,
//! `MaxSpotInstanceCountExceeded`, `VcpuLimitExceeded`, `UnfulfillableCapacity`,
//! `Unsupported`, `InsufficientFreeAddressesInSubnet`, `MaxFleetCountExceeded`,
//! `ReservationCapacityExceeded`) take the offering out for three minutes, or the reservation
//! when the launch was into reserved capacity; a missing spot service-linked role takes out
//! spot as a whole; a spread placement group at its per-zone limit takes out the zone for that
//! group. Anything else is reported and caches nothing.

use nodewright_aws_model::ice::{SPOT_ROLE_MISSING_CODE, UNFULFILLABLE_CODES, is_spread_limit};
use nodewright_core::model::CapacityType;

/// How a CreateFleet error is handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// Spot cannot be launched at all until the service-linked role exists.
    SpotRoleMissing,
    /// The spread placement group holds its limit in the override's zone.
    SpreadZoneFull,
    /// The override's capacity reservation has no room.
    ReservationFull,
    /// The (capacity type, instance type, zone) offering cannot be had now.
    Offering,
    /// Not about capacity.
    Other,
}

/// What the error means. `into_spread_group`: the launch went into a spread placement group;
/// `reservation`: the failed override names a capacity reservation.
pub fn classify(
    code: &str,
    message: &str,
    capacity_type: CapacityType,
    into_spread_group: bool,
    reservation: bool,
) -> FailureKind {
    if code == SPOT_ROLE_MISSING_CODE {
        return FailureKind::SpotRoleMissing;
    }
    if into_spread_group && is_spread_limit(message) {
        return FailureKind::SpreadZoneFull;
    }
    if !UNFULFILLABLE_CODES.contains(&code) {
        return FailureKind::Other;
    }
    if capacity_type == CapacityType::Reserved && reservation {
        FailureKind::ReservationFull
    } else {
        FailureKind::Offering
    }
}

#[cfg(test)]
mod tests;
