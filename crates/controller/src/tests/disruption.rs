//! Disruption: plan, wait the validation delay, re-check, act; replacements before deletion.

use std::time::Duration;

use nodewright_core::cadence::{DisruptionCadence, DisruptionTimings};
use serde_json::json;

use super::Harness;
use super::termination::initialized_node;
use crate::conditions;
use crate::disruption::deadline::SearchTimeouts;
use crate::disruption::{Disruptor, Running, Step};
use crate::state::{Kind, Object};
use crate::write::KubeWriter;

fn claim(h: &Harness, name: &str) -> Option<nodewright_api::v1::nodeclaim::NodeClaim> {
    match h.api.get(Kind::NodeClaim, name) {
        Some(Object::NodeClaim(c)) => Some(*c),
        _ => None,
    }
}

fn tainted(h: &Harness, node: &str) -> bool {
    let Some(Object::Node(n)) = h.api.get(Kind::Node, node) else {
        return false;
    };
    n.spec
        .and_then(|s| s.taints)
        .unwrap_or_default()
        .iter()
        .any(|t| t.key == "karpenter.sh/disrupted")
}

/// Whether claim `name`, which must exist, is being deleted.
fn deleting(h: &Harness, name: &str) -> bool {
    let c = claim(h, name).unwrap_or_else(|| panic!("no NodeClaim {name}"));
    c.metadata.deletion_timestamp.is_some()
}

/// The disruptor and its cadence, starting now.
fn disruptor(h: &Harness) -> (Disruptor, DisruptionCadence) {
    let cadence = DisruptionCadence::new(DisruptionTimings::default(), h.clock.now());
    (h.disruptor(), cadence)
}

/// The objects told an event of `reason`, with its message, sorted.
fn told(h: &Harness, reason: &str) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = h
        .events
        .with_reason(reason)
        .into_iter()
        .map(|e| (e.regarding.name, e.message))
        .collect();
    v.sort();
    v
}

/// A running, Ready pod of `cpu` bound to `node`.
fn running_pod(name: &str, cpu: &str, node: &str) -> serde_json::Value {
    let mut p = super::pending_pod_json(name, cpu);
    p["spec"]["nodeName"] = json!(node);
    p["status"] = json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]});
    p
}

#[tokio::test(start_paused = true)]
async fn an_empty_node_is_deleted_after_the_validation_delay() {
    let h = Harness::new();
    let name = initialized_node(&h).await;
    let (d, mut cadence) = disruptor(&h);
    assert_eq!(d.step(&mut cadence).await, Step::Planned(1));
    // Nothing happens before the delay.
    tokio::time::advance(Duration::from_secs(14)).await;
    assert_eq!(d.step(&mut cadence).await, Step::Idle);
    assert!(!tainted(&h, "n1"));
    assert!(!deleting(&h, &name));

    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(d.step(&mut cadence).await, Step::Started(1));
    assert!(tainted(&h, "n1"));
    let c = claim(&h, &name).unwrap();
    let conds = c.status.unwrap().conditions.unwrap();
    let reason = conditions::find(&conds, "DisruptionReason").unwrap();
    assert_eq!(
        (reason.status.as_str(), reason.reason.as_deref()),
        ("True", Some("Empty"))
    );
    // No replacements: the next wake deletes the claim.
    d.step(&mut cadence).await;
    assert!(deleting(&h, &name));
}

#[tokio::test(start_paused = true)]
async fn a_command_the_cluster_outgrew_is_rejected_on_recheck() {
    let h = Harness::new();
    let name = initialized_node(&h).await;
    let (d, mut cadence) = disruptor(&h);
    assert_eq!(d.step(&mut cadence).await, Step::Planned(1));
    // A pod lands on the node during the delay.
    h.bind("late", "n1");
    tokio::time::advance(Duration::from_secs(15)).await;
    let Step::Rejected(why) = d.step(&mut cadence).await else {
        panic!()
    };
    assert_eq!(why.len(), 1);
    assert!(!tainted(&h, "n1"));
    assert!(!deleting(&h, &name));
}

#[tokio::test(start_paused = true)]
async fn a_drifted_node_is_replaced_before_it_is_deleted() {
    let h = Harness::new();
    let name = initialized_node(&h).await;
    h.bind("web", "n1");
    drift(&h, &name).await;

    let (d, mut cadence) = disruptor(&h);
    let life = h.lifecycle();
    assert_eq!(d.step(&mut cadence).await, Step::Started(1));
    assert!(tainted(&h, "n1"));
    let running = d.running();
    assert_eq!(running.len(), 1);
    let replacement = running[0].replacements[0].clone();
    assert!(claim(&h, &replacement).is_some());

    // Until the replacement is initialized the old claim stays.
    tokio::time::advance(Duration::from_secs(1)).await;
    d.step(&mut cadence).await;
    assert!(!deleting(&h, &name));

    life.reconcile_all().await;
    h.claim_joins("n2", &replacement);
    life.reconcile_all().await;
    assert!(conditions::is_true(
        &claim(&h, &replacement)
            .unwrap()
            .status
            .unwrap()
            .conditions
            .unwrap(),
        "Initialized"
    ));
    tokio::time::advance(Duration::from_secs(1)).await;
    d.step(&mut cadence).await;
    assert!(deleting(&h, &name));
    assert!(d.running().is_empty());
    // Its one pod's disruption is initiated with the claim's deletion.
    let initiated = metric_lines(&h)
        .into_iter()
        .find(|l| l.starts_with("karpenter_pods_disruption_initiated_total{"));
    assert_eq!(
        initiated.as_deref(),
        Some(
            r#"karpenter_pods_disruption_initiated_total{reason="drifted",nodepool="default",capacity_type="on-demand",consolidation_policy="WhenEmptyOrUnderutilized",termination_mode="graceful"} 1"#
        ),
        "{}",
        h.metrics.encode()
    );
}

#[tokio::test(start_paused = true)]
async fn a_lost_replacement_rolls_the_command_back() {
    let h = Harness::new();
    let name = initialized_node(&h).await;
    h.bind("web", "n1");
    drift(&h, &name).await;
    let (d, mut cadence) = disruptor(&h);
    d.step(&mut cadence).await;
    let replacement = d.running()[0].replacements[0].clone();
    // The replacement fails (e.g. insufficient capacity deletes it).
    h.api.delete_nodeclaim(&replacement).await.unwrap();
    let finished = d.progress().await.unwrap();
    assert!(finished[0].starts_with("rolled back"), "{finished:?}");
    assert!(!tainted(&h, "n1"));
    let conds = claim(&h, &name)
        .unwrap()
        .status
        .unwrap()
        .conditions
        .unwrap();
    assert!(conditions::find(&conds, "DisruptionReason").is_none());
    assert!(!deleting(&h, &name));
    assert!(
        metric_lines(&h).contains(
            &r#"karpenter_voluntary_disruption_queue_failures_total{decision="replace",reason="drifted",consolidation_type=""} 1"#
                .to_string()
        ),
        "{}",
        h.metrics.encode()
    );
}

fn metric_lines(h: &Harness) -> Vec<String> {
    h.metrics.encode().lines().map(str::to_string).collect()
}

#[tokio::test(start_paused = true)]
async fn a_completed_command_is_not_a_queue_failure() {
    let h = Harness::new();
    initialized_node(&h).await;
    let (d, mut cadence) = disruptor(&h);
    assert_eq!(d.step(&mut cadence).await, Step::Planned(1));
    tokio::time::advance(Duration::from_secs(15)).await;
    assert_eq!(d.step(&mut cadence).await, Step::Started(1));
    d.step(&mut cadence).await;
    assert!(d.running().is_empty());
    assert!(
        !metric_lines(&h)
            .iter()
            .any(|l| l.starts_with("karpenter_voluntary_disruption_queue_failures_total{")),
        "{}",
        h.metrics.encode()
    );
    // The empty node's price is what the command saved.
    let saved = metric_lines(&h)
        .iter()
        .find_map(|l| {
            l.strip_prefix(r#"nodewright_consolidation_savings_dollars_per_hour_total{nodepool="default",consolidation_type="empty"} "#)
                .map(|v| v.parse::<f64>().unwrap())
        });
    assert!(saved.is_some_and(|v| v > 0.0), "{}", h.metrics.encode());
}

#[tokio::test(start_paused = true)]
async fn each_round_reports_the_budgets_allowed_disruptions_per_pool_and_reason() {
    let h = Harness::new();
    initialized_node(&h).await;
    // A busy node: the rounds plan nothing, so each wake is a planning round.
    h.bind("web", "n1");
    // Ten nodes at a time, none for drift; a second pool with a percentage.
    let mut v = h.api.get(Kind::NodePool, "default").unwrap().to_value();
    v["spec"]["disruption"]["budgets"] =
        json!([{"nodes": "10"}, {"nodes": "0", "reasons": ["Drifted"]}]);
    h.api.put_value(Kind::NodePool, v.clone());
    let mut other = v;
    other["metadata"]["name"] = json!("batch");
    other["metadata"]["uid"] = json!("np-batch");
    other["spec"]["disruption"]["budgets"] = json!([{"nodes": "50%"}]);
    h.api.put_value(Kind::NodePool, other);

    let (d, mut cadence) = disruptor(&h);
    d.step(&mut cadence).await;
    let lines = metric_lines(&h);
    for (pool, reason, n) in [
        ("default", "empty", "10.0"),
        ("default", "drifted", "0.0"),
        ("default", "underutilized", "10.0"),
        // No nodes: half of nothing.
        ("batch", "empty", "0.0"),
        ("batch", "underutilized", "0.0"),
    ] {
        let want = format!(
            r#"karpenter_nodepools_allowed_disruptions{{nodepool="{pool}",reason="{reason}"}} {n}"#
        );
        assert!(lines.contains(&want), "{want} in {}", h.metrics.encode());
    }
    // Each pool and reason its budgets block is announced on the pool, if the pool has nodes:
    // `batch`, blocked for every reason by half of nothing, is not told (as upstream).
    let mut blocked: Vec<(String, String)> = h
        .events
        .with_reason("DisruptionBlocked")
        .into_iter()
        .filter(|e| e.regarding.kind == "NodePool")
        .map(|e| (e.regarding.name, e.message))
        .collect();
    blocked.sort();
    let message = |r: &str| {
        format!("No allowed disruptions for disruption reason {r} due to blocking budget")
    };
    assert_eq!(blocked, [("default".to_string(), message("Drifted"))]);

    // The pool goes away: so do its series.
    h.api.delete(Kind::NodePool, "batch").unwrap();
    tokio::time::advance(Duration::from_secs(60)).await;
    d.step(&mut cadence).await;
    assert!(
        !metric_lines(&h)
            .iter()
            .any(|l| l.contains(r#"nodepool="batch""#)
                && l.starts_with("karpenter_nodepools_allowed")),
        "{}",
        h.metrics.encode()
    );
}

/// A pod's `do-not-disrupt` that is neither "true" nor a positive duration is ignored, and
/// said so on the pod; a valid one is not mentioned.
#[tokio::test(start_paused = true)]
async fn an_invalid_do_not_disrupt_value_is_reported_on_its_pod() {
    let h = Harness::new();
    initialized_node(&h).await;
    for (pod, value) in [("web", "soon"), ("db", "true"), ("job", "-5m")] {
        let mut p = super::pending_pod_json(pod, "100m");
        p["metadata"]["annotations"] = json!({"karpenter.sh/do-not-disrupt": value});
        p["spec"]["nodeName"] = json!("n1");
        p["status"] = json!({"phase": "Running"});
        h.api.put_value(Kind::Pod, p);
    }
    let (d, mut cadence) = disruptor(&h);
    d.step(&mut cadence).await;
    let invalid = told(&h, "InvalidDoNotDisruptAnnotation");
    let message = |v: &str| {
        format!(
            "Invalid karpenter.sh/do-not-disrupt annotation value \"{v}\", ignoring annotation. Use 'true' or a duration like '5m', '1h'"
        )
    };
    assert_eq!(
        invalid,
        [
            ("job".to_string(), message("-5m")),
            ("web".to_string(), message("soon")),
        ]
    );
}

/// Planning rounds so far, from the evaluation histogram of single-node consolidation.
fn rounds(h: &Harness) -> u64 {
    let prefix = r#"karpenter_voluntary_disruption_decision_evaluation_duration_seconds_count{reason="underutilized",consolidation_type="single"} "#;
    metric_lines(h)
        .iter()
        .find_map(|l| l.strip_prefix(prefix).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

#[tokio::test(start_paused = true)]
async fn rounds_that_found_nothing_are_skipped_until_the_cluster_changes() {
    let h = Harness::new();
    initialized_node(&h).await;
    // A busy node that nothing can replace: the round finds nothing.
    h.bind("web", "n1");
    let (d, mut cadence) = disruptor(&h);
    assert_eq!(d.step(&mut cadence).await, Step::Idle);
    assert_eq!(rounds(&h), 1);
    // Nothing changed: the next rounds do not plan.
    for _ in 0..3 {
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(d.step(&mut cadence).await, Step::Idle);
    }
    assert_eq!(rounds(&h), 1);
    // A pod arrives: the next round plans again.
    h.bind("api", "n1");
    tokio::time::advance(Duration::from_secs(10)).await;
    d.step(&mut cadence).await;
    assert_eq!(rounds(&h), 2);
    // Five minutes without a change and the verdict lapses on its own.
    tokio::time::advance(Duration::from_secs(300)).await;
    d.step(&mut cadence).await;
    assert_eq!(rounds(&h), 3);
}

/// A round takes what an unchanged node's labels say (selection's facts) from the round
/// before, as the simulator's rounds do.
#[tokio::test(start_paused = true)]
async fn a_round_takes_an_unchanged_nodes_facts_from_the_last_round() {
    let h = Harness::new();
    initialized_node(&h).await;
    h.bind("web", "n1");
    let (d, mut cadence) = disruptor(&h);
    d.step(&mut cadence).await;
    assert_eq!(d.kept_facts(), (0, 1));
    // A pod arrives; the Node itself is as it was.
    h.bind("api", "n1");
    tokio::time::advance(Duration::from_secs(10)).await;
    d.step(&mut cadence).await;
    assert_eq!(rounds(&h), 2);
    assert_eq!(d.kept_facts(), (1, 1));
}

/// Marks the claim `name` drifted.
async fn drift(h: &Harness, name: &str) {
    h.set_condition(name, "Drifted", "NodePoolDrifted").await;
}

#[tokio::test(start_paused = true)]
async fn the_next_command_starts_while_an_earlier_one_waits_for_its_replacement() {
    let h = Harness::new();
    let first = initialized_node(&h).await;
    h.bind("web", "n1");
    // A second node: a pod that does not fit next to `web`.
    h.pending_pod("big", "3");
    let name = h.provisioner().provision().await.unwrap().created[0].clone();
    let life = h.lifecycle();
    life.reconcile_all().await;
    h.claim_joins("n2", &name);
    life.reconcile_all().await;
    h.api.put_value(Kind::Pod, running_pod("big", "3", "n2"));
    // Both drifted; the budget allows both at once.
    let mut v = h.api.get(Kind::NodePool, "default").unwrap().to_value();
    v["spec"]["disruption"]["budgets"] = json!([{"nodes": "2"}]);
    h.api.put_value(Kind::NodePool, v);
    drift(&h, &first).await;
    drift(&h, &name).await;

    let (d, mut cadence) = disruptor(&h);
    assert_eq!(d.step(&mut cadence).await, Step::Started(1));
    assert_eq!(d.running().len(), 1);
    let target = d.running()[0].command.targets[0].node.clone();
    // The first command's replacement is not initialized yet; its target is not offered
    // again, so the next round drifts the other node.
    assert_eq!(d.step(&mut cadence).await, Step::Started(1));
    let running = d.running();
    assert_eq!(running.len(), 2);
    let other = running[1].command.targets[0].node.clone();
    assert_ne!(target, other);
    assert!(tainted(&h, "n1") && tainted(&h, "n2"));
}

/// A running pod of 1 cpu on `node` holding host port 8080: two such pods never share a node.
fn port_pod(name: &str, node: &str) -> serde_json::Value {
    let mut p = running_pod(name, "1", node);
    p["spec"]["containers"][0]["ports"] = json!([{"containerPort": 8080, "hostPort": 8080}]);
    p
}

/// Nodes `n1` and `n2`, each launched for a pod of `cpu` holding host port 8080 (so the two
/// never share a node); those pods are gone again.
async fn two_nodes(h: &Harness, cpu: &str) {
    h.nodepool("default", None);
    for name in ["big-a", "big-b"] {
        let mut p = super::pending_pod_json(name, cpu);
        p["spec"]["containers"][0]["ports"] = json!([{"containerPort": 8080, "hostPort": 8080}]);
        h.api.put_value(Kind::Pod, p);
    }
    h.api.mark_synced();
    let created = h.provisioner().provision().await.unwrap().created;
    assert_eq!(created.len(), 2, "{created:?}");
    let life = h.lifecycle();
    life.reconcile_all().await;
    for (node, name) in ["n1", "n2"].into_iter().zip(&created) {
        h.claim_joins(node, name);
    }
    life.reconcile_all().await;
    h.api.delete(Kind::Pod, "default/big-a").unwrap();
    h.api.delete(Kind::Pod, "default/big-b").unwrap();
}

/// Two empty nodes under the default 10% budget go one command at a time. The round right
/// after the first starts finds the budget taken by its target; once that target's instance
/// is terminating it leaves the budget, and the loop plans the second at its next wake, not a
/// poll interval later.
#[tokio::test(start_paused = true)]
async fn the_next_empty_node_is_planned_as_soon_as_the_last_one_leaves_the_budget() {
    let h = Harness::new();
    two_nodes(&h, "5").await;
    // Upstream's default budget: 10% of two nodes is one.
    let Some(Object::NodePool(np)) = h.api.get(Kind::NodePool, "default") else {
        panic!("no NodePool")
    };
    let mut np = serde_json::to_value(*np).unwrap();
    np["spec"]["disruption"]["budgets"] = json!([{"nodes": "10%"}]);
    h.api.put_value(Kind::NodePool, np);
    let (d, mut cadence) = disruptor(&h);
    assert_eq!(d.step(&mut cadence).await, Step::Planned(1));
    tokio::time::advance(Duration::from_secs(15)).await;
    assert_eq!(d.step(&mut cadence).await, Step::Started(1));
    let first = d.running()[0].command.targets[0].nodeclaim.clone();
    // The claim is deleted, and its node still counts against the budget: nothing to plan.
    assert_eq!(d.step(&mut cadence).await, Step::Idle);
    assert!(deleting(&h, &first));
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(d.step(&mut cadence).await, Step::Idle);
    // The termination controller has drained it and started terminating its instance.
    h.set_condition(&first, "InstanceTerminating", "InstanceTerminating")
        .await;
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(d.step(&mut cadence).await, Step::Planned(1));
    tokio::time::advance(Duration::from_secs(15)).await;
    assert_eq!(d.step(&mut cadence).await, Step::Started(1));
    let second = &d.running()[0].command.targets[0].nodeclaim;
    assert_ne!(second, &first);
}

/// Two m5.2xlarge nodes, each left with one pod that fits a smaller node and holds host port
/// 8080, and the disruptor once it has started replacing the first.
async fn first_replace_started(h: &Harness) -> (Disruptor, DisruptionCadence, Running) {
    two_nodes(h, "5").await;
    // What is left on each node fits an m5.large, and the two pods cannot share one.
    h.api.put_value(Kind::Pod, port_pod("a", "n1"));
    h.api.put_value(Kind::Pod, port_pod("b", "n2"));

    let (d, mut cadence) = disruptor(h);
    assert_eq!(d.step(&mut cadence).await, Step::Planned(1));
    tokio::time::advance(Duration::from_secs(15)).await;
    assert_eq!(d.step(&mut cadence).await, Step::Started(1));
    let first = d.running()[0].clone();
    (d, cadence, first)
}

/// The provisioner and disruption keep one compile of the NodePools between them, as `run`
/// wires them: the pass that launched the nodes compiled the catalog, and the round that plans
/// a replace and its re-check take that compile instead of making their own.
#[tokio::test(start_paused = true)]
async fn rounds_and_rechecks_reuse_the_provisioners_nodepool_compile() {
    let h = Harness::new();
    let (_, _, first) = first_replace_started(&h).await;
    assert_eq!(first.command.decision.as_str(), "replace");
    let (reused, made) = h.compiles.lock().unwrap().pool_counts();
    assert_eq!(made, 1, "compiled once, by the provisioning pass");
    assert!(reused >= 2, "the round and the re-check reuse it: {reused}");
}

/// A consolidation search out of time keeps what it found by then (here nothing: no time at
/// all) and is counted by its type; such a round has not shown there is nothing to do, so the
/// next one searches again. With upstream's limits the same cluster is consolidated.
#[tokio::test(start_paused = true)]
async fn consolidation_searches_out_of_time_are_counted_by_type() {
    let h = Harness::new();
    two_nodes(&h, "5").await;
    h.api.put_value(Kind::Pod, port_pod("a", "n1"));
    h.api.put_value(Kind::Pod, port_pod("b", "n2"));
    let no_time = SearchTimeouts {
        multi_node: Duration::ZERO,
        single_node: Duration::ZERO,
    };
    let d = h.disruptor().with_timeouts(no_time);
    let mut cadence = DisruptionCadence::new(DisruptionTimings::default(), h.clock.now());
    assert_eq!(d.step(&mut cadence).await, Step::Idle);
    let timeouts = |h: &Harness, t: &str| {
        let prefix = format!(
            r#"karpenter_voluntary_disruption_consolidation_timeouts_total{{consolidation_type="{t}"}} "#
        );
        metric_lines(h)
            .iter()
            .find_map(|l| l.strip_prefix(&prefix).map(str::to_owned))
    };
    assert_eq!(timeouts(&h, "multi").as_deref(), Some("1"));
    assert_eq!(timeouts(&h, "single").as_deref(), Some("1"));
    tokio::time::advance(Duration::from_secs(10)).await;
    assert_eq!(d.step(&mut cadence).await, Step::Idle);
    assert_eq!(rounds(&h), 2);
    assert_eq!(timeouts(&h, "single").as_deref(), Some("2"));

    let d = h.disruptor();
    let mut cadence = DisruptionCadence::new(DisruptionTimings::default(), h.clock.now());
    assert_eq!(d.step(&mut cadence).await, Step::Planned(1));
    assert_eq!(timeouts(&h, "single").as_deref(), Some("2"));
}

/// Steps `d` every ten seconds until a round plans something; that round's command count.
async fn next_planned(d: &Disruptor, cadence: &mut DisruptionCadence) -> Option<usize> {
    for _ in 0..3 {
        tokio::time::advance(Duration::from_secs(10)).await;
        match d.step(cadence).await {
            Step::Planned(n) => return Some(n),
            Step::Idle => {}
            other => panic!("{other:?}"),
        }
    }
    None
}

#[tokio::test(start_paused = true)]
async fn a_second_replace_is_planned_while_the_first_replacement_launches() {
    let h = Harness::new();
    let (d, mut cadence, first) = first_replace_started(&h).await;
    assert_eq!(
        first.command.decision.as_str(),
        "replace",
        "{}",
        first.command
    );
    let replacement = &first.replacements[0];
    assert!(
        !claim(&h, replacement)
            .unwrap()
            .status
            .and_then(|s| s.conditions)
            .is_some_and(|c| conditions::is_true(&c, "Initialized"))
    );

    // The replacement is still launching. Its capacity is the first target's pod's, so the
    // other node's pod may not count on it: the next round replaces the other node too.
    assert_eq!(next_planned(&d, &mut cadence).await, Some(1));
    tokio::time::advance(Duration::from_secs(15)).await;
    assert_eq!(d.step(&mut cadence).await, Step::Started(1));
    let running = d.running();
    assert_eq!(running.len(), 2);
    assert_ne!(
        running[0].command.targets[0].node,
        running[1].command.targets[0].node
    );
    assert_eq!(running[1].command.decision.as_str(), "replace");
    assert!(tainted(&h, "n1") && tainted(&h, "n2"));
    // Neither target is deleted before its replacement is initialized.
    for r in &running {
        assert!(!deleting(&h, &r.command.targets[0].nodeclaim));
    }
}

#[tokio::test(start_paused = true)]
async fn a_replacement_stays_reserved_while_its_target_drains() {
    let h = Harness::new();
    let (d, mut cadence, first) = first_replace_started(&h).await;
    let target = first.command.targets[0].clone();
    // The replacement launches, joins and initializes; the next pass deletes the target.
    let life = h.lifecycle();
    life.reconcile_all().await;
    h.claim_joins("n3", &first.replacements[0]);
    life.reconcile_all().await;
    tokio::time::advance(Duration::from_secs(1)).await;
    d.progress().await.unwrap();
    assert!(d.running().is_empty());
    assert!(deleting(&h, &target.nodeclaim));

    // The target's pod has not moved yet, so the empty-looking replacement is its: the other
    // node's pod, which cannot share a node with it, needs a replacement of its own, and the
    // replacement itself is no candidate.
    assert_eq!(next_planned(&d, &mut cadence).await, Some(1));
    tokio::time::advance(Duration::from_secs(15)).await;
    assert_eq!(d.step(&mut cadence).await, Step::Started(1));
    let second = d.running()[0].clone();
    assert_ne!(
        second.command.targets[0].node, target.node,
        "{}",
        second.command
    );
    assert_ne!(second.command.targets[0].node, "n3", "{}", second.command);
    assert_eq!(
        second.command.decision.as_str(),
        "replace",
        "{}",
        second.command
    );
    assert!(d.in_flight().replacements.contains(&first.replacements[0]));

    // Once the target is drained, the replacement is an ordinary node again.
    h.set_condition(
        &target.nodeclaim,
        "InstanceTerminating",
        "InstanceTerminating",
    )
    .await;
    d.progress().await.unwrap();
    assert!(!d.in_flight().replacements.contains(&first.replacements[0]));
}

/// Two m5.xlarge nodes: `n1`'s pod, which fits an m5.large, cannot join `n2`'s, which may not
/// be disrupted, so `n1` is planned to be replaced by an m5.large, the one cheaper type.
/// Before the re-check `n1` takes a pod of 2 cpu more.
async fn replace_planned_then_target_grows(h: &Harness) -> (Disruptor, DisruptionCadence) {
    two_nodes(h, "3").await;
    h.api.put_value(Kind::Pod, port_pod("a", "n1"));
    let mut b = port_pod("b", "n2");
    b["metadata"]["annotations"] = json!({"karpenter.sh/do-not-disrupt": "true"});
    h.api.put_value(Kind::Pod, b);
    let (d, mut cadence) = disruptor(h);
    assert_eq!(d.step(&mut cadence).await, Step::Planned(1));
    h.api.put_value(Kind::Pod, running_pod("extra", "2", "n1"));
    (d, cadence)
}

#[tokio::test(start_paused = true)]
async fn a_replace_whose_pods_now_fit_without_a_new_node_is_rejected_on_recheck() {
    let h = Harness::new();
    let (d, mut cadence) = replace_planned_then_target_grows(&h).await;
    // n2 empties: all of n1's pods now fit there. The planned replacement would only add a
    // node (and no longer holds them); the next round finds the delete.
    h.api.delete(Kind::Pod, "default/b").unwrap();
    tokio::time::advance(Duration::from_secs(15)).await;
    match d.step(&mut cadence).await {
        Step::Rejected(why) => assert!(why[0].contains("without a new node"), "{why:?}"),
        other => panic!("{other:?}"),
    }
    assert!(d.running().is_empty());
    assert!(!tainted(&h, "n1"));
}

#[tokio::test(start_paused = true)]
async fn a_replace_whose_target_outgrew_its_replacement_is_rejected_on_recheck() {
    let h = Harness::new();
    let (d, mut cadence) = replace_planned_then_target_grows(&h).await;
    // n2 fills up too: n1's pods still need a new node, but one bigger than the planned
    // m5.large.
    h.api
        .put_value(Kind::Pod, running_pod("full", "2500m", "n2"));
    tokio::time::advance(Duration::from_secs(15)).await;
    match d.step(&mut cadence).await {
        Step::Rejected(why) => {
            assert!(
                why[0].contains("m5.large is no longer a valid replacement"),
                "{why:?}"
            )
        }
        other => panic!("{other:?}"),
    }
    assert!(d.running().is_empty());
    assert!(!tainted(&h, "n1"));
}

/// A pool with a node whose budgets allow no disruption for any reason is told so once more,
/// with the event that names no reason; every pool and reason has its nodes consuming the
/// budget, and a started command's target consumes it.
#[tokio::test(start_paused = true)]
async fn a_pool_blocked_for_every_reason_is_told_so_and_budgets_show_who_consumes_them() {
    let h = Harness::new();
    initialized_node(&h).await;
    let (d, mut cadence) = disruptor(&h);
    assert_eq!(d.step(&mut cadence).await, Step::Planned(1));
    tokio::time::advance(Duration::from_secs(15)).await;
    assert_eq!(d.step(&mut cadence).await, Step::Started(1));
    // The empty node's command runs: its node consumes the budget of every reason.
    d.plan_round().await.unwrap();
    for reason in ["empty", "drifted", "underutilized"] {
        let want = format!(
            r#"karpenter_nodepools_nodes_consuming_budgets{{nodepool="default",reason="{reason}"}} 1.0"#
        );
        assert!(
            metric_lines(&h).contains(&want),
            "{want} in {}",
            h.metrics.encode()
        );
    }
    let reasonless = |h: &Harness| {
        h.events
            .with_reason("DisruptionBlocked")
            .into_iter()
            .filter(|e| e.message == "No allowed disruptions due to blocking budget")
            .map(|e| (e.regarding.kind, e.regarding.name))
            .collect::<Vec<_>>()
    };
    assert!(reasonless(&h).is_empty());

    let mut v = h.api.get(Kind::NodePool, "default").unwrap().to_value();
    v["spec"]["disruption"]["budgets"] = json!([{"nodes": "0"}]);
    h.api.put_value(Kind::NodePool, v);
    tokio::time::advance(Duration::from_secs(10)).await;
    d.plan_round().await.unwrap();
    assert_eq!(
        reasonless(&h),
        [("NodePool".to_string(), "default".to_string())]
    );
}

/// A pod's `do-not-disrupt` duration is explained on the pod: until when it protects the
/// pod, or that it has passed.
#[tokio::test(start_paused = true)]
async fn a_do_not_disrupt_duration_says_until_when_or_that_it_passed() {
    let h = Harness::new();
    initialized_node(&h).await;
    let now = h.clock.now();
    let started = crate::clock::rfc3339(nodewright_core::time::Timestamp(now.0 - 120_000));
    for (pod, value) in [("web", "5m"), ("job", "1m"), ("db", "true")] {
        let mut p = super::pending_pod_json(pod, "100m");
        p["metadata"]["annotations"] = json!({"karpenter.sh/do-not-disrupt": value});
        p["spec"]["nodeName"] = json!("n1");
        p["status"] = json!({"phase": "Running", "startTime": started});
        h.api.put_value(Kind::Pod, p);
    }
    let (d, mut cadence) = disruptor(&h);
    d.step(&mut cadence).await;
    let until = crate::clock::rfc3339(nodewright_core::time::Timestamp(now.0 + 180_000));
    assert_eq!(
        told(&h, "DoNotDisruptUntil"),
        [(
            "web".to_string(),
            format!("Pod will be disruptable at {until}")
        )]
    );
    assert_eq!(
        told(&h, "DoNotDisruptGracePeriodElapsed"),
        [(
            "job".to_string(),
            "The karpenter.sh/do-not-disrupt grace period has elapsed, pod is now disruptable"
                .to_string()
        )]
    );
}

/// A consolidation command planned is announced on its targets, and so is its rejection on
/// re-check, with upstream's kind of failure.
#[tokio::test(start_paused = true)]
async fn a_consolidation_candidate_and_its_rejection_are_announced_on_the_targets() {
    let h = Harness::new();
    let (d, mut cadence) = replace_planned_then_target_grows(&h).await;
    let kinds = |reason: &str| {
        let mut v: Vec<(String, String)> = h
            .events
            .with_reason(reason)
            .into_iter()
            .map(|e| (e.regarding.kind, e.message))
            .collect();
        v.sort();
        v
    };
    let candidate = kinds("ConsolidationCandidate");
    assert_eq!(candidate.len(), 2, "{candidate:?}");
    assert_eq!(
        (candidate[0].0.as_str(), candidate[1].0.as_str()),
        ("Node", "NodeClaim")
    );
    assert!(
        candidate[0].1.starts_with(
            "Consolidation candidate: single-node-consolidation: replace: nodepools=[default]: [n1/"
        ),
        "{candidate:?}"
    );
    assert!(kinds("ConsolidationRejected").is_empty());
    h.api.delete(Kind::Pod, "default/b").unwrap();
    tokio::time::advance(Duration::from_secs(15)).await;
    assert!(matches!(d.step(&mut cadence).await, Step::Rejected(_)));
    let rejected = kinds("ConsolidationRejected");
    assert_eq!(rejected.len(), 2, "{rejected:?}");
    assert!(
        rejected[0].1.contains(", reason: scheduling (savings: $"),
        "{rejected:?}"
    );
}

/// In a Balanced pool each single-node move is scored: the node whose pods are most of the
/// pool's disruption is rejected, the other approved and told so.
#[tokio::test(start_paused = true)]
async fn balanced_moves_are_counted_scored_and_approved_ones_announced() {
    let h = Harness::new();
    two_nodes(&h, "5").await;
    let mut v = h.api.get(Kind::NodePool, "default").unwrap().to_value();
    v["spec"]["disruption"]["consolidationPolicy"] = json!("Balanced");
    h.api.put_value(Kind::NodePool, v);
    h.api.put_value(Kind::Pod, port_pod("a", "n1"));
    h.api.put_value(Kind::Pod, port_pod("b", "n2"));
    for i in 0..6 {
        let mut p = running_pod(&format!("small-{i}"), "100m", "n1");
        p["spec"]["containers"][0]["resources"]["requests"]["memory"] = json!("100Mi");
        h.api.put_value(Kind::Pod, p);
    }
    let (d, mut cadence) = disruptor(&h);
    assert_eq!(d.step(&mut cadence).await, Step::Planned(1));
    let lines = metric_lines(&h);
    for decision in ["approved", "rejected"] {
        let labels = format!(r#"{{decision="{decision}",nodepool="default",policy="Balanced"}}"#);
        for want in [
            format!("karpenter_consolidation_moves_total{labels} 1"),
            format!("karpenter_consolidation_score_count{labels} 1"),
        ] {
            assert!(lines.contains(&want), "{want} in {}", h.metrics.encode());
        }
    }
    let approved: Vec<(String, String)> = h
        .events
        .with_reason("ConsolidationApproved")
        .into_iter()
        .map(|e| (e.regarding.kind, e.regarding.name))
        .collect();
    assert_eq!(approved.len(), 2, "{approved:?}");
    assert_eq!(approved[0], ("Node".to_string(), "n2".to_string()));
    let message = &h.events.with_reason("ConsolidationApproved")[0].message;
    assert!(message.contains(">= threshold 0.50 (k: 2,"), "{message}");
}
