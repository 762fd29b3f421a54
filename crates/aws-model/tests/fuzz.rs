//! Fuzzing interruption-queue messages: arbitrary bodies, and real event shapes with one value
//! replaced by anything JSON can hold, never panic the parser, and every refusal says where
//! (a line and column in the body, or the field of `detail`). Part of `scripts/test`; raise
//! `NODEWRIGHT_FUZZ_CASES` to search longer.

use nodewright_aws_model::interruption::parse;
use proptest::prelude::*;
use serde_json::{Value, json};

fn cases() -> u32 {
    std::env::var("NODEWRIGHT_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000)
}

/// Any JSON value, small, with the numbers and strings that break careless code.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        prop_oneof![
            Just(i64::MIN),
            Just(i64::MAX),
            Just(-1),
            Just(0),
            any::<i64>()
        ]
        .prop_map(Value::from),
        prop_oneof![Just(u64::MAX), any::<u64>()].prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 12, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z-]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Every JSON pointer in `v`, the root included.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => m.iter().for_each(|(k, c)| {
            pointers(
                c,
                format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")),
                out,
            )
        }),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .for_each(|(i, c)| pointers(c, format!("{at}/{i}"), out)),
        _ => {}
    }
    out.push(at);
}

/// `base` with the value at one of its pointers (chosen by `pick`) replaced, or removed.
fn mutate(base: &Value, pick: usize, with: Value, remove: bool) -> Value {
    let mut v = base.clone();
    let mut all = Vec::new();
    pointers(&v, String::new(), &mut all);
    let at = &all[pick % all.len()];
    match at.rsplit_once('/') {
        Some((parent, key)) if remove => match v.pointer_mut(parent) {
            Some(Value::Object(m)) => {
                m.remove(&key.replace("~1", "/").replace("~0", "~"));
            }
            Some(Value::Array(a)) => {
                a.remove(key.parse::<usize>().unwrap_or(0).min(a.len() - 1));
            }
            _ => {}
        },
        _ => {
            if let Some(slot) = v.pointer_mut(at) {
                *slot = with;
            }
        }
    }
    v
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
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

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
        let body = mutate(&events()[which], pick, with, remove).to_string();
        if let Err(e) = parse(&body) {
            assert_located(&body, &e.reason);
        }
    }
}
