//! Which unhealthy nodes are repaired, after which toleration, and when a pool's share holds off.

use super::*;

const MIN: u64 = 60;

fn policies() -> Vec<Policy> {
    let p = |condition: &str, status: &str, minutes: u64| Policy {
        condition: condition.into(),
        status: status.into(),
        toleration: Duration::from_secs(minutes * MIN),
    };
    vec![
        p("Ready", "False", 30),
        p("Ready", "Unknown", 30),
        p("AcceleratedHardwareReady", "False", 10),
    ]
}

fn at(minutes: i64) -> Timestamp {
    Timestamp(minutes * 60_000)
}

/// A managed node of `pool`, created at minute 0, with `conditions` as (type, status,
/// since minute).
fn node(name: &str, pool: &str, conditions: &[(&str, &str, i64)]) -> NodeHealth {
    NodeHealth {
        node: name.into(),
        created: at(0),
        nodepool: Some(pool.into()),
        claim: Some(Claim {
            name: format!("{name}-claim"),
            nodepool: Some(pool.into()),
            ..Claim::default()
        }),
        conditions: conditions
            .iter()
            .map(|(k, s, m)| Condition {
                kind: (*k).into(),
                status: (*s).into(),
                since: Some(at(*m)),
            })
            .collect(),
    }
}

fn healthy(name: &str, pool: &str) -> NodeHealth {
    node(name, pool, &[("Ready", "True", 0)])
}

fn repaired(p: &Plan) -> Vec<(&str, &str)> {
    p.repair
        .iter()
        .map(|r| (r.nodeclaim.as_str(), r.condition.as_str()))
        .collect()
}

/// Four healthy nodes beside `sick` in pool `a`, so one unhealthy node is within 20%.
fn pool_with(sick: NodeHealth) -> Vec<NodeHealth> {
    let mut v = vec![sick];
    v.extend((1..=4).map(|i| healthy(&format!("h{i}"), "a")));
    v
}

#[test]
fn waits_out_the_toleration_then_repairs() {
    let nodes = pool_with(node("n", "a", &[("Ready", "False", 100)]));
    assert_eq!(plan(&nodes, &policies(), at(129)), Plan::default());
    let p = plan(&nodes, &policies(), at(130));
    assert_eq!(repaired(&p), [("n-claim", "Ready")]);
    assert!(p.repair[0].stamp && p.repair[0].delete);
    assert!(p.blocked.is_empty());
}

#[test]
fn the_shortest_toleration_among_matching_conditions_decides() {
    let nodes = pool_with(node(
        "n",
        "a",
        &[
            ("Ready", "Unknown", 100),
            ("AcceleratedHardwareReady", "False", 105),
        ],
    ));
    let p = plan(&nodes, &policies(), at(115));
    assert_eq!(repaired(&p), [("n-claim", "AcceleratedHardwareReady")]);
}

#[test]
fn conditions_no_policy_names_or_healthy_statuses_are_ignored() {
    let nodes = pool_with(node(
        "n",
        "a",
        &[
            ("Ready", "True", 0),
            ("KernelReady", "False", 0),
            ("AcceleratedHardwareReady", "True", 0),
            ("DiskPressure", "True", 0),
        ],
    ));
    assert_eq!(plan(&nodes, &policies(), at(10_000)), Plan::default());
}

#[test]
fn a_condition_without_a_transition_time_counts_from_the_nodes_creation() {
    let mut n = node("n", "a", &[]);
    n.created = at(50);
    n.conditions.push(Condition {
        kind: "AcceleratedHardwareReady".into(),
        status: "False".into(),
        since: None,
    });
    let nodes = pool_with(n);
    assert!(plan(&nodes, &policies(), at(59)).repair.is_empty());
    assert_eq!(
        repaired(&plan(&nodes, &policies(), at(60))),
        [("n-claim", "AcceleratedHardwareReady")]
    );
}

#[test]
fn nodes_without_a_claim_are_never_repaired() {
    let mut n = node("n", "a", &[("Ready", "False", 0)]);
    n.claim = None;
    assert_eq!(plan(&pool_with(n), &policies(), at(1000)), Plan::default());
}

#[test]
fn more_than_a_fifth_of_a_pool_unhealthy_blocks_its_repairs() {
    // Two of two: the allowance of 2 nodes is 1.
    let nodes = vec![
        node("x", "a", &[("Ready", "False", 0)]),
        node("y", "a", &[("Ready", "False", 0)]),
    ];
    let p = plan(&nodes, &policies(), at(1000));
    assert!(p.repair.is_empty());
    assert_eq!(p.blocked.len(), 2);
    assert_eq!((p.blocked[0].unhealthy, p.blocked[0].total), (2, 2));
    assert_eq!(p.blocked[0].nodepool.as_deref(), Some("a"));
    // Still tolerated nodes count too: y is unhealthy for a minute only.
    let nodes = vec![
        node("x", "a", &[("Ready", "False", 0)]),
        node("y", "a", &[("Ready", "False", 999)]),
    ];
    let p = plan(&nodes, &policies(), at(1000));
    assert!(p.repair.is_empty());
    assert_eq!(p.blocked.len(), 1);
}

#[test]
fn the_allowance_rounds_up_and_other_pools_do_not_count() {
    assert_eq!(
        [0, 1, 2, 5, 6, 10, 11].map(allowance),
        [0, 1, 1, 1, 2, 2, 3]
    );
    // One of one, one of two, one of three: each may be repaired.
    for healthy_peers in 0..=2 {
        let mut nodes = vec![node("n", "a", &[("Ready", "False", 0)])];
        nodes.extend((0..healthy_peers).map(|i| healthy(&format!("h{i}"), "a")));
        // A sick node of another pool is not a's business.
        nodes.push(node("other", "b", &[("Ready", "False", 999)]));
        let p = plan(&nodes, &policies(), at(1000));
        assert_eq!(repaired(&p), [("n-claim", "Ready")], "{healthy_peers}");
    }
}

#[test]
fn a_standalone_claim_is_judged_against_the_whole_cluster() {
    let mut n = node("n", "a", &[("Ready", "False", 0)]);
    n.nodepool = None;
    n.claim.as_mut().unwrap().nodepool = None;
    // Its own pool-less count would be 1 of 1; the cluster's is 2 of 2.
    let nodes = vec![n.clone(), node("m", "b", &[("Ready", "Unknown", 999)])];
    let p = plan(&nodes, &policies(), at(1000));
    assert_eq!(p.blocked.len(), 1);
    assert_eq!(p.blocked[0].nodepool, None);
    let mut nodes = pool_with(n);
    nodes.push(healthy("h5", "b"));
    assert_eq!(
        repaired(&plan(&nodes, &policies(), at(1000))),
        [("n-claim", "Ready")]
    );
}

#[test]
fn a_deleting_claim_gets_its_deadline_brought_forward_once() {
    let mut n = node("n", "a", &[("Ready", "False", 0)]);
    let claim = n.claim.as_mut().unwrap();
    claim.deleting = true;
    claim.termination_timestamp = Some(at(5000));
    let p = plan(&pool_with(n.clone()), &policies(), at(1000));
    assert_eq!(repaired(&p), [("n-claim", "Ready")]);
    assert!(p.repair[0].stamp && !p.repair[0].delete);
    // Once the deadline has passed, there is nothing left to do.
    n.claim.as_mut().unwrap().termination_timestamp = Some(at(900));
    assert_eq!(plan(&pool_with(n), &policies(), at(1000)), Plan::default());
}
