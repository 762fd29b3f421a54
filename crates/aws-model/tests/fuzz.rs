//! Fuzzing interruption-queue messages: arbitrary bodies, and real event shapes with one value
//! replaced by anything JSON can hold, never panic the parser, and every refusal says where
//! (a line and column in the body, or the field of `detail`). Part of `scripts/test`; raise
//! `NODEWRIGHT_FUZZ_CASES` to search longer.

use nodewright_aws_model::interruption::parse;
use nodewright_testkit::fuzz::{self, config, mutate};
use proptest::prelude::*;
use serde_json::{Value, json};

/// Any JSON value, with instance ids as the events carry them.
fn any_json() -> impl Strategy<Value = Value> {
    fuzz::any_json("i-[0-9a-f]{1,17}")
}

fn events() -> Vec<Value> {
    let envelope = |detail_type: &str, source: &str, detail: Value| {
        json!({"version": "0", "id": "e-1", "detail-type": detail_type, "source": source,
               "account": "1", "time": "2024-06-01T00:00:00Z", "region": "us-west-2",
               "resources": [], "detail": detail})
    };
    vec![
        envelope(
            "EC2 Spot Instance Interruption Warning",
            "aws.ec2",
            json!({"instance-id": "i-1", "instance-action": "terminate"}),
        ),
        envelope(
            "EC2 Instance State-change Notification",
            "aws.ec2",
            json!({"instance-id": "i-1", "state": "stopping"}),
        ),
        envelope(
            "AWS Health Event",
            "aws.health",
            json!({"service": "EC2", "eventTypeCategory": "scheduledChange",
                   "affectedEntities": [{"entityValue": "i-1"}, {"entityValue": "i-2"}]}),
        ),
    ]
}

/// A refusal says where: serde's line and column, or the field of `detail` it names.
fn assert_located(body: &str, reason: &str) {
    assert!(
        reason.contains(" at line ") || reason.contains("detail"),
        "no location in {reason:?} for {body}"
    );
}

proptest! {
    #![proptest_config(config(3000))]

    #[test]
    fn arbitrary_bodies(body in "\\PC{0,80}|\\{\"version\":\"0\",\\PC{0,60}") {
        if let Err(e) = parse(&body) {
            assert_located(&body, &e.reason);
        }
    }

    #[test]
    fn events_with_one_value_changed(
        which in 0..3usize,
        pick in any::<usize>(),
        with in any_json(),
        remove in prop::bool::weighted(0.2),
    ) {
        let body = mutate(&events()[which], pick, with, remove).0.to_string();
        if let Err(e) = parse(&body) {
            assert_located(&body, &e.reason);
        }
    }
}
