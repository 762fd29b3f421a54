//! What `bench cluster` sets up and watches on the control plane: the CRDs, the controller as
//! a child process, the NodePool and Deployment, and counts of the pods, bound pods, Nodes
//! and NodeClaims kept from watches (a list of 20,000 pods every second would load the API
//! server more than the controller under test does).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, PartialObjectMeta, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::runtime::watcher::{self, Event};
use serde_json::{Value, json};

/// The bench's field manager for every object it applies.
const MANAGER: &str = "nodewright-bench";

/// The controller under test: `nodewright controller --cloud-provider sim`, this binary, as
/// an operator runs it out of the cluster; its simulated cloud's node agent runs in a process
/// of its own (`nodewright node-agent --cloud-provider sim`, as kwok runs beside upstream's
/// controller) unless `agent_inside`. Both are killed when dropped.
pub struct Controller {
    child: Child,
    agent: Option<Child>,
    pub health_port: u16,
}

impl Controller {
    pub fn start(
        kubeconfig: &Path,
        log: &Path,
        agent_inside: bool,
        env: &[(String, String)],
    ) -> anyhow::Result<Controller> {
        let health_port = free_port()?;
        let inside = if agent_inside { "true" } else { "false" };
        let child = nodewright(kubeconfig, log)?
            .args([
                "controller",
                "--cloud-provider",
                "sim",
                "--sim-node-agent",
                inside,
            ])
            .args([
                "--cluster-name",
                "bench",
                "--leader-election-namespace",
                "default",
            ])
            .env("METRICS_PORT", free_port()?.to_string())
            .env("HEALTH_PROBE_PORT", health_port.to_string())
            .envs(env.iter().map(|(k, v)| (k, v)))
            .spawn()
            .context("starting nodewright controller")?;
        let mut controller = Controller {
            child,
            agent: None,
            health_port,
        };
        if !agent_inside {
            let agent = nodewright(kubeconfig, &agent_log(log))?
                .args([
                    "node-agent",
                    "--cloud-provider",
                    "sim",
                    "--cluster-name",
                    "bench",
                ])
                .spawn()
                .context("starting nodewright node-agent")?;
            controller.agent = Some(agent);
        }
        Ok(controller)
    }

    pub fn pid(&self) -> String {
        self.child.id().to_string()
    }

    /// The node agent's process, when it is not the controller's.
    pub fn agent_pid(&self) -> Option<String> {
        self.agent.as_ref().map(|a| a.id().to_string())
    }

    /// Fails if the controller or its agent has ended.
    pub fn check_alive(&mut self, log: &Path) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!("the controller exited ({status}); see {}", log.display());
        }
        if let Some(agent) = self.agent.as_mut()
            && let Some(status) = agent.try_wait()?
        {
            bail!(
                "the node agent exited ({status}); see {}",
                agent_log(log).display()
            );
        }
        Ok(())
    }

    /// Whether `/readyz` answers 200.
    pub fn ready(&self) -> bool {
        http_status(self.health_port, "/readyz") == Some(200)
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        for child in std::iter::once(&mut self.child).chain(self.agent.as_mut()) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The node agent's log, beside the controller's.
pub fn agent_log(controller_log: &Path) -> std::path::PathBuf {
    controller_log.with_file_name("node-agent.log")
}

/// This binary with `kubeconfig`, its output to `log`, its servers on 127.0.0.1, and no AWS
/// settings from the bench's own environment.
fn nodewright(kubeconfig: &Path, log: &Path) -> anyhow::Result<Command> {
    let out = File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let mut cmd = Command::new(std::env::current_exe().context("finding this binary")?);
    cmd.env("KUBECONFIG", kubeconfig)
        .env("LISTEN_ADDRESS", "127.0.0.1")
        .env("HOSTNAME", "nodewright-bench")
        .env_remove("AWS_REGION")
        .env_remove("AWS_ENDPOINT_URL")
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out);
    Ok(cmd)
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The status code of a plain GET on 127.0.0.1:`port`.
fn http_status(port: u16, path: &str) -> Option<u16> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut head = [0u8; 12];
    s.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

/// The CRDs, applied as the chart holds them, and waited for until established.
pub async fn install_crds(client: &kube::Client) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut names = Vec::new();
    for (file, value) in nodewright_api::crd::all() {
        let crd: CustomResourceDefinition =
            serde_json::from_value(value).with_context(|| format!("reading CRD {file}"))?;
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(&name, &apply(), &Patch::Apply(&crd))
            .await
            .with_context(|| format!("applying CRD {name}"))?;
        names.push(name);
    }
    for name in names {
        let mut tries = 0;
        loop {
            let crd = api.get(&name).await?;
            let established = crd.status.and_then(|s| s.conditions).is_some_and(|cs| {
                cs.iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            });
            if established {
                break;
            }
            tries += 1;
            if tries > 120 {
                bail!("CRD {name} not established after 60 s");
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    Ok(())
}

fn apply() -> PatchParams {
    PatchParams::apply(MANAGER).force()
}

fn resource(group: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", kind), plural)
}

pub fn nodeclaims() -> ApiResource {
    resource("karpenter.sh", "NodeClaim", "nodeclaims")
}

/// The resources of one pod: a `pods_per_node`th of what an 8-vCPU node of the AL2 catalog
/// has allocatable, rounded so that one more never fits (7,910m is the least such a node
/// offers; a tenth of 7,500m leaves 410m free, less than a pod).
pub fn pod_requests(pods_per_node: u32) -> (String, String) {
    (
        format!("{}m", 7500 / pods_per_node),
        format!("{}Mi", 12 * 1024 / pods_per_node),
    )
}

/// The EC2NodeClass and the NodePool: on-demand amd64 c/m/r nodes of 8 vCPUs, consolidating
/// what is empty or underutilised 30 s after it became so, limited only by `cpu_limit`.
pub async fn apply_nodepool(client: &kube::Client, cpu_limit: u64) -> anyhow::Result<()> {
    let class = json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
        "metadata": {"name": "bench"},
        "spec": {
            "amiFamily": "AL2", "role": "KarpenterNodeRole-bench",
            "amiSelectorTerms": [{"alias": "al2@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "bench"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "bench"}}],
        }
    });
    let requirement =
        |key: &str, values: &[&str]| json!({"key": key, "operator": "In", "values": values});
    let pool = json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "bench"},
        "spec": {
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "bench"},
                "requirements": [
                    requirement("karpenter.k8s.aws/instance-cpu", &["8"]),
                    requirement("karpenter.k8s.aws/instance-category", &["c", "m", "r"]),
                    requirement("karpenter.sh/capacity-type", &["on-demand"]),
                    requirement("kubernetes.io/arch", &["amd64"]),
                    {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["2"]},
                ],
            }},
            "limits": {"cpu": cpu_limit.to_string()},
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "30s"},
        }
    });
    apply_dynamic(
        client,
        resource("karpenter.k8s.aws", "EC2NodeClass", "ec2nodeclasses"),
        class,
    )
    .await?;
    apply_dynamic(
        client,
        resource("karpenter.sh", "NodePool", "nodepools"),
        pool,
    )
    .await
}

async fn apply_dynamic(client: &kube::Client, ar: ApiResource, value: Value) -> anyhow::Result<()> {
    let name = value["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    api.patch(&name, &apply(), &Patch::Apply(&value))
        .await
        .with_context(|| format!("applying {} {name}", ar.kind))?;
    Ok(())
}

/// The Deployment `scale` in `default`: `replicas` pause pods of `pod_requests`.
pub async fn scale(client: &kube::Client, replicas: u32, pods_per_node: u32) -> anyhow::Result<()> {
    let (cpu, memory) = pod_requests(pods_per_node);
    let deployment: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "scale", "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "scale"}},
            "template": {
                "metadata": {"labels": {"app": "scale"}},
                "spec": {
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{
                        "name": "pause", "image": "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
                        "resources": {"requests": {"cpu": cpu, "memory": memory}},
                    }],
                },
            },
        }
    }))?;
    let api: Api<Deployment> = Api::namespaced(client.clone(), "default");
    api.patch("scale", &apply(), &Patch::Apply(&deployment))
        .await
        .context("applying Deployment scale")?;
    Ok(())
}

/// What the watches have seen so far.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Counts {
    pub pods: usize,
    pub bound: usize,
    pub nodes: usize,
    pub claims: usize,
}

/// Counts kept current by three watches, which stop when this is dropped.
pub struct Watches {
    pods: Arc<Mutex<BTreeMap<String, bool>>>,
    nodes: Arc<Mutex<BTreeMap<String, bool>>>,
    claims: Arc<Mutex<BTreeMap<String, bool>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Watches {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Watches {
    pub fn start(client: &kube::Client) -> Watches {
        let pods = Arc::new(Mutex::new(BTreeMap::new()));
        let nodes = Arc::new(Mutex::new(BTreeMap::new()));
        let claims = Arc::new(Mutex::new(BTreeMap::new()));
        let pod_api: Api<Pod> = Api::namespaced(client.clone(), "default");
        let node_api: Api<PartialObjectMeta<Node>> = Api::all(client.clone());
        let claim_api: Api<PartialObjectMeta<DynamicObject>> =
            Api::all_with(client.clone(), &nodeclaims());
        let tasks = vec![
            keep(
                watcher::watcher(pod_api, watcher::Config::default().labels("app=scale")),
                pods.clone(),
                |p: &Pod| {
                    (
                        name(&p.metadata),
                        p.spec.as_ref().is_some_and(|s| s.node_name.is_some()),
                    )
                },
            ),
            keep(
                watcher::watcher(node_api, watcher::Config::default()),
                nodes.clone(),
                |n| (name(&n.metadata), true),
            ),
            keep(
                watcher::watcher(claim_api, watcher::Config::default()),
                claims.clone(),
                |c| (name(&c.metadata), true),
            ),
        ];
        Watches {
            pods,
            nodes,
            claims,
            tasks,
        }
    }

    pub fn counts(&self) -> Counts {
        let pods = lock(&self.pods);
        Counts {
            pods: pods.len(),
            bound: pods.values().filter(|b| **b).count(),
            nodes: lock(&self.nodes).len(),
            claims: lock(&self.claims).len(),
        }
    }
}

fn name(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

fn lock(m: &Mutex<BTreeMap<String, bool>>) -> std::sync::MutexGuard<'_, BTreeMap<String, bool>> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Follows one watch into `into` (name → flag), rebuilding it on each relist.
fn keep<K, S>(
    stream: S,
    into: Arc<Mutex<BTreeMap<String, bool>>>,
    key: fn(&K) -> (String, bool),
) -> tokio::task::JoinHandle<()>
where
    K: Send + 'static,
    S: futures::Stream<Item = Result<Event<K>, watcher::Error>> + Send + 'static,
{
    tokio::spawn(async move {
        let mut relist = BTreeMap::new();
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(Event::Apply(k)) => {
                    let (n, f) = key(&k);
                    lock(&into).insert(n, f);
                }
                Ok(Event::Delete(k)) => {
                    lock(&into).remove(&key(&k).0);
                }
                Ok(Event::Init) => relist.clear(),
                Ok(Event::InitApply(k)) => {
                    let (n, f) = key(&k);
                    relist.insert(n, f);
                }
                Ok(Event::InitDone) => *lock(&into) = std::mem::take(&mut relist),
                // The watcher relists by itself; a pause keeps a failing server from a spin.
                Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
            }
        }
    })
}
