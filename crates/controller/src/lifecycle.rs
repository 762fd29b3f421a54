//! The NodeClaim lifecycle: finalizer, launch through the cloud (provider labels fill in,
//! provider annotations such as the node class hash are written), registration (match the
//! Node by providerID, copy the claim's labels, annotations and taints onto it, run the
//! provider's registration hooks, lift the unregistered taint once none is pending),
//! initialization (Ready, startup and ephemeral taints gone, extended resources present),
//! the launch and registration timeouts, and finalization (delete the Node, terminate the
//! instance, release the finalizer). Every condition that changes status
//! is reported as an event once its write has landed.

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
use nodewright_core::resources::{Resources, format_amount};
use nodewright_core::time::Timestamp;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::claims::{TERMINATION_FINALIZER, finalizers_without_termination};
use crate::clock::{Clock, from_time, parse_rfc3339, rfc3339};
use crate::conditions::{self as cond, INITIALIZED, LAUNCHED, REGISTERED};
use crate::events::{self, EventSink, ObjectRef};
use crate::failpoint::{self, Failpoint};
use crate::metered::MeteredCloud;
use crate::metrics::Metrics;
use crate::state::{SharedState, convert, lock};
use crate::write::claim_status::write_status;
use crate::write::{KubeWriter, MetaPatch, NodePatch, WriteError};

/// Claims reconciled at once in a pass.
pub const RECONCILE_PARALLELISM: usize = 32;

pub const LAUNCH_TIMEOUT: Duration = Duration::from_secs(5 * 60);
pub const REGISTRATION_TIMEOUT: Duration = Duration::from_secs(15 * 60);
pub const UNREGISTERED_TAINT: &str = "karpenter.sh/unregistered";
pub const DISRUPTED_TAINT: &str = "karpenter.sh/disrupted";
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
    pub fn new(
        state: SharedState,
        writer: Arc<dyn KubeWriter>,
        cloud: Arc<dyn CloudProvider>,
        clock: Clock,
        metrics: Arc<Metrics>,
        events: Arc<dyn EventSink>,
    ) -> Self {
        Lifecycle {
            state,
            writer,
            cloud: MeteredCloud::wrap(cloud, metrics.clone(), "nodeclaim.lifecycle"),
            clock,
            metrics,
            events,
            launched: Mutex::new(HashMap::new()),
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
        let claims: Vec<NodeClaim> = lock(&self.state).nodeclaims.values().cloned().collect();
        // Claims are independent: up to RECONCILE_PARALLELISM at once, so one API round trip
        // per write does not add up across thousands of claims. Boxed so the stream's item
        // type names no closure lifetime (the loop's future must stay `Send`).
        type Reconcile<'a> =
            Pin<Box<dyn Future<Output = (String, Result<Outcome, String>)> + Send + 'a>>;
        let passes: Vec<Reconcile<'_>> = claims
            .into_iter()
            .map(|c| {
                Box::pin(async move {
                    let name = c.metadata.name.clone().unwrap_or_default();
                    let r = self.reconcile(c).await.map_err(|e| e.to_string());
                    if let Err(e) = &r {
                        warn!(nodeclaim = %name, error = %e, "nodeclaim reconcile failed");
                    }
                    (name, r)
                }) as Reconcile<'_>
            })
            .collect();
        futures::stream::iter(passes)
            .buffered(self.parallelism)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect()
    }

    pub async fn run(self: Arc<Self>, every: Duration) {
        loop {
            if lock(&self.state).synced() {
                self.reconcile_all().await;
            }
            tokio::time::sleep(every).await;
        }
    }

    pub async fn reconcile(&self, claim: NodeClaim) -> Result<Outcome, WriteError> {
        let name = claim.metadata.name.clone().unwrap_or_default();
        let finalizers = claim.metadata.finalizers.clone().unwrap_or_default();
        if claim.metadata.deletion_timestamp.is_some() {
            if !finalizers.iter().any(|f| f == TERMINATION_FINALIZER) {
                return Ok(Outcome::Unchanged);
            }
            return self.finalize(&claim).await;
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

        if !cond::is_true(&conds, LAUNCHED) {
            let created = claim
                .metadata
                .creation_timestamp
                .as_ref()
                .map(from_time)
                .unwrap_or(now);
            if now.since(created) >= LAUNCH_TIMEOUT {
                info!(nodeclaim = %name, "launch timed out; deleting");
                self.writer.delete_nodeclaim(&name).await?;
                self.count_disrupted(&claim, "launch_timeout");
                return Ok(Outcome::Deleted("launch_timeout"));
            }
            match self.launch(&claim).await {
                Ok(launched) => {
                    self.apply_launch(&claim, &launched, &mut status, &mut conds, now)
                        .await?;
                }
                Err(e @ CloudError::InsufficientCapacity { .. }) => {
                    info!(nodeclaim = %name, reason = %e, "insufficient capacity; deleting");
                    self.events.publish(events::insufficient_capacity(
                        claim_ref(&claim),
                        &e.to_string(),
                    ));
                    self.writer.delete_nodeclaim(&name).await?;
                    self.count_disrupted(&claim, "insufficient_capacity");
                    return Ok(Outcome::Deleted("insufficient_capacity"));
                }
                Err(e @ CloudError::NodeClassNotReady { .. }) => {
                    self.events.publish(events::nodeclass_not_ready(
                        claim_ref(&claim),
                        &e.to_string(),
                    ));
                    self.writer.delete_nodeclaim(&name).await?;
                    self.count_disrupted(&claim, "nodeclass_not_ready");
                    return Ok(Outcome::Deleted("nodeclass_not_ready"));
                }
                Err(e) => {
                    cond::set(
                        &mut conds,
                        LAUNCHED,
                        "Unknown",
                        "LaunchFailed",
                        &e.to_string(),
                        now,
                    );
                }
            }
        }
        if cond::is_true(&conds, LAUNCHED)
            && !cond::is_true(&conds, REGISTERED)
            && let Some(o) = self.register(&claim, &mut status, &mut conds, now).await?
        {
            return Ok(o);
        }
        if cond::is_true(&conds, REGISTERED) && !cond::is_true(&conds, INITIALIZED) {
            self.initialize(&claim, &status, &mut conds, now).await?;
        }
        cond::set_ready(&mut conds, now);
        status.conditions = Some(conds.clone());
        if (status.clone(), conds.clone()) != before {
            write_status(&*self.writer, &self.state, &claim, &status).await?;
            self.publish_transitions(&claim, &before.1, &conds);
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

    async fn launch(&self, claim: &NodeClaim) -> Result<Launched, CloudError> {
        let uid = claim.metadata.uid.clone().unwrap_or_default();
        if let Some(l) = self
            .launched
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&uid)
        {
            return Ok(l.clone());
        }
        let class = lock(&self.state)
            .nodeclasses
            .get(&claim.spec.node_class_ref.name)
            .cloned();
        let l = self.cloud.create(claim, class.as_ref()).await?;
        failpoint::reached(Failpoint::AfterLaunch);
        self.launched
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(uid, l.clone());
        Ok(l)
    }

    async fn apply_launch(
        &self,
        claim: &NodeClaim,
        l: &Launched,
        status: &mut NodeClaimStatus,
        conds: &mut Vec<Condition>,
        now: Timestamp,
    ) -> Result<(), WriteError> {
        let name = claim.metadata.name.clone().unwrap_or_default();
        // Provider labels fill in; labels the claim already has win.
        let existing = claim.metadata.labels.clone().unwrap_or_default();
        let mut patch = MetaPatch::default();
        for (k, v) in &l.labels {
            if !existing.contains_key(k) {
                patch.labels.insert(k.clone(), Some(v.clone()));
            }
        }
        for (k, v) in [
            (labels::INSTANCE_TYPE, l.instance.instance_type.as_str()),
            (labels::ZONE, l.instance.zone.as_str()),
            (labels::CAPACITY_TYPE, l.instance.capacity_type.as_str()),
        ] {
            if !existing.contains_key(k) {
                patch.labels.insert(k.into(), Some(v.into()));
            }
        }
        // Provider annotations override the claim's (upstream assigns them last).
        let existing = claim.metadata.annotations.clone().unwrap_or_default();
        for (k, v) in &l.annotations {
            if existing.get(k) != Some(v) {
                patch.annotations.insert(k.clone(), Some(v.clone()));
            }
        }
        if !patch.is_empty() {
            self.writer.patch_nodeclaim_meta(&name, &patch).await?;
        }
        status.provider_id = Some(l.instance.provider_id.clone());
        status.image_id = l.instance.image_id.clone();
        status.capacity = Some(resource_list(&l.capacity));
        status.allocatable = Some(resource_list(&l.allocatable));
        cond::set(conds, LAUNCHED, "True", LAUNCHED, "", now);
        info!(nodeclaim = %name, provider_id = %l.instance.provider_id, instance_type = %l.instance.instance_type, "launched nodeclaim");
        Ok(())
    }

    async fn register(
        &self,
        claim: &NodeClaim,
        status: &mut NodeClaimStatus,
        conds: &mut Vec<Condition>,
        now: Timestamp,
    ) -> Result<Option<Outcome>, WriteError> {
        let name = claim.metadata.name.clone().unwrap_or_default();
        let pid = status.provider_id.clone().unwrap_or_default();
        let nodes: Vec<Node> = lock(&self.state)
            .node_by_provider_id(&pid)
            .into_iter()
            .cloned()
            .collect();
        let node = match nodes.as_slice() {
            [] => {
                if let Some(o) = self.registration_timed_out(claim, conds, now).await? {
                    return Ok(Some(o));
                }
                cond::set(
                    conds,
                    REGISTERED,
                    "Unknown",
                    "NodeNotFound",
                    "Node not registered with cluster",
                    now,
                );
                return Ok(None);
            }
            [n] => n.clone(),
            _ => {
                cond::set(
                    conds,
                    REGISTERED,
                    "False",
                    "MultipleNodesFound",
                    "multiple nodes found for the providerID",
                    now,
                );
                return Ok(None);
            }
        };
        let node_name = node.metadata.name.clone().unwrap_or_default();
        let node_labels = node.metadata.labels.clone().unwrap_or_default();
        let node_annotations = node.metadata.annotations.clone().unwrap_or_default();
        let mut patch = NodePatch::default();
        // The claim as last written: the launch may have added labels and annotations in
        // this same pass.
        let latest = lock(&self.state)
            .nodeclaims
            .get(&name)
            .map(|c| c.metadata.clone())
            .unwrap_or_else(|| claim.metadata.clone());
        let mut claim_labels = latest.labels.clone().unwrap_or_default();
        let hook = self.run_registration_hooks(claim, &latest, status).await;
        let mut gained = MetaPatch::default();
        for (k, v) in &hook.labels {
            if !claim_labels.contains_key(k) {
                claim_labels.insert(k.clone(), v.clone());
                gained.labels.insert(k.clone(), Some(v.clone()));
            }
        }
        if !gained.is_empty() {
            self.writer.patch_nodeclaim_meta(&name, &gained).await?;
        }
        let registered =
            (!hook.is_pending()).then(|| (labels::REGISTERED.to_string(), "true".to_string()));
        for (k, v) in claim_labels
            .iter()
            .chain(registered.iter().map(|(k, v)| (k, v)))
        {
            if node_labels.get(k) != Some(v) {
                patch.meta.labels.insert(k.clone(), Some(v.clone()));
            }
        }
        // Claim annotations win over the Node's, as upstream's registration assigns them.
        for (k, v) in latest.annotations.iter().flatten() {
            if node_annotations.get(k) != Some(v) {
                patch.meta.annotations.insert(k.clone(), Some(v.clone()));
            }
        }
        let mut finalizers = node.metadata.finalizers.clone().unwrap_or_default();
        if !finalizers.iter().any(|f| f == TERMINATION_FINALIZER) {
            finalizers.push(TERMINATION_FINALIZER.into());
            patch.meta.finalizers = Some(finalizers);
            patch.meta.resource_version = node.metadata.resource_version.clone();
        }
        let current: Vec<ApiTaint> = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        if !current
            .iter()
            .any(|t| t.key == UNREGISTERED_TAINT && t.effect == "NoExecute")
        {
            self.events
                .publish(events::unregistered_taint_missing(ObjectRef::node(
                    &node_name,
                )));
        }
        // The unregistered taint is lifted only once every hook is done.
        let mut taints: Vec<ApiTaint> = current
            .iter()
            .filter(|t| {
                hook.is_pending() || !(t.key == UNREGISTERED_TAINT && t.effect == "NoExecute")
            })
            .cloned()
            .collect();
        let sync = node_labels
            .get(labels::DO_NOT_SYNC_TAINTS)
            .map(String::as_str)
            != Some("true");
        if sync {
            for t in claim
                .spec
                .taints
                .iter()
                .flatten()
                .chain(claim.spec.startup_taints.iter().flatten())
            {
                let t = api_taint(t);
                if !taints.iter().any(|x| same_taint(x, &t)) {
                    taints.push(t);
                }
            }
        }
        if taints != current {
            patch.taints = Some(taints);
        }
        if !patch.is_empty() {
            self.writer.patch_node(&node_name, &patch).await?;
        }
        if let Some(why) = &hook.pending {
            if let Some(o) = self.registration_timed_out(claim, conds, now).await? {
                return Ok(Some(o));
            }
            cond::set(
                conds,
                REGISTERED,
                "False",
                REGISTRATION_HOOK_PENDING,
                why,
                now,
            );
            return Ok(None);
        }
        status.node_name = Some(node_name.clone());
        cond::set(conds, REGISTERED, "True", REGISTERED, "", now);
        let label = |k: &str| claim_labels.get(k).cloned().unwrap_or_default();
        self.metrics.node_created(
            &label(labels::NODEPOOL),
            &node_labels
                .get(labels::ZONE)
                .cloned()
                .unwrap_or_else(|| label(labels::ZONE)),
        );
        info!(nodeclaim = %name, node = %node_name, "registered nodeclaim");
        Ok(None)
    }

    /// Deletes the claim once it has stayed unregistered for [`REGISTRATION_TIMEOUT`] since
    /// its launch.
    async fn registration_timed_out(
        &self,
        claim: &NodeClaim,
        conds: &[Condition],
        now: Timestamp,
    ) -> Result<Option<Outcome>, WriteError> {
        let launched_at = cond::find(conds, LAUNCHED)
            .and_then(|c| c.last_transition_time.as_deref())
            .and_then(parse_rfc3339)
            .unwrap_or(now);
        if now.since(launched_at) < REGISTRATION_TIMEOUT {
            return Ok(None);
        }
        let name = claim.metadata.name.clone().unwrap_or_default();
        info!(nodeclaim = %name, "registration timed out; deleting");
        self.writer.delete_nodeclaim(&name).await?;
        self.count_disrupted(claim, "registration_timeout");
        Ok(Some(Outcome::Deleted("registration_timeout")))
    }

    /// The provider's registration hooks for the claim as last written (`meta`, `status`).
    /// A hook that fails keeps registration pending, with the error as the reason.
    async fn run_registration_hooks(
        &self,
        claim: &NodeClaim,
        meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
        status: &NodeClaimStatus,
    ) -> Registration {
        let mut current = claim.clone();
        current.metadata = meta.clone();
        current.status = Some(status.clone());
        let class = lock(&self.state)
            .nodeclasses
            .get(&claim.spec.node_class_ref.name)
            .cloned();
        match self
            .cloud
            .registration_hooks(&current, class.as_ref())
            .await
        {
            Ok(r) => r,
            Err(e) => {
                let name = claim.metadata.name.as_deref().unwrap_or_default();
                warn!(nodeclaim = %name, error = %e, "registration hook failed");
                Registration::pending(format!("registration hook failed: {e}"))
            }
        }
    }

    async fn initialize(
        &self,
        claim: &NodeClaim,
        status: &NodeClaimStatus,
        conds: &mut Vec<Condition>,
        now: Timestamp,
    ) -> Result<(), WriteError> {
        let node_name = status.node_name.clone().unwrap_or_default();
        let Some(node) = lock(&self.state).nodes.get(&node_name).cloned() else {
            cond::set(
                conds,
                INITIALIZED,
                "Unknown",
                "NodeNotFound",
                "Node not registered with cluster",
                now,
            );
            return Ok(());
        };
        if !node_ready(&node) {
            cond::set(
                conds,
                INITIALIZED,
                "Unknown",
                "NodeNotReady",
                "Node status is NotReady",
                now,
            );
            return Ok(());
        }
        let taints: Vec<ApiTaint> = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        let startup: Vec<ApiTaint> = claim
            .spec
            .startup_taints
            .iter()
            .flatten()
            .map(api_taint)
            .collect();
        if let Some(t) = taints
            .iter()
            .find(|t| startup.iter().any(|s| same_taint(s, t)))
        {
            cond::set(
                conds,
                INITIALIZED,
                "Unknown",
                "StartupTaintsExist",
                &format!("StartupTaint {:?} still exists", t.key),
                now,
            );
            return Ok(());
        }
        if let Some(t) = taints.iter().find(|t| is_known_ephemeral(t)) {
            cond::set(
                conds,
                INITIALIZED,
                "Unknown",
                "KnownEphemeralTaintsExist",
                &format!("KnownEphemeralTaint {:?} still exists", t.key),
                now,
            );
            return Ok(());
        }
        let requested = convert::resources(
            claim
                .spec
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref()),
        )
        .unwrap_or_default();
        let allocatable = convert::node(&node)
            .map(|n| n.allocatable)
            .unwrap_or_default();
        let missing: Vec<&str> = requested
            .iter()
            .filter(|(k, v)| {
                *v > 0
                    && !matches!(
                        *k,
                        "cpu" | "memory" | "ephemeral-storage" | "pods" | "nodes"
                    )
                    && allocatable.get(k) <= 0
            })
            .map(|(k, _)| k)
            .collect();
        if let Some(r) = missing.first() {
            cond::set(
                conds,
                INITIALIZED,
                "Unknown",
                "ResourceNotRegistered",
                &format!("Resource {r:?} was requested but not registered"),
                now,
            );
            return Ok(());
        }
        if node
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(labels::INITIALIZED))
            .map(String::as_str)
            != Some("true")
        {
            let mut patch = NodePatch::default();
            patch
                .meta
                .labels
                .insert(labels::INITIALIZED.into(), Some("true".into()));
            self.writer.patch_node(&node_name, &patch).await?;
        }
        cond::set(conds, INITIALIZED, "True", INITIALIZED, "", now);
        info!(nodeclaim = claim.metadata.name.as_deref().unwrap_or_default(), node = %node_name, "initialized nodeclaim");
        Ok(())
    }

    /// Deleting claim: stamp the termination deadline, delete its Node and wait for it, then
    /// terminate the instance until the cloud says it is gone, then release the finalizer.
    async fn finalize(&self, claim: &NodeClaim) -> Result<Outcome, WriteError> {
        let name = claim.metadata.name.clone().unwrap_or_default();
        let now = self.clock.now();
        let annotations = claim.metadata.annotations.clone().unwrap_or_default();
        if let (Some(tgp), Some(deleted), false) = (
            claim
                .spec
                .termination_grace_period
                .as_deref()
                .and_then(|d| nodewright_api::v1::shared::parse_duration(d).ok()),
            claim.metadata.deletion_timestamp.as_ref().map(from_time),
            annotations.contains_key(TERMINATION_TIMESTAMP),
        ) {
            let mut p = MetaPatch::default();
            p.annotations.insert(
                TERMINATION_TIMESTAMP.into(),
                Some(rfc3339(deleted.plus(tgp))),
            );
            self.writer.patch_nodeclaim_meta(&name, &p).await?;
        }
        let status = claim.status.clone().unwrap_or_default();
        let pid = status.provider_id.clone();
        if let Some(pid) = &pid {
            let nodes: Vec<Node> = lock(&self.state)
                .node_by_provider_id(pid)
                .into_iter()
                .cloned()
                .collect();
            if !nodes.is_empty() {
                for n in nodes {
                    if n.metadata.deletion_timestamp.is_none() {
                        let node_name = n.metadata.name.clone().unwrap_or_default();
                        match self.writer.delete_node(&node_name).await {
                            Ok(()) => {}
                            Err(e) if e.is_not_found() => {}
                            Err(e) => return Err(e),
                        }
                    }
                }
                return Ok(Outcome::Updated);
            }
            match self.cloud.delete(pid).await {
                Err(e) if e.is_not_found() => {}
                Ok(()) => {
                    failpoint::reached(Failpoint::AfterTerminate);
                    let mut conds = status.conditions.clone().unwrap_or_default();
                    if cond::set(
                        &mut conds,
                        cond::INSTANCE_TERMINATING,
                        "True",
                        "InstanceTerminating",
                        "",
                        now,
                    ) {
                        let mut s = status.clone();
                        s.conditions = Some(conds.clone());
                        write_status(&*self.writer, &self.state, claim, &s).await?;
                        self.publish_transitions(
                            claim,
                            status.conditions.as_deref().unwrap_or_default(),
                            &conds,
                        );
                    }
                    return Ok(Outcome::Updated);
                }
                Err(e) => {
                    warn!(nodeclaim = %name, error = %e, "terminating instance failed");
                    return Ok(Outcome::Unchanged);
                }
            }
        }
        // As for Nodes: the list and its version guard from the latest read, since this pass
        // may already have written the termination timestamp.
        let latest = lock(&self.state)
            .nodeclaims
            .get(&name)
            .map(|c| c.metadata.clone())
            .unwrap_or_else(|| claim.metadata.clone());
        let finalizers = finalizers_without_termination(&latest);
        self.writer
            .patch_nodeclaim_meta(
                &name,
                &MetaPatch {
                    finalizers: Some(finalizers),
                    resource_version: latest.resource_version.clone(),
                    ..Default::default()
                },
            )
            .await?;
        self.launched
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&claim.metadata.uid.clone().unwrap_or_default());
        let claim_labels = claim.metadata.labels.clone().unwrap_or_default();
        let label = |k: &str| claim_labels.get(k).cloned().unwrap_or_default();
        let pool = label(labels::NODEPOOL);
        self.metrics.nodeclaim_terminated(
            &pool,
            &label(labels::CAPACITY_TYPE),
            &label(labels::ZONE),
        );
        if let Some(deleted) = claim.metadata.deletion_timestamp.as_ref().map(from_time) {
            self.metrics
                .nodeclaim_termination_duration(&pool, now.since(deleted).as_secs_f64());
        }
        // The instance is gone by now: how long it took since the terminate call.
        if let Some(terminating) = cond::find(
            status.conditions.as_deref().unwrap_or_default(),
            cond::INSTANCE_TERMINATING,
        )
        .filter(|c| c.status == "True")
        .and_then(|c| c.last_transition_time.as_deref())
        .and_then(parse_rfc3339)
        {
            self.metrics.nodeclaim_instance_termination_duration(
                &pool,
                now.since(terminating).as_secs_f64(),
            );
        }
        info!(nodeclaim = %name, "finalized nodeclaim");
        Ok(Outcome::Finalized)
    }

    /// Counts a claim the lifecycle deleted (`karpenter_nodeclaims_disrupted_total`).
    fn count_disrupted(&self, claim: &NodeClaim, reason: &str) {
        let claim_labels = claim.metadata.labels.clone().unwrap_or_default();
        let pool = claim_labels
            .get(labels::NODEPOOL)
            .cloned()
            .unwrap_or_default();
        let policy = consolidation_policy(&lock(&self.state), &pool);
        self.metrics.nodeclaim_disrupted_with_mode(
            reason,
            &pool,
            claim_labels
                .get(labels::CAPACITY_TYPE)
                .map(String::as_str)
                .unwrap_or_default(),
            &policy,
            termination_mode(claim),
        );
    }
}
