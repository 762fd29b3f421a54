//! The instance-health decision as plain data: reports against a small cluster state and a
//! clock the test moves.

use nodewright_cloud::{FailedCheck, HealthCategory, InstanceHealth};
use nodewright_core::time::Timestamp;
use serde_json::json;

use nodewright_testkit::json::merge;
use nodewright_testkit::k8s;

use super::*;
use crate::state::{Kind, Object};
use crate::tests::{object, state_of};

const T0: Timestamp = Timestamp(1_700_000_000_000);

fn at(secs: u64) -> Timestamp {
    T0.plus(Duration::from_secs(secs))
}

fn claim(name: &str, instance: &str, deleting: bool) -> Object {
    let mut v = merge(
        k8s::nodeclaim(name),
        json!({"metadata": {"labels": {"karpenter.sh/nodepool": "default",
                "karpenter.sh/capacity-type": "on-demand"}},
            "status": {"providerID": format!("aws:///us-east-1a/{instance}")}}),
    );
    if deleting {
        v["metadata"]["deletionTimestamp"] = json!("2023-11-14T22:13:20Z");
        v["metadata"]["finalizers"] = json!(["karpenter.sh/termination"]);
    }
    object(Kind::NodeClaim, v)
}

fn node(name: &str, instance: &str) -> Object {
    object(
        Kind::Node,
        k8s::node(name, &format!("aws:///us-east-1a/{instance}")),
    )
}

fn report(instance: &str, category: HealthCategory, since: Option<Timestamp>) -> InstanceHealth {
    InstanceHealth {
        instance_id: instance.into(),
        failed: vec![FailedCheck {
            category,
            name: "reachability".into(),
            since,
        }],
    }
}

fn run(
    reports: &[InstanceHealth],
    tracker: &mut Tracker,
    s: &ClusterState,
    now: Timestamp,
) -> HealthDecision {
    decide(reports, tracker, s, &InstanceIndex::new(s), now)
}

fn deleted(d: &HealthDecision) -> Vec<(String, HealthCategory, bool)> {
    d.delete
        .iter()
        .map(|u| (u.deletion.nodeclaim.clone(), u.category, u.forceful))
        .collect()
}

#[test]
fn a_check_without_a_start_time_counts_from_when_it_was_first_seen() {
    let s = state_of(vec![claim("c", "i-1", false), node("n", "i-1")]);
    let r = [report("i-1", HealthCategory::InstanceStatus, None)];
    let mut t = Tracker::default();
    assert_eq!(run(&r, &mut t, &s, at(0)), HealthDecision::default());
    assert!(run(&r, &mut t, &s, at(60)).delete.is_empty());
    assert!(
        run(&r, &mut t, &s, at(119)).delete.is_empty(),
        "119 s is not yet unhealthy"
    );
    let d = run(&r, &mut t, &s, at(120));
    assert_eq!(
        deleted(&d),
        [("c".into(), HealthCategory::InstanceStatus, true)]
    );
    assert_eq!(d.delete[0].deletion.termination_mode, "forceful");
    assert_eq!(d.delete[0].deletion.node.as_deref(), Some("n"));
    assert_eq!(d.count, [HealthCategory::InstanceStatus]);
    let events: Vec<(&str, &str)> = d
        .notify
        .iter()
        .map(|e| (e.reason.as_str(), e.regarding.name.as_str()))
        .collect();
    assert_eq!(
        events,
        [("InstanceUnhealthy", "c"), ("InstanceUnhealthy", "n")]
    );
    // Still failing a minute later: the episode is not counted again.
    let again = run(&r, &mut t, &s, at(180));
    assert!(again.count.is_empty());
}

#[test]
fn the_clouds_own_start_time_decides_at_the_boundary() {
    let s = state_of(vec![claim("c", "i-1", false)]);
    let mut t = Tracker::default();
    let young = [report("i-1", HealthCategory::SystemStatus, Some(at(1)))];
    assert!(run(&young, &mut t, &s, at(120)).delete.is_empty(), "119 s");
    let mut t = Tracker::default();
    let old = [report("i-1", HealthCategory::SystemStatus, Some(at(0)))];
    assert_eq!(
        deleted(&run(&old, &mut t, &s, at(120))),
        [("c".into(), HealthCategory::SystemStatus, true)],
        "a first sighting already 120 s into the failure acts at once"
    );
}

#[test]
fn a_recovered_instance_starts_over() {
    let s = state_of(vec![claim("c", "i-1", false)]);
    let r = [report("i-1", HealthCategory::InstanceStatus, None)];
    let mut t = Tracker::default();
    run(&r, &mut t, &s, at(0));
    run(&r, &mut t, &s, at(100));
    assert_eq!(
        run(&[], &mut t, &s, at(110)),
        HealthDecision::default(),
        "recovered"
    );
    assert!(
        run(&r, &mut t, &s, at(200)).delete.is_empty(),
        "failing again: a new clock"
    );
    assert!(run(&r, &mut t, &s, at(319)).delete.is_empty());
    assert_eq!(run(&r, &mut t, &s, at(320)).delete.len(), 1);
}

#[test]
fn the_metric_counts_each_episode_once() {
    let s = state_of(vec![claim("c", "i-1", false)]);
    let r = [report("i-1", HealthCategory::InstanceStatus, Some(at(0)))];
    let mut t = Tracker::default();
    assert_eq!(run(&r, &mut t, &s, at(120)).count.len(), 1);
    assert!(run(&r, &mut t, &s, at(180)).count.is_empty());
    run(&[], &mut t, &s, at(240));
    assert_eq!(
        run(&r, &mut t, &s, at(300)).count.len(),
        1,
        "a new episode after recovery"
    );
}

#[test]
fn a_scheduled_event_drains_at_once_without_forcing() {
    let s = state_of(vec![claim("c", "i-1", false)]);
    let mut t = Tracker::default();
    let d = run(
        &[report("i-1", HealthCategory::ScheduledEvent, None)],
        &mut t,
        &s,
        at(0),
    );
    assert_eq!(
        deleted(&d),
        [("c".into(), HealthCategory::ScheduledEvent, false)]
    );
    assert_eq!(d.delete[0].deletion.termination_mode, "graceful");
    assert_eq!(d.count, [HealthCategory::ScheduledEvent]);
}

#[test]
fn a_status_failure_outranks_an_event_on_the_same_instance() {
    let s = state_of(vec![claim("c", "i-1", false)]);
    let mut t = Tracker::default();
    let r = [InstanceHealth {
        instance_id: "i-1".into(),
        failed: vec![
            FailedCheck {
                category: HealthCategory::ScheduledEvent,
                name: "instance-retirement".into(),
                since: None,
            },
            FailedCheck {
                category: HealthCategory::SystemStatus,
                name: "reachability".into(),
                since: Some(at(0)),
            },
        ],
    }];
    let d = run(&r, &mut t, &s, at(300));
    assert_eq!(
        deleted(&d),
        [("c".into(), HealthCategory::SystemStatus, true)]
    );
    assert_eq!(d.count.len(), 2, "both categories are counted");
}

#[test]
fn unknown_instances_and_deleting_claims_are_left_alone() {
    let s = state_of(vec![claim("gone", "i-2", true)]);
    let mut t = Tracker::default();
    let r = [
        report("i-9", HealthCategory::InstanceStatus, Some(at(0))),
        report("i-2", HealthCategory::InstanceStatus, Some(at(0))),
    ];
    let d = run(&r, &mut t, &s, at(600));
    assert_eq!(d.unknown, ["i-9"]);
    assert!(d.delete.is_empty());
    assert!(d.notify.is_empty());
    assert_eq!(
        d.count,
        [HealthCategory::InstanceStatus],
        "the deleting claim's instance is still counted"
    );
}
