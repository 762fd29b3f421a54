use std::collections::BTreeMap;
use std::sync::Arc;

use super::*;
use crate::model::{
    CapacityType, InstanceType, Node, NodeClaim, NodePool, Offering, Pod, PodPhase, PodTemplate,
};
use crate::resources::Resources;
use crate::testkit::{instance_type, offering};

fn res(cpu: i64, memory: i64) -> Resources {
    Resources::new().with(CPU, cpu).with(MEMORY, memory)
}

fn node(name: &str, cpu: i64, memory: i64) -> Node {
    Node {
        name: name.into(),
        allocatable: res(cpu, memory),
        ..Node::default()
    }
}

fn pod(name: &str, on: &str, cpu: i64, memory: i64) -> Pod {
    Pod {
        name: name.into(),
        node_name: Some(on.into()),
        template: Arc::new(PodTemplate {
            requests: res(cpu, memory),
            ..PodTemplate::default()
        }),
        ..Pod::default()
    }
}

fn on_demand(price: f64) -> Offering {
    offering("z", CapacityType::OnDemand, price)
}

/// An instance type of `cpu` and `memory` (no overhead).
fn sized(name: &str, cpu: i64, memory: i64, offerings: Vec<Offering>) -> InstanceType {
    instance_type(name, res(cpu, memory), offerings)
}

fn snapshot(prices: &[f64]) -> Snapshot {
    let it = sized(
        "t",
        16000,
        64000,
        prices
            .iter()
            .map(|&price| Offering {
                available: false,
                ..on_demand(price)
            })
            .collect(),
    );
    Snapshot {
        nodes: vec![
            Arc::new(node("a", 4000, 8000)),
            Arc::new(node("b", 4000, 8000)),
            Arc::new(node("c", 4000, 8000)),
        ],
        pods: vec![
            pod("a1", "a", 3000, 1000).into(),
            pod("b1", "b", 1000, 1000).into(),
            pod("b2", "b", 1500, 6000).into(),
            pod("c1", "c", 500, 500).into(),
            Pod {
                phase: PodPhase::Succeeded,
                ..pod("c-done", "c", 4000, 8000)
            }
            .into(),
        ],
        instance_types: BTreeMap::from([("p".to_string(), Arc::new(vec![it]))]),
        ..Snapshot::default()
    }
}

/// Node `on` of `s` as a candidate priced `price`, its live pods to move.
fn candidate<'a>(
    s: &'a Snapshot,
    on: &str,
    price: f64,
    (claim, pool): &'a (NodeClaim, NodePool),
) -> Candidate<'a> {
    Candidate {
        node: s.nodes.iter().find(|n| n.name == on).unwrap(),
        claim,
        nodepool: pool,
        instance_type: "".into(),
        zone: "".into(),
        capacity_type: None,
        price,
        reschedulable_pods: s
            .pods
            .iter()
            .filter(|p| p.node_name.as_deref() == Some(on) && !p.is_terminal())
            .map(|p| &**p)
            .collect(),
        disruption_cost: 0.0,
        reschedule_cost: 1.0,
    }
}

/// The bound of node `on` priced `price`; `NEG_INFINITY` for no command at all.
fn bound(s: &Snapshot, on: &str, price: f64) -> f64 {
    let owners = (NodeClaim::default(), NodePool::default());
    SavingBounds::new(s)
        .of(&candidate(s, on, price, &owners))
        .unwrap_or(f64::NEG_INFINITY)
}

#[test]
fn a_candidates_pods_are_bounded_by_what_they_ask() {
    let s = snapshot(&[0.10]);
    let bounds = SavingBounds::new(&s);
    let mut copy = (*s.pods[1]).clone();
    copy.requests = res(9000, 100);
    // A candidate of such copies is bounded by what they ask: no other node holds 9000m,
    // so a new node must (the cheapest that does costs 0.10).
    let owners = (NodeClaim::default(), NodePool::default());
    let mut c = candidate(&s, "b", 0.2, &owners);
    assert_eq!(bounds.of(&c), Some(0.2));
    c.reschedulable_pods = vec![&copy];
    let bound = bounds.of(&c).expect("a replacement saves");
    assert!((bound - 0.1).abs() < 1e-9, "{bound}");
}

#[test]
fn a_pod_that_fits_nowhere_else_bounds_the_saving_by_the_price_gap() {
    // Free: a 1000m / 7000, b 1500m / 1000, c 3500m / 7500 (its finished pod holds nothing).
    // The floor is the cheapest offering, available or not.
    let s = snapshot(&[0.30, 0.10, 0.20]);
    // a's 3000m pod fits on c (3500m free): a may be deleted.
    assert_eq!(bound(&s, "a", 0.5), 0.5);
    // c's pod fits anywhere.
    assert_eq!(bound(&s, "c", 0.5), 0.5);
    // b's 6000 memory pod fits on a (7000) or c: b may be deleted.
    assert_eq!(bound(&s, "b", 0.5), 0.5);
    // Without c, a's 3000m pod fits nowhere (b has 1500m free).
    let mut without_c = s.clone();
    without_c.nodes.retain(|n| n.name != "c");
    assert_eq!(bound(&without_c, "a", 0.5), 0.5 - 0.10);
    // Priced at the floor, a can neither go nor be replaced by anything cheaper.
    assert_eq!(bound(&without_c, "a", 0.10), f64::NEG_INFINITY);
    assert_eq!(bound(&without_c, "a", 0.11), 0.11 - 0.10);
    // Deletable, it keeps its price, whatever that is.
    assert_eq!(bound(&s, "a", 0.10), 0.10);
}

#[test]
fn pods_that_fit_one_by_one_may_still_not_fit_together() {
    let mut s = snapshot(&[0.10]);
    s.nodes = vec![
        Arc::new(node("x", 2000, 8000)),
        Arc::new(node("y", 4000, 8000)),
    ];
    s.pods = vec![
        pod("x1", "x", 1000, 0).into(),
        pod("y1", "y", 800, 0).into(),
        pod("y2", "y", 800, 0).into(),
    ];
    // Each 800m pod fits in x's 1000m, both do not.
    assert_eq!(bound(&s, "y", 0.5), 0.5 - 0.10);
    s.nodes.push(Arc::new(node("z", 1000, 8000)));
    assert_eq!(bound(&s, "y", 0.5), 0.5);
    // Room only counts on nodes that can take the pod: 2,400m free in all, but no node
    // has the 1,500m the larger pod needs.
    s.node_mut(0).allocatable = res(2400, 8000);
    s.node_mut(2).allocatable = res(1400, 8000);
    s.pod_mut(1).requests = Resources::new().with(CPU, 1500);
    s.pod_mut(2).requests = Resources::new().with(CPU, 100);
    assert_eq!(bound(&s, "y", 0.5), 0.5 - 0.10);
    s.node_mut(0).allocatable = res(2500, 8000);
    assert_eq!(bound(&s, "y", 0.5), 0.5);
}

#[test]
fn the_floor_is_the_cheapest_offering_a_pool_may_launch_on() {
    let mut s = snapshot(&[0.30]);
    s.nodes.retain(|n| n.name == "b");
    let its = Arc::make_mut(s.instance_types.get_mut("p").unwrap());
    its[0]
        .offerings
        .push(offering("z", CapacityType::Spot, 0.10));
    // No NodePool named `p`, or one without a capacity-type requirement: spot counts.
    assert_eq!(bound(&s, "b", 0.5), 0.5 - 0.10);
    let mut pool = NodePool {
        name: "p".into(),
        ..NodePool::default()
    };
    s.nodepools = vec![pool.clone()];
    assert_eq!(bound(&s, "b", 0.5), 0.5 - 0.10);
    // An on-demand pool never launches the spot offering.
    pool.template.requirements = vec![crate::requirements::Requirement::new(
        labels::CAPACITY_TYPE,
        Operator::In,
        &["on-demand"],
    )];
    s.nodepools = vec![pool];
    assert_eq!(bound(&s, "b", 0.5), 0.5 - 0.30);
}

#[test]
fn a_pod_needs_one_node_with_both_its_cpu_and_its_memory() {
    let mut s = snapshot(&[0.10]);
    // x has cpu to spare, z memory; neither has both.
    s.nodes = vec![
        Arc::new(node("x", 4000, 1500)),
        Arc::new(node("y", 4000, 8000)),
        Arc::new(node("z", 1200, 8000)),
    ];
    s.pods = vec![
        pod("x1", "x", 1000, 1000).into(),
        pod("y1", "y", 1000, 1000).into(),
        pod("z1", "z", 1000, 2000).into(),
    ];
    assert_eq!(bound(&s, "y", 0.5), 0.5 - 0.10);
    s.node_mut(0).allocatable = res(4000, 2000);
    assert_eq!(bound(&s, "y", 0.5), 0.5);
}

#[test]
fn an_initialized_claim_without_its_node_is_room_too() {
    let mut s = snapshot(&[0.10]);
    s.nodes.retain(|n| n.name == "b");
    // b alone: its pods need a replacement, unless a claim that initialized takes them.
    assert_eq!(bound(&s, "b", 0.5), 0.5 - 0.10);
    s.node_claims.push(Arc::new(NodeClaim {
        name: "w".into(),
        allocatable: res(4000, 8000),
        ..NodeClaim::default()
    }));
    assert_eq!(bound(&s, "b", 0.5), 0.5 - 0.10);
    s.claim_mut(0).initialized = true;
    assert_eq!(bound(&s, "b", 0.5), 0.5);
    // Its Node in the snapshot stands for it.
    s.claim_mut(0).node_name = Some("b".into());
    assert_eq!(bound(&s, "b", 0.5), 0.5 - 0.10);
}

#[test]
fn pods_that_fit_no_other_node_price_the_replacement_by_a_type_that_holds_them() {
    let mut s = snapshot(&[]);
    s.instance_types = BTreeMap::from([(
        "p".to_string(),
        Arc::new(vec![
            sized("large", 8000, 32000, vec![on_demand(0.40)]),
            sized("small", 2000, 4000, vec![on_demand(0.10)]),
        ]),
    )]);
    // Free: x 500m, y 0m; y's pods fit nowhere else, 1,500m in all: `small` holds them.
    s.nodes = vec![
        Arc::new(node("x", 4000, 8000)),
        Arc::new(node("y", 4000, 8000)),
    ];
    s.pods = vec![
        pod("x1", "x", 3500, 1000).into(),
        pod("y1", "y", 1000, 1000).into(),
        pod("y2", "y", 500, 1000).into(),
    ];
    assert_eq!(bound(&s, "y", 0.5), 0.5 - 0.10);
    // 2,500m more: only `large` holds them.
    s.pods.push(pod("y3", "y", 2500, 1000).into());
    assert_eq!(bound(&s, "y", 0.5), 0.5 - 0.40);
    // With 1,000m free on x, the 1,000m and 500m pods each fit there and leave the sum:
    // the 2,500m pod alone still needs `large`.
    s.pod_mut(0).requests = res(3000, 1000);
    assert_eq!(bound(&s, "y", 0.5), 0.5 - 0.40);
    // With 2,500m free on x, every pod fits somewhere: the cheapest offering is the floor.
    s.pod_mut(0).requests = res(1500, 1000);
    assert_eq!(bound(&s, "y", 0.5), 0.5 - 0.10);
    // No type holds them: no single-node command at all.
    s.pods.push(pod("y4", "y", 9000, 1000).into());
    assert_eq!(bound(&s, "y", 0.5), f64::NEG_INFINITY);
}

#[test]
fn a_roomier_candidate_does_not_hide_the_other_nodes_that_fit() {
    let mut s = snapshot(&[0.10]);
    // y has the most room of all and covers x's, which still takes y's pod.
    s.nodes = vec![
        Arc::new(node("x", 2000, 4000)),
        Arc::new(node("y", 8000, 16000)),
    ];
    s.pods = vec![pod("y1", "y", 1000, 1000)]
        .into_iter()
        .map(Into::into)
        .collect();
    assert_eq!(bound(&s, "y", 0.5), 0.5);
    s.pods.push(pod("x1", "x", 1500, 0).into());
    assert_eq!(bound(&s, "y", 0.5), 0.5 - 0.10);
}

#[test]
fn a_prefix_needs_more_than_one_new_node_when_its_pods_outgrow_the_room_left() {
    // Free: a 1000m, b 1500m, c 3500m (6000m in all); the largest type has 2000m.
    let mut s = snapshot(&[0.10]);
    Arc::make_mut(s.instance_types.get_mut("p").unwrap())[0].capacity = res(2000, 64000);
    let bounds = SavingBounds::new(&s);
    let owners = (NodeClaim::default(), NodePool::default());
    let (a, b) = (
        candidate(&s, "a", 0.5, &owners),
        candidate(&s, "b", 0.5, &owners),
    );
    // a and b move 5500m; c's 3500m and one new node of 2000m hold 5500m.
    assert!(!bounds.rules_out_together(&[&a, &b]));
    // Without c's room only one new node is left for them.
    let mut fuller = s.clone();
    fuller.pods.push(pod("c2", "c", 100, 0).into());
    let bounds = SavingBounds::new(&fuller);
    assert!(bounds.rules_out_together(&[&a, &b]));
    // A single candidate's pods still fit.
    assert!(!bounds.rules_out_together(&[&a]));
}

#[test]
fn a_prefix_whose_stranded_pods_outgrow_one_new_node_is_ruled_out() {
    // Twenty nodes with 500m free each: 10,000m in all, but no 1,800m pod fits on one.
    let mut s = snapshot(&[0.30]);
    Arc::make_mut(s.instance_types.get_mut("p").unwrap())[0].capacity = res(4000, 64000);
    s.nodes = (0..20)
        .map(|i| Arc::new(node(&format!("f{i}"), 4000, 8000)))
        .collect();
    s.pods = (0..20)
        .map(|i| pod(&format!("f{i}-1"), &format!("f{i}"), 3500, 0))
        .map(Into::into)
        .collect();
    for n in ["a", "b"] {
        s.nodes.push(Arc::new(node(n, 4000, 8000)));
        s.pods.push(pod(&format!("{n}1"), n, 1800, 0).into());
        s.pods.push(pod(&format!("{n}2"), n, 1800, 0).into());
    }
    let bounds = SavingBounds::new(&s);
    let owners = (NodeClaim::default(), NodePool::default());
    let a = candidate(&s, "a", 0.5, &owners);
    let b = candidate(&s, "b", 0.5, &owners);
    // 7,200m stranded: more than the 4,000m type holds.
    assert!(bounds.rules_out_together(&[&a, &b]));
    // a alone: 3,600m fit the 0.30 type, cheaper than a.
    assert!(!bounds.rules_out_together(&[&a]));
    // Priced at 0.30, a gains nothing from a new node of 0.30.
    let cheap = candidate(&s, "a", 0.30, &owners);
    assert!(bounds.rules_out_together(&[&cheap]));
    // b with room for a's pods: they move there unless b goes too.
    s.nodes.last_mut().map(Arc::make_mut).unwrap().allocatable = res(8000, 8000);
    let bounds = SavingBounds::new(&s);
    let (a, b) = (
        candidate(&s, "a", 0.30, &owners),
        candidate(&s, "b", 0.5, &owners),
    );
    assert!(!bounds.rules_out_together(&[&a]));
    assert!(bounds.rules_out_together(&[&a, &b]));
}

#[test]
fn memory_alone_can_rule_out_a_delete() {
    // x has cpu to spare but not memory; y's pod asks for little cpu and much memory.
    let mut s = snapshot(&[0.10]);
    s.nodes = vec![
        Arc::new(node("x", 4000, 8000)),
        Arc::new(node("y", 4000, 8000)),
    ];
    s.pods = vec![pod("x1", "x", 0, 7000), pod("y1", "y", 100, 2000)]
        .into_iter()
        .map(Into::into)
        .collect();
    assert_eq!(bound(&s, "y", 0.5), 0.5 - 0.10);
    s.pod_mut(0).requests = Resources::new().with(MEMORY, 6000);
    assert_eq!(bound(&s, "y", 0.5), 0.5);
}

#[test]
fn a_candidate_alone_or_without_pods_keeps_its_price_or_the_gap() {
    let mut s = snapshot(&[0.10]);
    s.nodes.retain(|n| n.name == "b");
    // No other node: its pods need a replacement.
    assert_eq!(bound(&s, "b", 0.5), 0.5 - 0.10);
    s.pods.retain(|p| p.node_name.as_deref() != Some("b"));
    // No pods to move: it may simply go.
    assert_eq!(bound(&s, "b", 0.5), 0.5);
    // No offering anywhere: nothing can replace it.
    let mut bare = snapshot(&[]);
    bare.nodes.retain(|n| n.name == "b");
    assert_eq!(bound(&bare, "b", 0.5), f64::NEG_INFINITY);
}
