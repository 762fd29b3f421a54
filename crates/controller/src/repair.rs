//! The node repair loop (gate `NodeRepair`, upstream's `node.health`): every
//! [`EVERY`], core's [`repair::plan`] over every Node's conditions says which NodeClaims have
//! been unhealthy past their cloud's toleration. For each, this sets the claim's termination
//! timestamp to now (so the drain forces at once) and deletes it; the lifecycle and
//! termination loops take it from there, and the provisioner replaces it if its pods need a
//! node. No disruption budget applies. A NodePool with more than 20% of its nodes unhealthy
//! repairs none and says so with `NodeRepairBlocked` events.

mod events;
pub mod metrics;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use nodewright_core::labels;
use nodewright_core::repair::{self, Blocked, Claim, Condition, NodeHealth, Policy, Repair};
use nodewright_core::time::Timestamp;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::clock::{Clock, from_time, parse_rfc3339, rfc3339};
use crate::context::Context;
use crate::events::{EventSink, ObjectRef};
use crate::interruption::{Deletion, deletion};
use crate::lifecycle::TERMINATION_TIMESTAMP;
use crate::metrics::Metrics;
use crate::state::{ClusterState, SharedState, lock};
use crate::write::{KubeWriter, MetaPatch, WriteError};

/// How often the loop looks.
pub const EVERY: Duration = Duration::from_secs(10);

/// The `karpenter_nodeclaims_disrupted_total` reason of a repair.
const REASON: &str = "unhealthy";

pub struct NodeRepair {
    state: SharedState,
    writer: Arc<dyn KubeWriter>,
    clock: Clock,
    metrics: Arc<Metrics>,
    events: Arc<dyn EventSink>,
    policies: Vec<Policy>,
    leader: Option<watch::Receiver<bool>>,
}

/// A repair with what its metrics carry, read from the state before any write.
struct Job {
    repair: Repair,
    deletion: Option<Deletion>,
    image_id: String,
}

impl NodeRepair {
    /// With the cloud's repair policies; `None` when it has none (nothing could be repaired).
    pub fn new(ctx: &Context) -> Option<Self> {
        let policies = ctx.cloud.repair_policies();
        (!policies.is_empty()).then(|| NodeRepair {
            state: ctx.state.clone(),
            writer: ctx.writer.clone(),
            clock: ctx.clock,
            metrics: ctx.metrics.clone(),
            events: ctx.events.clone(),
            policies,
            leader: None,
        })
    }

    /// Acts only while `leader` says this replica holds the lease.
    pub fn with_leader(mut self, leader: watch::Receiver<bool>) -> Self {
        self.leader = Some(leader);
        self
    }

    fn leading(&self) -> bool {
        self.leader.as_ref().is_none_or(|l| *l.borrow())
    }

    /// One pass; returns the claims it deleted.
    pub async fn reconcile(&self) -> Result<Vec<String>, String> {
        let now = self.clock.now();
        let (jobs, blocked) = {
            let s = lock(&self.state);
            if !s.synced() {
                return Ok(Vec::new());
            }
            let plan = repair::plan(&inputs(&s), &self.policies, now);
            let jobs: Vec<Job> = plan.repair.into_iter().map(|r| job(&s, r)).collect();
            (jobs, plan.blocked)
        };
        for b in &blocked {
            self.publish_blocked(b);
        }
        let mut deleted = Vec::new();
        let mut failures = Vec::new();
        for j in &jobs {
            match self.carry_out(j, now).await {
                Ok(true) => deleted.push(j.repair.nodeclaim.clone()),
                Ok(false) => {}
                Err(e) => failures.push(format!("NodeClaim {}: {e}", j.repair.nodeclaim)),
            }
        }
        if failures.is_empty() {
            Ok(deleted)
        } else {
            Err(failures.join("; "))
        }
    }

    /// Stamps the deadline and deletes the claim; `Ok(true)` when this pass deleted it.
    async fn carry_out(&self, j: &Job, now: Timestamp) -> Result<bool, WriteError> {
        let r = &j.repair;
        if r.stamp {
            let mut p = MetaPatch::default();
            p.annotations
                .insert(TERMINATION_TIMESTAMP.into(), Some(rfc3339(now)));
            match self.writer.patch_nodeclaim_meta(&r.nodeclaim, &p).await {
                Err(e) if e.is_not_found() => return Ok(false),
                other => other?,
            }
        }
        if !r.delete {
            return Ok(false);
        }
        match self.writer.delete_nodeclaim(&r.nodeclaim).await {
            Err(e) if e.is_not_found() => return Ok(false),
            other => other?,
        }
        info!(node = %r.node, nodeclaim = %r.nodeclaim, condition = %r.condition, "deleting unhealthy node");
        if let Some(d) = &j.deletion {
            self.metrics.nodeclaim_disrupted_with_mode(
                REASON,
                &d.nodepool,
                &d.capacity_type,
                &d.consolidation_policy,
                d.termination_mode,
            );
            self.metrics.repair.nodeclaim_unhealthy_disrupted(
                &snake_case(&r.condition),
                &d.nodepool,
                &d.capacity_type,
                &j.image_id,
            );
        }
        Ok(true)
    }

    fn publish_blocked(&self, b: &Blocked) {
        let message = match &b.nodepool {
            Some(pool) => format!(
                "more than {}% of nodes in nodepool {pool:?} are unhealthy",
                repair::MAX_UNHEALTHY_PERCENT
            ),
            None => format!(
                "more than {}% of nodes in the cluster are unhealthy",
                repair::MAX_UNHEALTHY_PERCENT
            ),
        };
        debug!(node = %b.node, nodeclaim = %b.nodeclaim, unhealthy = b.unhealthy, total = b.total, "node repair blocked: {message}");
        let mut objects = vec![ObjectRef::node(&b.node), ObjectRef::nodeclaim(&b.nodeclaim)];
        objects.extend(b.nodepool.as_deref().map(ObjectRef::nodepool));
        for o in objects {
            self.events
                .publish(events::node_repair_blocked(o, &message));
        }
    }

    pub async fn run(self: Arc<Self>, r: crate::metrics::Reconciler) {
        loop {
            if self.leading()
                && let Err(e) = r.now(self.reconcile()).await
            {
                warn!(error = %e, "node repair pass failed");
            }
            tokio::time::sleep(EVERY).await;
        }
    }
}

fn job(s: &ClusterState, repair: Repair) -> Job {
    let claim = s.claim_named(&repair.nodeclaim);
    Job {
        deletion: claim.and_then(|c| deletion(c, s)),
        image_id: claim
            .and_then(|c| c.status.as_ref())
            .and_then(|st| st.image_id.clone())
            .unwrap_or_default(),
        repair,
    }
}

/// What repair reads of every Node in `s`: its conditions, its pool and its claim (found by
/// provider id, as upstream finds a Node's claim).
pub fn inputs(s: &ClusterState) -> Vec<NodeHealth> {
    s.nodes.values().map(|n| health(s, n)).collect()
}

fn health(s: &ClusterState, n: &Node) -> NodeHealth {
    let meta = &n.metadata;
    let provider_id = n.spec.as_ref().and_then(|sp| sp.provider_id.as_deref());
    let claim = provider_id
        .and_then(|pid| s.claim_by_provider_id(pid))
        .map(|c| Claim {
            name: c.metadata.name.clone().unwrap_or_default(),
            nodepool: c
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(labels::NODEPOOL))
                .cloned(),
            deleting: c.metadata.deletion_timestamp.is_some(),
            termination_timestamp: c
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(TERMINATION_TIMESTAMP))
                .and_then(|t| parse_rfc3339(t)),
        });
    let conditions = n
        .status
        .as_ref()
        .and_then(|st| st.conditions.as_ref())
        .into_iter()
        .flatten()
        .map(|c| Condition {
            kind: c.type_.clone(),
            status: c.status.clone(),
            since: c.last_transition_time.as_ref().map(from_time),
        })
        .collect();
    NodeHealth {
        node: meta.name.clone().unwrap_or_default(),
        created: meta
            .creation_timestamp
            .as_ref()
            .map(from_time)
            .unwrap_or_default(),
        nodepool: s
            .node_labels(meta.name.as_deref().unwrap_or_default())
            .and_then(|l| l.get(labels::NODEPOOL))
            .cloned(),
        claim,
        conditions,
    }
}

/// `AcceleratedHardwareReady` → `accelerated_hardware_ready`, the metric's `condition` label.
pub fn snake_case(s: &str) -> String {
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if ch.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(ch.to_ascii_lowercase());
        } else {
            out.push(ch);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn condition_labels_are_snake_case() {
        assert_eq!(
            snake_case("AcceleratedHardwareReady"),
            "accelerated_hardware_ready"
        );
        assert_eq!(snake_case("Ready"), "ready");
    }
}
