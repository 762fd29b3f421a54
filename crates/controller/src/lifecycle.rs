//! The NodeClaim lifecycle: finalizer, launch through the cloud (provider labels fill in,
//! provider annotations such as the node class hash are written), registration (match the
//! Node by providerID, copy the claim's labels, annotations and taints onto it, run the
//! provider's registration hooks, lift the unregistered taint once none is pending),
//! initialization (Ready, startup and ephemeral taints gone, extended resources present),
//! the launch and registration timeouts, and finalization (delete the Node, terminate the
//! instance, release the finalizer). Every condition that changes status
//! is reported as an event once its write has landed.

pub mod events;
mod finalization;
mod initialization;
mod launch;
mod liveness;
pub mod metrics;
mod registration;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Taint as ApiTaint};
use nodewright_api::v1::nodeclaim::{NodeClaim, NodeClaimStatus};
use nodewright_api::v1::shared::{Condition, Quantity, ResourceList};
use nodewright_cloud::{CloudError, CloudProvider, Launched, Registration};
use nodewright_core::labels;
use nodewright_core::lifecycle::Phase;
use nodewright_core::resources::{Resources, format_amount};
use nodewright_core::time::Timestamp;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::claims::{TERMINATION_FINALIZER, release_termination};
use crate::clock::{Clock, from_time, parse_rfc3339, rfc3339};
use crate::conditions::{self as cond, INITIALIZED, LAUNCHED, REGISTERED};
use crate::context::Context;
use crate::events::{EventSink, ObjectRef};
use crate::metered::MeteredCloud;
use crate::metrics::Metrics;
use crate::state::{SharedState, convert, lock};
use crate::write::claim_status::write_status;
use crate::write::{KubeWriter, MetaPatch, NodePatch, WriteError};

/// Claims reconciled at once in a pass.
pub const RECONCILE_PARALLELISM: usize = 32;

use nodewright_core::taints::UNREGISTERED_TAINT;
pub const TERMINATION_TIMESTAMP: &str = "karpenter.sh/nodeclaim-termination-timestamp";
/// The `Registered` reason while a provider registration hook has not finished.
pub const REGISTRATION_HOOK_PENDING: &str = "RegistrationHookPending";

/// Why a claim was deleted by the lifecycle (upstream's metric reasons).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Unchanged,
    Updated,
    Deleted(&'static str),
    Finalized,
}

pub struct Lifecycle {
    state: SharedState,
    writer: Arc<dyn KubeWriter>,
    cloud: Arc<dyn CloudProvider>,
    clock: Clock,
    metrics: Arc<Metrics>,
    events: Arc<dyn EventSink>,
    /// Launch results by claim uid, so a failed status write never launches twice.
    launched: Mutex<HashMap<String, Launched>>,
    /// Claims whose launches failed, by uid: failures in a row and when to try again
    /// (core's `launch_retry_after`).
    launch_backoff: Mutex<HashMap<String, (u32, Timestamp)>>,
    /// While this is false the loop does nothing: its writes would be refused anyway, and its
    /// cloud calls (launching, terminating) must come from the lease holder alone.
    leader: Option<watch::Receiver<bool>>,
    /// Claims reconciled at once: [`RECONCILE_PARALLELISM`] per CPU of `CPU_REQUESTS`.
    parallelism: usize,
}

fn resource_list(r: &Resources) -> ResourceList {
    r.iter()
        .map(|(k, v)| (k.to_string(), Quantity::String(format_amount(k, v))))
        .collect()
}

/// The ephemeral taints initialization waits out (upstream's "known ephemeral" set).
pub fn is_known_ephemeral(t: &ApiTaint) -> bool {
    matches!(
        (t.key.as_str(), t.effect.as_str()),
        ("node.kubernetes.io/not-ready", _)
            | ("node.kubernetes.io/unreachable", "NoSchedule")
            | (
                "node.cloudprovider.kubernetes.io/uninitialized",
                "NoSchedule"
            )
            | (UNREGISTERED_TAINT, "NoExecute")
    ) || t.key.starts_with("readiness.k8s.io/")
}

fn api_taint(t: &nodewright_api::v1::shared::Taint) -> ApiTaint {
    ApiTaint {
        key: t.key.clone(),
        value: t.value.clone(),
        effect: t.effect.clone(),
        time_added: None,
    }
}

fn same_taint(a: &ApiTaint, b: &ApiTaint) -> bool {
    a.key == b.key && a.effect == b.effect
}

fn node_ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

fn claim_ref(c: &NodeClaim) -> ObjectRef {
    let r = ObjectRef::nodeclaim(c.metadata.name.as_deref().unwrap_or_default());
    match c.metadata.uid.clone() {
        Some(uid) => r.with_uid(uid),
        None => r,
    }
}

/// The NodePool's `consolidationPolicy` (upstream's default when unset), for metric labels.
pub fn consolidation_policy(state: &crate::state::ClusterState, pool: &str) -> String {
    state
        .nodepools
        .get(pool)
        .and_then(|p| p.spec.disruption.as_ref())
        .and_then(|d| d.consolidation_policy.clone())
        .unwrap_or_else(|| "WhenEmptyOrUnderutilized".into())
}

/// The `termination_mode` label: `graceful` without a terminationGracePeriod, `eventual` with
/// a positive one, `forceful` with zero.
pub fn termination_mode(claim: &NodeClaim) -> &'static str {
    match claim
        .spec
        .termination_grace_period
        .as_deref()
        .and_then(|d| nodewright_api::v1::shared::parse_duration(d).ok())
    {
        None => "graceful",
        Some(d) if d.is_zero() => "forceful",
        Some(_) => "eventual",
    }
}

impl Lifecycle {
    pub fn new(ctx: &Context) -> Self {
        let Context {
            state,
            writer,
            cloud,
            clock,
            metrics,
            events,
        } = ctx.clone();
        Lifecycle {
            state,
            writer,
            cloud: MeteredCloud::wrap(cloud, metrics.clone(), "nodeclaim.lifecycle"),
            clock,
            metrics,
            events,
            launched: Mutex::new(HashMap::new()),
            launch_backoff: Mutex::new(HashMap::new()),
            leader: None,
            parallelism: RECONCILE_PARALLELISM,
        }
    }

    /// Reconciles [`RECONCILE_PARALLELISM`] claims at once per CPU (`CPU_REQUESTS`, rounded
    /// up), as upstream scales its reconciles with the CPU it was given.
    pub fn with_cpus(mut self, cpus: usize) -> Self {
        self.parallelism = RECONCILE_PARALLELISM * cpus.max(1);
        self
    }

    /// Runs only while `leader` says this replica holds the lease.
    pub fn with_leader(mut self, leader: watch::Receiver<bool>) -> Self {
        self.leader = Some(leader);
        self
    }

    fn leading(&self) -> bool {
        self.leader.as_ref().is_none_or(|l| *l.borrow())
    }

    /// Reconciles every claim once; returns each claim's outcome.
    pub async fn reconcile_all(&self) -> BTreeMap<String, Result<Outcome, String>> {
        if !self.leading() {
            return BTreeMap::new();
        }
        // Names only: each claim is taken from the state (shared, not copied) when its turn
        // comes, and each pass's future is made then too, so a pass over thousands of claims
        // holds only the few in progress and reads each as fresh as the watch has it.
        let names: Vec<String> = lock(&self.state).nodeclaims.keys().cloned().collect();
        // Claims are independent: up to RECONCILE_PARALLELISM at once, so one API round trip
        // per write does not add up across thousands of claims. Boxed so the stream's item
        // type names no closure lifetime (the loop's future must stay `Send`).
        type Reconcile<'a> =
            Pin<Box<dyn Future<Output = Option<(String, Result<Outcome, String>)>> + Send + 'a>>;
        futures::stream::iter(names)
            .map(|name| {
                Box::pin(async move {
                    let claim = lock(&self.state).nodeclaims.get(&name).cloned()?;
                    let r = self.reconcile(&claim).await.map_err(|e| e.to_string());
                    if let Err(e) = &r {
                        warn!(nodeclaim = %name, error = %e, "nodeclaim reconcile failed");
                    }
                    Some((name, r))
                }) as Reconcile<'_>
            })
            .buffered(self.parallelism)
            .filter_map(std::future::ready)
            .collect()
            .await
    }

    fn backoff(&self) -> std::sync::MutexGuard<'_, HashMap<String, (u32, Timestamp)>> {
        self.launch_backoff
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Drops the claim's kept launch result, if any.
    fn forget_launch(&self, claim: &NodeClaim) {
        let uid = claim.metadata.uid.as_deref().unwrap_or_default();
        self.launched
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(uid);
    }

    /// Launch results kept for claims whose status does not show the launch yet.
    #[cfg(test)]
    pub(crate) fn launches_kept(&self) -> usize {
        self.launched
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }

    /// Whether the claim's last launch failed and its wait has not passed.
    fn backing_off(&self, uid: &str, now: Timestamp) -> bool {
        self.backoff().get(uid).is_some_and(|(_, at)| now < *at)
    }

    pub async fn run(self: Arc<Self>, every: Duration, r: crate::metrics::Reconciler) {
        loop {
            if lock(&self.state).synced() {
                r.now(self.reconcile_all()).await;
            }
            self.clock.sleep_on_grid(every).await;
        }
    }

    pub async fn reconcile(&self, claim: &NodeClaim) -> Result<Outcome, WriteError> {
        let name = claim.metadata.name.clone().unwrap_or_default();
        let finalizers = claim.metadata.finalizers.clone().unwrap_or_default();
        if claim.metadata.deletion_timestamp.is_some() {
            if !finalizers.iter().any(|f| f == TERMINATION_FINALIZER) {
                return Ok(Outcome::Unchanged);
            }
            return self.finalize(claim).await;
        }
        if !finalizers.iter().any(|f| f == TERMINATION_FINALIZER) {
            let mut f = finalizers.clone();
            f.push(TERMINATION_FINALIZER.into());
            self.writer
                .patch_nodeclaim_meta(
                    &name,
                    &MetaPatch {
                        finalizers: Some(f),
                        resource_version: claim.metadata.resource_version.clone(),
                        ..Default::default()
                    },
                )
                .await?;
            return Ok(Outcome::Updated);
        }
        let now = self.clock.now();
        let mut status = claim.status.clone().unwrap_or_default();
        let mut conds = status.conditions.clone().unwrap_or_default();
        let before = (status.clone(), conds.clone());

        if cond::is_true(&conds, LAUNCHED) {
            // The index holds the launch: the status write landed, and no retry can launch
            // again, so its result need not be kept (upstream keeps it a minute).
            self.forget_launch(claim);
        } else if let Some(o) = self
            .advance_launch(claim, &mut status, &mut conds, now)
            .await?
        {
            return Ok(o);
        }
        if cond::is_true(&conds, LAUNCHED)
            && !cond::is_true(&conds, REGISTERED)
            && let Some(o) = self.register(claim, &mut status, &mut conds, now).await?
        {
            return Ok(o);
        }
        if cond::is_true(&conds, REGISTERED) && !cond::is_true(&conds, INITIALIZED) {
            self.initialize(claim, &status, &mut conds, now).await?;
        }
        cond::set_ready(&mut conds, now);
        status.conditions = Some(conds.clone());
        if (status.clone(), conds.clone()) != before {
            write_status(&*self.writer, &self.state, claim, &status).await?;
            self.publish_transitions(claim, &before.1, &conds);
            return Ok(Outcome::Updated);
        }
        Ok(Outcome::Unchanged)
    }

    /// One event per condition whose status changed (upstream's status-condition events).
    fn publish_transitions(&self, claim: &NodeClaim, before: &[Condition], after: &[Condition]) {
        for (c, was) in cond::transitions(before, after) {
            self.events.publish(events::condition_transitioned(
                claim_ref(claim),
                &c.type_,
                &was,
                &c.status,
                c.reason.as_deref().unwrap_or_default(),
                c.message.as_deref().unwrap_or_default(),
            ));
        }
    }
}

/// The claim's EC2NodeClass as its NodePool's nodes use it (with the pool's own kubelet
/// settings, [`crate::pool_kubelet`]).
fn pool_class(
    s: &crate::state::ClusterState,
    claim: &NodeClaim,
) -> Option<nodewright_api::aws::v1::EC2NodeClass> {
    let class = s.nodeclasses.get(&claim.spec.node_class_ref.name)?;
    let pool = claim
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(labels::NODEPOOL))
        .and_then(|p| s.nodepools.get(p));
    Some(crate::pool_kubelet::class_for(class, pool).into_owned())
}
