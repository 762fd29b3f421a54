//! `nodewright viewer`: a terminal view of the live cluster, in the spirit of eks-node-viewer.
//! One line per node (and per NodeClaim still launching) grouped by NodePool: instance type,
//! capacity type, zone, $/h, requested over allocatable as bars, pods, age and state, with
//! cluster totals. Functional core (`options`, `state`, `model`, `prices`, `render`), imperative
//! shell (`watch`, `app`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args as ClapArgs;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};

mod app;
mod model;
mod options;
mod prices;
mod render;
mod state;
mod watch;

#[derive(ClapArgs)]
pub struct Args {
    /// The kubeconfig to read (KUBECONFIG, then ~/.kube/config, then in-cluster when unset).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Resources shown as requested/allocatable bars, comma-separated (cpu, memory, pods,
    /// ephemeral-storage, nvidia.com/gpu, ...).
    #[arg(long, default_value = "cpu,memory")]
    pub resources: String,
    /// Only Nodes (and NodeClaims) matching this label selector, e.g.
    /// `karpenter.sh/nodepool=default` or `karpenter.sh/capacity-type!=spot`.
    #[arg(long)]
    pub node_selector: Option<String>,
    /// Labels shown as extra columns, comma-separated.
    #[arg(long, default_value = "")]
    pub extra_labels: String,
    /// Row order: `creation`, `name`, `price`, a resource's usage (`cpu`) or `label:KEY`,
    /// then `=asc` or `=dsc`.
    #[arg(long, default_value = "creation=asc")]
    pub sort: String,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let config = app::Config {
        resources: options::parse_resources(&args.resources)?,
        extra_labels: options::parse_list(&args.extra_labels),
        sort: options::parse_sort(&args.sort)?,
        prices: prices::Prices::embedded()?,
    };
    let selector = args.node_selector.filter(|s| !s.trim().is_empty());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let client = client(args.kubeconfig.as_deref()).await?;
        check(&client, selector.as_deref()).await?;
        let watches = watch::Watches::start(&client, selector.as_deref());
        app::run(watches, config).await
    })?;
    // The key-reading thread may still sit in a blocking read; ending here ends it.
    runtime.shutdown_background();
    Ok(ExitCode::SUCCESS)
}

async fn client(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => {
            let raw = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("--kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(raw, &Default::default())
                .await
                .with_context(|| format!("--kubeconfig {}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .context("reading kubeconfig or in-cluster configuration")?,
    };
    kube::Client::try_from(config).context("building the Kubernetes client")
}

/// One small list before the screen takes over, so an unreachable server or a selector the
/// server refuses is a plain error message rather than a watch retrying forever.
async fn check(client: &kube::Client, selector: Option<&str>) -> anyhow::Result<()> {
    let mut params = ListParams::default().limit(1);
    if let Some(s) = selector {
        params = params.labels(s);
    }
    let nodes: Api<Node> = Api::all(client.clone());
    match nodes.list_metadata(&params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 400 && selector.is_some() => Err(anyhow::anyhow!(
            "--node-selector {:?}: {}",
            selector.unwrap_or_default(),
            s.message
        )),
        Err(e) => Err(e).context("listing Nodes"),
    }
}
