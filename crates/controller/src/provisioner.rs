//! The provisioner: batches provisionable pods (idle 1 s / max 10 s), waits for the cluster
//! state to be synced, solves off the async runtime, and creates the NodeClaims the plan asks
//! for, re-checking each NodePool's limits (in-flight claims included) before every create.
//! Every pod placed on a claim is nominated to it (an event, and a record in the state so the
//! next batch leaves it there); unplaceable pods get `FailedScheduling`.

mod compatible;
pub mod events;
mod limits;
pub mod metrics;
mod snapshot;
mod trigger;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;

use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_api::v1::nodepool::NodePool;
use nodewright_cloud::CloudProvider;
use nodewright_core::cadence::BatchWindow;
use nodewright_core::model::Snapshot;
use nodewright_core::resources::Resources;
use nodewright_core::scheduling::{self, Compile, NodeCache, Options, Plan, Target};
use thiserror::Error;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::claims::{self, ClaimRequest};
use crate::clock::Clock;
use crate::context::Context;
use crate::events::{EventSink, ObjectRef};
use crate::metered::MeteredCloud;
use crate::metrics::Metrics;
use crate::state::{ClusterState, SharedState, convert, lock};
use crate::write::{KubeWriter, WriteError};

use limits::{pool_usage, smallest_capacity, within_limits};
pub use snapshot::{instance_types, snapshot};
pub use trigger::Trigger;

/// The `reason` label of `karpenter_nodeclaims_created_total` for provisioning.
pub const PROVISIONED: &str = "provisioned";

/// How many NodeClaim creates one pass keeps in flight: enough to hide the API server's
/// round trip when a scale-up needs hundreds of claims, few enough not to flood it.
pub const CREATE_PARALLELISM: usize = 16;

#[derive(Debug, Error)]
pub enum ProvisionError {
    #[error("cluster state is not synced yet")]
    NotSynced,
    #[error("listing instance types: {0}")]
    Cloud(#[from] nodewright_cloud::CloudError),
    #[error("solver task failed: {0}")]
    Solver(String),
}

/// What one provisioning pass did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Provisioned {
    /// Names of the claims created.
    pub created: Vec<String>,
    /// Claims the plan wanted that a NodePool limit refused at create time.
    pub limited: Vec<String>,
    /// Pods the plan could not place, with the reason.
    pub unplaced: Vec<(String, String)>,
    /// Writes that failed.
    pub errors: Vec<String>,
    /// Every pod the solve decided on (placed or not), by key.
    pub decided: Vec<String>,
}

pub struct Provisioner {
    state: SharedState,
    writer: Arc<dyn KubeWriter>,
    cloud: Arc<dyn CloudProvider>,
    clock: Clock,
    metrics: Arc<Metrics>,
    events: Arc<dyn EventSink>,
    pub options: Options,
    /// What earlier solves compiled (NodePools, nodes), kept for the next: between two
    /// passes the NodePools and most nodes are unchanged. Shared with disruption.
    compiles: Arc<Mutex<NodeCache>>,
    /// NodeClaim creates kept in flight: [`CREATE_PARALLELISM`] per CPU of `CPU_REQUESTS`.
    parallelism: usize,
    leader: Option<watch::Receiver<bool>>,
}

/// Creates `claim` (built by [`claims::build`]), records it in flight so the next pass cannot
/// launch it twice, and counts it under `reason`. The one way new claims are created, for
/// provisioning and disruption replacements alike.
pub async fn submit_claim(
    state: &SharedState,
    writer: &dyn KubeWriter,
    metrics: &Metrics,
    claim: &NodeClaim,
    reason: &str,
) -> Result<NodeClaim, WriteError> {
    let created = writer.create_nodeclaim(claim).await?;
    lock(state).record_created(created.clone());
    let labels = claim.metadata.labels.clone().unwrap_or_default();
    let relaxed = claim
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key("karpenter.sh/nodeclaim-min-values-relaxed"));
    metrics.provisioner.nodeclaim_created(
        reason,
        labels
            .get(nodewright_core::labels::NODEPOOL)
            .map(String::as_str)
            .unwrap_or_default(),
        relaxed,
    );
    Ok(created)
}

/// The event reference of the pod at `key` (`namespace/name`), with its uid when known.
pub fn pod_ref(state: &ClusterState, key: &str) -> ObjectRef {
    let (ns, name) = key.split_once('/').unwrap_or(("", key));
    let r = ObjectRef::pod(ns, name);
    match state.pods.get(key).and_then(|p| p.uid.clone()) {
        Some(uid) => r.with_uid(uid),
        None => r,
    }
}

/// The claims behind scheduling targets, by the names a target may carry: claim name and
/// node name. A name two claims share goes to the first in [`ClusterState::all_claims`]
/// order. Built once per pass so nominating many pods does not scan every claim per pod.
fn claims_by_target(state: &ClusterState) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for c in state.all_claims() {
        let Some(name) = c.metadata.name.clone() else {
            continue;
        };
        if let Some(node) = c.status.as_ref().and_then(|s| s.node_name.clone()) {
            out.entry(node).or_insert_with(|| name.clone());
        }
        out.entry(name.clone()).or_insert(name);
    }
    out
}

/// The claim behind a scheduling target: an in-flight claim by claim or node name, a node by
/// its providerID.
fn claim_of_target(
    state: &ClusterState,
    by_target: &BTreeMap<String, String>,
    target: &str,
) -> Option<String> {
    if let Some(c) = by_target.get(target) {
        return Some(c.clone());
    }
    let pid = state
        .nodes
        .get(target)
        .and_then(|n| n.spec.as_ref())
        .and_then(|s| s.provider_id.clone())?;
    state
        .claim_by_provider_id(&pid)
        .and_then(|c| c.metadata.name.clone())
}

impl Provisioner {
    pub fn new(ctx: &Context) -> Self {
        let Context {
            state,
            writer,
            cloud,
            clock,
            metrics,
            events,
        } = ctx.clone();
        Provisioner {
            state,
            writer,
            cloud: MeteredCloud::wrap(cloud, metrics.clone(), "provisioner"),
            clock,
            metrics,
            events,
            options: Options::default(),
            compiles: Arc::default(),
            parallelism: CREATE_PARALLELISM,
            leader: None,
        }
    }

    /// Keeps [`CREATE_PARALLELISM`] creates in flight per CPU (`CPU_REQUESTS`, rounded up),
    /// as upstream scales its reconciles with the CPU it was given.
    pub fn with_cpus(mut self, cpus: usize) -> Self {
        self.parallelism = CREATE_PARALLELISM * cpus.max(1);
        self
    }

    /// Solves under `options` (`PREFERENCE_POLICY`, `MIN_VALUES_POLICY`).
    pub fn with_options(mut self, options: Options) -> Self {
        self.options = options;
        self
    }

    /// Keeps compiles in `compiles`, shared with the loops that solve the same cluster.
    pub fn with_compiles(mut self, compiles: Arc<Mutex<NodeCache>>) -> Self {
        self.compiles = compiles;
        self
    }

    /// Passes run only while `leader` says this replica holds the lease: a standby's claims
    /// would be refused, and its first pass as leader should not wait out a requeue.
    pub fn with_leader(mut self, leader: watch::Receiver<bool>) -> Self {
        self.leader = Some(leader);
        self
    }

    fn leading(&self) -> bool {
        self.leader.as_ref().is_none_or(|l| *l.borrow())
    }

    /// One pass: solve the current pending pods and create the claims.
    pub async fn provision(&self) -> Result<Provisioned, ProvisionError> {
        if !lock(&self.state).synced() {
            return Err(ProvisionError::NotSynced);
        }
        let snap = snapshot(&self.state, self.cloud.as_ref(), self.clock.now()).await?;
        self.metrics
            .provisioner
            .ignored_pods(lock(&self.state).ignored_pods());
        let mut out = Provisioned::default();
        let pending = snap.pods.iter().filter(|p| p.node_name.is_none()).count();
        self.metrics.provisioner.queue_depth(pending);
        self.metrics
            .provisioner
            .pending_by_zone(&scheduling::pending_by_zone(&snap));
        if pending == 0 {
            self.metrics.provisioner.unschedulable_pods(0);
            return Ok(out);
        }
        self.publish_pools_without_types(&snap);
        let now = self.clock.now();
        {
            let mut s = lock(&self.state);
            for p in snap.pods.iter().filter(|p| p.node_name.is_none()) {
                s.ack_pod(&p.key(), now);
            }
        }
        let (options, compiles) = (self.options.clone(), self.compiles.clone());
        let started = Instant::now();
        let simulating = metrics::Simulating::begin(&self.metrics, "");
        let (snap, plan) = tokio::task::spawn_blocking(move || {
            let mut cache = compiles.lock().unwrap_or_else(|e| e.into_inner());
            let plan = scheduling::solve_with(&snap, &options, Compile::cached(&mut cache));
            (snap, plan)
        })
        .await
        .map_err(|e| ProvisionError::Solver(e.to_string()))?;
        drop(simulating);
        self.metrics
            .provisioner
            .scheduling_duration(started.elapsed().as_secs_f64());
        self.metrics
            .provisioner
            .unschedulable_pods(plan.unplaced.len());
        out.unplaced = plan
            .unplaced
            .iter()
            .map(|u| (u.pod.clone(), u.reason.clone()))
            .collect();
        out.decided = plan
            .placements
            .iter()
            .map(|p| p.pod.clone())
            .chain(plan.unplaced.iter().map(|u| u.pod.clone()))
            .collect();
        {
            let mut s = lock(&self.state);
            let now = self.clock.now();
            for p in &plan.placements {
                s.mark_scheduling_decision(&p.pod, true, now);
            }
            for u in &plan.unplaced {
                s.mark_scheduling_decision(&u.pod, false, now);
                self.events
                    .publish(events::failed_scheduling(pod_ref(&s, &u.pod), &u.reason));
            }
        }
        self.nominate_existing(&plan);
        self.create_claims(&snap, &plan, &mut out).await;
        Ok(out)
    }

    /// `NoCompatibleInstanceTypes` on each NodePool that can launch nothing (see
    /// [`compatible`]), as upstream writes it when it builds a pass's scheduler.
    fn publish_pools_without_types(&self, snap: &Snapshot) {
        let names = compatible::pools_without_instance_types(snap);
        let s = lock(&self.state);
        for name in names {
            let uid = s
                .nodepools
                .get(&name)
                .and_then(|np| np.metadata.uid.clone());
            let pool = ObjectRef::nodepool(&name);
            let pool = match uid {
                Some(uid) => pool.with_uid(uid),
                None => pool,
            };
            self.events
                .publish(events::no_compatible_instance_types(pool));
        }
    }

    /// Pods the plan puts on nodes and in-flight claims: nominated there (event and state).
    fn nominate_existing(&self, plan: &Plan) {
        let now = self.clock.now();
        let mut s = lock(&self.state);
        let by_target = claims_by_target(&s);
        for p in &plan.placements {
            let (name, on_node) = match &p.target {
                Target::Node(n) => (n, true),
                Target::InFlight(n) => (n, false),
                Target::NewClaim(_) => continue,
            };
            let claim = claim_of_target(&s, &by_target, name);
            let pod = pod_ref(&s, &p.pod);
            let event = match (&claim, on_node) {
                (c, true) => events::nominated_on_node(pod, name, c.as_deref()),
                (Some(c), false) => events::nominated(pod, c),
                (None, false) => continue,
            };
            self.events.publish(event);
            if let Some(c) = claim {
                s.nominate(&p.pod, &c, now);
            }
        }
    }

    /// Creates the plan's new claims: each is built and checked against its NodePool's
    /// limits in plan order (the pool's usage, claims earlier in this pass included, plus the
    /// smallest node this claim may become), then the admitted ones are created up to
    /// [`CREATE_PARALLELISM`] at a time, and each created claim's pods are nominated to it.
    async fn create_claims(&self, snap: &Snapshot, plan: &Plan, out: &mut Provisioned) {
        let mut pools: BTreeMap<String, Option<NodePool>> = BTreeMap::new();
        let mut usage: BTreeMap<String, Resources> = BTreeMap::new();
        let mut admitted = Vec::new();
        for claim in &plan.new_claims {
            let pool = pools
                .entry(claim.nodepool.clone())
                .or_insert_with(|| lock(&self.state).nodepools.get(&claim.nodepool).cloned());
            let Some(pool) = pool.as_ref() else { continue };
            let request = ClaimRequest {
                nodepool: claim.nodepool.clone(),
                requirements: claim.requirement_list.clone(),
                instance_types: claim
                    .instance_types
                    .iter()
                    .map(|o| plan.name_of(o).to_string())
                    .collect(),
                capacity_types: claim
                    .instance_types
                    .iter()
                    .map(|o| o.capacity_type.as_str().to_string())
                    .collect(),
                requests: claim.requests.clone(),
                min_values_relaxed: claim.min_values_relaxed,
            };
            let name = format!("{}-{}", claim.nodepool, claims::random_suffix());
            let object = claims::build(pool, &request, &name);
            let core_claim = convert::nodeclaim(&object).ok();
            let limits = snap
                .nodepools
                .iter()
                .find(|p| p.name == claim.nodepool)
                .map(|p| p.limits.clone())
                .unwrap_or_default();
            let mut add = smallest_capacity(
                snap.instance_types
                    .get(&claim.nodepool)
                    .map(|v| v.as_slice()),
                core_claim
                    .as_ref()
                    .map(|c| c.requirements.as_slice())
                    .unwrap_or(&[]),
            )
            .unwrap_or_default();
            add.set(nodewright_core::resources::NODES, 1);
            let used = usage
                .entry(claim.nodepool.clone())
                .or_insert_with(|| pool_usage(snap, &claim.nodepool));
            if !within_limits(&limits, used, &add) {
                info!(nodepool = %claim.nodepool, "nodepool limit reached; claim not created");
                out.limited.push(name);
                continue;
            }
            // What `pool_usage` would count for this claim once it exists: a claim that does
            // not convert is not in the snapshot, so it holds nothing.
            if core_claim.is_some() {
                used.add(&add);
            }
            admitted.push((name, object, claim));
        }
        // Boxed so the stream's item type names no closure lifetime (the loop's future must
        // stay `Send` for `tokio::spawn`).
        type Create<'a> = Pin<Box<dyn Future<Output = Result<NodeClaim, WriteError>> + Send + 'a>>;
        let creates: Vec<Create<'_>> = admitted
            .iter()
            .map(|(_, object, _)| {
                Box::pin(submit_claim(
                    &self.state,
                    self.writer.as_ref(),
                    &self.metrics,
                    object,
                    PROVISIONED,
                )) as Create<'_>
            })
            .collect();
        let results: Vec<_> = futures::stream::iter(creates)
            .buffered(self.parallelism)
            .collect()
            .await;
        for ((name, _, claim), result) in admitted.into_iter().zip(results) {
            match result {
                Ok(_) => {
                    info!(nodeclaim = %name, nodepool = %claim.nodepool, pods = claim.pods.len(), "created nodeclaim");
                    let now = self.clock.now();
                    let mut s = lock(&self.state);
                    for pod in &claim.pods {
                        let r = pod_ref(&s, pod);
                        self.events.publish(events::nominated(r, &name));
                        s.nominate(pod, &name, now);
                    }
                    drop(s);
                    out.created.push(name);
                }
                Err(e) => {
                    warn!(nodeclaim = %name, error = %e, "creating nodeclaim failed");
                    out.errors.push(format!("{name}: {e}"));
                }
            }
        }
    }

    /// Runs forever: triggers the batcher for provisionable pods (again every 10 s while
    /// they stay pending) and provisions when a batch closes. It looks at most every
    /// [`TICK`], and while leading sleeps between looks until the index changes, the batch
    /// closes or a pod's requeue comes, or [`IDLE_LOOK`] passes (on the clock's shared grid):
    /// an idle controller looks once a second, with the other loops.
    pub async fn run(self: Arc<Self>, window: BatchWindow, r: crate::metrics::Reconciler) {
        let mut trigger = Trigger::new(window);
        let changed = lock(&self.state).on_change();
        loop {
            if !self.leading() {
                // Every pending pod triggers again the moment this replica leads.
                trigger.retry_all();
                tokio::time::sleep(TICK).await;
                continue;
            }
            if trigger.due(&self.state, self.clock.now()) {
                r.now(self.pass(&mut trigger)).await;
            }
            tokio::time::sleep(TICK).await;
            let wait = trigger.idle_wait(self.clock.now());
            tokio::select! {
                _ = changed.notified() => {}
                _ = self.clock.sleep_at_most(wait, IDLE_LOOK) => {}
            }
        }
    }

    /// One provisioning pass after a batch closed, logged; a pass refused because the state
    /// is not synced yet retries the same pods.
    pub async fn pass(&self, trigger: &mut Trigger) -> Option<Provisioned> {
        match self.provision().await {
            Ok(p) => {
                let now = self.clock.now();
                for pod in &p.decided {
                    if let Some(seen) = trigger.decided(pod) {
                        self.metrics
                            .provisioner
                            .pod_scheduling_decision(now.since(seen).as_secs_f64());
                    }
                }
                if !p.created.is_empty() || !p.unplaced.is_empty() {
                    info!(
                        created = p.created.len(),
                        unplaced = p.unplaced.len(),
                        "provisioning pass"
                    )
                }
                Some(p)
            }
            Err(ProvisionError::NotSynced) => {
                trigger.retry_all();
                None
            }
            Err(e) => {
                warn!(error = %e, "provisioning failed");
                None
            }
        }
    }
}

/// A pass that returned nothing failed (or found the state not synced yet): its pods are
/// tried again.
impl crate::metrics::Reconciled for Option<Provisioned> {
    fn failed(&self) -> bool {
        self.is_none()
    }
}

/// The provisioner looks at the pending pods at most this often.
const TICK: Duration = Duration::from_millis(100);

/// The longest the provisioner sleeps without a change: leadership it gained meanwhile is
/// seen at least this soon.
const IDLE_LOOK: Duration = Duration::from_secs(1);

#[cfg(test)]
mod tests;
