//! The fleet alone, on explicit instants; `shells.rs` checks that the controller's cloud
//! answers as the fleet the simulator calls does.

use nodewright_core::testkit::{instance_type, offering};

use super::*;

mod shells;

/// Two types, spot in two zones each: c5.large the cheaper.
fn types() -> Vec<InstanceType> {
    let it = |name: &str, price: f64| {
        let a = offering("a", CapacityType::Spot, price);
        let b = offering("b", CapacityType::Spot, price + 0.001);
        instance_type(name, Resources::new(), vec![a, b])
    };
    vec![it("c5.large", 0.03), it("m5.large", 0.04)]
}

fn launch(f: &mut Fleet, at: i64) -> Result<Launch, LaunchError> {
    f.launch(&types(), &[], &Resources::new(), Timestamp(at))
}

fn no_c5_spot() -> FleetConfig {
    FleetConfig {
        insufficient_capacity: vec![OfferingPattern {
            instance_type: Some("c5.large".into()),
            capacity_type: Some(CapacityType::Spot),
            ..Default::default()
        }],
        ..FleetConfig::default()
    }
}

#[test]
fn the_first_offering_with_capacity_wins_and_what_failed_is_remembered_for_the_ttl() {
    let mut f = Fleet::new(no_c5_spot(), 1);
    let l = launch(&mut f, 0).unwrap();
    assert_eq!(
        (l.instance_type.as_str(), l.zone.as_str()),
        ("m5.large", "a")
    );
    let passed: Vec<&str> = l.out_of_capacity.iter().map(|c| c.zone.as_str()).collect();
    assert_eq!(
        passed,
        ["a", "b"],
        "both c5.large offerings, cheapest first"
    );
    assert!(f.is_unavailable("c5.large", "b", CapacityType::Spot, Timestamp(179_999)));
    assert!(!f.is_unavailable("c5.large", "b", CapacityType::Spot, Timestamp(180_000)));
    assert!(f.unavailable_ended_between(Timestamp(0), Timestamp(180_000)));
    // Within the TTL the failed offerings are not tried again.
    assert!(launch(&mut f, 1_000).unwrap().out_of_capacity.is_empty());
    let mut marked = types();
    f.mark_offerings(&mut marked, Timestamp(1_000));
    assert!(marked[0].offerings.iter().all(|o| !o.available));
    assert!(marked[1].offerings.iter().all(|o| o.available));
}

#[test]
fn nothing_left_to_try_is_insufficient_capacity() {
    let mut config = no_c5_spot();
    config.insufficient_capacity[0].instance_type = None;
    let mut f = Fleet::new(config, 1);
    let err = launch(&mut f, 0).unwrap_err();
    assert!(matches!(err, LaunchError::InsufficientCapacity(ref t) if t.len() == 4));
    assert!(err.to_string().contains("c5.large/a/spot"), "{err}");
    let err = launch(&mut f, 1_000).unwrap_err();
    assert_eq!(err, LaunchError::InsufficientCapacity(Vec::new()));
}

#[test]
fn api_errors_follow_the_rate_and_the_seed_and_ids_do_not_move_them() {
    let config = FleetConfig {
        api_error_rate: 0.5,
        ..FleetConfig::default()
    };
    let run = |seed| {
        let mut f = Fleet::new(config.clone(), seed);
        (0..200)
            .map(|t| launch(&mut f, t).is_err())
            .collect::<Vec<_>>()
    };
    let a = run(3);
    assert_eq!(a, run(3));
    let failures = a.iter().filter(|e| **e).count();
    assert!((70..130).contains(&failures), "{failures}");
    // The fault draws are the seed's own sequence, whatever ids were drawn between them.
    let mut rng = Rng::new(3);
    let alone: Vec<bool> = (0..200).map(|_| rng.chance(0.5)).collect();
    assert_eq!(a, alone);
}

#[test]
fn ids_are_ec2_shaped_and_follow_the_seed() {
    let ids = |seed| {
        let mut f = Fleet::new(FleetConfig::default(), seed);
        (0..3)
            .map(|t| launch(&mut f, t).unwrap().provider_id())
            .collect::<Vec<_>>()
    };
    let a = ids(7);
    assert_eq!(a, ids(7));
    assert_ne!(a, ids(8));
    let id = a[0].rsplit('/').next().unwrap();
    assert_eq!(id.len(), 2 + 17);
    assert!(id.starts_with("i-") && id[2..].chars().all(|c| c.is_ascii_hexdigit()));
}

#[test]
fn no_two_live_instances_share_a_private_address() {
    // 6,000 draws from 2^24 addresses would hold a pair on one address about two times in
    // three; the fleet draws again instead, so every Node name is its instance's alone.
    let mut f = Fleet::new(FleetConfig::default(), 1);
    let pids: Vec<String> = (0..6_000)
        .map(|t| launch(&mut f, t).unwrap().provider_id())
        .collect();
    let addresses: BTreeSet<[u8; 3]> = pids.iter().map(|p| private_ip(p)).collect();
    assert_eq!(addresses.len(), pids.len());
    // A forgotten instance frees its address.
    assert!(f.terminate(&pids[0], Timestamp(10_000)));
    let forgotten = f.forget_terminated(Timestamp(10_000_000), Duration::from_secs(60));
    assert_eq!(forgotten, [pids[0].clone()]);
    assert!(!f.addresses.contains(&private_ip(&pids[0])));
    assert_eq!(f.addresses.len(), pids.len() - 1);
}

#[test]
fn instances_go_through_their_states_by_time() {
    let mut f = Fleet::new(FleetConfig::default(), 1);
    let pid = launch(&mut f, 0).unwrap().provider_id();
    let state = |f: &Fleet, ms| f.state(&pid, Timestamp(ms));
    assert_eq!(state(&f, 2_999), Some(InstanceState::Pending));
    assert_eq!(state(&f, 3_000), Some(InstanceState::Running));
    assert!(f.terminate(&pid, Timestamp(10_000)));
    assert!(f.terminate(&pid, Timestamp(20_000)), "still shutting down");
    assert_eq!(state(&f, 39_999), Some(InstanceState::ShuttingDown));
    assert_eq!(state(&f, 40_000), Some(InstanceState::Terminated));
    assert!(!f.terminate(&pid, Timestamp(40_000)));
    assert!(!f.terminate("aws:///a/i-0", Timestamp(0)));
    assert_eq!(f.state("aws:///a/i-0", Timestamp(0)), None);
}

#[test]
fn spot_interruptions_only_with_a_rate() {
    let mut f = Fleet::new(FleetConfig::default(), 1);
    assert_eq!(f.spot_interruption_after(Duration::from_secs(86_400)), None);
    let mut f = Fleet::new(
        FleetConfig {
            spot_interruptions_per_hour: 1000.0,
            ..FleetConfig::default()
        },
        1,
    );
    assert!(
        f.spot_interruption_after(Duration::from_secs(3600))
            .is_some()
    );
}
