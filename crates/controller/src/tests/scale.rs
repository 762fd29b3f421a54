//! Provisioning a few hundred pods over several batches while the NodeClaim watch lags: claims
//! one pass created are still in flight (created, not yet observed) when the next pass solves,
//! and they must hold their pods and count towards the NodePool's limits.

use std::collections::{BTreeMap, BTreeSet};

use nodewright_api::v1::nodeclaim::NodeClaim;
use serde_json::json;

use super::Harness;
use crate::state::{Kind, lock};

const SIZES: [&str; 3] = ["500m", "1", "1500m"];

fn millis(cpu: &str) -> i64 {
    match cpu.strip_suffix('m') {
        Some(m) => m.parse().unwrap(),
        None => cpu.parse::<i64>().unwrap() * 1000,
    }
}

/// CPU of the test cloud's instance types, in millicores.
fn type_cpu(name: &str) -> i64 {
    match name {
        "m5.large" => 2000,
        "m5.xlarge" => 4000,
        "m5.2xlarge" => 8000,
        other => panic!("unknown type {other}"),
    }
}

/// Pod name → every claim it was nominated to, from the Nominated events.
fn nominations(h: &Harness) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for e in h.events.events() {
        if e.reason != "Nominated" {
            continue;
        }
        let claim = e
            .message
            .split("nodeclaim/")
            .nth(1)
            .and_then(|c| c.split(',').next())
            .unwrap_or_default()
            .to_string();
        out.entry(e.regarding.name.clone())
            .or_default()
            .insert(claim);
    }
    out
}

fn allowed_cpu(c: &NodeClaim) -> Vec<i64> {
    c.spec
        .requirements
        .iter()
        .find(|r| r.key == "node.kubernetes.io/instance-type")
        .map(|r| r.values().iter().map(|v| type_cpu(v)).collect())
        .unwrap_or_default()
}

/// `waves` batches of `per_wave` pods, one provisioning pass each (and a second pass that
/// must launch nothing); the NodeClaim watch is held back except after the waves listed in
/// `observe_after`. Returns each pod's CPU request by name.
async fn waves(
    h: &Harness,
    waves: usize,
    per_wave: usize,
    observe_after: &[usize],
) -> BTreeMap<String, i64> {
    let prov = h.provisioner();
    h.api.mark_synced();
    h.api.hold(Kind::NodeClaim);
    let mut pods = BTreeMap::new();
    let mut saw_in_flight = false;
    for w in 0..waves {
        for i in 0..per_wave {
            let name = format!("w{w}-{i:03}");
            let cpu = SIZES[(w * per_wave + i) % SIZES.len()];
            h.pending_pod(&name, cpu);
            pods.insert(name, millis(cpu));
        }
        let p = prov.provision().await.unwrap();
        assert!(p.errors.is_empty(), "{p:?}");
        saw_in_flight |= lock(&h.state).in_flight_count() > 0;
        let again = prov.provision().await.unwrap();
        assert!(again.created.is_empty(), "wave {w}: {again:?}");
        if observe_after.contains(&w) {
            h.api.release(Kind::NodeClaim);
            h.api.hold(Kind::NodeClaim);
        }
    }
    assert!(saw_in_flight, "the passes ran with claims in flight");
    pods
}

#[tokio::test(start_paused = true)]
async fn batches_with_claims_in_flight_place_every_pod_on_exactly_one_claim() {
    let h = Harness::new();
    h.nodepool("default", None);
    let pods = waves(&h, 4, 80, &[1]).await;
    let nominated = nominations(&h);
    for name in pods.keys() {
        let to = nominated.get(name).cloned().unwrap_or_default();
        assert_eq!(to.len(), 1, "pod {name} nominated to {to:?}");
    }
    let claims = h.claims();
    let mut load: BTreeMap<String, i64> = BTreeMap::new();
    for (pod, to) in &nominated {
        let claim = to.iter().next().unwrap().clone();
        *load.entry(claim).or_default() += pods[pod];
    }
    for c in &claims {
        let name = c.metadata.name.clone().unwrap();
        let used = load.get(&name).copied().unwrap_or(0);
        assert!(
            used > 0,
            "claim {name} holds no pod: launched twice for the same pods"
        );
        let biggest = allowed_cpu(c).into_iter().max().unwrap();
        assert!(
            used <= biggest,
            "claim {name}: {used}m on at most {biggest}m"
        );
    }
    // The claims launch about as much as the pods need: no more than one partly filled
    // largest node per wave beyond a perfect packing on it. (Counted in capacity, not claims:
    // prices here are linear in size, so a partly filled large claim is split into smaller
    // ones that cost less.) Each claim launches its smallest allowed type, the cheapest.
    let total: i64 = pods.values().sum();
    let floor = (total + 7999) / 8000;
    let launched: i64 = claims
        .iter()
        .map(|c| allowed_cpu(c).into_iter().min().unwrap())
        .sum();
    assert!(
        launched <= (floor + 4) * 8000,
        "{} claims launching {launched}m for {total}m (perfect packing {floor} nodes of 8000m)",
        claims.len()
    );
}

#[tokio::test(start_paused = true)]
async fn nodepool_limits_hold_across_batches_with_claims_in_flight() {
    let h = Harness::new();
    h.nodepool("default", Some(json!({"cpu": "40"})));
    let pods = waves(&h, 4, 80, &[2]).await;
    let claims = h.claims();
    assert!(!claims.is_empty());
    let held: i64 = claims
        .iter()
        .map(|c| allowed_cpu(c).into_iter().min().unwrap())
        .sum();
    assert!(
        held <= 40_000,
        "claims may hold {held}m against a 40 cpu limit"
    );
    let nominated = nominations(&h);
    for (name, to) in &nominated {
        assert_eq!(to.len(), 1, "pod {name} nominated to {to:?}");
    }
    assert!(
        nominated.len() < pods.len(),
        "the limit leaves pods unplaced"
    );
}

#[tokio::test(start_paused = true)]
async fn scheduling_decisions_and_instance_terminations_are_timed() {
    use std::time::Duration;

    use nodewright_core::cadence::BatchWindow;

    use crate::provisioner::Trigger;

    let h = Harness::new();
    h.nodepool("default", None);
    h.pending_pod("web-1", "1");
    h.api.mark_synced();
    let prov = h.provisioner();
    let mut trigger = Trigger::new(BatchWindow::default());
    assert!(!trigger.due(&h.state, h.clock.now()));
    tokio::time::advance(Duration::from_secs(1)).await;
    assert!(trigger.due(&h.state, h.clock.now()));
    let name = prov.pass(&mut trigger).await.unwrap().created[0].clone();
    let m = h.metrics.encode();
    assert!(
        m.contains("karpenter_pods_scheduling_decision_duration_seconds_count 1"),
        "{m}"
    );
    assert!(m.contains("karpenter_pods_scheduling_decision_duration_seconds_sum 1.0"));

    let life = h.lifecycle();
    life.reconcile_all().await;
    h.api.delete(Kind::NodeClaim, &name).unwrap();
    for _ in 0..4 {
        tokio::time::advance(Duration::from_secs(1)).await;
        life.reconcile_all().await;
    }
    assert!(h.api.get(Kind::NodeClaim, &name).is_none());
    let m = h.metrics.encode();
    assert!(
        m.contains(
            r#"karpenter_nodeclaims_instance_termination_duration_seconds_count{nodepool="default"} 1"#
        ),
        "{m}"
    );
}

/// The provisioner's tick looks only at the pods that changed since its last look and at the
/// requeues that came: an idle tick at 20,000 pending pods would otherwise compare every key,
/// ten times a second, and so would every tick after a pod was bound or a Node updated.
/// Skipping the others must still close the batch, and a requeue still triggers again.
#[tokio::test(start_paused = true)]
async fn a_tick_looks_only_at_the_pods_that_changed_or_came_due() {
    use std::time::Duration;

    use nodewright_core::cadence::{BatchWindow, POD_REQUEUE};

    use crate::provisioner::Trigger;

    let h = Harness::new();
    h.nodepool("default", None);
    h.pending_pod("web-1", "1");
    h.api.mark_synced();
    let tick = Duration::from_millis(100);
    let mut trigger = Trigger::new(BatchWindow::default());
    assert!(!trigger.due(&h.state, h.clock.now()));
    assert_eq!(trigger.looked(), 1);
    let mut closed = false;
    for _ in 0..15 {
        tokio::time::advance(tick).await;
        closed |= trigger.due(&h.state, h.clock.now());
    }
    assert!(closed, "the batch closes without a look at any pod");
    assert_eq!(trigger.looked(), 1, "nothing changed, nothing looked at");

    // The index changes, but not its pending pods: a Node joins, the NodePool is edited.
    let before = lock(&h.state).changes();
    h.node_joins("node-a", "sim:///node-a");
    h.edit_nodepool("default", |v| v["spec"]["weight"] = 7.into());
    assert!(lock(&h.state).changes() > before);
    for _ in 0..3 {
        tokio::time::advance(tick).await;
        trigger.due(&h.state, h.clock.now());
    }
    assert_eq!(trigger.looked(), 1, "no pod changed, nothing looked at");

    h.pending_pod("web-2", "1");
    tokio::time::advance(tick).await;
    trigger.due(&h.state, h.clock.now());
    assert_eq!(
        trigger.looked(),
        2,
        "the new pod is looked at, not web-1 again"
    );

    for _ in 0..15 {
        tokio::time::advance(tick).await;
        trigger.due(&h.state, h.clock.now());
    }
    assert_eq!(trigger.looked(), 2);

    // No pass ran, so both pods stay pending: each is due again POD_REQUEUE after it last
    // triggered (web-1 at 0 s, web-2 at 1.9 s), looked at then and only then.
    let mut closed = false;
    for _ in 0..(POD_REQUEUE.as_millis() / tick.as_millis()) {
        tokio::time::advance(tick).await;
        closed |= trigger.due(&h.state, h.clock.now());
    }
    assert!(closed, "the requeues close a new batch");
    assert_eq!(
        trigger.looked(),
        4,
        "each pod looked at once, at its requeue"
    );

    // web-1 is bound: looked at once as it changes, then forgotten; only web-2 requeues.
    h.bind("web-1", "node-a");
    for _ in 0..(POD_REQUEUE.as_millis() / tick.as_millis()) {
        tokio::time::advance(tick).await;
        trigger.due(&h.state, h.clock.now());
    }
    assert_eq!(
        trigger.looked(),
        6,
        "web-1 as it was bound, web-2 at its requeue"
    );
}

/// Between looks the provisioner sleeps until the index changes or something it knows of
/// comes due: the open batch's close, the next requeue. Idle, it looks once a second, not ten
/// times; any change to the index wakes it at once, even one made before it began to wait.
#[tokio::test(start_paused = true)]
async fn an_idle_provisioner_sleeps_until_the_index_changes() {
    use std::time::Duration;

    use nodewright_core::cadence::{BatchWindow, POD_REQUEUE};

    use crate::provisioner::Trigger;

    let h = Harness::new();
    h.nodepool("default", None);
    h.api.mark_synced();
    let window = BatchWindow::default();
    let mut trigger = Trigger::new(window);
    assert_eq!(
        trigger.idle_wait(h.clock.now()),
        Duration::ZERO,
        "a walk is owed"
    );
    trigger.due(&h.state, h.clock.now());
    assert_eq!(trigger.idle_wait(h.clock.now()), Duration::from_secs(1));

    // A pod: the batch it opens closes after the idle window, before its requeue.
    let changed = lock(&h.state).on_change();
    h.pending_pod("web-1", "1");
    tokio::time::timeout(Duration::from_millis(1), changed.notified())
        .await
        .expect("the change made before the wait wakes it");
    trigger.due(&h.state, h.clock.now());
    tokio::time::advance(Duration::from_millis(300)).await;
    assert_eq!(
        trigger.idle_wait(h.clock.now()),
        window.idle - Duration::from_millis(300)
    );
    tokio::time::advance(window.idle).await;
    assert!(trigger.due(&h.state, h.clock.now()), "the batch closed");

    // Still pending and no batch open: the next look is the requeue, after a second's looks.
    let since = window.idle + Duration::from_millis(300);
    assert_eq!(trigger.idle_wait(h.clock.now()), Duration::from_secs(1));
    tokio::time::advance(POD_REQUEUE - since - Duration::from_millis(400)).await;
    assert_eq!(trigger.idle_wait(h.clock.now()), Duration::from_millis(400));
    let quiet = tokio::time::timeout(Duration::from_millis(50), changed.notified()).await;
    assert!(quiet.is_err(), "nothing changed, nothing wakes it");
}
