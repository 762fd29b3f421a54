//! The zonal-shift changes as plain data, and the poller against the test cloud: events per
//! claim in a changed zone, metrics per change, and a failed poll changing nothing.

use nodewright_testkit::k8s;
use serde_json::json;

use super::*;
use crate::events::{EventType, MemoryEvents};
use crate::state::{ClusterState, Kind, Object, WatchEvent};
use crate::tests::cloud::TestCloud;

fn claim(name: &str, zone: Option<&str>) -> NodeClaim {
    let mut v = k8s::nodeclaim(name);
    v["metadata"]["labels"] = json!({"karpenter.sh/nodepool": "default"});
    if let Some(z) = zone {
        v["metadata"]["labels"]["topology.kubernetes.io/zone"] = json!(z);
    }
    serde_json::from_value(v).unwrap()
}

fn zones(v: &[&str]) -> BTreeSet<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn reasons(events: &[Event]) -> Vec<(String, String, EventType)> {
    events
        .iter()
        .map(|e| (e.regarding.name.clone(), e.reason.clone(), e.event_type))
        .collect()
}

#[test]
fn a_new_shift_notifies_each_claim_in_its_zone() {
    let claims = [
        claim("a1", Some("us-east-1a")),
        claim("b1", Some("us-east-1b")),
        claim("none", None),
    ];
    let c = decide(&zones(&[]), &zones(&["us-east-1a"]), claims.iter());
    assert_eq!(c.active, vec!["us-east-1a".to_string()]);
    assert!(c.cleared.is_empty());
    assert_eq!(
        reasons(&c.notify),
        vec![("a1".into(), "ZonalShiftActive".into(), EventType::Warning)]
    );
    assert!(c.notify[0].message.contains("us-east-1a"), "{:?}", c.notify);
}

#[test]
fn an_ended_shift_clears_and_an_unchanged_one_says_nothing() {
    let claims = [
        claim("a1", Some("us-east-1a")),
        claim("b1", Some("us-east-1b")),
    ];
    let c = decide(
        &zones(&["us-east-1a", "us-east-1b"]),
        &zones(&["us-east-1b"]),
        claims.iter(),
    );
    assert!(c.active.is_empty());
    assert_eq!(c.cleared, vec!["us-east-1a".to_string()]);
    assert_eq!(
        reasons(&c.notify),
        vec![("a1".into(), "ZonalShiftCleared".into(), EventType::Normal)]
    );
    let same = decide(
        &zones(&["us-east-1b"]),
        &zones(&["us-east-1b"]),
        claims.iter(),
    );
    assert_eq!(same, ShiftChanges::default());
}

fn controller(cloud: Arc<TestCloud>) -> (ZonalShiftController, Arc<MemoryEvents>, Arc<Metrics>) {
    let state = ClusterState::shared();
    {
        let mut s = lock(&state);
        for c in [
            claim("a1", Some("us-east-1a")),
            claim("b1", Some("us-east-1b")),
        ] {
            let v = serde_json::to_value(&c).unwrap();
            s.apply(WatchEvent::Apply(
                Object::from_value(Kind::NodeClaim, v).unwrap(),
            ));
        }
    }
    let h = crate::tests::Harness::new();
    let ctl = ZonalShiftController::new(&crate::context::Context {
        state,
        cloud,
        ..h.context()
    });
    let (events, metrics) = (h.events.clone(), h.metrics.clone());
    (ctl, events, metrics)
}

#[tokio::test]
async fn polls_report_shifts_starting_and_ending_and_failures_change_nothing() {
    let cloud = Arc::new(TestCloud::new());
    let (ctl, events, metrics) = controller(cloud.clone());

    cloud.set_zonal_shifts(Ok(&["us-east-1a"]));
    let c = ctl.poll_once().await.unwrap();
    assert_eq!(c.active, vec!["us-east-1a".to_string()]);
    assert_eq!(events.with_reason("ZonalShiftActive").len(), 1);
    exposes(
        &metrics.encode(),
        &[
            r#"nodewright_zonal_shift_transitions_total{zone="us-east-1a",state="active"} 1"#,
            r#"nodewright_zonal_shift_active{zone="us-east-1a"} 1"#,
        ],
    );

    // The cloud cannot be asked: the shift is still known, and nothing is reported.
    cloud.set_zonal_shifts(Err(
        "AccessDeniedException: no arc-zonal-shift:GetManagedResource",
    ));
    assert!(ctl.poll_once().await.unwrap_err().contains("AccessDenied"));
    cloud.set_zonal_shifts(Ok(&["us-east-1a"]));
    assert_eq!(ctl.poll_once().await.unwrap(), ShiftChanges::default());
    assert!(events.with_reason("ZonalShiftCleared").is_empty());

    cloud.set_zonal_shifts(Ok(&[]));
    let c = ctl.poll_once().await.unwrap();
    assert_eq!(c.cleared, vec!["us-east-1a".to_string()]);
    assert_eq!(events.with_reason("ZonalShiftCleared").len(), 1);
    exposes(
        &metrics.encode(),
        &[
            r#"nodewright_zonal_shift_transitions_total{zone="us-east-1a",state="cleared"} 1"#,
            r#"nodewright_zonal_shift_active{zone="us-east-1a"} 0"#,
        ],
    );
}

/// Asserts that the metrics exposition `m` holds every one of `lines`.
fn exposes(m: &str, lines: &[&str]) {
    for line in lines {
        assert!(m.contains(line), "{line} missing from\n{m}");
    }
}
