//! The event constructors' reasons and messages, de-duplication, the throttle and the sinks.

use k8s_openapi::jiff::Timestamp;
use tokio::time::Instant;

use super::*;
use crate::disruption::events::*;
use crate::interruption::events::*;
use crate::lifecycle::events::*;
use crate::metrics::Metrics;
use crate::provisioner::events::*;
use crate::supervise::Supervisor;
use crate::termination::events::*;
use crate::zonalshift::events::*;

fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).unwrap()
}

#[test]
fn constructors_use_upstream_reasons_and_messages() {
    let pod = ObjectRef::pod("web", "web-1");
    let e = nominated(pod.clone(), "default-abc12");
    assert_eq!(e.reason, "Nominated");
    assert_eq!(e.message, "Pod should schedule on: nodeclaim/default-abc12");
    assert_eq!(e.event_type, EventType::Normal);
    let e = disruption_terminating(ObjectRef::node("n1"), "underutilized");
    assert_eq!(
        (e.reason.as_str(), e.message.as_str()),
        ("DisruptionTerminating", "Disrupting Node: Underutilized")
    );
    let e = disruption_launching(ObjectRef::nodeclaim("nc"), "drifted");
    assert_eq!(e.message, "Launching NodeClaim: Drifted");
    let e = failed_scheduling(pod, "incompatible with nodepool \"default\"");
    assert_eq!(e.event_type, EventType::Warning);
    assert_eq!(
        e.message,
        "Failed to schedule pod, incompatible with nodepool \"default\""
    );
    let e = insufficient_capacity(ObjectRef::nodeclaim("nc-1"), "no capacity");
    assert_eq!(e.reason, "InsufficientCapacityError");
    assert_eq!(e.message, "NodeClaim nc-1 event: no capacity");
    let e = nodepool_blocked_for_reason(ObjectRef::nodepool("np"), "Drifted");
    assert_eq!(e.reason, "DisruptionBlocked");
    assert_eq!(
        e.message,
        "No allowed disruptions for disruption reason Drifted due to blocking budget"
    );
}

#[test]
fn long_errors_are_truncated() {
    let long = "x".repeat(5000);
    let e = insufficient_capacity(ObjectRef::nodeclaim("a"), &long);
    assert!(e.message.len() < 1100);
    assert!(e.message.ends_with("..."));
}

#[test]
fn memory_events_keep_order() {
    let sink = MemoryEvents::new();
    sink.publish(evicted(ObjectRef::pod("a", "p"), "drifted"));
    sink.publish(failed_draining(ObjectRef::node("n"), "pdb"));
    let reasons: Vec<String> = sink.events().into_iter().map(|e| e.reason).collect();
    assert_eq!(reasons, ["Evicted", "FailedDraining"]);
    assert_eq!(sink.with_reason("Evicted").len(), 1);
}

#[test]
fn repeats_within_the_window_fold_into_one_series() {
    let mut d = Deduper::new(Duration::from_secs(120));
    let ev = || disruption_blocked(ObjectRef::node("n1"), "pdb prevents pod evictions");
    let Some(Write::Create { name, .. }) = d.observe(ev(), at(0)) else {
        panic!("first occurrence must create");
    };
    for s in 1..=50 {
        assert_eq!(d.observe(ev(), at(s)), None);
    }
    let updates = d.flush(at(50));
    assert_eq!(
        updates,
        vec![Write::Update {
            name: name.clone(),
            namespace: "default".into(),
            count: 51,
            last: at(50),
        }]
    );
    // Nothing new since: no write.
    assert!(d.flush(at(60)).is_empty());
    // A different message is a different series.
    assert!(matches!(
        d.observe(disruption_blocked(ObjectRef::node("n1"), "other"), at(61)),
        Some(Write::Create { .. })
    ));
}

#[test]
fn a_series_expires_after_the_window() {
    let mut d = Deduper::new(Duration::from_secs(120));
    let ev = || evicted(ObjectRef::pod("ns", "p"), "drifted");
    assert!(d.observe(ev(), at(0)).is_some());
    assert!(d.flush(at(200)).is_empty());
    assert!(d.is_empty());
    match d.observe(ev(), at(201)) {
        Some(Write::Create { event, .. }) => {
            assert_eq!(event.regarding.namespace.as_deref(), Some("ns"))
        }
        other => panic!("expected a new create, got {other:?}"),
    }
}

#[tokio::test]
async fn kube_events_fold_a_hot_loop_into_one_create_and_one_patch() {
    let (client, state) = nodewright_testkit::api_server::start().await;
    let mut loops = Supervisor::new();
    let sink = KubeEvents::new(client, "karpenter", &mut loops);
    // An event without de-duplication values, so every repeat reaches the writer; and
    // one with them, which reaches it once.
    for _ in 0..50 {
        sink.publish(Event::new(
            ObjectRef::node("n1"),
            EventType::Normal,
            "Ready",
            "Node is ready",
        ));
        sink.publish(disruption_blocked(
            ObjectRef::node("n2"),
            "pdb prevents eviction",
        ));
    }
    let writes = |method: &str| {
        state
            .lock()
            .unwrap()
            .requests
            .iter()
            .filter(|r| r.starts_with(&format!("{method} ")))
            .count()
    };
    for _ in 0..100 {
        if writes("POST") > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Closing the sink flushes the folded repeats.
    drop(sink);
    let count = || {
        let s = state.lock().unwrap();
        s.objects.values().next().map(|e| e["count"].clone())
    };
    for _ in 0..100 {
        if count() == Some(serde_json::json!(50)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(writes("POST"), 2);
    assert_eq!(writes("PATCH"), 1);
    let s = state.lock().unwrap();
    let mut objects = s.objects.iter();
    let (path, event) = objects.next().unwrap();
    assert!(
        path.starts_with("/api/v1/namespaces/default/events/n1."),
        "{path}"
    );
    assert_eq!(event["count"], 50);
    assert_eq!(event["reason"], "Ready");
    assert_eq!(event["involvedObject"]["kind"], "Node");
    let (path, event) = objects.next().unwrap();
    assert!(path.contains("/events/n2."), "{path}");
    assert_eq!(event["count"], 1);
    assert_eq!(event["reason"], "DisruptionBlocked");
}

#[test]
fn core_event_fields() {
    let e = nominated(ObjectRef::pod("web", "p").with_uid("u1"), "nc");
    let ev = to_core_event("p.1", &e, at(0), "karpenter", "pod-0");
    assert_eq!(ev.metadata.namespace.as_deref(), Some("web"));
    assert_eq!(ev.involved_object.kind.as_deref(), Some("Pod"));
    assert_eq!(ev.involved_object.uid.as_deref(), Some("u1"));
    assert_eq!(ev.type_.as_deref(), Some("Normal"));
    assert_eq!(ev.count, Some(1));
    assert_eq!(
        ev.source.and_then(|s| s.component).as_deref(),
        Some("karpenter")
    );
    let node_ev = to_core_event(
        "n.1",
        &unregistered_taint_missing(ObjectRef::node("n")),
        at(0),
        "karpenter",
        "x",
    );
    assert_eq!(node_ev.metadata.namespace.as_deref(), Some("default"));
}

fn pod(i: usize) -> ObjectRef {
    ObjectRef::pod("web", &format!("web-{i}")).with_uid(format!("uid-{i}"))
}

#[test]
fn a_burst_of_nominations_is_limited_as_upstream() {
    let mut t = Throttle::new();
    let t0 = Instant::now();
    let admitted = |t: &mut Throttle, pods: std::ops::Range<usize>, at: Instant| {
        pods.filter(|i| t.admit(&nominated(pod(*i), "default-a"), at).is_ok())
            .count()
    };
    // 5,000 distinct pods at once: the bucket's burst of 10.
    assert_eq!(admitted(&mut t, 0..5000, t0), 10);
    // A second later, 5 more tokens.
    assert_eq!(admitted(&mut t, 5000..6000, t0 + Duration::from_secs(1)), 5);
    // Every pod seen is remembered, admitted or not: none of them again for two minutes,
    // even with tokens to spare.
    let later = t0 + Duration::from_secs(100);
    assert_eq!(admitted(&mut t, 0..6000, later), 0);
    assert_eq!(
        t.admit(&nominated(pod(7), "default-b"), later),
        Err(Refused::Duplicate),
        "another claim in the message is still the same pod's nomination"
    );
    // Past the timeout, a pod's nomination is news again.
    let after = t0 + Duration::from_secs(130);
    assert_eq!(t.admit(&nominated(pod(7), "default-b"), after), Ok(()));
}

#[test]
fn dedupe_timeouts_follow_the_event() {
    let mut t = Throttle::new();
    let t0 = Instant::now();
    let fail = |m: &str| failed_scheduling(pod(1), m);
    assert_eq!(t.admit(&fail("no capacity"), t0), Ok(()));
    // Same pod, another reason text, four minutes on: still within five minutes.
    let at = t0 + Duration::from_secs(240);
    assert_eq!(t.admit(&fail("other"), at), Err(Refused::Duplicate));
    assert_eq!(
        t.admit(&fail("other"), t0 + Duration::from_secs(301)),
        Ok(())
    );
    // A NodePool's budget can change every minute.
    let np = || nodepool_blocked(ObjectRef::nodepool("default").with_uid("np"));
    assert_eq!(t.admit(&np(), t0), Ok(()));
    assert_eq!(
        t.admit(&np(), t0 + Duration::from_secs(59)),
        Err(Refused::Duplicate)
    );
    assert_eq!(t.admit(&np(), t0 + Duration::from_secs(61)), Ok(()));
    // Disruption events keyed on their reason: a new reason is a new event.
    let nc = || ObjectRef::nodeclaim("nc").with_uid("u");
    assert_eq!(
        t.admit(&disruption_terminating(nc(), "drifted"), t0),
        Ok(())
    );
    assert_eq!(
        t.admit(&disruption_terminating(nc(), "drifted"), t0),
        Err(Refused::Duplicate)
    );
    assert_eq!(
        t.admit(&disruption_terminating(nc(), "expired"), t0),
        Ok(())
    );
    // Events without dedupe values always pass (the writer folds exact repeats).
    let plain = || Event::new(nc(), EventType::Normal, "Ready", "ready");
    assert_eq!(t.admit(&plain(), t0), Ok(()));
    assert_eq!(t.admit(&plain(), t0), Ok(()));
}

/// Every constructor, with the arguments that vary.
fn every_constructor() -> Vec<Event> {
    let p = || pod(1);
    let n = || ObjectRef::node("n1").with_uid("node-uid");
    let nc = || ObjectRef::nodeclaim("nc").with_uid("nc-uid");
    let np = || ObjectRef::nodepool("default").with_uid("np-uid");
    vec![
        nominated(p(), "nc"),
        nominated_on_node(p(), "n1", Some("nc")),
        failed_scheduling(p(), "no fit"),
        no_compatible_instance_types(np()),
        disruption_launching(nc(), "drifted"),
        disruption_waiting_readiness(nc()),
        disruption_terminating(n(), "drifted"),
        disruption_blocked(n(), "pdb"),
        nodepool_blocked(np()),
        nodepool_blocked_for_reason(np(), "Drifted"),
        unconsolidatable(n(), "policy"),
        evicted(p(), "drifted"),
        disrupted_pod_delete(p(), "2024-06-01T00:00:00Z", 30, None),
        failed_draining(n(), "pdb"),
        termination_grace_period_expiring(n(), "2024-06-01T00:00:00Z"),
        failed_termination(nc(), "boom"),
        awaiting_volume_detachment(n(), 1),
        condition_transitioned(nc(), "Ready", "False", "True", "Ready", ""),
        insufficient_capacity(nc(), "ice"),
        nodeclass_not_ready(nc(), "not ready"),
        unregistered_taint_missing(n()),
        failed_consistency_check(nc(), "expected 4 cpu"),
        invalid_do_not_disrupt(p(), "soon"),
        do_not_disrupt_until(p(), "2024-06-01T00:05:00Z"),
        do_not_disrupt_grace_period_elapsed(p()),
        consolidation_candidate(n(), "delete: [n1] (part of 2-node consolidation)", 0.2),
        consolidation_rejected(nc(), "delete: [n1]", "churn", 0.2),
        consolidation_approved(
            np(),
            &nodewright_core::disruption::BalancedScore {
                nodepool: "default".into(),
                score: 1.5,
                savings_fraction: 0.3,
                disruption_fraction: 0.2,
            },
        ),
        spot_interrupted(nc()),
        spot_rebalance_recommendation(nc()),
        instance_stopping(nc()),
        instance_terminating(nc()),
        instance_unhealthy(nc()),
        capacity_reservation_interrupted(nc()),
        terminating_on_interruption(nc()),
        zonal_shift_active(nc(), "us-east-1a"),
        zonal_shift_cleared(nc(), "us-east-1a"),
    ]
}

#[test]
fn every_event_the_controller_builds_is_de_duplicated() {
    let events = every_constructor();
    // A new constructor (each loop keeps its own beside it) must be listed above (the count
    // guards the list), and carry de-duplication values naming its object.
    let constructors: usize = [
        include_str!("../disruption/events.rs"),
        include_str!("../interruption/events.rs"),
        include_str!("../lifecycle/events.rs"),
        include_str!("../provisioner/events.rs"),
        include_str!("../termination/events.rs"),
        include_str!("../zonalshift/events.rs"),
    ]
    .iter()
    .map(|code| code.matches("-> Event {").count())
    .sum();
    assert_eq!(events.len(), constructors);
    for e in &events {
        let d = e
            .dedupe
            .as_ref()
            .unwrap_or_else(|| panic!("{} has no dedupe values", e.reason));
        let uid = e.regarding.uid.as_deref().unwrap();
        assert_eq!(
            d.values.first().map(String::as_str),
            Some(uid),
            "{}",
            e.reason
        );
    }
}

#[test]
fn a_repeat_within_two_minutes_is_dropped_and_news_is_not() {
    let t0 = Instant::now();
    let soon = t0 + Duration::from_secs(60);
    let later = t0 + Duration::from_secs(121);
    let nc = || ObjectRef::nodeclaim("nc").with_uid("nc-uid");
    let node = || ObjectRef::node("n1").with_uid("node-uid");
    // (first, a repeat that is dropped, an event that is news at once)
    let cases: Vec<(Event, Event, Event)> = vec![
        // Interruption: the same message delivered twice; the Node is another object.
        (
            spot_interrupted(nc()),
            spot_interrupted(nc()),
            spot_interrupted(node()),
        ),
        (
            instance_unhealthy(nc()),
            instance_unhealthy(nc()),
            instance_stopping(nc()),
        ),
        (
            terminating_on_interruption(nc()),
            terminating_on_interruption(nc()),
            terminating_on_interruption(node()),
        ),
        // A condition: the same transition again is dropped, the way back is not.
        (
            condition_transitioned(nc(), "Ready", "False", "True", "KubeletReady", ""),
            condition_transitioned(nc(), "Ready", "False", "True", "KubeletReady", ""),
            condition_transitioned(nc(), "Ready", "True", "False", "NodeNotReady", ""),
        ),
        (
            failed_consistency_check(nc(), "expected 4 cpu, found 2"),
            failed_consistency_check(nc(), "expected 4 cpu, found 2"),
            failed_consistency_check(nc(), "expected 16Gi memory, found 8Gi"),
        ),
        (
            invalid_do_not_disrupt(pod(1), "soon"),
            invalid_do_not_disrupt(pod(1), "soon"),
            invalid_do_not_disrupt(pod(1), "-5m"),
        ),
        (
            unregistered_taint_missing(node()),
            unregistered_taint_missing(node()),
            unregistered_taint_missing(ObjectRef::node("n2").with_uid("n2")),
        ),
    ];
    for (first, repeat, news) in cases {
        let mut t = Throttle::new();
        assert_eq!(t.admit(&first, t0), Ok(()), "{}", first.message);
        assert_eq!(
            t.admit(&repeat, soon),
            Err(Refused::Duplicate),
            "{}",
            repeat.message
        );
        assert_eq!(t.admit(&news, soon), Ok(()), "{}", news.message);
        assert_eq!(t.admit(&repeat, later), Ok(()), "{}", repeat.message);
    }
    // Budgets and offerings change by the minute: their events are news again sooner.
    let mut t = Throttle::new();
    let none = || no_compatible_instance_types(ObjectRef::nodepool("np").with_uid("np"));
    assert_eq!(t.admit(&none(), t0), Ok(()));
    assert_eq!(
        t.admit(&none(), t0 + Duration::from_secs(59)),
        Err(Refused::Duplicate)
    );
    assert_eq!(t.admit(&none(), t0 + Duration::from_secs(61)), Ok(()));
}

#[test]
fn expired_keys_are_swept() {
    let mut t = Throttle::new();
    let t0 = Instant::now();
    for i in 0..2000 {
        let at = t0 + Duration::from_secs(i as u64);
        let _ = t.admit(&evicted(pod(i), "drifted"), at);
    }
    // Only keys younger than two minutes (and those since the last sweep) are kept.
    assert!(t.remembered() < 1100, "{}", t.remembered());
}

#[test]
fn recorded_sinks_pass_on_what_the_throttle_admits() {
    let memory = Arc::new(MemoryEvents::new());
    let sink = Recorded::new(memory.clone());
    for i in 0..100 {
        sink.publish(nominated(pod(i), "default-a"));
        sink.publish(evicted(pod(i), "drifted"));
        sink.publish(evicted(pod(i), "drifted"));
    }
    assert_eq!(memory.with_reason("Nominated").len(), 10);
    assert_eq!(memory.with_reason("Evicted").len(), 100);
}

#[tokio::test]
async fn a_full_queue_counts_and_warns_instead_of_dropping_silently() {
    let (client, _state) = nodewright_testkit::api_server::start().await;
    let metrics = Arc::new(Metrics::new());
    let mut loops = Supervisor::new();
    let sink =
        KubeEvents::with_queue(client, "karpenter", 2, &mut loops).with_metrics(metrics.clone());
    // The writer cannot run before this test yields: the queue takes two, drops three.
    for i in 0..5 {
        sink.publish(condition_transitioned(
            ObjectRef::nodeclaim(&format!("nc-{i}")),
            "Ready",
            "False",
            "True",
            "Ready",
            "",
        ));
    }
    let text = metrics.encode();
    assert!(
        text.lines()
            .any(|l| l == "nodewright_events_dropped_total{reason=\"Ready\"} 3"),
        "{text}"
    );
}

#[tokio::test]
async fn the_writer_keeps_up_with_a_burst_of_distinct_events() {
    let (client, state) = nodewright_testkit::api_server::start().await;
    let metrics = Arc::new(Metrics::new());
    let mut loops = Supervisor::new();
    let sink = KubeEvents::new(client, "karpenter", &mut loops).with_metrics(metrics.clone());
    for i in 0..QUEUE {
        sink.publish(evicted(pod(i), "drifted"));
    }
    let posts = || {
        state
            .lock()
            .unwrap()
            .requests
            .iter()
            .filter(|r| r.starts_with("POST "))
            .count()
    };
    for _ in 0..500 {
        if posts() == QUEUE {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(posts(), QUEUE);
    assert!(
        !metrics
            .encode()
            .contains("nodewright_events_dropped_total{")
    );
}
