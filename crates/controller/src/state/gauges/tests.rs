use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::state::{Kind, Object, WatchEvent};

const NODES: usize = 4;
const PODS: usize = 12;

#[derive(Clone, Debug)]
enum Op {
    /// Add or update pod `i`: bound to node `node` (or pending), with a cpu request of
    /// `cpu` halves, a phase, Ready or not, owned by a DaemonSet or a ReplicaSet.
    Pod {
        i: usize,
        node: Option<usize>,
        cpu: u8,
        phase: usize,
        ready: bool,
        daemon: bool,
    },
    DeletePod(usize),
    /// Add or update node `i` with a zone, a NodePool and a cpu allocatable.
    Node {
        i: usize,
        zone: usize,
        pool: usize,
        cpu: u8,
    },
    DeleteNode(usize),
    /// Relist the pods, dropping those whose index is a multiple of `drop`.
    RelistPods(usize),
    /// Publish the gauges now.
    Tick,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..PODS, prop::option::of(0..NODES + 1), 0u8..5, 0usize..4, any::<bool>(), any::<bool>())
            .prop_map(|(i, node, cpu, phase, ready, daemon)| Op::Pod { i, node, cpu, phase, ready, daemon }),
        2 => (0..PODS).prop_map(Op::DeletePod),
        3 => (0..NODES, 0usize..2, 0usize..2, 1u8..5)
            .prop_map(|(i, zone, pool, cpu)| Op::Node { i, zone, pool, cpu }),
        1 => (0..NODES).prop_map(Op::DeleteNode),
        1 => (2usize..4).prop_map(Op::RelistPods),
        3 => Just(Op::Tick),
    ]
}

fn pod_json(
    i: usize,
    node: Option<usize>,
    cpu: u8,
    phase: usize,
    ready: bool,
    daemon: bool,
) -> Value {
    let phase = ["Pending", "Running", "Succeeded", "Failed"][phase];
    let owner = if daemon { "DaemonSet" } else { "ReplicaSet" };
    let mut v = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("p{i}"), "namespace": "web", "uid": format!("u{i}"),
            "creationTimestamp": "2024-06-01T00:00:00Z",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner, "name": "o",
                "uid": "o", "controller": true}]},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {
            "requests": {"cpu": format!("{}m", 500 * cpu as u32), "memory": "1Gi"},
            "limits": {"memory": "2Gi"}}}]},
        "status": {"phase": phase, "conditions": [
            {"type": "Ready", "status": if ready { "True" } else { "False" },
             "lastTransitionTime": "2024-06-01T00:01:00Z"}]}
    });
    match node {
        Some(n) => {
            v["spec"]["nodeName"] = json!(format!("n{n}"));
            v["status"]["conditions"]
                .as_array_mut()
                .unwrap()
                .push(json!({"type": "PodScheduled", "status": "True",
                        "lastTransitionTime": "2024-06-01T00:00:30Z"}));
        }
        None => v["status"]["conditions"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "PodScheduled", "status": "False", "reason": "Unschedulable"})),
    }
    v
}

fn node_json(i: usize, zone: usize, pool: usize, cpu: u8) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": format!("n{i}"), "labels": {
            "karpenter.sh/nodepool": format!("pool-{pool}"),
            "topology.kubernetes.io/zone": format!("zone-{zone}"),
            "node.kubernetes.io/instance-type": "m5.large",
            "karpenter.sh/capacity-type": "on-demand",
            "kubernetes.io/arch": "amd64"}},
        "status": {"allocatable": {"cpu": format!("{cpu}"), "memory": "8Gi", "pods": "110"}}
    })
}

fn apply(s: &mut ClusterState, kind: Kind, v: Value) {
    s.apply(WatchEvent::Apply(Object::from_value(kind, v).unwrap()));
}

/// The node and pod gauge lines of `m` (utilisation aside: its sums may differ in the
/// last bit).
fn samples(m: &Metrics) -> Vec<String> {
    let mut out: Vec<String> = m
        .encode()
        .lines()
        .filter(|l| {
            !l.starts_with('#')
                && (l.starts_with("karpenter_nodes_") || l.starts_with("karpenter_pods_state{"))
        })
        .map(str::to_owned)
        .collect();
    out.sort();
    out
}

fn utilization(m: &Metrics) -> BTreeMap<String, f64> {
    m.encode()
        .lines()
        .filter(|l| l.starts_with("karpenter_cluster_utilization_percent{"))
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').unwrap();
            (k.to_owned(), v.parse().unwrap())
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// After any sequence of pod and node changes (and relists), the incrementally
    /// published rows and metrics equal a recount from scratch, and the incremental
    /// startup observer records what a full walk every tick records.
    #[test]
    fn incremental_gauges_equal_a_full_recount(ops in prop::collection::vec(op(), 1..60)) {
        let mut s = ClusterState::default();
        let incremental = Metrics::new();
        let walked = Metrics::new();
        let mut startup = PodStartup::default();
        let mut walking = PodStartup::default();
        let mut live: BTreeMap<usize, Value> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Pod { i, node, cpu, phase, ready, daemon } => {
                    let v = pod_json(i, node, cpu, phase, ready, daemon);
                    live.insert(i, v.clone());
                    apply(&mut s, Kind::Pod, v);
                }
                Op::DeletePod(i) => {
                    if let Some(v) = live.remove(&i) {
                        s.apply(WatchEvent::Delete(Object::from_value(Kind::Pod, v).unwrap()));
                    }
                }
                Op::Node { i, zone, pool, cpu } => apply(&mut s, Kind::Node, node_json(i, zone, pool, cpu)),
                Op::DeleteNode(i) => {
                    if s.nodes.contains_key(&format!("n{i}")) {
                        let v = node_json(i, 0, 0, 1);
                        s.apply(WatchEvent::Delete(Object::from_value(Kind::Node, v).unwrap()));
                    }
                }
                Op::RelistPods(drop) => {
                    live.retain(|i, _| i % drop != 0);
                    s.apply(WatchEvent::Init(Kind::Pod));
                    for v in live.values() {
                        s.apply(WatchEvent::InitApply(Object::from_value(Kind::Pod, v.clone()).unwrap()));
                    }
                    s.apply(WatchEvent::InitDone(Kind::Pod));
                }
                Op::Tick => {
                    set_all(&s, &incremental);
                    startup.observe(&s, &incremental);
                    walking.read = None;
                    walking.observe(&s, &walked);
                }
            }
        }
        set_all(&s, &incremental);
        let (nodes, pods) = incremental.state.gauge_rows().lock().unwrap().rows();
        prop_assert_eq!(&nodes, &node_gauges(&s));
        prop_assert_eq!(&pods, &pod_gauges(&s));

        let recount = Metrics::new();
        let recounted: Vec<Arc<NodeGauge>> = node_gauges(&s).into_iter().map(Arc::new).collect();
        recount.state.set_nodes(&recounted);
        let recounted: Vec<Arc<PodGauge>> = pod_gauges(&s).into_iter().map(Arc::new).collect();
        recount.state.set_pods(&recounted);
        prop_assert_eq!(samples(&incremental), samples(&recount));
        let (a, b) = (utilization(&incremental), utilization(&recount));
        prop_assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
        for (k, v) in &a {
            prop_assert!((v - b[k]).abs() < 1e-9, "{}: {} vs {}", k, v, b[k]);
        }

        startup.observe(&s, &incremental);
        walking.read = None;
        walking.observe(&s, &walked);
        let startup_lines = |m: &Metrics| -> Vec<String> {
            m.encode()
                .lines()
                .filter(|l| l.starts_with("karpenter_pods_startup_duration_seconds")
                    || l.starts_with("karpenter_pods_bound_duration_seconds"))
                .map(str::to_owned)
                .collect()
        };
        prop_assert_eq!(startup_lines(&incremental), startup_lines(&walked));
        prop_assert_eq!(startup.watching(), walking.watching());
    }
}

#[test]
fn disabled_observability_keeps_only_the_states_own_gauges() {
    let mut s = ClusterState::default();
    let mut node = node_json(0, 0, 0, 4);
    node["status"]["conditions"] = json!([{"type": "Ready", "status": "True",
            "lastTransitionTime": "2024-06-01T00:00:00Z"}]);
    apply(&mut s, Kind::Node, node);
    apply(&mut s, Kind::Pod, pod_json(1, Some(0), 1, 1, true, false));
    let on = Metrics::new();
    let off = Metrics::new();
    StateMetrics::new(true, crate::clock::Clock::system()).tick(&s, &on);
    StateMetrics::new(false, crate::clock::Clock::system()).tick(&s, &off);
    let (on, off) = (on.encode(), off.encode());
    for family in [
        "karpenter_nodes_allocatable{",
        "karpenter_pods_state{",
        "operator_node_status_condition_count{",
    ] {
        assert!(on.contains(family), "{family} missing when enabled:\n{on}");
        assert!(
            !off.contains(family),
            "{family} exported when disabled:\n{off}"
        );
    }
    assert!(off.contains("karpenter_cluster_state_node_count"), "{off}");
}

/// The gauges are refreshed every `GAUGES_EVERY` of tokio's clock, so `bench controller`,
/// whose runtime's clock is paused, sees them move as the controller would.
#[tokio::test(start_paused = true)]
async fn the_gauges_follow_tokios_clock() {
    let mut s = ClusterState::default();
    let m = Metrics::new();
    let mut observed = StateMetrics::new(
        true,
        crate::clock::Clock::starting_at(nodewright_core::time::Timestamp(0)),
    );
    let n1 = r#"karpenter_nodes_allocatable{"#;
    let has_n1 = |m: &Metrics| {
        m.encode()
            .lines()
            .any(|l| l.starts_with(n1) && l.contains(r#"node_name="n1""#))
    };
    apply(&mut s, Kind::Node, node_json(0, 0, 0, 4));
    observed.tick(&s, &m);
    apply(&mut s, Kind::Node, node_json(1, 0, 0, 4));
    tokio::time::advance(GAUGES_EVERY - std::time::Duration::from_secs(1)).await;
    observed.tick(&s, &m);
    assert!(!has_n1(&m), "refreshed before its period");
    tokio::time::advance(std::time::Duration::from_secs(1)).await;
    observed.tick(&s, &m);
    assert!(
        has_n1(&m),
        "not refreshed after its period of tokio's clock"
    );
}

#[test]
fn a_tick_revisits_only_what_changed() {
    let mut s = ClusterState::default();
    let m = Metrics::new();
    apply(&mut s, Kind::Node, node_json(0, 0, 0, 4));
    for i in 0..50 {
        apply(&mut s, Kind::Pod, pod_json(i, Some(0), 1, 1, true, false));
    }
    set_all(&s, &m);
    let head = (s.pod_log.head(), s.node_log.head());
    // Nothing changed: nothing to revisit.
    let rows = m.state.gauge_rows().lock().unwrap();
    assert!(matches!(s.pod_log.since(rows.pods_read), Since::Keys(k) if k.is_empty()));
    drop(rows);
    apply(&mut s, Kind::Pod, pod_json(7, Some(0), 2, 1, false, false));
    match (
        s.pod_log.since(Some(head.0)),
        s.node_log.since(Some(head.1)),
    ) {
        (Since::Keys(pods), Since::Keys(nodes)) => {
            assert_eq!(pods, ["web/p7"]);
            assert_eq!(nodes, ["n0"]);
        }
        other => panic!("expected changed keys, got {other:?}"),
    }
    set_all(&s, &m);
    let usage = s.node_usage("n0").unwrap();
    assert_eq!(usage.requests.get(CPU), 49 * 500 + 1000);
    assert!(m.encode().lines().any(
        |l| l.starts_with("karpenter_pods_state{name=\"p7\"") && l.contains("ready=\"false\"")
    ));
}

#[test]
fn pod_and_node_rows_share_the_values_they_hold_alike() {
    let mut s = ClusterState::default();
    let m = Metrics::new();
    apply(&mut s, Kind::Node, node_json(0, 0, 0, 4));
    apply(&mut s, Kind::Node, node_json(1, 0, 0, 8));
    for i in 0..3 {
        apply(&mut s, Kind::Pod, pod_json(i, Some(0), 1, 1, true, false));
    }
    set_all(&s, &m);
    // A change revisits one row; it takes the values the others hold.
    apply(&mut s, Kind::Pod, pod_json(2, Some(0), 2, 1, false, false));
    set_all(&s, &m);
    let rows = m.state.gauge_rows().lock().unwrap();
    let pods = rows.rows().1;
    assert_eq!(pods.len(), 3);
    assert_eq!((&*pods[0].node.name, &*pods[0].node.zone), ("n0", "zone-0"));
    for p in &pods[1..] {
        for (a, b) in [(&pods[0].owner, &p.owner), (&pods[0].phase, &p.phase)] {
            assert!(Arc::ptr_eq(a, b), "{a} held twice");
        }
        // The node's part is one for every pod on the node.
        assert!(
            Arc::ptr_eq(&pods[0].node, &p.node),
            "{:?} held twice",
            p.node
        );
    }
    // The rows' keys are the index's.
    for (key, p) in s.pods.keys().zip(&pods) {
        assert!(Arc::ptr_eq(key, &p.key));
    }
    let nodes = rows.rows().0;
    let (n0, n1) = (&nodes[0], &nodes[1]);
    let value = |n: &NodeGauge, k: &str| n.labels.iter().find(|(d, _)| *d == k).unwrap().1.clone();
    assert_eq!(&*value(n1, "node_name"), "n1");
    for k in ["zone", "instance_type", "nodepool", "capacity_type", "arch"] {
        assert!(Arc::ptr_eq(&value(n0, k), &value(n1, k)), "{k} held twice");
    }
    assert!(Arc::ptr_eq(&value(n0, "zone"), &pods[0].node.zone));
    assert_ne!(n0.allocatable, n1.allocatable);
    for (a, b) in n0.allocatable.iter().zip(&n1.allocatable) {
        assert!(Arc::ptr_eq(&a.0, &b.0), "{} held twice", a.0);
    }
}
