//! The node agent: plays the kubelet for [`SimCloud`] instances, as kwok does. For each
//! running instance launched for a NodeClaim it registers a Node the way an EKS node
//! bootstrapped from Karpenter's user data would (name, labels, taints, capacity, providerID,
//! a Ready condition), keeps it alive (its Lease in `kube-node-lease` and the Ready
//! heartbeat), and deletes it once the instance has terminated.
//!
//! What Node should exist is decided by pure functions ([`desired_node`], [`plan`]) over plain
//! data; [`NodeAgent`] only lists, applies the plan and sleeps.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, NodeSystemInfo, Taint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::core::GroupVersionKind;
use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_cloud::InstanceState;
use nodewright_core::labels;
use nodewright_core::resources::{Resources, format_amount};
use tokio::time::Instant;

use crate::cloud::{SimCloud, SimInstance};

/// Marks the Nodes this agent registered, so it never touches anyone else's.
pub const AGENT_LABEL: &str = "sim.nodewright/agent";
pub const UNREGISTERED_TAINT: &str = "karpenter.sh/unregistered";
const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";
const KUBELET_VERSION: &str = "v1.33.0-eks-sim";

/// `ip-10-x-y-z.ec2.internal`, derived from the provider id so the same instance always gets
/// the same name.
pub fn node_name(provider_id: &str) -> String {
    let [x, y, z] = private_ip(provider_id);
    format!("ip-10-{x}-{y}-{z}.ec2.internal")
}

fn private_ip(provider_id: &str) -> [u8; 3] {
    // FNV-1a: stable across runs and platforms.
    let mut h: u32 = 0x811c_9dc5;
    for b in provider_id.bytes() {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    let [a, b, c, _] = h.to_be_bytes();
    [a, b, c.max(1)]
}

fn quantities(r: &Resources) -> BTreeMap<String, Quantity> {
    r.iter()
        .map(|(k, v)| (k.to_owned(), Quantity(format_amount(k, v))))
        .collect()
}

fn taint(t: &nodewright_api::v1::Taint) -> Taint {
    Taint {
        key: t.key.clone(),
        value: t.value.clone(),
        effect: t.effect.clone(),
        time_added: None,
    }
}

fn condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> NodeCondition {
    NodeCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_heartbeat_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}

/// The Node a kubelet on `instance` registers for `claim`: the claim's labels plus the
/// instance's well-known labels and hostname; the `karpenter.sh/unregistered` taint, the
/// claim's taints and its startup taints; capacity and allocatable of the instance type.
pub fn desired_node(instance: &SimInstance, claim: &NodeClaim, now: Timestamp) -> Node {
    let name = node_name(&instance.instance.provider_id);
    let mut node_labels = claim.metadata.labels.clone().unwrap_or_default();
    for (k, v) in &instance.labels {
        node_labels.insert(k.clone(), v.clone());
    }
    node_labels.insert(labels::HOSTNAME.into(), name.clone());
    node_labels
        .entry(labels::OS.into())
        .or_insert_with(|| "linux".into());
    node_labels.insert(AGENT_LABEL.into(), "true".into());

    let mut taints = vec![Taint {
        key: UNREGISTERED_TAINT.into(),
        value: None,
        effect: "NoExecute".into(),
        time_added: None,
    }];
    let claim_taints = claim.spec.taints.iter().flatten();
    let startup = claim.spec.startup_taints.iter().flatten();
    for t in claim_taints.chain(startup) {
        if !taints
            .iter()
            .any(|x| x.key == t.key && x.effect == t.effect)
        {
            taints.push(taint(t));
        }
    }

    let [x, y, z] = private_ip(&instance.instance.provider_id);
    let ip = format!("10.{x}.{y}.{z}");
    Node {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some(node_labels.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(instance.instance.provider_id.clone()),
            taints: Some(taints),
            ..NodeSpec::default()
        }),
        status: Some(NodeStatus {
            capacity: Some(quantities(&instance.capacity)),
            allocatable: Some(quantities(&instance.allocatable)),
            conditions: Some(vec![
                condition(
                    "MemoryPressure",
                    "False",
                    "KubeletHasSufficientMemory",
                    "kubelet has sufficient memory available",
                    now,
                ),
                condition(
                    "DiskPressure",
                    "False",
                    "KubeletHasNoDiskPressure",
                    "kubelet has no disk pressure",
                    now,
                ),
                condition(
                    "PIDPressure",
                    "False",
                    "KubeletHasSufficientPID",
                    "kubelet has sufficient PID available",
                    now,
                ),
                condition(
                    "Ready",
                    "True",
                    "KubeletReady",
                    "kubelet is posting ready status",
                    now,
                ),
            ]),
            addresses: Some(vec![
                NodeAddress {
                    type_: "InternalIP".into(),
                    address: ip,
                },
                NodeAddress {
                    type_: "Hostname".into(),
                    address: name.clone(),
                },
                NodeAddress {
                    type_: "InternalDNS".into(),
                    address: name,
                },
            ]),
            node_info: Some(NodeSystemInfo {
                architecture: node_labels.get(labels::ARCH).cloned().unwrap_or_default(),
                operating_system: node_labels.get(labels::OS).cloned().unwrap_or_default(),
                kubelet_version: KUBELET_VERSION.into(),
                kube_proxy_version: KUBELET_VERSION.into(),
                ..NodeSystemInfo::default()
            }),
            ..NodeStatus::default()
        }),
    }
}

/// One step of the agent.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Register this Node (and its Lease).
    Register(Box<Node>),
    /// Renew the Lease and Ready heartbeat of this Node.
    Heartbeat(String),
    /// Delete this Node (and its Lease): its instance is gone.
    Delete(String),
}

/// What to do, given the cloud's instances, the cluster's NodeClaims by name and the names of
/// the Nodes this agent registered. An instance registers once it has been running for
/// `register_after` since launch and its claim exists; a Node whose instance is terminated
/// (or unknown) is deleted; every other registered Node on a running instance gets a
/// heartbeat. Output is sorted by node name.
pub fn plan(
    instances: &[SimInstance],
    claims: &BTreeMap<String, NodeClaim>,
    registered: &BTreeSet<String>,
    now: Instant,
    register_after: Duration,
    wall: Timestamp,
) -> Vec<Action> {
    let mut out: BTreeMap<String, Action> = BTreeMap::new();
    let mut alive = BTreeSet::new();
    for i in instances {
        let name = node_name(&i.instance.provider_id);
        match i.instance.state {
            InstanceState::Terminated => continue,
            InstanceState::Pending | InstanceState::ShuttingDown => {
                // A shutting-down instance's kubelet has stopped: no heartbeat, but the Node
                // stays until the instance is gone.
                alive.insert(name);
                continue;
            }
            InstanceState::Running => {}
        }
        alive.insert(name.clone());
        if registered.contains(&name) {
            out.insert(name.clone(), Action::Heartbeat(name));
            continue;
        }
        if now.duration_since(i.launched_at()) < register_after {
            continue;
        }
        let Some(claim) = i.instance.nodeclaim().and_then(|c| claims.get(c)) else {
            continue;
        };
        out.insert(
            name,
            Action::Register(Box::new(desired_node(i, claim, wall))),
        );
    }
    for name in registered {
        if !alive.contains(name) {
            out.insert(name.clone(), Action::Delete(name.clone()));
        }
    }
    out.into_values().collect()
}

#[derive(Clone, Debug, PartialEq)]
pub struct AgentConfig {
    /// From a running instance to a registered Node (boot, kubelet start).
    pub registration_delay: Duration,
    /// How often the agent looks at the cloud and the cluster.
    pub interval: Duration,
    /// How often Leases and Ready heartbeats are renewed (the kubelet's default is 10 s).
    pub heartbeat: Duration,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            registration_delay: Duration::from_secs(10),
            interval: Duration::from_secs(1),
            heartbeat: Duration::from_secs(10),
        }
    }
}

/// The kube side of the agent.
pub struct NodeAgent {
    cloud: Arc<SimCloud>,
    client: kube::Client,
    config: AgentConfig,
    last_heartbeat: BTreeMap<String, Instant>,
}

fn nodeclaim_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("karpenter.sh", "v1", "NodeClaim"),
        "nodeclaims",
    )
}

impl NodeAgent {
    pub fn new(cloud: Arc<SimCloud>, client: kube::Client, config: AgentConfig) -> Self {
        NodeAgent {
            cloud,
            client,
            config,
            last_heartbeat: BTreeMap::new(),
        }
    }

    /// Runs until the task is dropped; API errors are logged and retried next interval.
    pub async fn run(mut self) {
        loop {
            if let Err(e) = self.reconcile().await {
                tracing::warn!(error = %e, "node agent pass failed");
            }
            tokio::time::sleep(self.config.interval).await;
        }
    }

    /// One pass: list, plan, apply.
    pub async fn reconcile(&mut self) -> Result<(), kube::Error> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), NODE_LEASE_NAMESPACE);
        let claims_api: Api<DynamicObject> =
            Api::all_with(self.client.clone(), &nodeclaim_resource());
        let mut claims = BTreeMap::new();
        for obj in claims_api.list(&ListParams::default()).await?.items {
            let Ok(value) = serde_json::to_value(&obj) else {
                continue;
            };
            match serde_json::from_value::<NodeClaim>(value) {
                Ok(nc) => {
                    if let Some(name) = nc.metadata.name.clone() {
                        claims.insert(name, nc);
                    }
                }
                Err(e) => tracing::debug!(error = %e, "skipping a NodeClaim that does not parse"),
            }
        }
        let registered: BTreeSet<String> = nodes
            .list(&ListParams::default().labels(&format!("{AGENT_LABEL}=true")))
            .await?
            .items
            .into_iter()
            .filter_map(|n| n.metadata.name)
            .collect();
        let register_after = self.cloud.config().launch_delay + self.config.registration_delay;
        let now = Instant::now();
        let wall = Timestamp::now();
        let instances = self.cloud.instances();
        for action in plan(&instances, &claims, &registered, now, register_after, wall) {
            match action {
                Action::Register(node) => {
                    let name = node.metadata.name.clone().unwrap_or_default();
                    let created = nodes.create(&PostParams::default(), &node).await?;
                    // Status is a subresource: the create drops it, so write it separately.
                    let status = serde_json::json!({ "status": node.status });
                    nodes
                        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                        .await?;
                    self.write_lease(&leases, &name, created.metadata.uid.as_deref(), wall)
                        .await?;
                    self.last_heartbeat.insert(name.clone(), now);
                    tracing::info!(node = %name, provider_id = ?node.spec.as_ref().and_then(|s| s.provider_id.as_ref()), "registered node");
                }
                Action::Heartbeat(name) => {
                    let due = self
                        .last_heartbeat
                        .get(&name)
                        .is_none_or(|t| now.duration_since(*t) >= self.config.heartbeat);
                    if !due {
                        continue;
                    }
                    self.write_lease(&leases, &name, None, wall).await?;
                    let mut ready = serde_json::json!({"status": {"conditions": [{
                        "type": "Ready", "status": "True", "reason": "KubeletReady",
                        "message": "kubelet is posting ready status",
                        "lastHeartbeatTime": Time(wall),
                    }]}});
                    // Capacity rides along, as a kubelet's status updates carry it: a Node
                    // whose first status write failed after its create still gets it.
                    if let Some(i) = instances
                        .iter()
                        .find(|i| node_name(&i.instance.provider_id) == name)
                    {
                        ready["status"]["capacity"] = serde_json::json!(quantities(&i.capacity));
                        ready["status"]["allocatable"] =
                            serde_json::json!(quantities(&i.allocatable));
                    }
                    nodes
                        .patch_status(&name, &PatchParams::default(), &Patch::Strategic(&ready))
                        .await?;
                    self.last_heartbeat.insert(name, now);
                }
                Action::Delete(name) => {
                    ignore_not_found(
                        nodes
                            .delete(&name, &DeleteParams::default())
                            .await
                            .map(|_| ()),
                    )?;
                    ignore_not_found(
                        leases
                            .delete(&name, &DeleteParams::default())
                            .await
                            .map(|_| ()),
                    )?;
                    self.last_heartbeat.remove(&name);
                    tracing::info!(node = %name, "deleted node of a terminated instance");
                }
            }
        }
        Ok(())
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

fn ignore_not_found(r: Result<(), kube::Error>) -> Result<(), kube::Error> {
    match r {
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodewright_cloud::Instance;
    use nodewright_core::model::CapacityType;

    fn instance(
        provider_id: &str,
        claim: &str,
        state: InstanceState,
        launched: Instant,
    ) -> SimInstance {
        SimInstance::for_tests(
            Instance {
                provider_id: provider_id.into(),
                instance_type: "m5.large".into(),
                zone: "us-east-1a".into(),
                capacity_type: CapacityType::Spot,
                image_id: None,
                state,
                launched_at: None,
                tags: BTreeMap::from([("karpenter.sh/nodeclaim".to_string(), claim.to_string())]),
            },
            Resources::new()
                .with("cpu", 2000)
                .with("memory", 8 << 30)
                .with("pods", 29),
            Resources::new()
                .with("cpu", 1930)
                .with("memory", 7 << 30)
                .with("pods", 29),
            BTreeMap::from([
                (labels::INSTANCE_TYPE.to_string(), "m5.large".to_string()),
                (labels::ZONE.to_string(), "us-east-1a".to_string()),
                (labels::CAPACITY_TYPE.to_string(), "spot".to_string()),
                (labels::ARCH.to_string(), "amd64".to_string()),
            ]),
            launched,
        )
    }

    fn claim(name: &str) -> NodeClaim {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "default", "team": "web"}},
            "spec": {
                "requirements": [],
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}],
                "startupTaints": [{"key": "cni-not-ready", "effect": "NoSchedule"}]
            }
        }))
        .unwrap()
    }

    fn wall() -> Timestamp {
        Timestamp::from_second(1_700_000_000).unwrap()
    }

    #[test]
    fn names_look_like_eks_and_are_stable() {
        let a = node_name("aws:///us-east-1a/i-0123456789abcdef0");
        assert_eq!(a, node_name("aws:///us-east-1a/i-0123456789abcdef0"));
        assert_ne!(a, node_name("aws:///us-east-1a/i-0123456789abcdef1"));
        let parts: Vec<&str> = a.trim_end_matches(".ec2.internal").split('-').collect();
        assert_eq!(parts[..2], ["ip", "10"]);
        assert!(parts[2..].iter().all(|p| p.parse::<u8>().is_ok()));
        assert!(a.ends_with(".ec2.internal"));
    }

    #[test]
    fn the_node_carries_labels_taints_capacity_and_ready() {
        let i = instance(
            "aws:///us-east-1a/i-0abc",
            "nc-1",
            InstanceState::Running,
            Instant::now(),
        );
        let node = desired_node(&i, &claim("nc-1"), wall());
        let name = node.metadata.name.clone().unwrap();
        let l = node.metadata.labels.as_ref().unwrap();
        assert_eq!(l["karpenter.sh/nodepool"], "default");
        assert_eq!(l["team"], "web");
        assert_eq!(l[labels::INSTANCE_TYPE], "m5.large");
        assert_eq!(l[labels::CAPACITY_TYPE], "spot");
        assert_eq!(l[labels::HOSTNAME], name);
        assert_eq!(l[labels::OS], "linux");
        let spec = node.spec.as_ref().unwrap();
        assert_eq!(
            spec.provider_id.as_deref(),
            Some("aws:///us-east-1a/i-0abc")
        );
        let taints: Vec<(String, String)> = spec
            .taints
            .iter()
            .flatten()
            .map(|t| (t.key.clone(), t.effect.clone()))
            .collect();
        assert_eq!(
            taints,
            [
                (
                    "karpenter.sh/unregistered".to_string(),
                    "NoExecute".to_string()
                ),
                ("dedicated".to_string(), "NoSchedule".to_string()),
                ("cni-not-ready".to_string(), "NoSchedule".to_string()),
            ]
        );
        let status = node.status.as_ref().unwrap();
        assert_eq!(status.capacity.as_ref().unwrap()["cpu"].0, "2");
        assert_eq!(status.allocatable.as_ref().unwrap()["cpu"].0, "1930m");
        assert_eq!(status.allocatable.as_ref().unwrap()["memory"].0, "7Gi");
        let ready = status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "Ready")
            .unwrap();
        assert_eq!(ready.status, "True");
        assert_eq!(status.node_info.as_ref().unwrap().architecture, "amd64");
    }

    #[test]
    fn plan_registers_heartbeats_and_deletes() {
        let t0 = Instant::now();
        let later = t0 + Duration::from_secs(30);
        let claims = BTreeMap::from([("a".to_string(), claim("a")), ("b".to_string(), claim("b"))]);
        let a = instance("aws:///z/i-a", "a", InstanceState::Running, t0);
        let b = instance("aws:///z/i-b", "b", InstanceState::Running, t0);
        let gone = instance("aws:///z/i-c", "c", InstanceState::Terminated, t0);
        let orphan = instance("aws:///z/i-d", "missing", InstanceState::Running, t0);
        let young = instance("aws:///z/i-e", "a", InstanceState::Running, later);
        let registered = BTreeSet::from([
            node_name("aws:///z/i-b"),
            node_name("aws:///z/i-c"),
            "ip-10-9-9-9.ec2.internal".to_string(),
        ]);
        let actions = plan(
            &[a, b, gone, orphan, young],
            &claims,
            &registered,
            later,
            Duration::from_secs(13),
            wall(),
        );
        let mut summary: Vec<String> = actions
            .iter()
            .map(|a| match a {
                Action::Register(n) => format!(
                    "register {}",
                    n.spec.as_ref().unwrap().provider_id.as_ref().unwrap()
                ),
                Action::Heartbeat(n) => format!("heartbeat {n}"),
                Action::Delete(n) => format!("delete {n}"),
            })
            .collect();
        summary.sort();
        let mut expected = vec![
            "register aws:///z/i-a".to_string(),
            format!("heartbeat {}", node_name("aws:///z/i-b")),
            format!("delete {}", node_name("aws:///z/i-c")),
            "delete ip-10-9-9-9.ec2.internal".to_string(),
        ];
        expected.sort();
        assert_eq!(summary, expected);
    }

    #[test]
    fn a_shutting_down_instance_keeps_its_node_without_heartbeats() {
        let t0 = Instant::now();
        let i = instance("aws:///z/i-a", "a", InstanceState::ShuttingDown, t0);
        let registered = BTreeSet::from([node_name("aws:///z/i-a")]);
        let claims = BTreeMap::from([("a".to_string(), claim("a"))]);
        assert!(plan(&[i], &claims, &registered, t0, Duration::ZERO, wall()).is_empty());
    }
}

/// The agent against a minimal in-process API server on 127.0.0.1.
#[cfg(test)]
mod kube_tests {
    use super::*;
    use crate::cloud::SimCloudConfig;
    use axum::body::Bytes;
    use axum::http::{HeaderMap, Method, StatusCode, Uri};
    use axum::response::{IntoResponse, Response};
    use serde_json::{Value, json};
    use std::sync::Mutex;

    type Objects = Arc<Mutex<BTreeMap<String, Value>>>;

    fn reply(code: u16, v: Value) -> Response {
        (
            StatusCode::from_u16(code).unwrap(),
            [("content-type", "application/json")],
            v.to_string(),
        )
            .into_response()
    }

    fn not_found() -> Response {
        reply(
            404,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "NotFound", "code": 404}),
        )
    }

    fn merge(t: &mut Value, p: &Value) {
        match (t, p) {
            (Value::Object(t), Value::Object(p)) => {
                for (k, v) in p {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
            (t, p) => *t = p.clone(),
        }
    }

    async fn handle(
        objects: Objects,
        method: Method,
        uri: Uri,
        headers: HeaderMap,
        body: Bytes,
    ) -> Response {
        let path = uri.path().to_owned();
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let mut o = objects.lock().unwrap();
        match method {
            Method::GET => {
                let selector = uri.query().unwrap_or("").contains("labelSelector");
                let items: Vec<Value> = o
                    .iter()
                    .filter(|(k, v)| {
                        k.rsplit_once('/').is_some_and(|(dir, _)| dir == path)
                            && (!selector || v["metadata"]["labels"][AGENT_LABEL] == "true")
                    })
                    .map(|(_, v)| v.clone())
                    .collect();
                reply(
                    200,
                    json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": "1"}, "items": items}),
                )
            }
            Method::POST => {
                let key = format!("{path}/{}", body["metadata"]["name"].as_str().unwrap());
                let mut obj = body;
                // Status is a subresource: the API server drops it on create.
                if let Some(m) = obj.as_object_mut() {
                    m.remove("status");
                }
                obj["metadata"]["uid"] = json!(format!("uid-{}", o.len()));
                o.insert(key, obj.clone());
                reply(201, obj)
            }
            Method::PATCH => {
                if path.ends_with("/status")
                    && let Some(fail) = o.get_mut(FAIL_NEXT_STATUS)
                    && fail.as_bool() == Some(true)
                {
                    *fail = json!(false);
                    return reply(
                        500,
                        json!({"kind": "Status", "apiVersion": "v1",
                        "status": "Failure", "message": "etcdserver: request timed out",
                        "reason": "InternalError", "code": 500}),
                    );
                }
                let key = path.trim_end_matches("/status").to_owned();
                let apply = headers
                    .get("content-type")
                    .is_some_and(|c| c.to_str().unwrap_or("").contains("apply-patch"));
                match o.get_mut(&key) {
                    Some(current) => {
                        merge(current, &body);
                        reply(200, current.clone())
                    }
                    None if apply => {
                        o.insert(key, body.clone());
                        reply(201, body)
                    }
                    None => not_found(),
                }
            }
            Method::DELETE => match o.remove(&path) {
                Some(v) => reply(200, v),
                None => not_found(),
            },
            _ => not_found(),
        }
    }

    /// A key in the fake's store: while true, the next status patch fails with a 500.
    const FAIL_NEXT_STATUS: &str = "fail-next-status";

    async fn server(objects: Objects) -> kube::Client {
        let app = axum::Router::new().fallback(move |m: Method, u: Uri, h: HeaderMap, b: Bytes| {
            let objects = objects.clone();
            async move { handle(objects, m, u, h, b).await }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        kube::Client::try_from(kube::Config::new(format!("http://{addr}").parse().unwrap()))
            .unwrap()
    }

    #[tokio::test]
    async fn registers_heartbeats_and_deletes_nodes() {
        let objects: Objects = Arc::default();
        let client = server(objects.clone()).await;
        let cloud = Arc::new(
            SimCloud::new(SimCloudConfig {
                launch_delay: Duration::ZERO,
                termination_delay: Duration::ZERO,
                ..SimCloudConfig::default()
            })
            .unwrap(),
        );
        let nc: NodeClaim = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "nc-1", "labels": {"karpenter.sh/nodepool": "default"}},
            "spec": {"requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}],
                     "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}
        }))
        .unwrap();
        objects.lock().unwrap().insert(
            "/apis/karpenter.sh/v1/nodeclaims/nc-1".into(),
            serde_json::to_value(&nc).unwrap(),
        );
        use nodewright_cloud::CloudProvider;
        let launched = cloud.create(&nc, None).await.unwrap();
        let name = node_name(&launched.instance.provider_id);
        let mut agent = NodeAgent::new(
            cloud.clone(),
            client,
            AgentConfig {
                registration_delay: Duration::ZERO,
                ..AgentConfig::default()
            },
        );
        agent.reconcile().await.unwrap();
        {
            let o = objects.lock().unwrap();
            let node = &o[&format!("/api/v1/nodes/{name}")];
            assert_eq!(
                node["spec"]["providerID"],
                json!(launched.instance.provider_id)
            );
            assert_eq!(
                node["metadata"]["labels"]["karpenter.sh/nodepool"],
                "default"
            );
            assert_eq!(node["status"]["conditions"][3]["type"], "Ready");
            let lease = &o
                [&format!("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}")];
            assert_eq!(lease["spec"]["holderIdentity"], json!(name));
        }
        // A second pass neither registers again nor fails.
        agent.reconcile().await.unwrap();
        cloud.delete(&launched.instance.provider_id).await.unwrap();
        agent.reconcile().await.unwrap();
        let o = objects.lock().unwrap();
        assert!(
            !o.contains_key(&format!("/api/v1/nodes/{name}")),
            "the node goes with its instance"
        );
        assert!(!o.keys().any(|k| k.contains("kube-node-lease")));
    }

    #[tokio::test]
    async fn a_node_whose_first_status_write_failed_gets_its_capacity_on_the_next_heartbeat() {
        let objects: Objects = Arc::default();
        let client = server(objects.clone()).await;
        let cloud = Arc::new(
            SimCloud::new(SimCloudConfig {
                launch_delay: Duration::ZERO,
                ..SimCloudConfig::default()
            })
            .unwrap(),
        );
        let nc: NodeClaim = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "nc-1", "labels": {"karpenter.sh/nodepool": "default"}},
            "spec": {"requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}],
                     "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}
        }))
        .unwrap();
        {
            let mut o = objects.lock().unwrap();
            o.insert(
                "/apis/karpenter.sh/v1/nodeclaims/nc-1".into(),
                serde_json::to_value(&nc).unwrap(),
            );
            o.insert(FAIL_NEXT_STATUS.into(), json!(true));
        }
        use nodewright_cloud::CloudProvider;
        let launched = cloud.create(&nc, None).await.unwrap();
        let key = format!(
            "/api/v1/nodes/{}",
            node_name(&launched.instance.provider_id)
        );
        let mut agent = NodeAgent::new(
            cloud.clone(),
            client,
            AgentConfig {
                registration_delay: Duration::ZERO,
                heartbeat: Duration::ZERO,
                ..AgentConfig::default()
            },
        );
        assert!(agent.reconcile().await.is_err());
        assert!(
            objects.lock().unwrap()[&key]["status"].is_null(),
            "created without a status"
        );
        agent.reconcile().await.unwrap();
        let o = objects.lock().unwrap();
        assert_eq!(o[&key]["status"]["capacity"]["cpu"], "2");
        assert_eq!(o[&key]["status"]["allocatable"]["cpu"], "1930m");
    }
}
