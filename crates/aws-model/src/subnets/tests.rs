use super::*;

use nodewright_core::resources::Resources;
use nodewright_core::testkit::{instance_type, offering};

const OD: CapacityType = CapacityType::OnDemand;
const SPOT: CapacityType = CapacityType::Spot;

fn subnet(id: &str, zone: &str, ips: u64) -> SubnetInfo {
    SubnetInfo {
        id: id.into(),
        zone: zone.into(),
        available_ips: ips,
    }
}

fn it(name: &str, pods: i64, offerings: &[(&str, CapacityType)]) -> InstanceType {
    let offerings = offerings.iter().map(|(z, ct)| offering(z, *ct, 0.1));
    instance_type(name, Resources::new().with(PODS, pods), offerings.collect())
}

fn zones(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(z, n)| (z.to_string(), *n)).collect()
}

fn launched(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(|s| s.to_string()).collect()
}

const T0: Timestamp = Timestamp(1_000_000);

#[test]
fn most_free_addresses_per_zone_skipping_full_subnets() {
    let subnets = [
        subnet("subnet-a1", "a", 100),
        subnet("subnet-a2", "a", 4000),
        subnet("subnet-b2", "b", 50),
        subnet("subnet-b1", "b", 50),
        subnet("subnet-c1", "c", 10),
    ];
    let now = Timestamp(1_000);
    let mut cache = UnavailableOfferings::new();
    let chosen = zonal_subnets(&subnets, &cache, now);
    assert_eq!(
        chosen,
        BTreeMap::from([
            ("a".to_string(), "subnet-a2".to_string()),
            ("b".to_string(), "subnet-b1".to_string()),
            ("c".to_string(), "subnet-c1".to_string()),
        ])
    );
    cache.mark_subnet("subnet-a2", now);
    cache.mark_subnet("subnet-c1", now);
    let chosen = zonal_subnets(&subnets, &cache, now);
    assert_eq!(chosen.get("a").map(String::as_str), Some("subnet-a1"));
    assert_eq!(chosen.get("c"), None, "every subnet of zone c is full");
}

#[test]
fn prediction_is_the_fewest_pods_among_types_offered_in_the_zone() {
    let types = [
        it("m5.large", 29, &[("a", OD), ("a", SPOT), ("b", SPOT)]),
        it("m5.xlarge", 58, &[("a", OD), ("b", OD)]),
        it("t3.micro", 4, &[("c", OD)]),
    ];
    assert_eq!(predicted_usage(&types, OD, "a"), 29);
    assert_eq!(
        predicted_usage(&types, OD, "b"),
        58,
        "m5.large has no on-demand in b"
    );
    assert_eq!(predicted_usage(&types, SPOT, "b"), 29);
    assert_eq!(predicted_usage(&types, OD, "c"), 4);
    assert_eq!(predicted_usage(&types, SPOT, "c"), 0, "no type offers it");

    let mut unavailable = types.to_vec();
    unavailable[0].offerings[0].available = false;
    assert_eq!(
        predicted_usage(&unavailable, OD, "a"),
        58,
        "an unavailable offering does not count"
    );
}

#[test]
fn two_launches_in_a_row_spread_over_two_subnets_of_one_zone() {
    // subnet-1 leads by 10 addresses; the first launch's prediction (29) drops it below
    // subnet-2, so the second launch goes there although no new count arrived.
    let subnets = [subnet("subnet-1", "a", 260), subnet("subnet-2", "a", 250)];
    let cache = UnavailableOfferings::new();
    let mut book = InflightAddresses::new();
    book.refresh(&subnets, T0);
    let predicted = zones(&[("a", 29)]);

    let first = book.zonal_subnets(&subnets, &cache, T0);
    assert_eq!(first["a"], "subnet-1");
    let d1 = book.deduct(&subnets, &first, &predicted, T0);
    assert_eq!(d1.subnets().collect::<Vec<_>>(), vec![("subnet-1", 29)]);
    book.settle(&d1, &launched(&["subnet-1"]));
    assert_eq!(book.free(&subnets[0], T0), 231);

    let second = book.zonal_subnets(&subnets, &cache, T0);
    assert_eq!(second["a"], "subnet-2");

    // Without the prediction both launches take the subnet the count favours.
    let counts_only = zonal_subnets(&subnets, &cache, T0);
    assert_eq!(counts_only["a"], "subnet-1");
}

#[test]
fn launches_alongside_each_other_see_each_others_deductions() {
    let subnets = [subnet("subnet-1", "a", 100), subnet("subnet-2", "a", 100)];
    let cache = UnavailableOfferings::new();
    let mut book = InflightAddresses::new();
    let predicted = zones(&[("a", 10)]);
    // Nothing tracked yet: the first deduction starts from the subnet's own count.
    let first = book.zonal_subnets(&subnets, &cache, T0);
    let d1 = book.deduct(&subnets, &first, &predicted, T0);
    let second = book.zonal_subnets(&subnets, &cache, T0);
    assert_ne!(
        first["a"], second["a"],
        "the second launch starts before the first settles"
    );
    let d2 = book.deduct(&subnets, &second, &predicted, T0);
    book.settle(&d1, &launched(&[&first["a"]]));
    book.settle(&d2, &launched(&[&second["a"]]));
    assert_eq!(book.free(&subnets[0], T0), 90);
    assert_eq!(book.free(&subnets[1], T0), 90);
}

#[test]
fn subnets_the_fleet_did_not_use_get_their_addresses_back() {
    let subnets = [subnet("subnet-a", "a", 100), subnet("subnet-b", "b", 100)];
    let cache = UnavailableOfferings::new();
    let mut book = InflightAddresses::new();
    book.refresh(&subnets, T0);
    let chosen = book.zonal_subnets(&subnets, &cache, T0);
    let d = book.deduct(&subnets, &chosen, &zones(&[("a", 29), ("b", 58)]), T0);
    assert_eq!(book.free(&subnets[0], T0), 71);
    assert_eq!(book.free(&subnets[1], T0), 42);
    book.settle(&d, &launched(&["subnet-b"]));
    assert_eq!(
        book.free(&subnets[0], T0),
        100,
        "the fleet launched nothing in a"
    );
    assert_eq!(book.free(&subnets[1], T0), 42);

    // A failed call launched nothing: everything comes back.
    let d = book.deduct(&subnets, &chosen, &zones(&[("a", 29), ("b", 58)]), T0);
    book.settle(&d, &BTreeSet::new());
    assert_eq!(book.free(&subnets[0], T0), 100);
    assert_eq!(book.free(&subnets[1], T0), 42);
}

#[test]
fn a_fresh_count_resets_the_prediction_and_old_deductions_stay_out_of_it() {
    let subnets = [subnet("subnet-a", "a", 100)];
    let cache = UnavailableOfferings::new();
    let mut book = InflightAddresses::new();
    book.refresh(&subnets, T0);
    let chosen = book.zonal_subnets(&subnets, &cache, T0);
    let d = book.deduct(&subnets, &chosen, &zones(&[("a", 30)]), T0);
    assert_eq!(book.free(&subnets[0], T0), 70);

    // EC2 counted again while the launch was out (and saw its address taken).
    let recounted = [subnet("subnet-a", "a", 99)];
    book.refresh(&recounted, T0);
    assert_eq!(book.free(&recounted[0], T0), 99);
    book.settle(&d, &BTreeSet::new());
    assert_eq!(
        book.free(&recounted[0], T0),
        99,
        "nothing given back to a count that never had it deducted"
    );
}

#[test]
fn predictions_expire_with_their_count() {
    let subnets = [subnet("subnet-1", "a", 200), subnet("subnet-2", "a", 190)];
    let cache = UnavailableOfferings::new();
    let mut book = InflightAddresses::new();
    book.refresh(&subnets, T0);
    let chosen = book.zonal_subnets(&subnets, &cache, T0);
    let d = book.deduct(&subnets, &chosen, &zones(&[("a", 29)]), T0);
    book.settle(&d, &launched(&["subnet-1"]));
    let almost = T0.plus(ADDRESS_COUNT_TTL - Duration::from_millis(1));
    assert_eq!(
        book.zonal_subnets(&subnets, &cache, almost)["a"],
        "subnet-2"
    );
    let later = T0.plus(ADDRESS_COUNT_TTL);
    assert_eq!(
        book.free(&subnets[0], later),
        200,
        "the stale prediction is dropped"
    );
    assert_eq!(book.zonal_subnets(&subnets, &cache, later)["a"], "subnet-1");
}

#[test]
fn zones_without_a_prediction_deduct_nothing() {
    let subnets = [subnet("subnet-a", "a", 100), subnet("subnet-b", "b", 100)];
    let cache = UnavailableOfferings::new();
    let mut book = InflightAddresses::new();
    let chosen = book.zonal_subnets(&subnets, &cache, T0);
    let d = book.deduct(&subnets, &chosen, &zones(&[("a", 5), ("b", 0)]), T0);
    assert_eq!(d.subnets().collect::<Vec<_>>(), vec![("subnet-a", 5)]);
    assert_eq!(book.free(&subnets[1], T0), 100);
}
