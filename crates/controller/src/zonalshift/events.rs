//! The zonal-shift watcher's events: a shift away from a zone began or ended.

use crate::events::{DEFAULT_DEDUPE_TIMEOUT, Event, EventType, ObjectRef};

/// An ARC zonal shift moved traffic away from the zone the claim runs in. Sent for each claim
/// in the zone, once per claim and zone within the dedupe window.
pub fn zonal_shift_active(object: ObjectRef, zone: &str) -> Event {
    Event::new(
        object,
        EventType::Warning,
        "ZonalShiftActive",
        format!(
            "Zone {zone} is under an ARC zonal shift: no nodes launch there and termination waits until the shift ends"
        ),
    )
    .dedupe_on(&[zone], DEFAULT_DEDUPE_TIMEOUT)
}

/// The ARC zonal shift away from the claim's zone ended.
pub fn zonal_shift_cleared(object: ObjectRef, zone: &str) -> Event {
    Event::new(
        object,
        EventType::Normal,
        "ZonalShiftCleared",
        format!("The ARC zonal shift away from zone {zone} ended"),
    )
    .dedupe_on(&[zone], DEFAULT_DEDUPE_TIMEOUT)
}
