//! Message bodies shaped like the events EC2 and AWS Health put on the queue.

use super::*;

fn ec2(detail_type: &str, detail: &str) -> String {
    format!(
        r#"{{"version":"0","id":"7d5e2a1c-3f4b-4e8a-9c21-0a1b2c3d4e5f","detail-type":"{detail_type}","source":"aws.ec2","account":"123456789012","time":"2024-06-01T00:00:00Z","region":"us-west-2","resources":["arn:aws:ec2:us-west-2:123456789012:instance/i-0123456789abcdef0"],"detail":{detail}}}"#
    )
}

fn health(service: &str, category: &str) -> String {
    format!(
        r#"{{
  "version": "0",
  "id": "9f1c3a77-52b1-4d0e-8b5e-1d2c3b4a5f60",
  "detail-type": "AWS Health Event",
  "source": "aws.health",
  "account": "123456789012",
  "time": "2024-06-01T00:00:10Z",
  "region": "us-west-2",
  "resources": ["i-0123456789abcdef0", "i-0fedcba9876543210"],
  "detail": {{
    "eventArn": "arn:aws:health:us-west-2::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED_1",
    "service": "{service}",
    "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
    "eventTypeCategory": "{category}",
    "startTime": "Sat, 08 Jun 2024 00:00:00 GMT",
    "endTime": "Sat, 08 Jun 2024 02:00:00 GMT",
    "eventDescription": [{{"language": "en_US", "latestDescription": "The instance is scheduled for retirement."}}],
    "affectedEntities": [
      {{"entityValue": "i-0123456789abcdef0"}},
      {{"entityValue": "i-0fedcba9876543210"}},
      {{"entityValue": "i-0123456789abcdef0"}}
    ]
  }}
}}"#
    )
}

const INSTANCE: &str = "i-0123456789abcdef0";

#[test]
fn spot_interruption_warning() {
    let m = parse(&ec2(
        SPOT_INTERRUPTION,
        r#"{"instance-id":"i-0123456789abcdef0","instance-action":"terminate"}"#,
    ))
    .unwrap();
    assert_eq!(m.kind, Kind::SpotInterrupted);
    assert_eq!(m.instance_ids, vec![INSTANCE]);
    assert_eq!(m.time, Some(Timestamp(1_717_200_000_000)));
    assert_eq!(m.id, "7d5e2a1c-3f4b-4e8a-9c21-0a1b2c3d4e5f");
    assert_eq!(m.source, "aws.ec2");
}

#[test]
fn rebalance_recommendation() {
    let m = parse(&ec2(
        REBALANCE_RECOMMENDATION,
        r#"{"instance-id":"i-0123456789abcdef0"}"#,
    ))
    .unwrap();
    assert_eq!(m.kind, Kind::RebalanceRecommendation);
    assert_eq!(m.instance_ids, vec![INSTANCE]);
}

#[test]
fn capacity_reservation_interruption_warning() {
    let m = parse(&ec2(
        CAPACITY_RESERVATION_INTERRUPTION,
        r#"{"instance-id":"i-0123456789abcdef0","instance-action":"terminate"}"#,
    ))
    .unwrap();
    assert_eq!(m.kind, Kind::CapacityReservationInterrupted);
    assert_eq!(m.instance_ids, vec![INSTANCE]);
}

#[test]
fn state_changes_that_end_an_instance() {
    for (state, kind) in [
        ("stopping", Kind::InstanceStopped),
        ("stopped", Kind::InstanceStopped),
        ("shutting-down", Kind::InstanceTerminated),
        ("terminated", Kind::InstanceTerminated),
    ] {
        let body = ec2(
            STATE_CHANGE,
            &format!(r#"{{"instance-id":"i-0123456789abcdef0","state":"{state}"}}"#),
        );
        let m = parse(&body).unwrap();
        assert_eq!(m.kind, kind, "{state}");
        assert_eq!(m.instance_ids, vec![INSTANCE]);
    }
}

#[test]
fn state_changes_that_do_not_matter_are_no_ops() {
    for state in ["pending", "running"] {
        let body = ec2(
            STATE_CHANGE,
            &format!(r#"{{"instance-id":"i-0123456789abcdef0","state":"{state}"}}"#),
        );
        let m = parse(&body).unwrap();
        assert_eq!(m.kind, Kind::NoOp, "{state}");
        assert!(m.instance_ids.is_empty());
    }
}

#[test]
fn scheduled_change_names_every_affected_instance_once() {
    let m = parse(&health("EC2", "scheduledChange")).unwrap();
    assert_eq!(m.kind, Kind::ScheduledChange);
    assert_eq!(
        m.instance_ids,
        vec!["i-0123456789abcdef0", "i-0fedcba9876543210"]
    );
    assert_eq!(m.time, Some(Timestamp(1_717_200_010_000)));
}

#[test]
fn health_events_for_other_services_or_categories_are_no_ops() {
    for (service, category) in [
        ("RDS", "scheduledChange"),
        ("EC2", "issue"),
        ("EC2", "accountNotification"),
    ] {
        let m = parse(&health(service, category)).unwrap();
        assert_eq!(m.kind, Kind::NoOp, "{service} {category}");
        assert!(m.instance_ids.is_empty());
    }
}

#[test]
fn unknown_sources_detail_types_and_versions_are_no_ops() {
    let other_type = ec2(
        "EC2 Fleet Error",
        r#"{"sub-type":"spotFleetRequestConfigNotValid"}"#,
    );
    assert_eq!(parse(&other_type).unwrap().kind, Kind::NoOp);
    let other_source = ec2(SPOT_INTERRUPTION, r#"{"instance-id":"i-1"}"#)
        .replace("\"aws.ec2\"", "\"aws.autoscaling\"");
    assert_eq!(parse(&other_source).unwrap().kind, Kind::NoOp);
    let other_version = ec2(SPOT_INTERRUPTION, r#"{"instance-id":"i-1"}"#)
        .replace(r#""version":"0""#, r#""version":"1""#);
    assert_eq!(parse(&other_version).unwrap().kind, Kind::NoOp);
}

#[test]
fn an_unreadable_time_leaves_the_message_usable() {
    let body = ec2(
        SPOT_INTERRUPTION,
        r#"{"instance-id":"i-0123456789abcdef0","instance-action":"terminate"}"#,
    )
    .replace("2024-06-01T00:00:00Z", "yesterday");
    let m = parse(&body).unwrap();
    assert_eq!(m.kind, Kind::SpotInterrupted);
    assert_eq!(m.time, None);
}

#[test]
fn garbage_is_an_error() {
    for body in [
        "",
        "not json",
        "[]",
        r#"{"Message":"hello"}"#,
        r#"{"version":"0","source":"aws.ec2"}"#,
    ] {
        let e = parse(body).unwrap_err();
        assert!(
            e.to_string().contains("not an EventBridge event"),
            "{body}: {e}"
        );
    }
}

#[test]
fn a_known_event_without_its_instance_is_an_error() {
    let missing = ec2(SPOT_INTERRUPTION, r#"{"instance-action":"terminate"}"#);
    let e = parse(&missing).unwrap_err();
    assert!(e.to_string().contains("instance-id"), "{e}");
    let empty = ec2(REBALANCE_RECOMMENDATION, r#"{"instance-id":""}"#);
    assert!(parse(&empty).unwrap_err().to_string().contains("empty"));
    let not_object = ec2(STATE_CHANGE, r#""stopping""#);
    assert!(parse(&not_object).is_err());
}

#[test]
fn kinds_spell_upstream_labels() {
    let labels: Vec<&str> = Kind::ALL.iter().map(|k| k.as_str()).collect();
    assert_eq!(
        labels,
        [
            "spot_interrupted",
            "rebalance_recommendation",
            "scheduled_change",
            "instance_stopped",
            "instance_terminated",
            "capacity_reservation_interrupted",
            "no_op"
        ]
    );
}
