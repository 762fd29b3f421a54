//! Expiration: a claim older than its `expireAfter` is replaced whatever protects it. It is
//! forceful: no budgets, no blockers, no replacement first.

use std::cell::OnceCell;
use std::time::Duration;

use super::Round;
use crate::disruption::candidates::is_reschedulable;
use crate::disruption::command::{Command, Method, Target};
use crate::labels;
use crate::model::{Node, NodeClaim, NodePool, Snapshot};
use crate::scheduling::intern::FastMap;
use crate::time::Timestamp;

/// One command per expired claim that has a node.
pub(super) fn plan(round: &mut Round<'_>) {
    let snapshot = round.snapshot;
    // The first node of each name, as a scan of the node list would find it; built only once
    // a claim has expired.
    let nodes_by_name: OnceCell<FastMap<&str, &Node>> = OnceCell::new();
    let by_name = |n: &str| {
        nodes_by_name
            .get_or_init(|| {
                let mut m = FastMap::default();
                for n in &snapshot.nodes {
                    m.entry(n.name.as_str()).or_insert(&**n);
                }
                m
            })
            .get(n)
            .copied()
    };
    for claim in &snapshot.node_claims {
        if claim.deletion_timestamp.is_some() || !expired(&round.budgets.pools, snapshot.now, claim)
        {
            continue;
        }
        let Some(node) = claim.node_name.as_deref().and_then(by_name) else {
            continue;
        };
        let cmd = Command::new(
            Method::Expiration,
            vec![expiring_target(snapshot, claim, node)],
            vec![],
        );
        round.push(cmd);
    }
}

/// `pools` holds the first NodePool of each name, as a scan of the list would find it.
fn expired(pools: &FastMap<&str, &NodePool>, now: Timestamp, claim: &NodeClaim) -> bool {
    expire_after(pools, claim).is_some_and(|e| now.since(claim.creation_timestamp) >= e)
}

/// The claim's `expireAfter`, else its NodePool's template's; `None` is `Never`.
pub(super) fn expire_after(
    pools: &FastMap<&str, &NodePool>,
    claim: &NodeClaim,
) -> Option<Duration> {
    claim.expire_after.or_else(|| {
        pools
            .get(claim.nodepool.as_str())
            .and_then(|p| p.template.expire_after)
    })
}

/// A target for a node that expires, whatever protects it.
fn expiring_target(snapshot: &Snapshot, claim: &NodeClaim, node: &Node) -> Target {
    let label = |k: &str| node.labels.get(k).cloned().unwrap_or_default();
    let pods = snapshot
        .pods
        .iter()
        .filter(|p| p.node_name.as_deref() == Some(node.name.as_str()))
        .filter(|p| is_reschedulable(p))
        .map(|p| p.key())
        .collect();
    let price = snapshot
        .instance_types
        .get(&claim.nodepool)
        .and_then(|its| {
            its.iter()
                .find(|it| it.name == label(labels::INSTANCE_TYPE))
        })
        .and_then(|it| {
            it.offerings.iter().find(|o| {
                o.zone == label(labels::ZONE)
                    && o.capacity_type.as_str() == label(labels::CAPACITY_TYPE)
            })
        })
        .map(|o| o.price)
        .unwrap_or(0.0);
    Target {
        node: node.name.clone(),
        nodeclaim: claim.name.clone(),
        nodepool: claim.nodepool.clone(),
        instance_type: label(labels::INSTANCE_TYPE),
        zone: label(labels::ZONE),
        capacity_type: label(labels::CAPACITY_TYPE),
        price,
        pods,
    }
}
