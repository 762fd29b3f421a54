//! The kube side of the node agent: reads the cloud's instances, and the NodeClaims, its own
//! Nodes and the pods bound to Nodes from watches ([`Watches`]), applies what [`plan`] and
//! [`pod_plan`] decide, and sleeps.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use nodewright_cloud::InstanceState;
use tokio::time::Instant;

use super::cached::{KeptPod, keep_pod};
use super::machines::Machines;
use super::node::{Action, node_ip, node_name, plan, quantities};
use super::pod::{Kubelet, PodAction, PodRef, pod_plan};
use super::watches::Watches;
use super::writes::{NodeWrites, overlay};

const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// Pod writes in flight at once, so a scale-up of thousands of pods starts them in seconds
/// without flooding the API server.
const POD_WRITES_IN_FLIGHT: usize = 16;

/// Node registrations, Lease renewals and Node status writes in flight at once: 2,000 Nodes
/// renew 200 Leases a second between them.
const HEARTBEATS_IN_FLIGHT: usize = 16;

/// How far one Node's registration got: its create, status and Lease written in turn
/// (`steps` of the three), and why it stopped if it did.
#[derive(Default)]
struct Registration {
    steps: u8,
    error: Option<kube::Error>,
}

impl Registration {
    fn failed(mut self, e: kube::Error) -> Self {
        self.error = Some(e);
        self
    }
}

/// How one write of a heartbeat went.
type Written = Result<(), kube::Error>;

/// One Node's heartbeat in a pass: its Lease renewal when due, its Ready status when a report
/// is due.
struct Beat {
    name: String,
    lease: bool,
    status: Option<serde_json::Value>,
}

/// The Ready status a kubelet reports for Node `name`, with the capacity of its instance.
fn ready_status(
    instances: &[crate::cloud::SimInstance],
    name: &str,
    wall: Timestamp,
) -> serde_json::Value {
    let mut ready = serde_json::json!({"status": {"conditions": [{
        "type": "Ready", "status": "True", "reason": "KubeletReady",
        "message": "kubelet is posting ready status",
        "lastHeartbeatTime": Time(wall),
    }]}});
    // Capacity rides along, as a kubelet's status updates carry it: a Node whose first
    // status write failed after its create still gets it.
    if let Some(i) = instances
        .iter()
        .find(|i| node_name(&i.instance.provider_id) == name)
    {
        ready["status"]["capacity"] = serde_json::json!(quantities(&i.capacity));
        ready["status"]["allocatable"] = serde_json::json!(quantities(&i.allocatable));
    }
    ready
}

/// How long [`NodeAgent::run`] waits for the watches' first lists before its first pass, so
/// that pass (which deletes the Nodes an earlier process registered) also deletes their pods.
/// A pass acts on Nodes only once the NodeClaims and Nodes have been listed, and on pods once
/// the pods have.
const FIRST_LIST: Duration = Duration::from_secs(10);

#[derive(Clone, Debug, PartialEq)]
pub struct AgentConfig {
    /// From a running instance to a registered Node (boot, kubelet start).
    pub registration_delay: Duration,
    /// How often the agent looks at the cloud and the cluster.
    pub interval: Duration,
    /// How often a Node's Lease is renewed (the kubelet's default is 10 s).
    pub heartbeat: Duration,
    /// How often a Node's status (its Ready condition's heartbeat, capacity and allocatable)
    /// is written when nothing in it changed: the kubelet's `nodeStatusReportFrequency`, 5 min
    /// by default. Node health rides on the Lease; a status write is a Node watch event for
    /// every watcher, so writing it at the Lease's pace would cost each of them one per Node
    /// every 10 s.
    pub status_report: Duration,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            registration_delay: Duration::from_secs(10),
            interval: Duration::from_secs(1),
            heartbeat: Duration::from_secs(10),
            status_report: Duration::from_secs(5 * 60),
        }
    }
}

/// Why a pass of the agent failed; the next pass tries again.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error("listing the cloud's instances: {0}")]
    Cloud(#[from] nodewright_cloud::CloudError),
}

/// The kube side of the agent.
pub struct NodeAgent {
    machines: Arc<dyn Machines>,
    client: kube::Client,
    config: AgentConfig,
    /// When each Node's Lease was last renewed.
    last_heartbeat: BTreeMap<String, Instant>,
    /// When each Node's status was last written; a Node missing here has none yet.
    last_status: BTreeMap<String, Instant>,
    /// Started on first use (a pass or [`NodeAgent::wait_for_watches`]).
    watches: Option<Watches>,
    /// Nodes this agent created or deleted, until the Node watch shows the change; without
    /// it a lagging watch would have a Node created twice, or a deleted one heartbeated.
    nodes: NodeWrites,
    /// Pods this agent started, as the API server returned them (kept as the cache keeps
    /// them, [`keep_pod`]), until the watch shows the change; without it a lagging watch
    /// would have them started twice.
    started: BTreeMap<String, Arc<KeptPod>>,
    /// Uids of pods this agent deleted or finished, until the watch drops them (or shows
    /// them finished); without it a lagging watch would have a finished pod finished again.
    done: BTreeSet<String>,
}

impl NodeAgent {
    pub fn new(machines: Arc<dyn Machines>, client: kube::Client, config: AgentConfig) -> Self {
        NodeAgent {
            machines,
            client,
            config,
            last_heartbeat: BTreeMap::new(),
            last_status: BTreeMap::new(),
            watches: None,
            nodes: NodeWrites::default(),
            started: BTreeMap::new(),
            done: BTreeSet::new(),
        }
    }

    fn watches(&mut self) -> &Watches {
        let client = self.client.clone();
        self.watches.get_or_insert_with(|| Watches::start(client))
    }

    /// Starts the watches if they have not started and waits for their first lists.
    pub async fn wait_for_watches(&mut self) {
        self.watches().wait().await;
    }

    /// Runs until the task is dropped; API errors are logged and retried next interval.
    pub async fn run(mut self) {
        if tokio::time::timeout(FIRST_LIST, self.wait_for_watches())
            .await
            .is_err()
        {
            tracing::warn!("the watches have not all listed yet; starting without them");
        }
        loop {
            if let Err(e) = self.reconcile().await {
                tracing::warn!(error = %e, "node agent pass failed");
            }
            tokio::time::sleep(self.config.interval).await;
        }
    }

    /// One pass: plan and apply for Nodes, then for the pods on them; nothing until the
    /// NodeClaim and Node watches have listed (they start on the first pass), and nothing for
    /// pods until the pod watch has.
    pub async fn reconcile(&mut self) -> Result<(), AgentError> {
        let watches = self.watches();
        if !watches.nodes_ready() {
            tracing::debug!("the NodeClaim and Node watches have not listed yet");
            return Ok(());
        }
        let claims = watches.claims();
        let watched = watches.node_names();
        let listed = self.nodes.registered(watched);
        let nodes: Api<Node> = Api::all(self.client.clone());
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), NODE_LEASE_NAMESPACE);
        let register_after = self.machines.boot_time() + self.config.registration_delay;
        let instances = self.machines.machines(&claims).await?;
        let now = Instant::now();
        let wall = Timestamp::now();
        let mut registered = listed.clone();
        let (mut arrivals, mut beats) = (Vec::new(), Vec::new());
        for action in plan(&instances, &claims, &listed, now, register_after, wall) {
            match action {
                Action::Register(node) => {
                    registered.insert(node.metadata.name.clone().unwrap_or_default());
                    arrivals.push(*node);
                }
                Action::Heartbeat(name) => {
                    let due = |last: &BTreeMap<String, Instant>, every: Duration| {
                        last.get(&name)
                            .is_none_or(|t| now.duration_since(*t) >= every)
                    };
                    let lease = due(&self.last_heartbeat, self.config.heartbeat);
                    let status = due(&self.last_status, self.config.status_report)
                        .then(|| ready_status(&instances, &name, wall));
                    if lease || status.is_some() {
                        beats.push(Beat {
                            name,
                            lease,
                            status,
                        });
                    }
                }
                Action::Delete(name) => {
                    registered.remove(&name);
                    self.delete_node(&nodes, &leases, &name).await?;
                }
            }
        }
        let arrived = self.register(&nodes, &leases, arrivals, now, wall).await;
        let beaten = self.heartbeat(&nodes, &leases, beats, now, wall).await;
        let kubelets = kubelets(&instances, &listed, &registered);
        let pods = self.reconcile_pods(&kubelets, wall).await;
        arrived?;
        beaten?;
        Ok(pods?)
    }

    /// Renews the due Leases and writes the due Node statuses, many at once; a failed write
    /// is retried next pass and holds up no other. One at a time, a pass over 2,000 Nodes
    /// took longer than a Lease lasts on a loaded API server, and the node lifecycle
    /// controller tainted Nodes unreachable that the agent was still heartbeating.
    async fn heartbeat(
        &mut self,
        nodes: &Api<Node>,
        leases: &Api<Lease>,
        beats: Vec<Beat>,
        now: Instant,
        wall: Timestamp,
    ) -> Result<(), kube::Error> {
        let this = &*self;
        let results: Vec<(Beat, Written, Written)> = futures::stream::iter(beats)
            .map(|beat| async move {
                let lease = match beat.lease {
                    true => this.write_lease(leases, &beat.name, None, wall).await,
                    false => Ok(()),
                };
                let status = match &beat.status {
                    Some(body) => nodes
                        .patch_status(&beat.name, &PatchParams::default(), &Patch::Strategic(body))
                        .await
                        .map(|_| ()),
                    None => Ok(()),
                };
                (beat, lease, status)
            })
            .buffer_unordered(HEARTBEATS_IN_FLIGHT)
            .collect()
            .await;
        let mut first_error = None;
        for (beat, lease, status) in results {
            match lease {
                Ok(()) if beat.lease => {
                    self.last_heartbeat.insert(beat.name.clone(), now);
                }
                Ok(()) => {}
                Err(e) => {
                    tracing::warn!(node = %beat.name, error = %e, "lease renewal failed");
                    first_error.get_or_insert(e);
                }
            }
            match status {
                Ok(()) if beat.status.is_some() => {
                    self.last_status.insert(beat.name, now);
                }
                Ok(()) => {}
                Err(e) => {
                    // The Node went before the watch ever showed it (someone deleted it at
                    // once): forget the creation, so a later pass registers it again.
                    if let kube::Error::Api(s) = &e
                        && s.code == 404
                    {
                        self.nodes.gone(&beat.name);
                    }
                    tracing::warn!(node = %beat.name, error = %e, "node status write failed");
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Registers the Nodes of booted instances, many at once: a scale-up boots hundreds
    /// in one pass, each three writes, and the Leases of the Nodes already there wait for
    /// the pass to end.
    async fn register(
        &mut self,
        nodes: &Api<Node>,
        leases: &Api<Lease>,
        arrivals: Vec<Node>,
        now: Instant,
        wall: Timestamp,
    ) -> Result<(), kube::Error> {
        let this = &*self;
        let results: Vec<(Node, Registration)> = futures::stream::iter(arrivals)
            .map(|node| async move {
                let done = this.register_node(nodes, leases, &node, wall).await;
                (node, done)
            })
            .buffer_unordered(HEARTBEATS_IN_FLIGHT)
            .collect()
            .await;
        let mut first_error = None;
        for (node, done) in results {
            let name = node.metadata.name.clone().unwrap_or_default();
            // Even when a later write failed: the next pass must not create it again while
            // the watch does not show it yet.
            if done.steps > 0 {
                self.nodes.created(&name);
            }
            if done.steps > 1 {
                self.last_status.insert(name.clone(), now);
            }
            if done.steps > 2 {
                self.last_heartbeat.insert(name.clone(), now);
            }
            match done.error {
                None => {
                    let provider_id = node.spec.as_ref().and_then(|s| s.provider_id.as_deref());
                    tracing::info!(node = %name, provider_id = provider_id.unwrap_or_default(), "registered node");
                }
                Some(e) => {
                    tracing::warn!(node = %name, error = %e, "node registration failed");
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Creates the Node of a booted instance, then writes its status and its Lease, as a
    /// kubelet registers; stops at the first write that fails.
    async fn register_node(
        &self,
        nodes: &Api<Node>,
        leases: &Api<Lease>,
        node: &Node,
        wall: Timestamp,
    ) -> Registration {
        let name = node.metadata.name.clone().unwrap_or_default();
        let mut done = Registration::default();
        let created = match nodes.create(&PostParams::default(), node).await {
            Ok(created) => created,
            Err(e) => return done.failed(e),
        };
        done.steps = 1;
        // Status is a subresource: the create drops it, so write it separately.
        let status = serde_json::json!({ "status": node.status });
        if let Err(e) = nodes
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await
        {
            return done.failed(e);
        }
        done.steps = 2;
        let uid = created.metadata.uid.as_deref();
        if let Err(e) = self.write_lease(leases, &name, uid, wall).await {
            return done.failed(e);
        }
        done.steps = 3;
        done
    }

    /// Deletes the Node and Lease of an instance that is gone.
    async fn delete_node(
        &mut self,
        nodes: &Api<Node>,
        leases: &Api<Lease>,
        name: &str,
    ) -> Result<(), kube::Error> {
        ignore_not_found(
            nodes
                .delete(name, &DeleteParams::default())
                .await
                .map(|_| ()),
        )?;
        self.nodes.deleted(name);
        ignore_not_found(
            leases
                .delete(name, &DeleteParams::default())
                .await
                .map(|_| ()),
        )?;
        self.last_heartbeat.remove(name);
        self.last_status.remove(name);
        tracing::info!(node = %name, "deleted node of a terminated instance");
        Ok(())
    }

    async fn reconcile_pods(
        &mut self,
        kubelets: &BTreeMap<String, Kubelet>,
        wall: Timestamp,
    ) -> Result<(), kube::Error> {
        let pods = &self.watches().pods;
        if !pods.ready() {
            tracing::debug!("the pod watch has not listed yet");
            return Ok(());
        }
        let cached = pods.state();
        let pods = overlay(cached, &mut self.started, &mut self.done);
        let actions = pod_plan(kubelets, pods.iter().map(|p| p.as_ref()), wall);
        if actions.is_empty() {
            return Ok(());
        }
        let client = &self.client;
        // Each answer is cut down as it arrives: a pass that starts the pods of a few hundred
        // new Nodes would otherwise hold every one of them whole at once (16 MiB of the
        // controller's heap at its peak in a 10,000-pod run).
        let results: Vec<(PodAction, Result<Option<KeptPod>, kube::Error>)> =
            futures::stream::iter(actions)
                .map(|action| async move {
                    let result = apply_pod(client, &action).await.map(|p| p.map(keep_pod));
                    (action, result)
                })
                .buffer_unordered(POD_WRITES_IN_FLIGHT)
                .collect()
                .await;
        let (mut started, mut deleted, mut finished, mut first_error) = (0, 0, 0, None);
        for (action, result) in results {
            match (action, result) {
                (PodAction::Start(r, _), Ok(Some(pod))) => {
                    started += 1;
                    if let Some(uid) = r.uid {
                        self.started.insert(uid, Arc::new(pod));
                    }
                }
                (PodAction::Delete(r), Ok(_)) => {
                    deleted += 1;
                    if let Some(uid) = r.uid {
                        self.done.insert(uid);
                    }
                }
                (PodAction::Finish(r, _), Ok(Some(_))) => {
                    finished += 1;
                    if let Some(uid) = r.uid {
                        self.done.insert(uid);
                    }
                }
                (_, Ok(None)) => {}
                (action, Err(e)) => {
                    let p = action.pod();
                    tracing::warn!(namespace = %p.namespace, pod = %p.name, error = %e, "pod write failed");
                    first_error.get_or_insert(e);
                }
            }
        }
        if started + deleted + finished > 0 {
            tracing::info!(started, finished, deleted, "played the kubelet for pods");
        }
        first_error.map_or(Ok(()), Err)
    }

    async fn write_lease(
        &self,
        leases: &Api<Lease>,
        name: &str,
        node_uid: Option<&str>,
        wall: Timestamp,
    ) -> Result<(), kube::Error> {
        let owner = node_uid.map(|uid| {
            vec![
                k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                    api_version: "v1".into(),
                    kind: "Node".into(),
                    name: name.into(),
                    uid: uid.into(),
                    ..Default::default()
                },
            ]
        });
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(NODE_LEASE_NAMESPACE.into()),
                owner_references: owner,
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(name.into()),
                lease_duration_seconds: Some(40),
                renew_time: Some(MicroTime(wall)),
                ..LeaseSpec::default()
            }),
        };
        let params = PatchParams::apply("nodewright-sim-kubelet").force();
        leases
            .patch(name, &params, &Patch::Apply(&lease))
            .await
            .map(|_| ())
    }
}

/// The kubelet each of the agent's Node names plays: `Running` for a Node that is registered
/// (`listed` before this pass, `registered` after it) on a running instance; `Gone` for a name
/// the agent uses (an instance's, or a Node it listed) with no Node after this pass. A Node on
/// an instance that is still pending or already shutting down has no kubelet running.
pub(crate) fn kubelets(
    instances: &[crate::cloud::SimInstance],
    listed: &BTreeSet<String>,
    registered: &BTreeSet<String>,
) -> BTreeMap<String, Kubelet> {
    let mut out: BTreeMap<String, Kubelet> = listed
        .iter()
        .filter(|n| !registered.contains(*n))
        .map(|n| (n.clone(), Kubelet::Gone))
        .collect();
    for i in instances {
        let name = node_name(&i.instance.provider_id);
        if !registered.contains(&name) {
            out.insert(name, Kubelet::Gone);
        } else if i.instance.state == InstanceState::Running {
            let host_ip = node_ip(&i.instance.provider_id);
            out.insert(name, Kubelet::Running { host_ip });
        }
    }
    out
}

/// Sends one pod action; `Ok(None)` when the pod is already gone, or a delete's uid
/// precondition failed because another pod of the same name replaced it: nothing more to do.
/// (A status patch for a replaced pod fails validation instead, 422, which is reported: the
/// same code would also mean a status the API server refuses, which must not pass quietly.)
async fn apply_pod(client: &kube::Client, action: &PodAction) -> Result<Option<Pod>, kube::Error> {
    let PodRef {
        namespace,
        name,
        uid,
    } = action.pod();
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let result = match action {
        PodAction::Start(_, status) | PodAction::Finish(_, status) => {
            // The uid in the patch makes it conditional, as the kubelet's own status patches:
            // the API server refuses to change it.
            let mut body = serde_json::json!({ "status": status });
            if let Some(uid) = uid {
                body["metadata"] = serde_json::json!({ "uid": uid });
            }
            api.patch_status(name, &PatchParams::default(), &Patch::Strategic(&body))
                .await
                .map(Some)
        }
        PodAction::Delete(_) => {
            let params = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: uid.as_ref().map(|uid| Preconditions {
                    uid: Some(uid.clone()),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            api.delete(name, &params).await.map(|_| None)
        }
    };
    match result {
        Err(kube::Error::Api(s)) if matches!(s.code, 404 | 409) => Ok(None),
        other => other,
    }
}

fn ignore_not_found(r: Result<(), kube::Error>) -> Result<(), kube::Error> {
    match r {
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests;
