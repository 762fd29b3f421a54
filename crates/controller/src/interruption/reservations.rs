//! Capacity-reservation upkeep, once a minute on the leader, as upstream's
//! `capacityreservation.expiration` and `capacityreservation.capacitytype` controllers:
//!
//! - a claim in a capacity block that has entered its expiring window (the last
//!   [`EXPIRING_WINDOW`] before the block's end, ten minutes before EC2 starts reclaiming) is
//!   deleted, so its pods move while there is time. The blocks' ends come from the node
//!   classes' status, and for blocks a claim sits in that no class lists any more, from the
//!   cloud;
//! - a claim labelled `reserved` whose instance EC2 now reports as on-demand (its reservation
//!   ended or was cancelled, and EC2 kept the instance) is relabelled
//!   `karpenter.sh/capacity-type=on-demand` without its reservation id, and so are its
//!   registered Nodes, so scheduling and disruption price it as what it now is.
//!
//! [`expiring`] and [`demoted`] are the pure halves; [`ReservationController`] is the shell.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_cloud::{CloudProvider, Instance, ReservationEnd};
use nodewright_core::labels;
use nodewright_core::model::CapacityType;
use nodewright_core::time::Timestamp;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::clock::{Clock, parse_rfc3339};
use crate::context::Context;
use crate::state::{ClusterState, SharedState, lock};
use crate::write::{KubeWriter, MetaPatch, NodePatch};

/// How often the leader looks (upstream's).
pub const CHECK_EVERY: Duration = Duration::from_secs(60);

/// A capacity block is expiring this long before its end (upstream's 40 minutes).
pub const EXPIRING_WINDOW: Duration = Duration::from_secs(40 * 60);

/// The reservation-type label value of a capacity block.
const CAPACITY_BLOCK: &str = "capacity-block";

fn label<'a>(claim: &'a NodeClaim, key: &str) -> Option<&'a str> {
    claim
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

/// Capacity blocks in any node class's status that are expiring at `now`: by their end time,
/// or by the state the class's last reconcile wrote.
fn expiring_blocks(state: &ClusterState, now: Timestamp) -> BTreeSet<String> {
    state
        .nodeclasses
        .values()
        .filter_map(|c| c.status.as_ref()?.capacity_reservations.as_ref())
        .flatten()
        .filter(|r| r.reservation_type.as_deref() == Some(CAPACITY_BLOCK))
        .filter(|r| {
            r.state.as_deref() == Some("expiring")
                || r.end_time
                    .as_deref()
                    .and_then(parse_rfc3339)
                    .is_some_and(|end| end <= now.plus(EXPIRING_WINDOW))
        })
        .map(|r| r.id.clone())
        .collect()
}

/// Capacity blocks live claims sit in (by their reservation id and type labels) that no node
/// class's status lists, sorted: their end times must be looked up in the cloud.
pub fn unlisted_blocks(state: &ClusterState) -> Vec<String> {
    let listed: BTreeSet<&str> = state
        .nodeclasses
        .values()
        .filter_map(|c| c.status.as_ref()?.capacity_reservations.as_ref())
        .flatten()
        .map(|r| r.id.as_str())
        .collect();
    let ids: BTreeSet<String> = state
        .nodeclaims
        .values()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .filter(|c| label(c, labels::aws::CAPACITY_RESERVATION_TYPE) == Some(CAPACITY_BLOCK))
        .filter_map(|c| label(c, labels::aws::CAPACITY_RESERVATION_ID))
        .filter(|id| !id.is_empty() && !listed.contains(id))
        .map(str::to_string)
        .collect();
    ids.into_iter().collect()
}

/// Claims (not already deleting) in a capacity block that is expiring at `now`, sorted, with
/// the reservation each is in. Blocks come from the node classes' status.
pub fn expiring(state: &ClusterState, now: Timestamp) -> Vec<(String, String)> {
    expiring_with(state, now, &[])
}

/// [`expiring`], with blocks no class lists whose ends the cloud reported (`looked_up`).
pub fn expiring_with(
    state: &ClusterState,
    now: Timestamp,
    looked_up: &[ReservationEnd],
) -> Vec<(String, String)> {
    let mut blocks = expiring_blocks(state, now);
    blocks.extend(
        looked_up
            .iter()
            .filter(|r| r.capacity_block)
            .filter(|r| r.end.is_some_and(|end| end <= now.plus(EXPIRING_WINDOW)))
            .map(|r| r.id.clone()),
    );
    if blocks.is_empty() {
        return Vec::new();
    }
    state
        .nodeclaims
        .values()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .filter_map(|c| {
            let id = label(c, labels::aws::CAPACITY_RESERVATION_ID)?;
            blocks
                .contains(id)
                .then(|| Some((c.metadata.name.clone()?, id.to_string())))?
        })
        .collect()
}

/// A claim EC2 moved out of its reservation, and its Nodes to relabel with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Demoted {
    pub nodeclaim: String,
    /// Registered, not deleting, still labelled `reserved`.
    pub nodes: Vec<String>,
}

/// Claims labelled `reserved` whose instance `instances` (the cloud's current list) reports
/// as on-demand. Deleting claims are skipped: they are draining anyway. Sorted by claim.
pub fn demoted(state: &ClusterState, instances: &[Instance]) -> Vec<Demoted> {
    let mut out: Vec<Demoted> = instances
        .iter()
        .filter(|i| i.capacity_type == CapacityType::OnDemand)
        .filter_map(|i| {
            let claim = state.claim_by_provider_id(&i.provider_id)?;
            if claim.metadata.deletion_timestamp.is_some()
                || label(claim, labels::CAPACITY_TYPE) != Some(labels::CAPACITY_TYPE_RESERVED)
            {
                return None;
            }
            let nodes = state
                .node_by_provider_id(&i.provider_id)
                .into_iter()
                .filter(|n| n.metadata.deletion_timestamp.is_none())
                .filter(|n| {
                    let l = state.node_labels(n.metadata.name.as_deref().unwrap_or_default());
                    // A Node not yet registered still gets the claim's labels copied over.
                    l.and_then(|l| l.get(labels::REGISTERED))
                        .map(String::as_str)
                        == Some("true")
                        && l.and_then(|l| l.get(labels::CAPACITY_TYPE))
                            .map(String::as_str)
                            == Some(labels::CAPACITY_TYPE_RESERVED)
                })
                .filter_map(|n| n.metadata.name.clone())
                .collect();
            Some(Demoted {
                nodeclaim: claim.metadata.name.clone()?,
                nodes,
            })
        })
        .collect();
    out.sort_by(|a, b| a.nodeclaim.cmp(&b.nodeclaim));
    out
}

/// The label change for a demoted claim or Node.
pub fn on_demand_patch() -> MetaPatch {
    let mut p = MetaPatch::default();
    p.labels.insert(
        labels::CAPACITY_TYPE.into(),
        Some(labels::CAPACITY_TYPE_ON_DEMAND.into()),
    );
    p.labels
        .insert(labels::aws::CAPACITY_RESERVATION_ID.into(), None);
    p
}

impl crate::metrics::Reconciled for Pass {
    fn failed(&self) -> bool {
        !self.failed.is_empty()
    }
}

/// What one pass did, for logs and tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pass {
    /// Claims deleted for an expiring capacity block.
    pub deleted: Vec<String>,
    /// Claims and Nodes relabelled on-demand.
    pub relabelled: Vec<String>,
    pub failed: Vec<String>,
}

pub struct ReservationController {
    state: SharedState,
    writer: Arc<dyn KubeWriter>,
    cloud: Arc<dyn CloudProvider>,
    clock: Clock,
    leader: watch::Receiver<bool>,
}

impl ReservationController {
    pub fn new(ctx: &Context) -> Self {
        let Context {
            state,
            writer,
            cloud,
            clock,
            ..
        } = ctx.clone();
        ReservationController {
            state,
            writer,
            cloud,
            clock,
            leader: watch::channel(true).1,
        }
    }

    pub fn with_leader(mut self, leader: watch::Receiver<bool>) -> Self {
        self.leader = leader;
        self
    }

    fn active(&self) -> bool {
        *self.leader.borrow() && lock(&self.state).synced()
    }

    /// One pass: expiring blocks first, then demotions.
    pub async fn pass(&self) -> Pass {
        let mut out = Pass::default();
        let now = self.clock.now();
        let unlisted = unlisted_blocks(&lock(&self.state));
        let looked_up = if unlisted.is_empty() {
            Vec::new()
        } else {
            match self.cloud.capacity_reservations(&unlisted).await {
                Ok(r) => r,
                Err(e) => {
                    out.failed
                        .push(format!("looking up capacity blocks {unlisted:?}: {e}"));
                    Vec::new()
                }
            }
        };
        let doomed = expiring_with(&lock(&self.state), now, &looked_up);
        for (claim, reservation) in doomed {
            match self.writer.delete_nodeclaim(&claim).await {
                Ok(()) => {
                    info!(nodeclaim = %claim, capacity_reservation_id = %reservation, "initiating delete for capacity block expiration");
                    out.deleted.push(claim);
                }
                Err(e) if e.is_not_found() => {}
                Err(e) => out.failed.push(format!("deleting NodeClaim {claim}: {e}")),
            }
        }
        let instances = match self.cloud.list().await {
            Ok(i) => i,
            Err(e) => {
                out.failed.push(format!("listing instances: {e}"));
                return out;
            }
        };
        let demoted = demoted(&lock(&self.state), &instances);
        let patch = on_demand_patch();
        for d in demoted {
            match self.writer.patch_nodeclaim_meta(&d.nodeclaim, &patch).await {
                Ok(()) => out.relabelled.push(d.nodeclaim.clone()),
                Err(e) if e.is_not_found() => continue,
                Err(e) => {
                    out.failed
                        .push(format!("relabelling NodeClaim {}: {e}", d.nodeclaim));
                    continue;
                }
            }
            for n in d.nodes {
                let node_patch = NodePatch {
                    meta: patch.clone(),
                    taints: None,
                };
                match self.writer.patch_node(&n, &node_patch).await {
                    Ok(()) => out.relabelled.push(n),
                    Err(e) if e.is_not_found() => {}
                    Err(e) => out.failed.push(format!("relabelling Node {n}: {e}")),
                }
            }
        }
        if !out.relabelled.is_empty() {
            info!(objects = ?out.relabelled, "updated capacity type to on-demand after the reservation ended");
        }
        out
    }

    pub async fn run(self: Arc<Self>, r: crate::metrics::Reconciler) {
        loop {
            if self.active() {
                for f in r.now(self.pass()).await.failed {
                    warn!(error = %f, "capacity reservation upkeep");
                }
            }
            tokio::time::sleep(CHECK_EVERY).await;
        }
    }
}

#[cfg(test)]
mod tests;
