//! The view model on hand-written objects: states, requests, prices, grouping, sorting and
//! totals.

use k8s_openapi::api::core::v1::{Node, Pod};
use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_aws_model::pricing::{OnDemandPrices, SpotPrices};
use nodewright_testkit::json::merge;
use nodewright_testkit::k8s;
use serde_json::{Value, json};

use super::super::options::{Sort, parse_sort};
use super::super::prices::Prices;
use super::super::state::State;
use super::*;

const NOW: i64 = 1_800_000_000;

fn time(secs_ago: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_second(NOW - secs_ago)
        .unwrap()
        .to_string()
}

/// A Ready node of `pool` (if any), labelled `team=<NAME>`, created `age` seconds ago.
fn node(name: &str, pool: Option<&str>, it: &str, ct: &str, zone: &str, age: i64) -> Value {
    let labels = json!({
        "node.kubernetes.io/instance-type": it,
        "karpenter.sh/capacity-type": ct,
        "topology.kubernetes.io/zone": zone,
        "karpenter.sh/nodepool": pool,
        "team": name.to_uppercase(),
    });
    let extra = json!({
        "metadata": {"labels": labels, "creationTimestamp": time(age)},
        "status": {
            "allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    });
    merge(k8s::node(name, &format!("aws:///{zone}/i-{name}")), extra)
}

/// A pod in `phase`, on `node` if given, asking for `cpu` (its init container for 3 cpu).
fn pod(name: &str, node: Option<&str>, cpu: &str, phase: &str) -> Pod {
    let extra = json!({
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
            "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "3"}}}],
        },
        "status": {"phase": phase},
    });
    serde_json::from_value(merge(k8s::pod("default", name), extra)).unwrap()
}

fn claim(name: &str, node: Option<&str>, labels: Value, extra_status: Value) -> NodeClaim {
    let mut status = json!({"nodeName": node});
    if let Some(n) = node {
        status["providerID"] = json!(format!("aws:///us-east-1a/i-{n}"));
    }
    for (k, v) in extra_status.as_object().into_iter().flatten() {
        status[k] = v.clone();
    }
    let extra = json!({"metadata": {"labels": labels, "creationTimestamp": time(5)},
        "status": status});
    serde_json::from_value(merge(k8s::nodeclaim(name), extra)).unwrap()
}

fn prices() -> Prices {
    let mut od = OnDemandPrices::new();
    od.insert("us-east-1", "m5.large", 0.096);
    od.insert("us-east-1", "c5.xlarge", 0.17);
    Prices::new(od, SpotPrices::synthetic())
}

fn view(nodes: &[Node], pods: &[Pod], claims: &[NodeClaim], sort: &Sort) -> View {
    let resources = ["cpu".to_string(), "memory".to_string()];
    let extra = ["team".to_string()];
    let prices = prices();
    let input = Inputs {
        nodes: nodes.iter().collect(),
        pods: pods.iter().collect(),
        claims: claims.iter().collect(),
        nodepools: vec!["default".into(), "empty".into()],
    };
    build(
        &input,
        &Settings {
            resources: &resources,
            extra_labels: &extra,
            sort,
            prices: &prices,
            now: NOW,
        },
    )
}

fn nodes(values: Vec<Value>) -> Vec<Node> {
    values
        .into_iter()
        .map(|v| serde_json::from_value(v).unwrap())
        .collect()
}

#[test]
fn rows_carry_requests_prices_and_states_grouped_by_nodepool() {
    let mut disrupted = node("b", Some("default"), "m5.large", "spot", "us-east-1b", 100);
    disrupted["spec"]["taints"] =
        json!([{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]);
    let mut cordoned = node("c", None, "c5.xlarge", "on-demand", "us-east-1c", 50);
    cordoned["spec"]["unschedulable"] = json!(true);
    let nodes = nodes(vec![
        node(
            "a",
            Some("default"),
            "m5.large",
            "on-demand",
            "us-east-1a",
            200,
        ),
        disrupted,
        cordoned,
    ]);
    let pods = vec![
        pod("p1", Some("a"), "500m", "Running"),
        pod("p2", Some("a"), "250m", "Running"),
        pod("done", Some("a"), "1", "Succeeded"),
        pod("waiting", None, "1", "Pending"),
    ];
    let reason = json!({"conditions": [{"type": "DisruptionReason", "status": "True", "reason": "Underutilized"}]});
    let claims = vec![
        claim("default-b", Some("b"), json!({}), reason),
        claim(
            "default-new",
            None,
            json!({"karpenter.sh/nodepool": "default", "node.kubernetes.io/instance-type": "c5.xlarge",
                   "karpenter.sh/capacity-type": "on-demand", "topology.kubernetes.io/zone": "us-east-1a"}),
            json!({"allocatable": {"cpu": "3920m"}}),
        ),
    ];
    let v = view(&nodes, &pods, &claims, &Sort::default());
    let names: Vec<_> = v.groups.iter().map(|g| g.nodepool.clone()).collect();
    assert_eq!(names, [Some("default".into()), Some("empty".into()), None]);
    let default = &v.groups[0];
    let rows: Vec<(&str, String)> = default
        .rows
        .iter()
        .map(|r| (r.name.as_str(), r.state.to_string()))
        .collect();
    assert_eq!(
        rows,
        [
            ("a", "ready".to_string()),
            ("b", "disrupting (Underutilized)".to_string()),
            ("default-new", "launching".to_string()),
        ]
    );
    let a = &default.rows[0];
    // Each pod's init container (3 CPUs) is its peak; finished pods do not count.
    assert_eq!(
        a.usage[0],
        Usage {
            resource: "cpu".into(),
            requested: 6000,
            allocatable: 1930
        }
    );
    assert_eq!(a.usage[1].requested, 2 << 30);
    assert_eq!((a.pods, a.price, a.age), (2, Some(0.096), Some(200)));
    assert_eq!(a.extra, ["A"]);
    let b = &default.rows[1];
    let spot = SpotPrices::synthetic().get("m5.large", "us-east-1b", Some(0.096));
    assert_eq!(b.price, spot);
    let launching = &default.rows[2];
    assert_eq!(launching.price, Some(0.17));
    assert_eq!(launching.usage[0].allocatable, 3920);
    assert_eq!(v.groups[2].rows[0].state, State::Cordoned);
    assert_eq!(v.groups[1].totals.nodes, 0);

    assert_eq!((v.totals.nodes, v.totals.launching), (3, 1));
    assert_eq!((v.totals.pods, v.pending_pods), (2, 1));
    let sum = 0.096 + spot.unwrap() + 0.17 + 0.17;
    assert!(
        (v.totals.per_hour - sum).abs() < 1e-9,
        "{}",
        v.totals.per_hour
    );
    assert_eq!(v.totals.usage[0].allocatable, 1930 * 3 + 3920);
    assert!(v.problems.is_empty(), "{:?}", v.problems);
}

#[test]
fn deleting_not_ready_and_hidden_claims() {
    let mut gone = node(
        "g",
        Some("default"),
        "m5.large",
        "on-demand",
        "us-east-1a",
        10,
    );
    gone["metadata"]["deletionTimestamp"] = json!(time(1));
    let mut sick = node(
        "s",
        Some("default"),
        "m5.large",
        "on-demand",
        "us-east-1a",
        10,
    );
    sick["status"]["conditions"] = json!([{"type": "Ready", "status": "Unknown"}]);
    let nodes = nodes(vec![gone, sick]);
    let mut finishing = claim("default-x", Some("x"), json!({}), json!({}));
    finishing.metadata.deletion_timestamp = nodes[0].metadata.deletion_timestamp.clone();
    let claims = vec![
        finishing,
        // Registered to a node outside the selection: not shown.
        claim("default-y", Some("y"), json!({}), json!({})),
    ];
    let v = view(&nodes, &[], &claims, &Sort::default());
    let states: Vec<_> = v
        .groups
        .iter()
        .flat_map(|g| &g.rows)
        .map(|r| (r.name.clone(), r.state.clone()))
        .collect();
    assert_eq!(
        states,
        [
            ("g".to_string(), State::Deleting(None)),
            ("s".to_string(), State::NotReady),
            ("default-x".to_string(), State::Deleting(None)),
        ]
    );
    // The claim has no labels: it has no NodePool and no price.
    assert_eq!(v.totals.unpriced, 1);
}

#[test]
fn sorting_by_price_usage_and_label_with_missing_values_last() {
    let nodes = nodes(vec![
        node(
            "a",
            Some("default"),
            "m5.large",
            "on-demand",
            "us-east-1a",
            30,
        ),
        node(
            "b",
            Some("default"),
            "c5.xlarge",
            "on-demand",
            "us-east-1a",
            20,
        ),
        node(
            "c",
            Some("default"),
            "z9.none",
            "on-demand",
            "us-east-1a",
            10,
        ),
    ]);
    let pods = vec![pod("p", Some("c"), "1", "Running")];
    let order = |sort: &str| -> Vec<String> {
        let v = view(&nodes, &pods, &[], &parse_sort(sort).unwrap());
        v.groups[0].rows.iter().map(|r| r.name.clone()).collect()
    };
    assert_eq!(order("creation"), ["a", "b", "c"]);
    assert_eq!(order("creation=dsc"), ["c", "b", "a"]);
    assert_eq!(order("price"), ["a", "b", "c"]);
    assert_eq!(order("price=dsc"), ["b", "a", "c"]);
    assert_eq!(order("cpu=dsc"), ["c", "a", "b"]);
    assert_eq!(order("label:team=dsc"), ["c", "b", "a"]);
    assert_eq!(order("label:absent"), ["a", "b", "c"]);
}

#[test]
fn unreadable_quantities_are_reported_not_fatal() {
    let mut bad = node(
        "a",
        Some("default"),
        "m5.large",
        "on-demand",
        "us-east-1a",
        30,
    );
    bad["status"]["allocatable"]["cpu"] = json!("lots");
    let nodes = nodes(vec![bad]);
    let pods = vec![pod("p", Some("a"), "x1", "Running")];
    let v = view(&nodes, &pods, &[], &Sort::default());
    assert_eq!(v.groups[0].rows[0].pods, 1);
    assert_eq!(v.problems.len(), 2, "{:?}", v.problems);
    assert!(
        v.problems
            .iter()
            .any(|p| p.starts_with("Node a: status.allocatable.cpu"))
    );
    assert!(v.problems.iter().any(|p| p.starts_with("Pod default/p:")));
}
