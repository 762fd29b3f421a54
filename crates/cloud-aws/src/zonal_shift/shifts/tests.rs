//! Which zones a zonal shift answer closes, the offerings it closes, and terminations it holds.

use aws_sdk_arczonalshift::primitives::DateTime;
use aws_sdk_arczonalshift::types::{AutoshiftInResource, ZonalShiftInResource};
use nodewright_core::model::CapacityType;
use nodewright_core::resources::Resources;
use nodewright_core::testkit::{instance_type, offering};

use super::*;

const NOW: i64 = 1_800_000_000;

fn shift(away: &str, status: AppliedStatus, expiry: i64) -> ZonalShiftInResource {
    ZonalShiftInResource::builder()
        .applied_status(status)
        .zonal_shift_id("zs-1")
        .resource_identifier("arn:aws:eks:us-east-1:123456789012:cluster/c")
        .away_from(away)
        .expiry_time(DateTime::from_secs(expiry))
        .start_time(DateTime::from_secs(NOW - 60))
        .comment("")
        .build()
        .unwrap()
}

fn autoshift(away: &str, status: AutoshiftAppliedStatus) -> AutoshiftInResource {
    AutoshiftInResource::builder()
        .applied_status(status)
        .away_from(away)
        .start_time(DateTime::from_secs(NOW - 60))
        .build()
        .unwrap()
}

fn ids(v: &[&str]) -> BTreeSet<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn applied_unexpired_shifts_and_autoshifts_count() {
    let out = GetManagedResourceOutput::builder()
        .zonal_shifts(shift("use1-az1", AppliedStatus::Applied, NOW + 3600))
        .zonal_shifts(shift("use1-az2", AppliedStatus::NotApplied, NOW + 3600))
        .zonal_shifts(shift("use1-az3", AppliedStatus::Applied, NOW - 1))
        .autoshifts(autoshift("use1-az4", AutoshiftAppliedStatus::Applied))
        .autoshifts(autoshift("use1-az5", AutoshiftAppliedStatus::NotApplied))
        .set_applied_weights(Some(Default::default()))
        .build()
        .unwrap();
    assert_eq!(shifted_zone_ids(&out, NOW), ids(&["use1-az1", "use1-az4"]));
}

#[test]
fn an_answer_without_shifts_shifts_nothing() {
    let out = GetManagedResourceOutput::builder()
        .set_zonal_shifts(Some(Vec::new()))
        .set_applied_weights(Some(Default::default()))
        .build()
        .unwrap();
    assert!(shifted_zone_ids(&out, NOW).is_empty());
}

#[test]
fn ids_map_to_names_and_unknown_ids_are_reported() {
    let map: BTreeMap<String, String> = [("use1-az1", "us-east-1b"), ("use1-az2", "us-east-1a")]
        .into_iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    let (names, unknown) = zone_names(&ids(&["use1-az1", "use1-az9"]), &map);
    assert_eq!(names, ids(&["us-east-1b"]));
    assert_eq!(unknown, vec!["use1-az9".to_string()]);
}

#[test]
fn every_offering_in_a_shifted_zone_closes() {
    let mut types = vec![instance_type(
        "m5.large",
        Resources::default(),
        vec![
            offering("us-east-1a", CapacityType::OnDemand, 0.1),
            offering("us-east-1a", CapacityType::Spot, 0.1),
            offering("us-east-1a", CapacityType::Reserved, 0.1),
            offering("us-east-1b", CapacityType::OnDemand, 0.1),
        ],
    )];
    close_shifted_offerings(&mut types, &ids(&["us-east-1a"]));
    let open: Vec<(&str, bool)> = types[0]
        .offerings
        .iter()
        .map(|o| (o.zone.as_str(), o.available))
        .collect();
    assert_eq!(
        open,
        vec![
            ("us-east-1a", false),
            ("us-east-1a", false),
            ("us-east-1a", false),
            ("us-east-1b", true)
        ]
    );
}

#[test]
fn terminations_in_a_shifted_zone_wait() {
    let shifted = ids(&["us-east-1a"]);
    assert_eq!(
        refused_termination("aws:///us-east-1a/i-0abc", &shifted),
        Some("us-east-1a")
    );
    assert_eq!(
        refused_termination("aws:///us-east-1b/i-0abc", &shifted),
        None
    );
    assert_eq!(
        refused_termination("aws:///us-east-1a/i-0abc", &BTreeSet::new()),
        None
    );
    assert_eq!(refused_termination("kwok://us-east-1a/x", &shifted), None);
    assert_eq!(refused_termination("aws:///us-east-1a", &shifted), None);
}
