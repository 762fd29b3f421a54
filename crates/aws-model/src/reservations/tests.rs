use super::*;
use nodewright_core::testkit::{instance_type, offering};

fn cr(id: &str, ty: &str, zone: &str, free: u32) -> CapacityReservation {
    CapacityReservation {
        id: id.into(),
        instance_type: ty.into(),
        zone: zone.into(),
        owner_id: "123456789012".into(),
        instance_match_criteria: "targeted".into(),
        available_instance_count: free,
        state: "active".into(),
        tags: [("team".to_string(), "ml".to_string())].into(),
        ..Default::default()
    }
}

fn it(name: &str, zones: &[&str], price: f64) -> InstanceType {
    let offerings = zones
        .iter()
        .map(|z| offering(z, CapacityType::OnDemand, price));
    let mut it = instance_type(name, Default::default(), offerings.collect());
    if name == "m5.large" {
        it.requirements = vec![Requirement::new(
            labels::CAPACITY_TYPE,
            Operator::In,
            &["on-demand"],
        )];
    }
    it
}

#[test]
fn terms_select_by_id_tags_owner_and_criteria_active_only_once() {
    let mut expired = cr("cr-3", "m5.large", "a", 1);
    expired.state = "expired".into();
    let mut other_owner = cr("cr-2", "m5.large", "a", 1);
    other_owner.owner_id = "999999999999".into();
    let found = vec![cr("cr-1", "m5.large", "a", 2), other_owner, expired];
    let by_id = ReservationTerm {
        id: Some("cr-1".into()),
        ..Default::default()
    };
    let by_tags_and_owner = ReservationTerm {
        owner_id: Some("123456789012".into()),
        tags: [("team".to_string(), "*".to_string())].into(),
        ..Default::default()
    };
    let got = select(&[by_id.clone(), by_tags_and_owner], &found);
    let ids: Vec<&str> = got.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(
        ids,
        ["cr-1"],
        "owner filters cr-2, state filters cr-3, cr-1 once"
    );
    let open_only = ReservationTerm {
        instance_match_criteria: Some("open".into()),
        ..by_id
    };
    assert!(select(&[open_only], &found).is_empty());
    let wrong_tag = ReservationTerm {
        tags: [("team".to_string(), "web".to_string())].into(),
        ..Default::default()
    };
    assert!(select(&[wrong_tag], &found).is_empty());
}

#[test]
fn reserved_offerings_in_class_zones_priced_below_everything() {
    let mut types = vec![
        it("m5.large", &["a", "b"], 0.096),
        it("c5.large", &["a"], 0.085),
    ];
    let rs = vec![
        cr("cr-a", "m5.large", "a", 3),
        cr("cr-full", "m5.large", "b", 0),
        cr("cr-z", "m5.large", "z", 5),
    ];
    add_reserved_offerings(&mut types, &rs, &["a".into(), "b".into()], 0);
    let reserved: Vec<&Offering> = types[0]
        .offerings
        .iter()
        .filter(|o| o.capacity_type == CapacityType::Reserved)
        .collect();
    assert_eq!(reserved.len(), 2, "zone z is not the class's");
    assert_eq!(reserved[0].reservation_id.as_deref(), Some("cr-a"));
    assert_eq!(reserved[0].reservation_capacity, Some(3));
    assert!(reserved[0].available);
    assert!((reserved[0].price - 0.096 / 1e7).abs() < 1e-15);
    assert!(!reserved[1].available, "no free instance");
    let ct = types[0]
        .requirements
        .iter()
        .find(|r| r.key == labels::CAPACITY_TYPE)
        .unwrap();
    assert_eq!(ct.values[..], ["on-demand", "reserved"]);
    assert!(
        types[1].requirements.is_empty(),
        "no reservation, no change"
    );
    assert!(
        types[1]
            .offerings
            .iter()
            .all(|o| o.capacity_type == CapacityType::OnDemand)
    );
}

#[test]
fn targets_follow_the_mode_and_capacity_type() {
    let r = cr("cr-1", "m5.large", "a", 1);
    assert_eq!(target(false, CapacityType::Reserved, Some(&r)), None);
    assert_eq!(
        target(true, CapacityType::Reserved, Some(&r)),
        Some(ReservationTarget::Only {
            id: "cr-1".into(),
            reservation_type: ReservationType::Default,
            interruptible: false,
        })
    );
    assert_eq!(
        target(true, CapacityType::OnDemand, None),
        Some(ReservationTarget::None)
    );
    assert_eq!(
        fleet_target_capacity_type(ReservationType::Default, false),
        "on-demand"
    );
    assert_eq!(
        fleet_target_capacity_type(ReservationType::parse("capacity-block"), false),
        "capacity-block"
    );
    assert_eq!(
        fleet_target_capacity_type(ReservationType::Default, true),
        "reserved-capacity"
    );
    let mut i = r.clone();
    i.interruptible = true;
    assert!(matches!(
        target(true, CapacityType::Reserved, Some(&i)),
        Some(ReservationTarget::Only {
            interruptible: true,
            ..
        })
    ));
}

#[test]
fn capacity_blocks_expire_forty_minutes_before_their_end() {
    let end = 1_000_000;
    let mut block = cr("cr-b", "p5.48xlarge", "a", 2);
    block.reservation_type = ReservationType::CapacityBlock;
    block.end_unix = Some(end);
    let before = end - CAPACITY_BLOCK_EXPIRING_WINDOW_SECS - 1;
    assert!(!block.is_expiring(before));
    assert_eq!(block.status_state(before), "active");
    assert!(block.can_launch(before));
    let inside = end - CAPACITY_BLOCK_EXPIRING_WINDOW_SECS;
    assert!(block.is_expiring(inside));
    assert_eq!(block.status_state(inside), "expiring");
    assert!(!block.can_launch(inside));
    assert!(block.is_expiring(end + 5), "past the end");
    let mut odcr = block.clone();
    odcr.reservation_type = ReservationType::Default;
    assert!(
        !odcr.is_expiring(end + 5),
        "only capacity blocks expire early"
    );
}

#[test]
fn expiring_blocks_and_incompatible_types_give_unavailable_offerings() {
    let mut block = cr("cr-b", "m5.large", "a", 2);
    block.reservation_type = ReservationType::CapacityBlock;
    block.end_unix = Some(10_000);
    let mut types = vec![it("m5.large", &["a"], 0.1)];
    add_reserved_offerings(&mut types, &[block.clone()], &["a".into()], 0);
    assert!(types[0].offerings[1].available);
    let mut types = vec![it("m5.large", &["a"], 0.1)];
    add_reserved_offerings(&mut types, &[block.clone()], &["a".into()], 10_000 - 60);
    assert!(!types[0].offerings[1].available, "inside the window");
    let mut types = vec![it("m5.large", &["a"], 0.1)];
    types[0].offerings[0].available = false;
    add_reserved_offerings(&mut types, &[block], &["a".into()], 0);
    assert!(
        !types[0].offerings[1].available,
        "a type the class cannot launch has no available reserved offering"
    );
}

#[test]
fn the_ledger_counts_launches_terminations_and_refusals_until_ec2_speaks_again() {
    let mut ledger = ReservationLedger::new();
    ledger.observe(&[
        cr("cr-1", "m5.large", "a", 2),
        cr("cr-2", "m5.large", "b", 1),
    ]);
    ledger.launched("cr-1");
    assert_eq!(ledger.free("cr-1"), Some(1));
    ledger.launched("cr-1");
    ledger.launched("cr-1");
    assert_eq!(ledger.free("cr-1"), Some(0), "never below zero");
    let now = ledger.current(["cr-1", "cr-9", "cr-1"]);
    assert_eq!(now.len(), 1, "unknown ids left out, repeats once");
    assert!(!now[0].can_launch(0), "used up");
    ledger.released("cr-1");
    assert_eq!(ledger.free("cr-1"), Some(1));
    ledger.exhausted("cr-2");
    assert_eq!(ledger.free("cr-2"), Some(0));
    ledger.launched("cr-9");
    assert_eq!(ledger.free("cr-9"), None, "unknown ids stay unknown");
    ledger.observe(&[cr("cr-2", "m5.large", "b", 4)]);
    assert_eq!(ledger.free("cr-2"), Some(4), "EC2's count replaces ours");
    assert_eq!(ledger.free("cr-1"), Some(1), "others keep theirs");
}

#[test]
fn restrict_updates_counts_and_only_ever_takes_availability_away() {
    let rs = vec![
        cr("cr-1", "m5.large", "a", 1),
        cr("cr-2", "m5.large", "b", 3),
    ];
    let mut types = vec![it("m5.large", &["a", "b"], 0.1)];
    add_reserved_offerings(&mut types, &rs, &["a".into(), "b".into()], 0);
    let mut ledger = ReservationLedger::new();
    ledger.observe(&rs);
    ledger.launched("cr-1");
    ledger.launched("cr-2");
    ledger.restrict(&mut types, 0);
    let reserved = |types: &[InstanceType], id: &str| {
        types[0]
            .offerings
            .iter()
            .find(|o| o.reservation_id.as_deref() == Some(id))
            .map(|o| (o.available, o.reservation_capacity))
            .unwrap()
    };
    assert_eq!(reserved(&types, "cr-1"), (false, Some(0)), "used up");
    assert_eq!(reserved(&types, "cr-2"), (true, Some(2)));
    ledger.released("cr-1");
    ledger.restrict(&mut types, 0);
    assert_eq!(
        reserved(&types, "cr-1"),
        (false, Some(1)),
        "restrict never makes an offering available again"
    );
    assert!(types[0].offerings[0].available, "on-demand untouched");
}

#[test]
fn one_launch_uses_one_kind_of_reservation_and_one_capacity_block() {
    let mut block_a = cr("cb-a", "m5.large", "a", 1);
    block_a.reservation_type = ReservationType::CapacityBlock;
    let mut block_b = cr("cb-b", "c5.large", "a", 1);
    block_b.reservation_type = ReservationType::CapacityBlock;
    let mut flexible = cr("cr-i", "m5.large", "b", 1);
    flexible.interruptible = true;
    let plain = cr("cr-p", "c5.large", "b", 1);
    let all = vec![
        block_a.clone(),
        block_b.clone(),
        flexible.clone(),
        plain.clone(),
    ];
    let fresh = |rs: &[CapacityReservation]| {
        let mut types = vec![
            it("m5.large", &["a", "b"], 0.096),
            it("c5.large", &["a", "b"], 0.085),
        ];
        add_reserved_offerings(&mut types, rs, &["a".into(), "b".into()], 0);
        types
    };
    let available = |types: &[InstanceType]| {
        let mut ids: Vec<String> = types
            .iter()
            .flat_map(|t| &t.offerings)
            .filter(|o| o.available && o.capacity_type == CapacityType::Reserved)
            .filter_map(|o| o.reservation_id.clone())
            .collect();
        ids.sort();
        ids
    };
    let mut types = fresh(&all);
    narrow_reserved_for_launch(&mut types, &all, |_, _| true);
    assert_eq!(available(&types), ["cr-p"], "plain reservations first");
    assert!(
        types
            .iter()
            .flat_map(|t| &t.offerings)
            .filter(|o| o.capacity_type == CapacityType::OnDemand)
            .all(|o| o.available),
        "other capacity types untouched"
    );
    let rest = vec![block_a.clone(), block_b.clone(), flexible];
    let mut types = fresh(&rest);
    narrow_reserved_for_launch(&mut types, &rest, |_, _| true);
    assert_eq!(available(&types), ["cr-i"], "then interruptible ones");
    let blocks = vec![block_a, block_b];
    let mut types = fresh(&blocks);
    narrow_reserved_for_launch(&mut types, &blocks, |_, _| true);
    assert_eq!(
        available(&types),
        ["cb-b"],
        "one block, the cheapest (c5.large)"
    );
    // A claim that cannot use the plain reservation (zone a only) gets the blocks.
    let mut types = fresh(&all);
    narrow_reserved_for_launch(&mut types, &all, |_, o| o.zone == "a");
    for t in types.iter_mut() {
        t.offerings.retain(|o| o.zone == "a");
    }
    assert_eq!(
        available(&types),
        ["cb-b"],
        "what the claim cannot use does not count"
    );
}
