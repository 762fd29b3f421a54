//! What the loops report: metrics under upstream's names and labels, events with upstream's
//! reasons, nominations that hold a pod on its claim, the drain's deadline deletes, and the
//! requests a disruption replacement carries.

use std::sync::Arc;
use std::time::Duration;

use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_core::cadence::{DisruptionCadence, DisruptionTimings};
use serde_json::json;

use super::termination::initialized_node;
use super::{Harness, pending_pod_json};
use crate::conditions;
use crate::context::Context;
use crate::disruption::{Disruptor, Step};
use crate::events::EventType;
use crate::lifecycle::{Lifecycle, Outcome};
use crate::provisioner::Provisioner;
use crate::state::{Kind, Object, gauges, lock};
use crate::termination::{Progress, Termination};
use crate::write::KubeWriter;

fn claim(h: &Harness, name: &str) -> Option<NodeClaim> {
    match h.api.get(Kind::NodeClaim, name) {
        Some(Object::NodeClaim(c)) => Some(*c),
        _ => None,
    }
}

fn loops(h: &Harness) -> (Provisioner, Lifecycle, Termination, Disruptor) {
    let w: Arc<dyn KubeWriter> = h.api.clone();
    let (m, e) = (h.metrics.clone(), h.events.clone());
    (
        Provisioner::new(&Context {
            writer: w.clone(),
            metrics: m.clone(),
            events: e.clone(),
            ..h.context()
        }),
        Lifecycle::new(&Context {
            writer: w.clone(),
            metrics: m.clone(),
            events: e.clone(),
            ..h.context()
        }),
        Termination::new(&Context {
            writer: w.clone(),
            metrics: m.clone(),
            events: e.clone(),
            ..h.context()
        }),
        Disruptor::new(&Context {
            writer: w,
            metrics: m,
            events: e,
            ..h.context()
        }),
    )
}

/// The line of `metric` (name plus label set) in the OpenMetrics text.
fn sample<'a>(text: &'a str, series: &str) -> Option<&'a str> {
    text.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .map(|l| l[series.len() + 1..].trim())
}

#[tokio::test(start_paused = true)]
async fn provisioning_and_launch_are_counted_and_nominate_the_pod() {
    let h = Harness::new();
    h.nodepool("default", None);
    h.pending_pod("web-1", "1500m");
    h.api.mark_synced();
    let (prov, life, ..) = loops(&h);
    let name = prov.provision().await.unwrap().created[0].clone();

    let text = h.metrics.encode();
    assert_eq!(
        sample(
            &text,
            r#"karpenter_nodeclaims_created_total{reason="provisioned",nodepool="default",min_values_relaxed="false"}"#
        ),
        Some("1"),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"karpenter_scheduler_scheduling_duration_seconds_count{controller="provisioner"}"#
        ),
        Some("1"),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"karpenter_scheduler_unschedulable_pods_count{controller="provisioner"}"#
        ),
        Some("0.0"),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"karpenter_scheduler_queue_depth{controller="provisioner",scheduling_id=""}"#
        ),
        Some("1.0"),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"karpenter_cloudprovider_duration_seconds_count{controller="provisioner",method="GetInstanceTypes",provider="test"}"#
        ),
        Some("1"),
        "{text}"
    );

    let nominated = h.events.with_reason("Nominated");
    assert_eq!(nominated.len(), 1, "{nominated:?}");
    assert_eq!(nominated[0].regarding.kind, "Pod");
    assert_eq!(nominated[0].regarding.name, "web-1");
    assert_eq!(nominated[0].regarding.uid.as_deref(), Some("pod-web-1"));
    assert_eq!(
        nominated[0].message,
        format!("Pod should schedule on: nodeclaim/{name}")
    );

    // Launch and registration: the Create call and the new node are counted.
    life.reconcile_all().await;
    h.claim_joins("n1", &name);
    life.reconcile_all().await;
    let text = h.metrics.encode();
    assert_eq!(
        sample(
            &text,
            r#"karpenter_cloudprovider_duration_seconds_count{controller="nodeclaim.lifecycle",method="Create",provider="test"}"#
        ),
        Some("1"),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"karpenter_nodes_created_total{nodepool="default",zone="us-east-1a"}"#
        ),
        Some("1"),
        "{text}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_pod_nobody_can_place_gets_failed_scheduling() {
    let h = Harness::new();
    h.nodepool("default", None);
    h.pending_pod("huge", "64");
    h.api.mark_synced();
    let (prov, ..) = loops(&h);
    let p = prov.provision().await.unwrap();
    assert!(p.created.is_empty());
    let failed = h.events.with_reason("FailedScheduling");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].event_type, EventType::Warning);
    assert!(failed[0].message.starts_with("Failed to schedule pod, "));
    assert_eq!(
        sample(
            &h.metrics.encode(),
            r#"karpenter_scheduler_unschedulable_pods_count{controller="provisioner"}"#
        ),
        Some("1.0")
    );
}

#[tokio::test(start_paused = true)]
async fn a_pending_pod_the_scheduler_cannot_read_is_counted_as_ignored() {
    let h = Harness::new();
    h.nodepool("default", None);
    h.pending_pod("fine", "1");
    let mut odd = pending_pod_json("odd", "1");
    odd["spec"]["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
        {"nodeSelectorTerms": [{"matchExpressions": [{"key": "team", "operator": "Near", "values": ["a"]}]}]}}});
    h.api.put_value(Kind::Pod, odd);
    h.api.mark_synced();
    let (prov, ..) = loops(&h);
    prov.provision().await.unwrap();
    assert_eq!(
        sample(
            &h.metrics.encode(),
            "karpenter_scheduler_ignored_pods_count"
        ),
        Some("1.0"),
        "{}",
        h.metrics.encode()
    );
}

#[tokio::test(start_paused = true)]
async fn insufficient_capacity_is_an_event_a_disruption_and_a_cloud_error() {
    let h = Harness::new();
    h.nodepool("default", None);
    h.pending_pod("web-1", "1");
    h.api.mark_synced();
    let (prov, life, ..) = loops(&h);
    let name = prov.provision().await.unwrap().created[0].clone();
    h.cloud.set_ice(true);
    assert_eq!(
        life.reconcile_all().await[&name],
        Ok(Outcome::Deleted("insufficient_capacity"))
    );
    let ice = h.events.with_reason("InsufficientCapacityError");
    assert_eq!(ice.len(), 1);
    assert_eq!(ice[0].regarding.kind, "NodeClaim");
    assert_eq!(ice[0].regarding.name, name);
    assert_eq!(ice[0].event_type, EventType::Warning);
    let text = h.metrics.encode();
    assert_eq!(
        sample(
            &text,
            r#"karpenter_nodeclaims_disrupted_total{reason="insufficient_capacity",nodepool="default",capacity_type="",consolidation_policy="WhenEmptyOrUnderutilized",termination_mode="graceful"}"#
        ),
        Some("1"),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"karpenter_cloudprovider_errors_total{controller="nodeclaim.lifecycle",method="Create",provider="test",error="InsufficientCapacityError"}"#
        ),
        Some("1"),
        "{text}"
    );
}

/// A NodePool whose nodes come up with a startup taint (a CNI agent not ready yet).
fn pool_with_startup_taint(h: &Harness) {
    h.nodepool("default", None);
    let Some(Object::NodePool(p)) = h.api.get(Kind::NodePool, "default") else {
        panic!()
    };
    let mut v = serde_json::to_value(*p).unwrap();
    v["spec"]["template"]["spec"]["startupTaints"] =
        json!([{"key": "example.com/agent-not-ready", "effect": "NoSchedule"}]);
    h.api.put_value(Kind::NodePool, v);
}

#[tokio::test(start_paused = true)]
async fn a_nominated_pod_does_not_launch_a_second_claim() {
    let h = Harness::new();
    pool_with_startup_taint(&h);
    h.pending_pod("web-1", "1500m");
    h.api.mark_synced();
    let (prov, life, ..) = loops(&h);
    let name = prov.provision().await.unwrap().created[0].clone();
    life.reconcile_all().await;
    h.claim_joins("n1", &name);
    life.reconcile_all().await;
    // Registered, still carrying its startup taint: kube-scheduler cannot bind the pod yet,
    // and to a fresh solve the node looks closed to it.
    let conds = claim(&h, &name)
        .unwrap()
        .status
        .unwrap()
        .conditions
        .unwrap();
    assert!(conditions::is_true(&conds, "Registered"));
    assert!(!conditions::is_true(&conds, "Initialized"));

    tokio::time::advance(Duration::from_secs(30)).await;
    let again = prov.provision().await.unwrap();
    assert!(again.created.is_empty(), "{again:?}");
    assert_eq!(h.api.list(Kind::NodeClaim).len(), 1);
    {
        let s = lock(&h.state);
        assert_eq!(
            s.nominated_claim("default/web-1", h.clock.now())
                .and_then(|c| c.metadata.name.clone()),
            Some(name.clone())
        );
    }

    // Once the claim is initialized, the nomination lapses after the window.
    let Some(Object::Node(n)) = h.api.get(Kind::Node, "n1") else {
        panic!()
    };
    let mut n = serde_json::to_value(*n).unwrap();
    n["spec"]["taints"] = json!([]);
    h.api.put_value(Kind::Node, n);
    life.reconcile_all().await;
    assert!(conditions::is_true(
        &claim(&h, &name)
            .unwrap()
            .status
            .unwrap()
            .conditions
            .unwrap(),
        "Initialized"
    ));
    let s = lock(&h.state);
    assert!(s.nominated_claim("default/web-1", h.clock.now()).is_some());
    let later = h.clock.now().plus(Duration::from_secs(21));
    assert!(s.nominated_claim("default/web-1", later).is_none());
}

#[tokio::test(start_paused = true)]
async fn a_pod_outlasting_the_grace_period_is_deleted_to_meet_the_deadline() {
    let h = Harness::new();
    let name = initialized_node(&h).await;
    // The claim carries a terminationGracePeriod of 2 minutes.
    let w: Arc<dyn KubeWriter> = h.api.clone();
    let Some(Object::NodeClaim(c)) = h.api.get(Kind::NodeClaim, &name) else {
        panic!()
    };
    let mut v = serde_json::to_value(*c).unwrap();
    v["spec"]["terminationGracePeriod"] = json!("2m");
    h.api.put_value(Kind::NodeClaim, v);
    let mut pod = super::pending_pod_json("db", "100m");
    pod["metadata"]["labels"] = json!({"app": "db"});
    pod["spec"]["nodeName"] = json!("n1");
    pod["spec"]["terminationGracePeriodSeconds"] = json!(60);
    pod["status"] = json!({"phase": "Running"});
    h.api.put_value(Kind::Pod, pod);
    // A PDB that never allows the eviction.
    h.api.put_value(
        Kind::Pdb,
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "db", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "db"}}, "maxUnavailable": 0},
            "status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}}),
    );
    let (_, life, term, _) = loops(&h);
    w.delete_nodeclaim(&name).await.unwrap();
    life.reconcile_all().await; // stamps the deadline and deletes the node
    life.reconcile_all().await;

    let r = term.reconcile_all().await;
    let Ok(Progress::Draining {
        blocked, deleted, ..
    }) = &r["n1"]
    else {
        panic!("{r:?}")
    };
    assert_eq!(blocked, &vec!["default/db".to_string()]);
    assert!(deleted.is_empty());
    assert!(!h.events.with_reason("FailedDraining").is_empty());
    assert!(
        !h.events
            .with_reason("TerminationGracePeriodExpiring")
            .is_empty()
    );

    // 61 s later the pod's own 60 s no longer fit before the deadline: it is deleted with
    // what is left (59 s), bypassing the PDB.
    tokio::time::advance(Duration::from_secs(61)).await;
    let r = term.reconcile_all().await;
    let Ok(Progress::Draining { deleted, .. }) = &r["n1"] else {
        panic!("{r:?}")
    };
    assert_eq!(deleted, &vec!["default/db".to_string()]);
    assert!(
        h.api
            .log()
            .iter()
            .any(|l| l == "delete-pod Pod default/db grace=59"),
        "{:?}",
        h.api.log()
    );
    let disrupted = h.events.with_reason("Disrupted");
    assert_eq!(disrupted.len(), 1);
    assert!(
        disrupted[0].message.contains(
            "The pod was granted 59 seconds of grace-period of its 60 terminationGracePeriodSeconds"
        ),
        "{}",
        disrupted[0].message
    );

    // The drain is complete: the instance goes, then the finalizer.
    assert_eq!(term.reconcile_all().await["n1"], Ok(Progress::Terminating));
    assert_eq!(term.reconcile_all().await["n1"], Ok(Progress::Done));
    let text = h.metrics.encode();
    assert_eq!(
        sample(
            &text,
            r#"karpenter_pods_eviction_requests_total{code="429"}"#
        ),
        Some("1"),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"karpenter_nodes_terminated_total{nodepool="default",zone="us-east-1a"}"#
        ),
        Some("1"),
        "{text}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_replacement_carries_its_pods_requests_and_the_disruption_is_reported() {
    let h = Harness::new();
    let name = initialized_node(&h).await;
    h.bind("web", "n1");
    h.set_condition(&name, "Drifted", "NodePoolDrifted").await;

    let (_, life, _, d) = loops(&h);
    let mut cadence = DisruptionCadence::new(DisruptionTimings::default(), h.clock.now());
    assert_eq!(d.step(&mut cadence).await, Step::Started(1));
    let replacement = d.running()[0].replacements[0].clone();
    let requests = claim(&h, &replacement)
        .unwrap()
        .spec
        .resources
        .unwrap()
        .requests
        .unwrap();
    // The bound pod asks for 1 CPU and 1Gi.
    assert_eq!(requests["cpu"].text(), "1");
    assert_eq!(requests["memory"].text(), "1Gi");
    assert_eq!(requests["pods"].text(), "1");

    let launching = h.events.with_reason("DisruptionLaunching");
    assert_eq!(launching.len(), 1);
    assert_eq!(launching[0].regarding.name, replacement);
    assert_eq!(launching[0].message, "Launching NodeClaim: Drifted");

    tokio::time::advance(Duration::from_secs(1)).await;
    d.step(&mut cadence).await;
    assert!(
        !h.events
            .with_reason("DisruptionWaitingReadiness")
            .is_empty()
    );

    life.reconcile_all().await;
    h.claim_joins("n2", &replacement);
    life.reconcile_all().await;
    tokio::time::advance(Duration::from_secs(1)).await;
    d.step(&mut cadence).await;
    let terminating = h.events.with_reason("DisruptionTerminating");
    let kinds: Vec<&str> = terminating
        .iter()
        .map(|e| e.regarding.kind.as_str())
        .collect();
    assert_eq!(kinds, vec!["Node", "NodeClaim"]);
    assert_eq!(terminating[0].message, "Disrupting Node: Drifted");

    let text = h.metrics.encode();
    assert_eq!(
        sample(
            &text,
            r#"karpenter_voluntary_disruption_decisions_total{decision="replace",reason="drifted",consolidation_type=""}"#
        ),
        Some("1"),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"karpenter_nodeclaims_created_total{reason="drifted",nodepool="default",min_values_relaxed="false"}"#
        ),
        Some("1"),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"karpenter_nodeclaims_disrupted_total{reason="drifted",nodepool="default",capacity_type="on-demand",consolidation_policy="WhenEmptyOrUnderutilized",termination_mode="graceful"}"#
        ),
        Some("1"),
        "{text}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_node_a_pdb_protects_is_reported_blocked() {
    let h = Harness::new();
    let name = initialized_node(&h).await;
    let mut pod = super::pending_pod_json("db", "100m");
    pod["metadata"]["labels"] = json!({"app": "db"});
    pod["spec"]["nodeName"] = json!("n1");
    pod["status"] = json!({"phase": "Running"});
    h.api.put_value(Kind::Pod, pod);
    h.api.put_value(
        Kind::Pdb,
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "db", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "db"}}, "maxUnavailable": 0},
            "status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}}),
    );
    let (.., d) = loops(&h);
    let mut cadence = DisruptionCadence::new(DisruptionTimings::default(), h.clock.now());
    assert_eq!(d.step(&mut cadence).await, Step::Idle);
    let blocked = h.events.with_reason("DisruptionBlocked");
    let on: Vec<(&str, &str)> = blocked
        .iter()
        .map(|e| (e.regarding.kind.as_str(), e.regarding.name.as_str()))
        .collect();
    assert_eq!(on, vec![("Node", "n1"), ("NodeClaim", name.as_str())]);
    assert!(blocked[0].message.contains("PDB"), "{}", blocked[0].message);
    let text = h.metrics.encode();
    assert!(
        text.lines().any(|l| l.starts_with(
            r#"karpenter_voluntary_disruption_decision_evaluation_duration_seconds_count{reason="underutilized",consolidation_type="single"}"#
        )),
        "{text}"
    );
}

#[tokio::test(start_paused = true)]
async fn cluster_gauges_follow_the_state() {
    let h = Harness::new();
    initialized_node(&h).await;
    h.bind("web", "n1");
    gauges::set_all(&lock(&h.state), &h.metrics);
    let text = h.metrics.encode();
    let requests = text
        .lines()
        .find(|l| {
            l.starts_with("karpenter_nodes_total_pod_requests{")
                && l.contains(r#"node_name="n1""#)
                && l.contains(r#"resource_type="cpu""#)
        })
        .unwrap_or_else(|| panic!("{text}"));
    assert!(requests.ends_with(" 1.0"), "{requests}");
    assert!(
        text.lines().any(|l| l.starts_with("karpenter_pods_state{")
            && l.contains(r#"name="web""#)
            && l.contains(r#"nodepool="default""#)),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"karpenter_nodepools_usage{resource_type="nodes",nodepool="default"}"#
        ),
        Some("1.0"),
        "{text}"
    );
}

#[tokio::test(start_paused = true)]
async fn namespace_labels_reach_the_snapshot() {
    let h = Harness::new();
    h.api.put_value(
        Kind::Namespace,
        json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "team-a", "labels": {"team": "a"},
                "annotations": {"big": "x"}},
            "spec": {"finalizers": ["kubernetes"]}}),
    );
    h.api.mark_synced();
    let s = lock(&h.state);
    assert!(s.synced());
    let ns = &s.namespaces["team-a"];
    assert!(ns.metadata.annotations.is_none() && ns.spec.is_none());
    let (snap, _) = s.snapshot(h.clock.now(), Default::default());
    assert_eq!(snap.namespaces["team-a"]["team"], "a");
}

#[tokio::test(start_paused = true)]
async fn startup_is_observed_once_for_pods_seen_pending() {
    let h = Harness::new();
    h.pending_pod("web-1", "1");
    // Running before anything watched it: not ours to time.
    h.bind("old", "n1");
    let mut startup = gauges::PodStartup::default();
    startup.observe(&lock(&h.state), &h.metrics);
    let mut p = super::pending_pod_json("web-1", "1");
    p["spec"]["nodeName"] = json!("n1");
    p["status"] = json!({"phase": "Running", "conditions": [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2024-06-01T00:00:05Z"},
        {"type": "Ready", "status": "True", "lastTransitionTime": "2024-06-01T00:00:40Z"}]});
    h.api.put_value(Kind::Pod, p);
    startup.observe(&lock(&h.state), &h.metrics);
    startup.observe(&lock(&h.state), &h.metrics);
    let text = h.metrics.encode();
    assert_eq!(
        sample(&text, "karpenter_pods_startup_duration_seconds_count"),
        Some("1"),
        "{text}"
    );
    assert_eq!(
        sample(&text, "karpenter_pods_startup_duration_seconds_sum"),
        Some("40.0"),
        "{text}"
    );
    assert_eq!(
        sample(&text, "karpenter_pods_bound_duration_seconds_sum"),
        Some("5.0"),
        "{text}"
    );
}

/// The provisioner's first look at a pod and its first decision time the pod metrics: the
/// pod is undecided from the first until the second, then waits to be bound and started from
/// when the provisioner found it room; the histograms take those waits when they end.
#[tokio::test(start_paused = true)]
async fn provisioning_waits_count_from_when_the_provisioner_found_the_pod_room() {
    use nodewright_core::cadence::BatchWindow;

    use crate::provisioner::Trigger;
    use crate::state::ages::set_pod_waits;

    let h = Harness::new();
    h.nodepool("default", None);
    h.pending_pod("web-1", "1");
    h.api.mark_synced();
    let t0 = h.clock.now();
    let at = |secs: i64| nodewright_core::time::Timestamp(t0.0 + secs * 1000);
    let mut trigger = Trigger::new(BatchWindow::default());
    let mut startup = gauges::PodStartup::default();
    let waits = |startup: &gauges::PodStartup, secs: i64| {
        set_pod_waits(&lock(&h.state), &h.metrics, at(secs), startup.waiting());
        let text = h.metrics.encode();
        let row = r#"{name="web-1",namespace="default"}"#;
        [
            "karpenter_pods_provisioning_scheduling_undecided_time_seconds",
            "karpenter_pods_provisioning_unbound_time_seconds",
            "karpenter_pods_provisioning_unstarted_time_seconds",
        ]
        .map(|f| sample(&text, &format!("{f}{row}")).map(str::to_owned))
    };
    assert!(!trigger.due(&h.state, h.clock.now()));
    startup.observe(&lock(&h.state), &h.metrics);
    assert_eq!(waits(&startup, 3), [Some("3.0".into()), None, None]);

    tokio::time::advance(Duration::from_secs(1)).await;
    assert!(trigger.due(&h.state, h.clock.now()));
    h.provisioner().pass(&mut trigger).await.unwrap();
    assert_eq!(
        waits(&startup, 4),
        [None, Some("3.0".into()), Some("3.0".into())]
    );

    let mut p = pending_pod_json("web-1", "1");
    p["spec"]["nodeName"] = json!("n1");
    p["status"] = json!({"phase": "Running", "conditions": [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": crate::clock::rfc3339(at(5))},
        {"type": "Ready", "status": "True", "lastTransitionTime": crate::clock::rfc3339(at(9))}]});
    h.api.put_value(Kind::Pod, p);
    startup.observe(&lock(&h.state), &h.metrics);
    assert_eq!(waits(&startup, 10), [None, None, None]);
    let text = h.metrics.encode();
    for (series, want) in [
        (
            "karpenter_pods_provisioning_bound_duration_seconds_sum",
            "4.0",
        ),
        (
            "karpenter_pods_provisioning_startup_duration_seconds_sum",
            "8.0",
        ),
    ] {
        assert_eq!(sample(&text, series), Some(want), "{series} in {text}");
    }
}

#[tokio::test(start_paused = true)]
async fn pod_affinity_finds_its_peers_through_namespace_labels() {
    let h = Harness::new();
    let name = initialized_node(&h).await;
    h.api.put_value(
        Kind::Namespace,
        json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "team-a", "labels": {"team": "a"}}}),
    );
    let mut db = super::pending_pod_json("db", "100m");
    db["metadata"]["namespace"] = json!("team-a");
    db["metadata"]["labels"] = json!({"app": "db"});
    db["spec"]["nodeName"] = json!("n1");
    db["status"] = json!({"phase": "Running"});
    h.api.put_value(Kind::Pod, db);
    let mut web = super::pending_pod_json("web", "500m");
    web["spec"]["affinity"] = json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}},
         "namespaceSelector": {"matchLabels": {"team": "a"}},
         "topologyKey": "kubernetes.io/hostname"}]}});
    h.api.put_value(Kind::Pod, web);

    let (prov, ..) = loops(&h);
    let p = prov.provision().await.unwrap();
    assert!(p.created.is_empty() && p.unplaced.is_empty(), "{p:?}");
    let nominated: Vec<_> = h
        .events
        .with_reason("Nominated")
        .into_iter()
        .filter(|e| e.regarding.name == "web")
        .collect();
    assert_eq!(nominated.len(), 1, "{nominated:?}");
    assert_eq!(
        nominated[0].message,
        format!("Pod should schedule on: nodeclaim/{name}, node/n1")
    );
}
