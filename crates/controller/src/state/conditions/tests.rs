//! The status-condition metrics driven by watch events into the index, as the controller's
//! state loop drives them.

use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeStatus};
use nodewright_api::aws::v1::{EC2NodeClass, EC2NodeClassStatus};
use nodewright_api::v1::nodeclaim::{NodeClaim, NodeClaimStatus};
use nodewright_api::v1::nodepool::{NodePool, NodePoolStatus};
use nodewright_api::v1::shared::Condition;

use super::*;
use crate::clock::{rfc3339, to_time};
use crate::state::{Object, WatchEvent};

/// Seconds after an arbitrary epoch.
fn at(s: i64) -> Timestamp {
    Timestamp(1_717_200_000_000 + s * 1000)
}

fn ready(status: &str, reason: &str, since: i64) -> Condition {
    Condition {
        type_: "Ready".into(),
        status: status.into(),
        reason: Some(reason.to_owned()).filter(|r| !r.is_empty()),
        last_transition_time: Some(rfc3339(at(since))),
        ..Default::default()
    }
}

fn claim(conditions: Vec<Condition>, deleted: Option<i64>) -> Object {
    let mut c = NodeClaim::default();
    c.metadata.name = Some("c1".into());
    c.metadata.deletion_timestamp = deleted.map(|s| to_time(at(s)));
    c.status = Some(NodeClaimStatus {
        conditions: Some(conditions),
        ..Default::default()
    });
    Object::NodeClaim(Box::new(c))
}

/// The samples of the families starting `operator_{kind}_`, sorted.
fn samples(m: &Metrics, kind: &str) -> Vec<String> {
    let prefix = format!("operator_{kind}_");
    let mut out: Vec<String> = crate::metrics::samples(m)
        .into_iter()
        .filter(|l| l.starts_with(&prefix) && !l.contains("_bucket{"))
        .collect();
    out.sort();
    out
}

fn has(m: &Metrics, kind: &str, line: &str) -> bool {
    samples(m, kind).iter().any(|l| l == line)
}

/// The index, the condition observer and the metrics, as the state loop holds them.
struct Fixture {
    m: Metrics,
    s: ClusterState,
    o: ConditionObserver,
}

impl Fixture {
    fn new() -> Self {
        Fixture {
            m: Metrics::new(),
            s: ClusterState::default(),
            o: ConditionObserver::default(),
        }
    }

    /// `event` into the index, then the observer's pass `t` seconds after the epoch.
    fn tick(&mut self, event: WatchEvent, t: i64) {
        self.s.apply(event);
        self.o.observe(&self.s, &self.m, at(t));
    }

    /// `obj` applied, then observed at `t`.
    fn apply(&mut self, obj: Object, t: i64) {
        self.tick(WatchEvent::Apply(obj), t);
    }

    /// The NodeClaim families' samples, sorted.
    fn claim_samples(&self) -> Vec<String> {
        samples(&self.m, "nodeclaim")
    }

    fn claim_has(&self, line: &str) -> bool {
        has(&self.m, "nodeclaim", line)
    }
}

const COUNT: &str = "operator_nodeclaim_status_condition_count";
const CURRENT: &str = "operator_nodeclaim_status_condition_current_status_seconds";
const TRANSITIONS: &str = "operator_nodeclaim_status_condition_transitions_total";
const HELD: &str = "operator_nodeclaim_status_condition_transition_seconds";

#[test]
fn a_condition_going_unknown_true_false_counts_each_change_and_how_long_each_status_held() {
    let mut f = Fixture::new();
    f.apply(claim(vec![ready("Unknown", "", 0)], None), 10);
    let series = |status: &str, reason: &str| {
        format!(r#"{{name="c1",namespace="",type="Ready",status="{status}",reason="{reason}"}}"#)
    };
    assert_eq!(
        f.claim_samples(),
        [
            format!("{COUNT}{} 1.0", series("Unknown", "")),
            format!("{CURRENT}{} 10.0", series("Unknown", "")),
            format!(r#"{TRANSITIONS}{{type="Ready",status="Unknown",reason=""}} 1"#),
            // Unlabelled, so present from the start.
            "operator_nodeclaim_termination_duration_seconds_count 0".into(),
            "operator_nodeclaim_termination_duration_seconds_sum 0.0".into(),
        ]
    );

    f.apply(claim(vec![ready("True", "", 30)], None), 35);
    f.apply(
        claim(vec![ready("False", "KubeletNotReady", 100)], None),
        130,
    );
    assert_eq!(
        f.claim_samples(),
        [
            format!("{COUNT}{} 1.0", series("False", "KubeletNotReady")),
            format!("{CURRENT}{} 30.0", series("False", "KubeletNotReady")),
            format!(r#"{HELD}_count{{type="Ready",status="True",reason=""}} 1"#),
            format!(r#"{HELD}_count{{type="Ready",status="Unknown",reason=""}} 1"#),
            format!(r#"{HELD}_sum{{type="Ready",status="True",reason=""}} 70.0"#),
            format!(r#"{HELD}_sum{{type="Ready",status="Unknown",reason=""}} 30.0"#),
            format!(r#"{TRANSITIONS}{{type="Ready",status="False",reason="KubeletNotReady"}} 1"#),
            format!(r#"{TRANSITIONS}{{type="Ready",status="True",reason=""}} 1"#),
            format!(r#"{TRANSITIONS}{{type="Ready",status="Unknown",reason=""}} 1"#),
            "operator_nodeclaim_termination_duration_seconds_count 0".into(),
            "operator_nodeclaim_termination_duration_seconds_sum 0.0".into(),
        ]
    );
}

#[test]
fn a_new_reason_under_the_same_status_moves_the_gauges_but_is_no_transition() {
    let mut f = Fixture::new();
    f.apply(claim(vec![ready("False", "A", 0)], None), 5);
    f.apply(claim(vec![ready("False", "B", 0)], None), 6);
    let count = |reason: &str| {
        format!(
            r#"{COUNT}{{name="c1",namespace="",type="Ready",status="False",reason="{reason}"}} 1.0"#
        )
    };
    assert!(!f.claim_has(&count("A")));
    assert!(f.claim_has(&count("B")));
    let total: Vec<String> = f
        .claim_samples()
        .into_iter()
        .filter(|l| l.starts_with(TRANSITIONS))
        .collect();
    assert_eq!(
        total,
        [format!(
            r#"{TRANSITIONS}{{type="Ready",status="False",reason="A"}} 1"#
        )]
    );
}

#[test]
fn an_unchanged_object_ages_on_refresh() {
    let mut f = Fixture::new();
    f.apply(claim(vec![ready("True", "", 0)], Some(20)), 25);
    f.o.refresh(&f.m, at(60));
    let series = r#"{name="c1",namespace="",type="Ready",status="True",reason=""}"#;
    assert!(f.claim_has(&format!("{CURRENT}{series} 60.0")));
    assert!(f.claim_has(
        r#"operator_nodeclaim_termination_current_time_seconds{name="c1",namespace=""} 40.0"#
    ));
}

#[test]
fn a_deleted_object_observes_its_termination_and_leaves_no_gauge_behind() {
    let mut f = Fixture::new();
    f.apply(claim(vec![ready("True", "", 0)], None), 10);
    let deleting = claim(vec![ready("True", "", 0)], Some(50));
    f.apply(deleting.clone(), 52);
    assert!(f.claim_has(
        r#"operator_nodeclaim_termination_current_time_seconds{name="c1",namespace=""} 2.0"#
    ));
    f.tick(WatchEvent::Delete(deleting), 80);
    let left: Vec<String> = f
        .claim_samples()
        .into_iter()
        .filter(|l| !l.starts_with(TRANSITIONS))
        .collect();
    assert_eq!(
        left,
        [
            "operator_nodeclaim_termination_duration_seconds_count 1",
            "operator_nodeclaim_termination_duration_seconds_sum 30.0",
        ]
    );
    assert_eq!(f.o.len(), 0, "nothing is remembered of a deleted object");
}

#[test]
fn an_object_deleted_while_the_watch_was_down_goes_at_the_relist() {
    let mut f = Fixture::new();
    f.apply(claim(vec![ready("True", "", 0)], Some(5)), 10);
    f.s.apply(WatchEvent::Init(Kind::NodeClaim));
    f.tick(WatchEvent::InitDone(Kind::NodeClaim), 20);
    assert!(f.claim_samples().iter().all(|l| !l.contains("c1")));
    assert!(f.claim_has("operator_nodeclaim_termination_duration_seconds_count 1"));
    assert_eq!(f.o.len(), 0);
}

#[test]
fn a_new_object_under_a_deleted_ones_name_starts_afresh() {
    let mut f = Fixture::new();
    f.apply(claim(vec![ready("True", "", 0)], Some(5)), 10);
    f.apply(claim(vec![ready("Unknown", "", 12)], None), 15);
    let lines = f.claim_samples();
    assert!(
        lines
            .iter()
            .all(|l| !l.contains("termination_current_time")),
        "{lines:?}"
    );
    assert!(f.claim_has("operator_nodeclaim_termination_duration_seconds_count 1"));
    // The new object's condition is a first sighting, not a change from the old one's.
    assert!(lines.iter().all(|l| !l.starts_with(HELD)), "{lines:?}");
}

#[test]
fn nodes_nodepools_and_ec2nodeclasses_have_their_own_families() {
    let mut f = Fixture::new();
    let mut node = Node::default();
    node.metadata.name = Some("n1".into());
    node.status = Some(NodeStatus {
        conditions: Some(vec![NodeCondition {
            type_: "Ready".into(),
            status: "True".into(),
            reason: Some("KubeletReady".into()),
            last_transition_time: Some(to_time(at(0))),
            ..Default::default()
        }]),
        ..Default::default()
    });
    let mut pool = NodePool::default();
    pool.metadata.name = Some("p1".into());
    pool.status = Some(NodePoolStatus {
        conditions: Some(vec![ready("True", "", 0)]),
        ..Default::default()
    });
    let mut class = EC2NodeClass::default();
    class.metadata.name = Some("k1".into());
    class.status = Some(EC2NodeClassStatus {
        conditions: Some(vec![nodewright_api::aws::common::Condition {
            type_: "AMIsReady".into(),
            status: "False".into(),
            reason: Some("AMINotFound".into()),
            last_transition_time: Some(rfc3339(at(0))),
            ..Default::default()
        }]),
        ..Default::default()
    });
    for obj in [
        Object::Node(Box::new(node)),
        Object::NodePool(Box::new(pool)),
        Object::NodeClass(Box::new(class)),
    ] {
        f.apply(obj, 4);
    }
    for (kind, line) in [
        (
            "node",
            r#"operator_node_status_condition_count{name="n1",namespace="",type="Ready",status="True",reason="KubeletReady"} 1.0"#,
        ),
        (
            "nodepool",
            r#"operator_nodepool_status_condition_current_status_seconds{name="p1",namespace="",type="Ready",status="True",reason=""} 4.0"#,
        ),
        (
            "ec2nodeclass",
            r#"operator_ec2nodeclass_status_condition_transitions_total{type="AMIsReady",status="False",reason="AMINotFound"} 1"#,
        ),
    ] {
        assert!(has(&f.m, kind, line), "{kind}: {:?}", samples(&f.m, kind));
    }
}

#[test]
fn histogram_buckets_are_upstreams() {
    let m = Metrics::new();
    m.conditions.of(Kind::Node).termination.observe(8192.0);
    let text = m.encode();
    let les: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("operator_node_termination_duration_seconds_bucket"))
        .map(|l| l.split('"').nth(1).unwrap())
        .collect();
    assert_eq!(les.first(), Some(&"0.5"));
    assert_eq!(les.len(), 16, "0.5 s doubling to 8192 s, and +Inf: {les:?}");
    assert_eq!(les[14], "8192.0");
}

#[test]
fn a_condition_listed_twice_is_one_series_valued_as_the_last() {
    // Upstream's gauge vector keeps one series per label set, the last one set.
    let mut f = Fixture::new();
    f.apply(
        claim(vec![ready("True", "", 0), ready("True", "", 5)], None),
        30,
    );
    let series = r#"{name="c1",namespace="",type="Ready",status="True",reason=""}"#;
    let current: Vec<String> = f
        .claim_samples()
        .into_iter()
        .filter(|l| l.starts_with(CURRENT))
        .collect();
    assert_eq!(current, [format!("{CURRENT}{series} 25.0")]);
    assert!(f.claim_has(&format!("{COUNT}{series} 1.0")));
}
