//! Which CreateFleet errors mark an offering unavailable, where, and for how long.

use super::*;
use nodewright_core::model::Offering;
use nodewright_core::testkit::{instance_type, offering};

fn it(name: &str, offerings: Vec<Offering>) -> InstanceType {
    instance_type(name, Default::default(), offerings)
}

fn err(code: &str, ct: CapacityType, ty: &str, zone: &str) -> FleetError {
    FleetError {
        code: code.into(),
        capacity_type: ct,
        instance_type: ty.into(),
        zone: zone.into(),
        subnet_id: Some("subnet-1".into()),
    }
}

const T0: Timestamp = Timestamp(1_000_000);

#[test]
fn capacity_errors_in_a_placement_group_stay_in_that_group() {
    let mut c = UnavailableOfferings::new();
    let e = err(
        "InsufficientInstanceCapacity",
        CapacityType::OnDemand,
        "p5.48xlarge",
        "us-east-1a",
    );
    let m = c.record_in(&e, Some("pg-1:2"), T0);
    assert_eq!(
        m,
        Marked::Offering {
            key: "on-demand:p5.48xlarge:us-east-1a:pg-1:2".into(),
            subnet: None
        }
    );
    let od = CapacityType::OnDemand;
    assert!(c.is_unavailable_in(od, "p5.48xlarge", "us-east-1a", Some("pg-1:2"), T0));
    assert!(!c.is_unavailable_in(od, "p5.48xlarge", "us-east-1a", Some("pg-1:3"), T0));
    assert!(!c.is_unavailable_in(od, "p5.48xlarge", "us-east-1a", Some("pg-2"), T0));
    assert!(!c.is_unavailable(od, "p5.48xlarge", "us-east-1a", T0));
    let mut types = vec![it("p5.48xlarge", vec![offering("us-east-1a", od, 98.0)])];
    c.apply_in(&mut types, Some("pg-1"), T0);
    assert!(
        types[0].offerings[0].available,
        "other partitions stay usable"
    );
    c.apply_in(&mut types, Some("pg-1:2"), T0);
    assert!(!types[0].offerings[0].available);
    // Expiry still bumps the type's sequence (the key's second field is the type).
    let before = c.sequence("p5.48xlarge");
    c.evict_expired(T0.plus(UNAVAILABLE_TTL));
    assert_ne!(c.sequence("p5.48xlarge"), before);
}

#[test]
fn a_full_spread_group_zone_hides_every_type_there_for_that_group_only() {
    let mut c = UnavailableOfferings::new();
    let before = c.sequence("m5.large");
    c.mark_group_zone("pg-s", "us-east-1a", T0);
    assert_ne!(c.sequence("m5.large"), before, "every type must rebuild");
    let (od, spot) = (CapacityType::OnDemand, CapacityType::Spot);
    for (ct, ty) in [(od, "m5.large"), (spot, "c5.xlarge"), (od, "r6i.2xlarge")] {
        assert!(c.is_unavailable_in(ct, ty, "us-east-1a", Some("pg-s"), T0));
        assert!(!c.is_unavailable_in(ct, ty, "us-east-1b", Some("pg-s"), T0));
        assert!(!c.is_unavailable_in(ct, ty, "us-east-1a", Some("pg-other"), T0));
        assert!(!c.is_unavailable(ct, ty, "us-east-1a", T0));
    }
    let mut types = vec![it(
        "m5.large",
        vec![
            offering("us-east-1a", od, 0.1),
            offering("us-east-1b", od, 0.1),
        ],
    )];
    c.apply_in(&mut types, Some("pg-s"), T0);
    assert_eq!(
        types[0]
            .offerings
            .iter()
            .map(|o| o.available)
            .collect::<Vec<_>>(),
        vec![false, true]
    );
    let later = T0.plus(UNAVAILABLE_TTL);
    assert!(!c.is_unavailable_in(od, "m5.large", "us-east-1a", Some("pg-s"), later));
    let seen = c.sequence("m5.large");
    c.evict_expired(later);
    assert_ne!(c.sequence("m5.large"), seen, "expiry is a change too");
}

#[test]
fn the_spread_limit_is_told_apart_from_plain_capacity_errors() {
    assert!(is_spread_limit(
        "You have reached the limit of instances in the spread placement group pg-1 in us-east-1a"
    ));
    assert!(is_spread_limit(
        "The maximum number of running instances for placement group 'db' has been reached."
    ));
    assert!(!is_spread_limit(
        "We currently do not have sufficient m5.large capacity in the Availability Zone you requested (us-east-1a)."
    ));
    assert!(!is_spread_limit(
        "You have requested more vCPU capacity than your current vCPU limit"
    ));
}

#[test]
fn ice_marks_one_offering_for_three_minutes() {
    let mut c = UnavailableOfferings::new();
    let m = c.record(
        &err(
            "InsufficientInstanceCapacity",
            CapacityType::Spot,
            "m5.large",
            "us-east-1a",
        ),
        T0,
    );
    assert_eq!(
        m,
        Marked::Offering {
            key: "spot:m5.large:us-east-1a".into(),
            subnet: None
        }
    );
    assert!(c.is_unavailable(CapacityType::Spot, "m5.large", "us-east-1a", T0));
    assert!(!c.is_unavailable(CapacityType::OnDemand, "m5.large", "us-east-1a", T0));
    assert!(!c.is_unavailable(CapacityType::Spot, "m5.large", "us-east-1b", T0));
    assert!(!c.is_unavailable(CapacityType::Spot, "m5.xlarge", "us-east-1a", T0));
    let almost = T0.plus(UNAVAILABLE_TTL - Duration::from_millis(1));
    assert!(c.is_unavailable(CapacityType::Spot, "m5.large", "us-east-1a", almost));
    let expired = T0.plus(UNAVAILABLE_TTL);
    assert!(!c.is_unavailable(CapacityType::Spot, "m5.large", "us-east-1a", expired));
    assert_eq!(c.offering_keys(almost), vec!["spot:m5.large:us-east-1a"]);
    let seen = c.sequence("m5.large");
    assert_ne!(seen, UnavailableOfferings::new().sequence("m5.large"));
    assert_eq!(c.sequence("c5.large"), (0, 0));
    c.evict_expired(almost);
    assert_eq!(c.sequence("m5.large"), seen, "nothing expired yet");
    c.evict_expired(expired);
    assert!(c.offering_keys(almost).is_empty());
    assert_ne!(
        c.sequence("m5.large"),
        seen,
        "expiry changes availability too"
    );
}

#[test]
fn every_unfulfillable_code_marks_and_others_do_not() {
    for code in UNFULFILLABLE_CODES {
        let mut c = UnavailableOfferings::new();
        assert!(matches!(
            c.record(&err(code, CapacityType::OnDemand, "c5.large", "z"), T0),
            Marked::Offering { .. }
        ));
        assert!(
            c.is_unavailable(CapacityType::OnDemand, "c5.large", "z", T0),
            "{code}"
        );
    }
    let mut c = UnavailableOfferings::new();
    for code in [
        "InvalidParameterValue",
        "RequestLimitExceeded",
        "UnauthorizedOperation",
    ] {
        assert_eq!(
            c.record(&err(code, CapacityType::OnDemand, "c5.large", "z"), T0),
            Marked::Nothing
        );
    }
    assert_eq!(c, UnavailableOfferings::new());
}

#[test]
fn full_subnet_marks_subnet_too() {
    let mut c = UnavailableOfferings::new();
    let m = c.record(
        &err(SUBNET_FULL_CODE, CapacityType::OnDemand, "c5.large", "z"),
        T0,
    );
    assert_eq!(
        m,
        Marked::Offering {
            key: "on-demand:c5.large:z".into(),
            subnet: Some("subnet-1".into())
        }
    );
    assert!(c.is_subnet_unavailable("subnet-1", T0));
    assert!(!c.is_subnet_unavailable("subnet-1", T0.plus(UNAVAILABLE_TTL)));
}

#[test]
fn missing_spot_role_marks_all_spot() {
    let mut c = UnavailableOfferings::new();
    let m = c.record(
        &err(SPOT_ROLE_MISSING_CODE, CapacityType::Spot, "m5.large", "a"),
        T0,
    );
    assert_eq!(m, Marked::CapacityType(CapacityType::Spot));
    assert_eq!(c.sequence("anything").0, 1);
    assert!(c.is_unavailable(CapacityType::Spot, "anything", "any-zone", T0));
    assert!(!c.is_unavailable(CapacityType::OnDemand, "anything", "any-zone", T0));
}

#[test]
fn apply_turns_off_marked_offerings_and_cheapest_moves_on() {
    let mut types = vec![it(
        "m5.large",
        vec![
            offering("a", CapacityType::Spot, 0.03),
            offering("b", CapacityType::Spot, 0.04),
            offering("a", CapacityType::OnDemand, 0.096),
        ],
    )];
    let mut c = UnavailableOfferings::new();
    c.mark_offering(CapacityType::Spot, "m5.large", "a", T0);
    c.apply(&mut types, T0);
    let avail: Vec<bool> = types[0].offerings.iter().map(|o| o.available).collect();
    assert_eq!(avail, vec![false, true, true]);
    let next = types[0].cheapest_available().unwrap();
    assert_eq!((next.zone.as_str(), next.price), ("b", 0.04));
}
