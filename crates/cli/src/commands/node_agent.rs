//! `nodewright node-agent --cloud-provider aws`: the simulated cloud's node agent, run as a
//! process of its own over a real provider's instances. For every instance launched for a
//! NodeClaim it registers a Ready Node, keeps it alive and reports the pods bound to it
//! Running, as kwok does; it deletes the Node once the instance is gone. With moto behind
//! `AWS_ENDPOINT_URL` this gives the controller a cluster whose nodes come and go with EC2's
//! instances, without a kubelet anywhere; the controller's own restarts do not touch it.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::Args as ClapArgs;
use nodewright_cloud_sim::kwok::{AgentConfig, NodeAgent, ProviderMachines};
use nodewright_controller::settings::Settings;

use super::controller::AwsArgs;
use super::controller::aws;

#[derive(ClapArgs)]
pub struct Args {
    /// The only provider whose instances live outside the controller's process.
    #[arg(long, value_parser = ["aws"], default_value = "aws")]
    pub cloud_provider: String,
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
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let config = kube::Config::infer()
            .await
            .context("reading kubeconfig or in-cluster configuration")?;
        let cloud = aws::provider(&args.settings, &args.aws, &config).await?;
        let client = kube::Client::try_from(config)?;
        let agent = NodeAgent::new(
            Arc::new(ProviderMachines::new(cloud)),
            client,
            AgentConfig::default(),
        );
        tracing::info!("node agent started");
        tokio::select! {
            _ = agent.run() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        Ok(ExitCode::SUCCESS)
    })
}
