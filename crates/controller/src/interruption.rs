//! Interruption handling: notices from the cloud's interruption queue (spot reclaims, scheduled
//! retirements, stops and terminations) turned into NodeClaim deletions, so the node is drained
//! and replaced before the instance disappears under its pods.
//!
//! [`decide`] is the pure half: a notice and the cluster state in, the events to publish and
//! the claims to delete out. [`InterruptionController`] is the shell: it polls the queue while
//! this replica holds the lease and the state is synced, handles up to [`PARALLELISM`]
//! deliveries at once, and acknowledges each one after its deletions went through. A deletion
//! is the ordinary one (finalizer, drain, terminate); interruptions take no disruption budget,
//! as upstream.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::{self, StreamExt};
use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_cloud::{
    CloudError, Delivery, InterruptedOffering, Interruption, InterruptionKind, InterruptionSource,
};
use nodewright_core::labels;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::clock::Clock;
use crate::context::Context;
use crate::events::{Event, EventSink, ObjectRef};
use crate::lifecycle::{consolidation_policy, termination_mode};
use crate::metrics::Metrics;
use crate::state::{ClusterState, SharedState, lock};
use crate::write::KubeWriter;

/// Deliveries handled at once (upstream's).
pub const PARALLELISM: usize = 10;

/// How long the loop waits before polling again while it may not (standby, unsynced).
const IDLE: Duration = Duration::from_secs(1);

/// Backoff after a failed receive, doubled per failure up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// A claim to delete because of a notice, with the labels its disruption metric carries.
#[derive(Clone, Debug, PartialEq)]
pub struct Deletion {
    pub nodeclaim: String,
    pub provider_id: String,
    /// The claim's Node, if one registered.
    pub node: Option<String>,
    pub nodepool: String,
    pub capacity_type: String,
    pub consolidation_policy: String,
    pub termination_mode: &'static str,
}

/// Deletes a claim for an interruption or an unhealthy instance: the delete, the log line,
/// upstream's `TerminatingOnInterruption` events and the disrupted-claim metric.
pub(crate) struct Deleter<'a> {
    pub writer: &'a dyn KubeWriter,
    pub events: &'a dyn EventSink,
    pub metrics: &'a Metrics,
}

impl Deleter<'_> {
    /// `Ok(false)` when the claim was already gone.
    pub async fn delete(
        &self,
        reason: &str,
        d: &Deletion,
        message: &str,
    ) -> Result<bool, crate::write::WriteError> {
        match self.writer.delete_nodeclaim(&d.nodeclaim).await {
            Ok(()) => {}
            Err(e) if e.is_not_found() => return Ok(false),
            Err(e) => return Err(e),
        }
        info!(nodeclaim = %d.nodeclaim, provider_id = %d.provider_id, reason, "{message}");
        self.events
            .publish(events::terminating_on_interruption(ObjectRef::nodeclaim(
                &d.nodeclaim,
            )));
        if let Some(n) = &d.node {
            self.events
                .publish(events::terminating_on_interruption(ObjectRef::node(n)));
        }
        self.metrics.nodeclaim_disrupted_with_mode(
            reason,
            &d.nodepool,
            &d.capacity_type,
            &d.consolidation_policy,
            d.termination_mode,
        );
        Ok(true)
    }
}

/// What one notice calls for.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Decision {
    /// Published on receipt, on each named claim and its node (`SpotInterrupted`, ...).
    pub notify: Vec<Event>,
    /// Claims to delete; already-deleting claims are not repeated here.
    pub delete: Vec<Deletion>,
    /// Instance ids no claim of this cluster runs on; nothing is done for them.
    pub unknown: Vec<String>,
    /// The pools of interrupted claims, read from their labels, for the provider to keep
    /// replacements out of (spot and capacity-reservation interruptions only).
    pub mark: Vec<InterruptedOffering>,
}

/// Claims by the instance id in their `status.providerID` (the segment after the last `/`).
pub struct InstanceIndex<'a> {
    claims: BTreeMap<&'a str, &'a NodeClaim>,
}

impl<'a> InstanceIndex<'a> {
    pub fn new(state: &'a ClusterState) -> Self {
        let claims = state
            .nodeclaims
            .values()
            .filter_map(|c| {
                let pid = c.status.as_ref()?.provider_id.as_deref()?;
                Some((instance_id(pid)?, &**c))
            })
            .collect();
        InstanceIndex { claims }
    }

    pub fn get(&self, instance_id: &str) -> Option<&'a NodeClaim> {
        self.claims.get(instance_id).copied()
    }
}

/// The instance id inside a provider id (`aws:///us-east-1a/i-0abc` → `i-0abc`).
pub fn instance_id(provider_id: &str) -> Option<&str> {
    provider_id
        .rsplit('/')
        .next()
        .filter(|id| !id.is_empty() && *id != provider_id)
}

/// The event a notice of `kind` publishes on each affected object.
fn notice_event(kind: InterruptionKind, object: ObjectRef) -> Option<Event> {
    Some(match kind {
        InterruptionKind::SpotInterrupted => events::spot_interrupted(object),
        InterruptionKind::RebalanceRecommendation => events::spot_rebalance_recommendation(object),
        InterruptionKind::ScheduledChange => events::instance_unhealthy(object),
        InterruptionKind::InstanceStopped => events::instance_stopping(object),
        InterruptionKind::InstanceTerminated => events::instance_terminating(object),
        InterruptionKind::CapacityReservationInterrupted => {
            events::capacity_reservation_interrupted(object)
        }
        InterruptionKind::NoOp => return None,
    })
}

fn claim_ref(c: &NodeClaim) -> ObjectRef {
    let r = ObjectRef::nodeclaim(c.metadata.name.as_deref().unwrap_or_default());
    match c.metadata.uid.clone() {
        Some(uid) => r.with_uid(uid),
        None => r,
    }
}

/// The pool a claim interrupted by `kind` ran in, from its labels (`label`): upstream marks
/// it only for spot interruptions (and reservation interruptions mark the reservation), and
/// only when the claim says which instance type and zone it runs in.
fn interrupted_offering(
    kind: InterruptionKind,
    label: &dyn Fn(&str) -> String,
) -> Option<InterruptedOffering> {
    if !matches!(
        kind,
        InterruptionKind::SpotInterrupted | InterruptionKind::CapacityReservationInterrupted
    ) {
        return None;
    }
    let offering = InterruptedOffering {
        kind,
        instance_type: label(labels::INSTANCE_TYPE),
        zone: label(labels::ZONE),
        reservation_id: Some(label(labels::aws::CAPACITY_RESERVATION_ID))
            .filter(|id| !id.is_empty()),
    };
    let placed = !offering.instance_type.is_empty() && !offering.zone.is_empty();
    (placed || offering.reservation_id.is_some()).then_some(offering)
}

/// A claim's label, empty when it has none.
fn claim_label(claim: &NodeClaim, key: &str) -> String {
    claim
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .cloned()
        .unwrap_or_default()
}

/// What deleting `claim` needs to know: its Node (found by provider id in `state`), and the
/// labels and policy its metrics and events carry. `None` for a claim without a name.
pub(crate) fn deletion(claim: &NodeClaim, state: &ClusterState) -> Option<Deletion> {
    let name = claim.metadata.name.clone()?;
    let provider_id = claim
        .status
        .as_ref()
        .and_then(|s| s.provider_id.clone())
        .unwrap_or_default();
    let node = state
        .node_by_provider_id(&provider_id)
        .first()
        .and_then(|n| n.metadata.name.clone());
    let nodepool = claim_label(claim, labels::NODEPOOL);
    Some(Deletion {
        consolidation_policy: consolidation_policy(state, &nodepool),
        nodepool,
        capacity_type: claim_label(claim, labels::CAPACITY_TYPE),
        termination_mode: termination_mode(claim),
        nodeclaim: name,
        provider_id,
        node,
    })
}

/// What `notice` calls for, given the claims and nodes in `state` (indexed by `index`).
pub fn decide(notice: &Interruption, state: &ClusterState, index: &InstanceIndex<'_>) -> Decision {
    let mut out = Decision::default();
    if notice.kind == InterruptionKind::NoOp {
        return out;
    }
    for id in &notice.instance_ids {
        let Some(claim) = index.get(id) else {
            out.unknown.push(id.clone());
            continue;
        };
        let Some(deletion) = deletion(claim, state) else {
            continue;
        };
        out.notify
            .extend(notice_event(notice.kind, claim_ref(claim)));
        if let Some(n) = &deletion.node {
            out.notify
                .extend(notice_event(notice.kind, ObjectRef::node(n)));
        }
        out.mark
            .extend(interrupted_offering(notice.kind, &|key: &str| {
                claim_label(claim, key)
            }));
        if !notice.kind.terminates() || claim.metadata.deletion_timestamp.is_some() {
            continue;
        }
        out.delete.push(deletion);
    }
    out
}

/// What handling one batch did, for logs and tests.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Handled {
    /// Deliveries acknowledged (deleted from the queue).
    pub acked: usize,
    /// Claims deleted, sorted.
    pub deleted: Vec<String>,
    /// Deliveries left on the queue because something failed (they come back), with why.
    pub failed: Vec<String>,
}

pub struct InterruptionController {
    state: SharedState,
    writer: Arc<dyn KubeWriter>,
    source: Arc<dyn InterruptionSource>,
    clock: Clock,
    metrics: Arc<Metrics>,
    events: Arc<dyn EventSink>,
    leader: watch::Receiver<bool>,
}

/// One delivery's outcome.
struct Outcome {
    acked: bool,
    deleted: Vec<String>,
    failed: Option<String>,
}

impl InterruptionController {
    pub fn new(ctx: &Context, source: Arc<dyn InterruptionSource>) -> Self {
        let Context {
            state,
            writer,
            clock,
            metrics,
            events,
            ..
        } = ctx.clone();
        InterruptionController {
            state,
            writer,
            source,
            clock,
            metrics,
            events,
            leader: watch::channel(true).1,
        }
    }

    /// Polls only while `leader` is true; a standby must not hide notices from the leader.
    pub fn with_leader(mut self, leader: watch::Receiver<bool>) -> Self {
        self.leader = leader;
        self
    }

    /// Whether this replica may take messages off the queue now.
    pub fn active(&self) -> bool {
        *self.leader.borrow() && lock(&self.state).synced()
    }

    /// One receive and the handling of what it returned.
    pub async fn poll_once(&self) -> Result<Handled, CloudError> {
        let deliveries = self.source.receive().await?;
        Ok(self.handle(deliveries).await)
    }

    /// Handles a batch: decisions from one look at the state, then up to [`PARALLELISM`]
    /// deliveries at once.
    pub async fn handle(&self, deliveries: Vec<Delivery>) -> Handled {
        let decided: Vec<(Delivery, Option<Decision>)> = {
            let s = lock(&self.state);
            let index = InstanceIndex::new(&s);
            deliveries
                .into_iter()
                .map(|d| {
                    let decision = d.message.as_ref().ok().map(|m| decide(m, &s, &index));
                    (d, decision)
                })
                .collect()
        };
        let outcomes: Vec<Outcome> = stream::iter(decided)
            .map(|(d, decision)| self.handle_one(d, decision))
            .buffer_unordered(PARALLELISM)
            .collect()
            .await;
        let mut handled = Handled::default();
        for o in outcomes {
            handled.acked += usize::from(o.acked);
            handled.deleted.extend(o.deleted);
            handled.failed.extend(o.failed);
        }
        handled.deleted.sort();
        handled.failed.sort();
        handled
    }

    async fn handle_one(&self, delivery: Delivery, decision: Option<Decision>) -> Outcome {
        let mut out = Outcome {
            acked: false,
            deleted: Vec::new(),
            failed: None,
        };
        match (&delivery.message, decision) {
            (Err(reason), _) => {
                warn!(error = %reason, "deleting an unreadable interruption message");
            }
            (Ok(notice), decision) => {
                let kind = notice.kind.as_str();
                self.metrics.interruption.received(kind);
                if let Some(t) = notice.time {
                    let waited = self.clock.now().since(t);
                    self.metrics
                        .interruption
                        .queue_duration(waited.as_secs_f64());
                }
                let decision = decision.unwrap_or_default();
                if !decision.unknown.is_empty() {
                    tracing::debug!(kind, instances = ?decision.unknown, "interruption for instances without a nodeclaim");
                }
                for e in decision.notify {
                    self.events.publish(e);
                }
                for o in &decision.mark {
                    self.source.offering_interrupted(o);
                }
                for d in decision.delete {
                    match self.delete(kind, &d).await {
                        Ok(true) => out.deleted.push(d.nodeclaim),
                        Ok(false) => {}
                        Err(e) => {
                            out.failed.get_or_insert_with(|| {
                                format!("{}: deleting NodeClaim {}: {e}", notice.id, d.nodeclaim)
                            });
                        }
                    }
                }
            }
        }
        if out.failed.is_some() {
            return out;
        }
        match self.source.ack(&delivery.ack).await {
            Ok(()) => {
                self.metrics.interruption.deleted();
                out.acked = true;
            }
            Err(e) => out.failed = Some(format!("acknowledging a message: {e}")),
        }
        out
    }

    /// Deletes one claim; `Ok(false)` when it was already gone.
    async fn delete(&self, kind: &str, d: &Deletion) -> Result<bool, crate::write::WriteError> {
        let gone = Deleter {
            writer: self.writer.as_ref(),
            events: self.events.as_ref(),
            metrics: &self.metrics,
        }
        .delete(kind, d, "initiating delete from interruption message")
        .await?;
        Ok(gone)
    }

    /// Polls forever: long-polls while active, idles otherwise, backs off after failures.
    pub async fn run(self: Arc<Self>, r: crate::metrics::Reconciler) {
        let mut backoff = MIN_BACKOFF;
        loop {
            if !self.active() {
                tokio::time::sleep(IDLE).await;
                continue;
            }
            match r.now(self.poll_once()).await {
                Ok(h) => {
                    backoff = MIN_BACKOFF;
                    for f in &h.failed {
                        warn!(error = %f, "interruption message not handled; it will be retried");
                    }
                }
                Err(e) => {
                    warn!(error = %e, "receiving interruption messages failed");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }
}

pub mod events;
pub mod health;
pub mod metrics;
pub mod reservations;

#[cfg(test)]
mod tests;
