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
mod tests;
