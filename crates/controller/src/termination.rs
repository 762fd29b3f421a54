//! Node termination, driven by the `karpenter.sh/termination` finalizer: delete the claim,
//! taint the node `karpenter.sh/disrupted:NoSchedule`, evict its pods in upstream's priority
//! groups (PDBs answer 429 → retry later; `do-not-disrupt` pods are waited for, never
//! evicted), delete (bypassing PDBs) the pods whose own grace period would outlast the node's
//! termination deadline, with a grace period that ends at the deadline, wait for the node's
//! volumes to detach ([`volumes`]), terminate the instance until the cloud reports it gone,
//! then release the finalizer.

pub mod events;
pub mod metrics;
mod pods;
mod taint;
pub mod volumes;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_cloud::CloudProvider;
use nodewright_core::time::Timestamp;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::claims::{TERMINATION_FINALIZER, release_termination};
use crate::clock::{Clock, from_time, parse_rfc3339};
use crate::conditions::{self as cond, DISRUPTION_REASON};
use crate::context::Context;
use crate::events::{EventSink, ObjectRef};
use crate::failpoint::{self, Failpoint};
use crate::lifecycle::TERMINATION_TIMESTAMP;
use crate::metered::MeteredCloud;
use crate::metrics::Metrics;
use crate::state::{PodRecord, SharedState, lock};
use crate::write::claim_status::write_status;
use crate::write::{Eviction, KubeWriter, NodePatch, WriteError};
use pods::do_not_disrupt;
pub use pods::{drain_group, forced_grace, tolerates_disrupted, waits_for};
pub use taint::with_disrupted_taint;

/// Eviction requests one drain pass keeps in flight at once.
const EVICTIONS_IN_FLIGHT: usize = 100;

/// Where a node's termination stands after one pass.
#[derive(Clone, Debug, PartialEq)]
pub enum Progress {
    /// Pods still to go: evictions sent, blocked by PDBs, or still terminating.
    Draining {
        evicted: Vec<String>,
        blocked: Vec<String>,
        /// Deleted because the node's termination deadline is near or past.
        deleted: Vec<String>,
        /// Pods the drain still waits for, the deleted ones aside.
        waiting: usize,
    },
    /// Drained; these VolumeAttachments of the node's volumes have to go first.
    Detaching {
        attachments: Vec<String>,
    },
    /// Drained; the instance is being terminated.
    Terminating,
    /// The finalizer is released.
    Done,
    Unchanged,
}

pub struct Termination {
    state: SharedState,
    writer: Arc<dyn KubeWriter>,
    cloud: Arc<dyn CloudProvider>,
    clock: Clock,
    metrics: Arc<Metrics>,
    events: Arc<dyn EventSink>,
    /// While this is false the loop does nothing: its writes would be refused anyway, and its
    /// cloud calls (launching, terminating) must come from the lease holder alone.
    leader: Option<watch::Receiver<bool>>,
}

fn pod_ref(p: &PodRecord) -> ObjectRef {
    let r = ObjectRef::pod(p.namespace(), p.name());
    match p.uid.clone() {
        Some(uid) => r.with_uid(uid),
        None => r,
    }
}

/// The `reason` label of drained pods: the claim's disruption reason in upstream's lowercase
/// metric spelling, or `deleted` when the claim was deleted directly.
fn disruption_reason(claim: &NodeClaim) -> String {
    let conds = claim
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    cond::find(&conds, DISRUPTION_REASON)
        .filter(|c| c.status == "True")
        .and_then(|c| c.reason.as_deref())
        .map(str::to_lowercase)
        .unwrap_or_else(|| "deleted".into())
}

impl Termination {
    pub fn new(ctx: &Context) -> Self {
        let Context {
            state,
            writer,
            cloud,
            clock,
            metrics,
            events,
        } = ctx.clone();
        Termination {
            state,
            writer,
            cloud: MeteredCloud::wrap(cloud, metrics.clone(), "node.termination"),
            clock,
            metrics,
            events,
            leader: None,
        }
    }

    /// Runs only while `leader` says this replica holds the lease.
    pub fn with_leader(mut self, leader: watch::Receiver<bool>) -> Self {
        self.leader = Some(leader);
        self
    }

    fn leading(&self) -> bool {
        self.leader.as_ref().is_none_or(|l| *l.borrow())
    }

    /// One pass over every terminating node we own.
    pub async fn reconcile_all(&self) -> BTreeMap<String, Result<Progress, String>> {
        if !self.leading() {
            return BTreeMap::new();
        }
        let nodes: Vec<Node> = {
            let s = lock(&self.state);
            s.nodes
                .iter()
                .filter(|(_, n)| {
                    n.metadata.deletion_timestamp.is_some()
                        && n.metadata
                            .finalizers
                            .iter()
                            .flatten()
                            .any(|f| f == TERMINATION_FINALIZER)
                })
                .filter_map(|(name, _)| s.node_object(name))
                .collect()
        };
        let mut out = BTreeMap::new();
        for n in nodes {
            let name = n.metadata.name.clone().unwrap_or_default();
            let r = self.reconcile(&n).await.map_err(|e| e.to_string());
            if let Err(e) = &r {
                warn!(node = %name, error = %e, "node termination failed");
            }
            out.insert(name, r);
        }
        out
    }

    pub async fn run(self: Arc<Self>, every: Duration, r: crate::metrics::Reconciler) {
        loop {
            if lock(&self.state).synced() {
                r.now(self.reconcile_all()).await;
            }
            self.clock.sleep_on_grid(every).await;
        }
    }

    /// One pass over a node being deleted: each phase in upstream's order, returning where
    /// the first unfinished one stands.
    pub async fn reconcile(&self, node: &Node) -> Result<Progress, WriteError> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let now = self.clock.now();
        let pid = node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.clone())
            .unwrap_or_default();
        let claim: Option<NodeClaim> = lock(&self.state).claim_by_provider_id(&pid).cloned();
        self.begin(node, &name, claim.as_ref()).await?;
        // The grace deadline from the claim: after it, stop waiting for the drain.
        let deadline = claim
            .as_ref()
            .and_then(|c| c.metadata.annotations.as_ref())
            .and_then(|a| a.get(TERMINATION_TIMESTAMP))
            .and_then(|t| parse_rfc3339(t));
        let past_deadline = deadline.is_some_and(|d| now >= d);
        if let Some(d) = deadline.filter(|_| !past_deadline) {
            self.announce_deadline(&name, claim.as_ref(), d);
        }
        let reason = claim.as_ref().map(disruption_reason).unwrap_or_default();
        let progress = self.drain(&name, now, deadline, &reason).await?;
        let drained = !matches!(progress, Progress::Draining { .. });
        if !drained {
            if let Some(c) = &claim {
                self.mark(c, &[(cond::DRAINED, "Unknown", "Draining")], now)
                    .await?;
            }
            if !past_deadline {
                return Ok(progress);
            }
            info!(node = %name, "termination grace period elapsed; not waiting for the drain");
        }
        let attachments = {
            let s = lock(&self.state);
            volumes::blocking(
                &name,
                s.volume_attachments.values(),
                &s.pods_on(&name),
                &s.pvcs,
                now,
            )
        };
        if !attachments.is_empty() && !past_deadline {
            return self
                .await_detachment(&name, claim.as_ref(), attachments, now)
                .await;
        }
        let detached = if attachments.is_empty() {
            (cond::VOLUMES_DETACHED, "True", "VolumesDetached")
        } else {
            info!(node = %name, ?attachments, "termination grace period elapsed; not waiting for volumes to detach");
            (
                cond::VOLUMES_DETACHED,
                "False",
                "TerminationGracePeriodElapsed",
            )
        };
        if !pid.is_empty() {
            let mut marks = vec![detached];
            if drained {
                marks.insert(0, (cond::DRAINED, "True", "Drained"));
            }
            if let Some(progress) = self
                .terminate_instance(&pid, &name, claim.as_ref(), marks, now)
                .await?
            {
                return Ok(progress);
            }
        }
        self.release(node, &name, now).await?;
        Ok(Progress::Done)
    }

    /// The first steps, each done once: the claim deleted (so nothing replaces the node
    /// under its name) and the node tainted `karpenter.sh/disrupted:NoSchedule`.
    async fn begin(
        &self,
        node: &Node,
        name: &str,
        claim: Option<&NodeClaim>,
    ) -> Result<(), WriteError> {
        if let Some(c) = claim
            && c.metadata.deletion_timestamp.is_none()
        {
            let cname = c.metadata.name.clone().unwrap_or_default();
            match self.writer.delete_nodeclaim(&cname).await {
                Ok(()) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        let taints = node.spec.as_ref().and_then(|s| s.taints.as_deref());
        let Some(t) = with_disrupted_taint(taints.unwrap_or_default(), true) else {
            return Ok(());
        };
        self.writer
            .patch_node(
                name,
                &NodePatch {
                    taints: Some(t),
                    ..Default::default()
                },
            )
            .await
    }

    /// `TerminationGracePeriodExpiring` on the Node and its claim: the drain stops waiting at
    /// `deadline`.
    fn announce_deadline(&self, name: &str, claim: Option<&NodeClaim>, deadline: Timestamp) {
        let at = crate::clock::rfc3339(deadline);
        self.events
            .publish(events::termination_grace_period_expiring(
                ObjectRef::node(name),
                &at,
            ));
        if let Some(c) = claim {
            self.events
                .publish(events::termination_grace_period_expiring(
                    ObjectRef::nodeclaim(c.metadata.name.as_deref().unwrap_or_default()),
                    &at,
                ));
        }
    }

    /// Drained, but the node's volumes are still attached: the claim says so and the Node
    /// gets `AwaitingVolumeDetachment`.
    async fn await_detachment(
        &self,
        name: &str,
        claim: Option<&NodeClaim>,
        attachments: Vec<String>,
        now: Timestamp,
    ) -> Result<Progress, WriteError> {
        if let Some(c) = claim {
            let marks = [
                (cond::DRAINED, "True", "Drained"),
                (
                    cond::VOLUMES_DETACHED,
                    "Unknown",
                    "AwaitingVolumeDetachment",
                ),
            ];
            self.mark(c, &marks, now).await?;
        }
        self.events.publish(events::awaiting_volume_detachment(
            ObjectRef::node(name),
            attachments.len(),
        ));
        Ok(Progress::Detaching { attachments })
    }

    /// Asks the cloud to terminate the instance. `None` once the cloud says it is gone (the
    /// finalizer may go); otherwise the pass ends terminating, the claim marked with `marks`
    /// and `InstanceTerminating` if the call went through, a `FailedTermination` event if not.
    async fn terminate_instance(
        &self,
        pid: &str,
        name: &str,
        claim: Option<&NodeClaim>,
        mut marks: Vec<(&str, &str, &str)>,
        now: Timestamp,
    ) -> Result<Option<Progress>, WriteError> {
        match self.cloud.delete(pid).await {
            Err(e) if e.is_not_found() => Ok(None),
            Ok(()) => {
                failpoint::reached(Failpoint::AfterTerminate);
                if let Some(c) = claim {
                    marks.push((cond::INSTANCE_TERMINATING, "True", "InstanceTerminating"));
                    self.mark(c, &marks, now).await?;
                }
                Ok(Some(Progress::Terminating))
            }
            Err(e) => {
                warn!(node = %name, error = %e, "terminating instance failed");
                let object = claim.map_or_else(
                    || ObjectRef::node(name),
                    |c| ObjectRef::nodeclaim(c.metadata.name.as_deref().unwrap_or_default()),
                );
                self.events
                    .publish(events::failed_termination(object, &e.to_string()));
                Ok(Some(Progress::Terminating))
            }
        }
    }

    /// The instance is gone: the finalizer comes off the Node and the termination metrics are
    /// recorded.
    async fn release(&self, node: &Node, name: &str, now: Timestamp) -> Result<(), WriteError> {
        let latest = lock(&self.state)
            .nodes
            .get(name)
            .map(|n| n.metadata.clone())
            .unwrap_or_else(|| node.metadata.clone());
        self.writer
            .patch_node(
                name,
                &NodePatch {
                    meta: release_termination(&latest),
                    taints: None,
                },
            )
            .await?;
        let node_labels = node.metadata.labels.clone().unwrap_or_default();
        let pool = node_labels
            .get(nodewright_core::labels::NODEPOOL)
            .cloned()
            .unwrap_or_default();
        let zone = node_labels
            .get(nodewright_core::labels::ZONE)
            .cloned()
            .unwrap_or_default();
        self.metrics.termination.node_terminated(&pool, &zone);
        self.metrics.termination.node_drained(&pool);
        if let Some(deleted) = node.metadata.deletion_timestamp.as_ref().map(from_time) {
            self.metrics
                .termination
                .node_termination_duration(&pool, now.since(deleted).as_secs_f64());
        }
        if let Some(created) = node.metadata.creation_timestamp.as_ref().map(from_time) {
            self.metrics
                .termination
                .node_lifetime(&pool, now.since(created).as_secs_f64());
        }
        info!(node = %name, "node terminated");
        Ok(())
    }

    /// Sets conditions on the claim, `(type, status, reason)` each, in one status write:
    /// `Drained` (`Unknown` while pods drain, `True` once none is left to wait for) and
    /// `InstanceTerminating` once the instance's termination has started, as upstream does
    /// before it waits for the instance to go (the node then no longer counts for budgets).
    async fn mark(
        &self,
        claim: &NodeClaim,
        marks: &[(&str, &str, &str)],
        now: Timestamp,
    ) -> Result<(), WriteError> {
        let mut status = claim.status.clone().unwrap_or_default();
        let mut conds = status.conditions.clone().unwrap_or_default();
        let mut changed = false;
        for (type_, value, reason) in marks {
            changed |= cond::set(&mut conds, type_, value, reason, "", now);
        }
        if !changed {
            return Ok(());
        }
        status.conditions = Some(conds);
        match write_status(&*self.writer, &self.state, claim, &status).await {
            Err(e) if !e.is_not_found() => Err(e),
            _ => Ok(()),
        }
    }

    /// Deletes the pods the termination deadline leaves no room for, then evicts the first
    /// non-empty priority group; later groups wait until it is gone.
    async fn drain(
        &self,
        node: &str,
        now: Timestamp,
        deadline: Option<Timestamp>,
        reason: &str,
    ) -> Result<Progress, WriteError> {
        let pods: Vec<PodRecord> = lock(&self.state)
            .pods_on(node)
            .into_iter()
            .filter(|p| waits_for(p, now))
            .cloned()
            .collect();
        if pods.is_empty() {
            return Ok(Progress::Terminating);
        }
        let mut deleted = Vec::new();
        let mut rest = Vec::new();
        for p in pods {
            let grace = deadline.and_then(|d| forced_grace(&p, now, d).map(|g| (d, g)));
            // A pod already terminating within that grace period needs no second delete.
            let Some((d, grace)) = grace.filter(|(_, g)| {
                p.deleted.is_none() || p.deletion_grace_seconds.is_none_or(|current| current > *g)
            }) else {
                rest.push(p);
                continue;
            };
            match self
                .writer
                .delete_pod(p.namespace(), p.name(), Some(grace))
                .await
            {
                Ok(()) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
            info!(node = %node, pod = %p.key(), grace_seconds = grace, "deleted pod at the termination deadline");
            self.events.publish(events::disrupted_pod_delete(
                pod_ref(&p),
                &crate::clock::rfc3339(d),
                grace,
                p.shape.grace_seconds,
            ));
            deleted.push(p.key().to_string());
        }
        let group = rest.iter().map(drain_group).min().unwrap_or(0);
        let targets: Vec<&PodRecord> = rest
            .iter()
            .filter(|p| drain_group(p) == group)
            .filter(|p| p.deleted.is_none() && !do_not_disrupt(p, now))
            .collect();
        // Sent together, as upstream's eviction queue does (a hundred at once and more), not
        // one after another: each waits on the API server's PDB check and pod delete, and a
        // full node's pods evicted in turn held its drain, and so the disruption budget, for
        // seconds.
        let mut answers: Vec<Result<Eviction, WriteError>> = Vec::with_capacity(targets.len());
        for some in targets.chunks(EVICTIONS_IN_FLIGHT) {
            let sent = some
                .iter()
                .map(|p| self.writer.evict_pod(p.namespace(), p.name()));
            answers.extend(futures::future::join_all(sent).await);
        }
        let mut evicted = Vec::new();
        let mut blocked = Vec::new();
        let mut first_error = None;
        for (p, answer) in targets.into_iter().zip(answers) {
            let answer = match answer {
                Ok(answer) => answer,
                Err(e) => {
                    first_error.get_or_insert(e);
                    continue;
                }
            };
            match answer {
                Eviction::Evicted => {
                    self.metrics.termination.eviction_request(200);
                    self.metrics.termination.pods_drained(reason);
                    self.events.publish(events::evicted(pod_ref(p), reason));
                    evicted.push(p.key().to_string());
                }
                Eviction::Blocked(why) => {
                    self.metrics.termination.eviction_request(429);
                    info!(node = %node, pod = %p.key(), reason = %why, "eviction blocked");
                    self.events.publish(events::failed_draining(
                        ObjectRef::node(node),
                        &format!("evicting pod {}: {why}", p.key()),
                    ));
                    blocked.push(p.key().to_string());
                }
                Eviction::Gone => self.metrics.termination.eviction_request(404),
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        Ok(Progress::Draining {
            evicted,
            blocked,
            waiting: rest.len(),
            deleted,
        })
    }
}
