//! `nodewright controller`: run the controller against the cluster in the current kubeconfig
//! (or in-cluster config). `--cloud-provider sim` launches into the simulated cloud and runs
//! its node agent, which creates Ready Node objects for the simulated instances, so the whole
//! loop works on any Kubernetes API server (kind, k3d) without a cloud account.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{Args as ClapArgs, ValueEnum};
use nodewright_cloud::CloudProvider;
use nodewright_cloud_sim::kwok::{AgentConfig, NodeAgent};
use nodewright_cloud_sim::{SimCloud, SimCloudConfig};
use nodewright_controller::settings::Settings;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Provider {
    /// The simulated cloud (embedded AWS us-east-1 catalog) with its node agent.
    Sim,
}

#[derive(ClapArgs)]
pub struct Args {
    /// Which cloud to launch nodes in.
    #[arg(long, value_enum, default_value = "sim")]
    pub cloud_provider: Provider,
    #[command(flatten)]
    pub settings: Settings,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    nodewright_controller::logging::init(&args.settings.log_level, true);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let config = kube::Config::infer()
            .await
            .context("reading kubeconfig or in-cluster configuration")?;
        let identity = format!(
            "{}_{}",
            std::env::var("HOSTNAME").unwrap_or_else(|_| "nodewright".into()),
            std::process::id()
        );
        let cloud: Arc<dyn CloudProvider> = match args.cloud_provider {
            Provider::Sim => {
                let sim = Arc::new(
                    SimCloud::new(SimCloudConfig {
                        cluster_name: args.settings.cluster_name.clone(),
                        ..SimCloudConfig::default()
                    })
                    .context("starting the simulated cloud")?,
                );
                let client = kube::Client::try_from(config.clone())?;
                tokio::spawn(NodeAgent::new(sim.clone(), client, AgentConfig::default()).run());
                sim
            }
        };
        nodewright_controller::run::run(config, cloud, args.settings, identity).await?;
        Ok(ExitCode::SUCCESS)
    })
}
