//! Node repair (upstream's `node.health` controller, gate `NodeRepair`): which NodeClaims to
//! delete because their Node has been unhealthy for too long.
//!
//! The cloud provider lists repair policies: a node condition type, the status that makes it
//! unhealthy, and how long that may last (its toleration). A managed Node whose condition has
//! matched a policy since at least the toleration ago (counted from the condition's
//! `lastTransitionTime`, or the Node's creation when it has none) gets its claim's termination
//! timestamp set to now, so the drain does not wait, and its claim deleted; no disruption
//! budget applies.
//!
//! The guard: a NodePool with more than 20% of its Nodes unhealthy (any condition matching a
//! policy, tolerated or not; the allowance rounds up, as a PDB's percentage does, so one node
//! of a small pool can always be repaired) repairs none of them, since something wider than
//! one node is wrong and replacing them all would not help. A claim without a NodePool is
//! judged against every Node of the cluster.
//!
//! Offers the decision only; deleting claims and reading Node conditions are the controller's.

use std::time::Duration;

use crate::time::Timestamp;

/// The share of a NodePool's Nodes (in percent) that may be unhealthy while repair goes on.
pub const MAX_UNHEALTHY_PERCENT: usize = 20;

/// One repair policy of a cloud provider.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    /// The node condition type (`Ready`, `KernelReady`, ...).
    pub condition: String,
    /// The status that counts as unhealthy (`False`, `Unknown`, `True`).
    pub status: String,
    /// How long the condition may hold that status before the node is repaired.
    pub toleration: Duration,
}

/// One condition of a Node's status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    /// The condition's `type` (`Ready`, `KernelReady`, ...).
    pub kind: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// `lastTransitionTime`, when the Node has one.
    pub since: Option<Timestamp>,
}

/// The NodeClaim a Node belongs to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Claim {
    /// The NodeClaim's name.
    pub name: String,
    /// The claim's `karpenter.sh/nodepool` label; `None` for a standalone claim.
    pub nodepool: Option<String>,
    /// The claim has a deletion timestamp already.
    pub deleting: bool,
    /// Its `karpenter.sh/nodeclaim-termination-timestamp`, when set and readable.
    pub termination_timestamp: Option<Timestamp>,
}

/// What repair reads of one Node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeHealth {
    /// The Node's name.
    pub node: String,
    /// The Node's creation: unhealthiness counts from it when a condition has no
    /// `lastTransitionTime`.
    pub created: Timestamp,
    /// The Node's `karpenter.sh/nodepool` label: the pool whose count it is in.
    pub nodepool: Option<String>,
    /// `None` for a Node no NodeClaim owns: it is counted, never repaired.
    pub claim: Option<Claim>,
    /// The Node's `status.conditions`.
    pub conditions: Vec<Condition>,
}

/// A claim to repair.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Repair {
    /// The unhealthy Node.
    pub node: String,
    /// Its NodeClaim, to delete.
    pub nodeclaim: String,
    /// The claim's NodePool; `None` for a standalone claim.
    pub(crate) nodepool: Option<String>,
    /// The condition type that was unhealthy too long.
    pub condition: String,
    /// Set the termination timestamp to now first (it is unset or still in the future).
    pub stamp: bool,
    /// Delete the claim (it is not being deleted yet).
    pub delete: bool,
}

/// An unhealthy node past its toleration that the guard keeps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blocked {
    /// The unhealthy Node.
    pub node: String,
    /// Its NodeClaim, kept.
    pub nodeclaim: String,
    /// The pool over the threshold; `None` when the whole cluster is (a standalone claim).
    pub nodepool: Option<String>,
    /// Nodes of the pool (or cluster) with a condition matching a policy, tolerated or not.
    pub unhealthy: usize,
    /// Nodes of the pool (or cluster).
    pub total: usize,
}

/// What node repair decided: the claims to delete and the nodes the guard keeps.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// The claims to repair, in the order of the nodes given.
    pub repair: Vec<Repair>,
    /// The nodes past their toleration that the guard keeps, in the same order.
    pub blocked: Vec<Blocked>,
}

/// What to repair among `nodes` at `now` under `policies`, in the order of `nodes`.
pub fn plan(nodes: &[NodeHealth], policies: &[Policy], now: Timestamp) -> Plan {
    let mut out = Plan::default();
    for n in nodes {
        let Some(claim) = &n.claim else {
            continue;
        };
        let Some((condition, due)) = earliest_due(n, policies) else {
            continue;
        };
        if now < due {
            continue;
        }
        let (unhealthy, total) = census(nodes, policies, claim.nodepool.as_deref());
        if unhealthy > allowance(total) {
            out.blocked.push(Blocked {
                node: n.node.clone(),
                nodeclaim: claim.name.clone(),
                nodepool: claim.nodepool.clone(),
                unhealthy,
                total,
            });
            continue;
        }
        // A deadline already past is left as it is, as upstream does.
        let stamp = claim.termination_timestamp.is_none_or(|t| t >= now);
        if stamp || !claim.deleting {
            out.repair.push(Repair {
                node: n.node.clone(),
                nodeclaim: claim.name.clone(),
                nodepool: claim.nodepool.clone(),
                condition: condition.to_owned(),
                stamp,
                delete: !claim.deleting,
            });
        }
    }
    out
}

/// The policy-matching condition of `n` whose toleration ends first, and when it ends.
fn earliest_due<'a>(n: &'a NodeHealth, policies: &[Policy]) -> Option<(&'a str, Timestamp)> {
    policies
        .iter()
        .filter_map(|p| {
            let c = find(n, &p.condition).filter(|c| c.status == p.status)?;
            // Upstream (v1.14) counts from the condition's transition as written; one without
            // a time counts from the Node's creation rather than from the epoch.
            let since = c.since.unwrap_or(n.created);
            Some((c.kind.as_str(), since.plus(p.toleration)))
        })
        .min_by_key(|(_, due)| *due)
}

/// The first condition of `kind`, as Kubernetes' helpers read a Node.
fn find<'a>(n: &'a NodeHealth, kind: &str) -> Option<&'a Condition> {
    n.conditions.iter().find(|c| c.kind == kind)
}

/// Whether any condition of `n` matches a policy, however long it has.
pub(crate) fn unhealthy(n: &NodeHealth, policies: &[Policy]) -> bool {
    policies
        .iter()
        .any(|p| find(n, &p.condition).is_some_and(|c| c.status == p.status))
}

/// Unhealthy and total Nodes of `nodepool` (by the Nodes' label), or of the whole cluster.
fn census(nodes: &[NodeHealth], policies: &[Policy], nodepool: Option<&str>) -> (usize, usize) {
    let members: Vec<&NodeHealth> = nodes
        .iter()
        .filter(|n| nodepool.is_none() || n.nodepool.as_deref() == nodepool)
        .collect();
    let sick = members.iter().filter(|n| unhealthy(n, policies)).count();
    (sick, members.len())
}

/// How many of `total` Nodes may be unhealthy: [`MAX_UNHEALTHY_PERCENT`], rounded up.
pub(crate) fn allowance(total: usize) -> usize {
    (total * MAX_UNHEALTHY_PERCENT).div_ceil(100)
}

#[cfg(test)]
mod tests {
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
}
