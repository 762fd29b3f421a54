//! Controller loops against the in-memory API and a small in-memory cloud.

mod annotations;
mod claim_status;
pub(crate) mod cloud;
mod disruption;
mod e2e;
mod finalizers;
mod finished_pods;
mod gc;
mod interruption;
mod kube_api;
mod lifecycle_events;
mod policies;
pub(crate) mod registration;
mod repair;
mod scale;
mod static_capacity;
mod status;
mod tagging;
pub(crate) mod termination;
mod wiring;

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::clock::Clock;
use crate::conditions;
use crate::context::Context;
use crate::disruption::Disruptor;
use crate::events::MemoryEvents;
use crate::lifecycle::Lifecycle;
use crate::memory::MemoryApi;
use crate::metrics::Metrics;
use crate::provisioner::Provisioner;
use crate::state::{ClusterState, Kind, Object, SharedState, WatchEvent};
use crate::status::StatusController;
use crate::termination::Termination;
use crate::write::KubeWriter;
use cloud::TestCloud;
use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_core::scheduling::NodeCache;
use nodewright_core::time::Timestamp;

pub struct Harness {
    pub state: SharedState,
    pub api: Arc<MemoryApi>,
    pub cloud: Arc<TestCloud>,
    pub clock: Clock,
    pub metrics: Arc<Metrics>,
    pub events: Arc<MemoryEvents>,
    /// The compiles the provisioner and disruption share, as `run` wires them.
    pub compiles: Arc<Mutex<NodeCache>>,
}

impl Harness {
    pub fn new() -> Self {
        let state = ClusterState::shared();
        // 2024-06-01T00:00:00Z
        let clock = Clock::starting_at(Timestamp(1_717_200_000_000));
        let api = Arc::new(MemoryApi::new(state.clone(), clock));
        Harness {
            state,
            api,
            cloud: Arc::new(TestCloud::new()),
            clock,
            metrics: Arc::new(Metrics::new()),
            events: Arc::new(MemoryEvents::new()),
            compiles: Arc::default(),
        }
    }

    /// What the loops share, writing straight to the in-memory API.
    pub fn context(&self) -> Context {
        Context {
            state: self.state.clone(),
            writer: self.api.clone(),
            cloud: self.cloud.clone(),
            clock: self.clock,
            metrics: self.metrics.clone(),
            events: self.events.clone(),
        }
    }

    /// A provisioner writing straight to the in-memory API (no leader gate).
    pub fn provisioner(&self) -> Provisioner {
        Provisioner::new(&self.context()).with_compiles(self.compiles.clone())
    }

    /// The disruption loop writing straight to the in-memory API (no leader gate).
    pub fn disruptor(&self) -> Disruptor {
        Disruptor::new(&self.context()).with_compiles(self.compiles.clone())
    }

    /// The claim lifecycle loop writing straight to the in-memory API (no leader gate).
    pub fn lifecycle(&self) -> Lifecycle {
        Lifecycle::new(&self.context())
    }

    /// The termination loop writing straight to the in-memory API (no leader gate).
    pub fn termination(&self) -> Termination {
        Termination::new(&self.context())
    }

    /// The status writers, leading, writing straight to the in-memory API.
    pub fn status(&self) -> StatusController {
        // The sender is dropped; the receiver keeps the last value.
        let (_, leader) = tokio::sync::watch::channel(true);
        StatusController::new(&self.context()).with_leader(leader)
    }

    /// Every NodeClaim the in-memory API holds.
    pub fn claims(&self) -> Vec<NodeClaim> {
        self.api
            .list(Kind::NodeClaim)
            .into_iter()
            .filter_map(|o| match o {
                Object::NodeClaim(c) => Some(*c),
                _ => None,
            })
            .collect()
    }

    /// Changes NodePool `name` as JSON and stores it again.
    pub fn edit_nodepool(&self, name: &str, edit: impl FnOnce(&mut Value)) {
        let Some(Object::NodePool(np)) = self.api.get(Kind::NodePool, name) else {
            panic!("no NodePool {name}")
        };
        let mut v = serde_json::to_value(&*np).unwrap();
        edit(&mut v);
        self.api.put_value(Kind::NodePool, v);
    }

    pub fn nodepool(&self, name: &str, limits: Option<Value>) {
        let mut np = json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": name, "uid": format!("np-{name}"),
                "annotations": {"karpenter.sh/nodepool-hash": "1234"}},
            "spec": {
                "template": {
                    "metadata": {"labels": {"team": "web"}},
                    "spec": {
                        "requirements": [
                            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
                        ],
                        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                        "expireAfter": "Never"
                    }
                },
                "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s",
                    "budgets": [{"nodes": "100%"}]}
            }
        });
        if let Some(l) = limits {
            np["spec"]["limits"] = l;
        }
        self.api.put_value(Kind::NodePool, np);
    }

    pub fn pending_pod(&self, name: &str, cpu: &str) {
        self.api.put_value(Kind::Pod, pending_pod_json(name, cpu));
    }

    /// The kubelet registering: a Ready node for `provider_id` with the unregistered taint.
    pub fn node_joins(&self, name: &str, provider_id: &str) {
        self.api.put_value(
            Kind::Node,
            json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "spec": {"providerID": provider_id,
                    "taints": [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]},
                "status": {
                    "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                    "allocatable": {"cpu": "3920m", "memory": "15Gi", "pods": "110"},
                    "conditions": [{"type": "Ready", "status": "True"}]
                }
            }),
        );
    }

    /// The Node of claim `claim` joining as `node` (see [`Harness::node_joins`]).
    pub fn claim_joins(&self, node: &str, claim: &str) {
        let Some(Object::NodeClaim(c)) = self.api.get(Kind::NodeClaim, claim) else {
            panic!("no claim {claim}")
        };
        let pid = c.status.and_then(|s| s.provider_id);
        self.node_joins(
            node,
            &pid.unwrap_or_else(|| panic!("{claim} is not launched")),
        );
    }

    /// Sets condition `type_` of claim `claim` true with `reason`, as its own controller
    /// would (drift detection, termination).
    pub async fn set_condition(&self, claim: &str, type_: &str, reason: &str) {
        let Some(Object::NodeClaim(c)) = self.api.get(Kind::NodeClaim, claim) else {
            panic!("no claim {claim}")
        };
        let mut status = c.status.unwrap_or_default();
        let mut conds = status.conditions.take().unwrap_or_default();
        conditions::set(&mut conds, type_, "True", reason, "", self.clock.now());
        status.conditions = Some(conds);
        let w: Arc<dyn KubeWriter> = self.api.clone();
        let version = c.metadata.resource_version.clone();
        w.patch_nodeclaim_status(claim, &status, version.as_deref())
            .await
            .unwrap();
    }

    /// kube-scheduler binding a pod.
    pub fn bind(&self, pod: &str, node: &str) {
        let mut p = pending_pod_json(pod, "1");
        p["spec"]["nodeName"] = json!(node);
        p["status"] =
            json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]});
        self.api.put_value(Kind::Pod, p);
    }
}

/// The index as the watchers leave it after listing `objects`.
pub fn state_of(objects: Vec<Object>) -> ClusterState {
    let mut s = ClusterState::default();
    for o in objects {
        s.apply(WatchEvent::Apply(o));
    }
    s
}

/// `v` (a test's own object) as an index object of `kind`.
pub fn object(kind: Kind, v: Value) -> Object {
    Object::from_value(kind, v).expect("a test object that parses")
}

pub fn pending_pod_json(name: &str, cpu: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": format!("pod-{name}"),
            "labels": {"app": "web"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs", "controller": true}]},
        "spec": {"containers": [{"name": "c", "image": "x",
            "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    })
}
