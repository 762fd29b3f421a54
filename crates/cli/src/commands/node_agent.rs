//! `nodewright node-agent`: the simulated cloud's node agent as a process of its own. For
//! every instance launched for a NodeClaim it registers a Ready Node, keeps it alive and
//! reports the pods bound to it Running, as kwok does; it deletes the Node once the instance
//! is gone. The controller's own restarts do not touch it.
//!
//! - `--cloud-provider aws` plays the kubelet for EC2's instances: with moto behind
//!   `AWS_ENDPOINT_URL`, the controller gets a cluster whose nodes come and go with EC2's
//!   instances, without a kubelet anywhere.
//! - `--cloud-provider sim` plays it for the instances of a `controller --cloud-provider sim
//!   --sim-node-agent false` in another process, read from their NodeClaims: the controller's
//!   process then holds only what a controller holds, as upstream's beside kwok.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::Args as ClapArgs;
use nodewright_cloud_sim::kwok::{AgentConfig, ClaimMachines, Machines, NodeAgent};
use nodewright_controller::settings::Settings;

use super::controller::{AwsArgs, Provider, sim_config};

#[derive(ClapArgs)]
pub struct Args {
    /// Whose instances: EC2's (`aws`, binaries built with `--features aws`), or those of the
    /// simulated cloud of a controller in another process (`sim`).
    #[arg(long, value_enum, default_value = "aws")]
    pub cloud_provider: Provider,
    #[command(flatten)]
    pub aws: AwsArgs,
    #[command(flatten)]
    pub settings: Settings,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    args.settings
        .validate()
        .context("checking the agent's settings")?;
    nodewright_controller::logging::init(&args.settings.log_level, true);
    super::huge_pages::turn_off();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let config = kube::Config::infer()
            .await
            .context("reading kubeconfig or in-cluster configuration")?;
        let machines: Arc<dyn Machines> = match args.cloud_provider {
            Provider::Sim => {
                let sim = sim_config(&args.settings.cluster_name, args.aws.aws_region.as_deref())?;
                Arc::new(ClaimMachines::new(sim.fleet.launch_delay))
            }
            #[cfg(feature = "aws")]
            Provider::Aws => {
                let cloud = super::controller::aws::provider(&args.settings, &args.aws, &config);
                Arc::new(nodewright_cloud_sim::kwok::ProviderMachines::new(
                    cloud.await?,
                ))
            }
            #[cfg(not(feature = "aws"))]
            Provider::Aws => return Err(super::controller::aws_unavailable()),
        };
        let client = kube::Client::try_from(config)?;
        let agent = NodeAgent::new(machines, client, AgentConfig::default());
        tracing::info!("node agent started");
        tokio::select! {
            _ = agent.run() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        Ok(ExitCode::SUCCESS)
    })
}
