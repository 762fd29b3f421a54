//! A running cluster, read through its API server into one core [`Snapshot`], for
//! `nodewright explain` and `nodewright plan --kubeconfig`. Every kind the offline path reads
//! from a `kubectl get -o json` dump is listed and handed to the same converter
//! (`nodewright_api::cluster::read_cluster`). Each NodePool gets the instance types its
//! EC2NodeClass gets from `nodewright controller --cloud-provider sim`: the embedded AWS
//! catalog for the class's AMI family in the region's zones, asked of the same simulated
//! cloud through the controller's own function, so the answers here agree with that
//! controller's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::core::GroupVersionKind;
use nodewright_api::aws::v1::EC2NodeClass;
use nodewright_api::document::Document;
use nodewright_api::v1::nodepool::NodePool;
use nodewright_cloud_sim::SimCloud;
use nodewright_core::model::Snapshot;
use nodewright_core::time::Timestamp;
use serde_json::Value;

pub mod policies;

/// Where the cluster is and which region its instance types are priced in.
#[derive(Args, Clone, Debug, Default)]
pub struct ClusterArgs {
    /// The kubeconfig of the cluster to read. `explain` defaults to `KUBECONFIG`, then
    /// `~/.kube/config`, then the in-cluster service account, as kubectl does; `plan` reads
    /// a cluster only when given one.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// The region whose embedded catalog gives the instance types (us-east-1 when unset), as
    /// for `nodewright controller --cloud-provider sim`.
    #[arg(long, env = "AWS_REGION")]
    pub aws_region: Option<String>,
}

/// `(group, version, kind, plural)` of every kind read.
const KINDS: &[(&str, &str, &str, &str)] = &[
    ("karpenter.sh", "v1", "NodePool", "nodepools"),
    ("karpenter.sh", "v1", "NodeClaim", "nodeclaims"),
    ("karpenter.k8s.aws", "v1", "EC2NodeClass", "ec2nodeclasses"),
    ("", "v1", "Node", "nodes"),
    ("", "v1", "Pod", "pods"),
    ("", "v1", "Namespace", "namespaces"),
    ("", "v1", "PersistentVolume", "persistentvolumes"),
    ("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
    ("apps", "v1", "DaemonSet", "daemonsets"),
    (
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
    ),
    ("storage.k8s.io", "v1", "StorageClass", "storageclasses"),
];

/// The wall clock as a snapshot's `now`.
pub fn wall_now() -> anyhow::Result<Timestamp> {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .context("the system clock is before 1970")?
        .as_millis();
    Ok(Timestamp(ms as i64))
}

/// Runs `f` on a runtime of its own: the commands that read a cluster are otherwise
/// synchronous.
pub fn block_on<T>(f: impl std::future::Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(f)
}

pub async fn client(kubeconfig: Option<&Path>) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => {
            let raw = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(raw, &kube::config::KubeConfigOptions::default())
                .await
                .with_context(|| format!("loading kubeconfig {}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .context("reading kubeconfig or in-cluster configuration")?,
    };
    kube::Client::try_from(config).context("building the Kubernetes client")
}

/// Every object of one kind, as documents named `cluster:<plural>[i]`, with the `apiVersion`
/// and `kind` a list's items leave out.
async fn list(
    client: &kube::Client,
    (group, version, kind, plural): (&str, &str, &str, &str),
) -> anyhow::Result<Vec<Document>> {
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let api_version = gvk.api_version();
    let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let items = api
        .list(&ListParams::default())
        .await
        .with_context(|| format!("listing {plural} ({api_version}) from the API server"))?
        .items;
    items
        .into_iter()
        .enumerate()
        .map(|(index, o)| -> anyhow::Result<Document> {
            let mut value = serde_json::to_value(&o).with_context(|| {
                format!(
                    "{kind} {}: not JSON",
                    o.metadata.name.clone().unwrap_or_default()
                )
            })?;
            if let Some(m) = value.as_object_mut() {
                m.insert("apiVersion".into(), Value::String(api_version.clone()));
                m.insert("kind".into(), Value::String(kind.to_string()));
            }
            Ok(Document {
                source: format!("cluster:{plural}"),
                index,
                value,
            })
        })
        .collect()
}

/// Reads the cluster at `args` into a snapshot at `now`.
pub async fn read(args: &ClusterArgs, now: Timestamp) -> anyhow::Result<Snapshot> {
    let client = client(args.kubeconfig.as_deref()).await?;
    let mut docs = Vec::new();
    for kind in KINDS {
        docs.extend(list(&client, *kind).await?);
    }
    let mut pools: Vec<NodePool> = Vec::new();
    let mut classes: BTreeMap<String, EC2NodeClass> = BTreeMap::new();
    for d in &docs {
        match d.kind() {
            "NodePool" => pools.push(
                serde_json::from_value(d.value.clone())
                    .with_context(|| format!("{}: cannot be read", d.describe()))?,
            ),
            "EC2NodeClass" => {
                let c: EC2NodeClass = serde_json::from_value(d.value.clone())
                    .with_context(|| format!("{}: cannot be read", d.describe()))?;
                classes.insert(c.metadata.name.clone().unwrap_or_default(), c);
            }
            _ => {}
        }
    }
    let docs: Vec<Document> = docs
        .into_iter()
        .filter(|d| d.kind() != "EC2NodeClass")
        .collect();
    let mut snapshot = nodewright_api::cluster::read_cluster(docs, Vec::new(), now)?;
    let cloud = SimCloud::new(super::controller::sim_config(
        "nodewright",
        args.aws_region.as_deref(),
    )?)
    .context("loading the simulated cloud's catalog")?;
    snapshot.instance_types =
        nodewright_controller::provisioner::instance_types(&cloud, &pools, &classes)
            .await
            .context("listing instance types")?;
    // The template's current hash, as the controller's snapshot carries it (the annotation
    // lags an edit until the controller rewrites it).
    for np in &pools {
        let name = np.metadata.name.as_deref().unwrap_or_default();
        if let Some(p) = snapshot.nodepools.iter_mut().find(|p| p.name == name) {
            p.hash = nodewright_controller::hash::nodepool_hash(np);
        }
    }
    Ok(snapshot)
}
