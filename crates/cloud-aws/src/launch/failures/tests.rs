//! What each CreateFleet error code marks unavailable for later launches.

use super::*;

fn plain(code: &str) -> FailureKind {
    classify(code, "x", CapacityType::OnDemand, false, false)
}

#[test]
fn insufficient_instance_capacity_marks_the_offering() {
    assert_eq!(plain("InsufficientInstanceCapacity"), FailureKind::Offering);
}

#[test]
fn max_spot_instance_count_exceeded_marks_the_offering() {
    assert_eq!(
        classify(
            "MaxSpotInstanceCountExceeded",
            "x",
            CapacityType::Spot,
            false,
            false
        ),
        FailureKind::Offering
    );
}

#[test]
fn vcpu_limit_exceeded_marks_the_offering() {
    assert_eq!(plain("VcpuLimitExceeded"), FailureKind::Offering);
}

#[test]
fn unfulfillable_capacity_marks_the_offering() {
    assert_eq!(plain("UnfulfillableCapacity"), FailureKind::Offering);
}

#[test]
fn unsupported_marks_the_offering() {
    assert_eq!(plain("Unsupported"), FailureKind::Offering);
}

#[test]
fn insufficient_free_addresses_in_subnet_marks_the_offering() {
    assert_eq!(
        plain("InsufficientFreeAddressesInSubnet"),
        FailureKind::Offering
    );
}

#[test]
fn max_fleet_count_exceeded_marks_the_offering() {
    assert_eq!(plain("MaxFleetCountExceeded"), FailureKind::Offering);
}

#[test]
fn reservation_capacity_exceeded_marks_the_reservation_when_reserved() {
    assert_eq!(
        classify(
            "ReservationCapacityExceeded",
            "x",
            CapacityType::Reserved,
            false,
            true
        ),
        FailureKind::ReservationFull
    );
    // Reserved, but no reservation named on the override: the offering.
    assert_eq!(
        classify(
            "ReservationCapacityExceeded",
            "x",
            CapacityType::Reserved,
            false,
            false
        ),
        FailureKind::Offering
    );
    assert_eq!(plain("ReservationCapacityExceeded"), FailureKind::Offering);
}

#[test]
fn every_unfulfillable_code_in_a_reserved_launch_marks_the_reservation() {
    for code in UNFULFILLABLE_CODES {
        assert_eq!(
            classify(code, "x", CapacityType::Reserved, false, true),
            FailureKind::ReservationFull,
            "{code}"
        );
    }
}

#[test]
fn a_missing_spot_role_takes_out_spot() {
    for ct in [CapacityType::Spot, CapacityType::OnDemand] {
        assert_eq!(
            classify(SPOT_ROLE_MISSING_CODE, "x", ct, false, false),
            FailureKind::SpotRoleMissing
        );
    }
}

#[test]
fn a_spread_limit_closes_the_zone_only_for_a_spread_group_launch() {
    let msg = "You have reached the limit of instances in placement group pg-1 in this zone";
    assert_eq!(
        classify(
            "InsufficientInstanceCapacity",
            msg,
            CapacityType::OnDemand,
            true,
            false
        ),
        FailureKind::SpreadZoneFull
    );
    assert_eq!(
        classify(
            "InsufficientInstanceCapacity",
            msg,
            CapacityType::OnDemand,
            false,
            false
        ),
        FailureKind::Offering
    );
    assert_eq!(
        classify(
            "InsufficientInstanceCapacity",
            "no capacity",
            CapacityType::OnDemand,
            true,
            false
        ),
        FailureKind::Offering
    );
}

#[test]
fn other_codes_cache_nothing() {
    for code in [
        "InvalidParameterValue",
        "RequestLimitExceeded",
        "UnauthorizedOperation",
        "InvalidLaunchTemplateName.NotFoundException",
        "InsufficientCapacity",
        "",
    ] {
        assert_eq!(plain(code), FailureKind::Other, "{code}");
    }
}
