//! `nodewright controller`: run the controller against the cluster in the current kubeconfig
//! (or in-cluster config). `--cloud-provider sim` launches into the simulated cloud and runs
//! its node agent, which creates Ready Node objects for the simulated instances, so the whole
//! loop works on any Kubernetes API server (kind, k3d) without a cloud account;
//! `--sim-node-agent false` leaves that to `nodewright node-agent --cloud-provider sim`.
//! `--cloud-provider aws` launches EC2 instances; it needs a binary built with
//! `--features aws`, which keeps the AWS SDK out of the default build.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{Args as ClapArgs, ValueEnum};
use nodewright_cloud::{CloudProvider, InterruptionSource};
use nodewright_cloud_sim::kwok::{AgentConfig, NodeAgent};
use nodewright_cloud_sim::{SimCloud, SimCloudConfig};
use nodewright_controller::settings::Settings;

#[cfg(feature = "aws")]
pub mod aws;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Provider {
    /// The simulated cloud (embedded AWS us-east-1 catalog) with its node agent.
    Sim,
    /// EC2 in the region of `AWS_REGION` (binaries built with `--features aws`).
    Aws,
}

#[derive(ClapArgs)]
pub struct Args {
    /// Which cloud to launch nodes in.
    #[arg(long, value_enum, default_value = "sim")]
    pub cloud_provider: Provider,
    /// With `--cloud-provider sim`: run the simulated cloud's node agent in this process, or
    /// (`false`) leave it to `nodewright node-agent --cloud-provider sim` in a process of its
    /// own, as kwok runs beside upstream's kwok provider.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub sim_node_agent: bool,
    /// With `--cloud-provider sim`: how long a terminated instance stays shutting down, as an
    /// EC2 instance does, before the claim's finalizer may come off. Benchmarks set it to match
    /// the cloud they are compared with (upstream's kwok provider terminates at once).
    #[arg(long, default_value = "30s", value_parser = nodewright_controller::settings::parse_duration)]
    pub sim_termination_delay: std::time::Duration,
    #[command(flatten)]
    pub aws: AwsArgs,
    #[command(flatten)]
    pub settings: Settings,
}

/// Where the AWS provider sends its calls; the rest of its settings are the shared ones
/// (`CLUSTER_NAME`, `VM_MEMORY_OVERHEAD_PERCENT`, `RESERVED_ENIS`, `ISOLATED_VPC`).
#[derive(ClapArgs, Clone, Debug, Default)]
pub struct AwsArgs {
    /// The AWS region (`AWS_DEFAULT_REGION` when unset).
    #[arg(long, env = "AWS_REGION")]
    pub aws_region: Option<String>,
    /// Sends every AWS call to this URL instead of the regional endpoints (a local test
    /// peer, a VPC endpoint).
    #[arg(long, env = "AWS_ENDPOINT_URL")]
    pub aws_endpoint_url: Option<String>,
}

#[cfg(not(feature = "aws"))]
pub(crate) fn aws_unavailable() -> anyhow::Error {
    anyhow::anyhow!(
        "this nodewright was built without AWS support; build it with `cargo build --release --features aws` to use --cloud-provider aws"
    )
}

/// The simulated cloud in `region` (us-east-1 when unset), with every zone the embedded
/// catalog offers there (us-east-1a, b and c when unset).
pub fn sim_config(cluster_name: &str, region: Option<&str>) -> anyhow::Result<SimCloudConfig> {
    let mut config = SimCloudConfig {
        cluster_name: cluster_name.to_string(),
        ..SimCloudConfig::default()
    };
    let Some(region) = region.filter(|r| !r.is_empty()) else {
        return Ok(config);
    };
    let catalog = nodewright_aws_model::catalog::embedded()
        .context("reading the embedded instance-type catalog")?;
    let zones: Vec<String> = catalog
        .zones(region)
        .into_iter()
        .map(String::from)
        .collect();
    anyhow::ensure!(
        !zones.is_empty(),
        "AWS_REGION {region:?}: the simulated cloud's catalog offers no instance types there; regions it knows: {}",
        catalog.regions().collect::<Vec<_>>().join(", ")
    );
    config.region = region.to_string();
    config.zones = zones;
    Ok(config)
}

impl Args {
    /// The simulated cloud these arguments ask for: `sim_config` with their timings.
    fn sim_cloud_config(&self) -> anyhow::Result<SimCloudConfig> {
        let mut config = sim_config(&self.settings.cluster_name, self.aws.aws_region.as_deref())?;
        config.fleet.termination_delay = self.sim_termination_delay;
        Ok(config)
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // Refused before anything connects, so the message is the first thing a user sees.
    #[cfg(not(feature = "aws"))]
    if args.cloud_provider == Provider::Aws {
        return Err(aws_unavailable());
    }
    // Bad settings stop the start with the setting's name, before anything connects.
    args.settings
        .validate()
        .context("checking the controller's settings")?;
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
        let identity = format!(
            "{}_{}",
            std::env::var("HOSTNAME").unwrap_or_else(|_| "nodewright".into()),
            std::process::id()
        );
        let (cloud, interruption): (Arc<dyn CloudProvider>, Option<Arc<dyn InterruptionSource>>) =
            match args.cloud_provider {
                Provider::Sim => {
                    let sim = Arc::new(
                        SimCloud::new(args.sim_cloud_config()?)
                            .context("starting the simulated cloud")?,
                    );
                    if args.sim_node_agent {
                        let client = kube::Client::try_from(config.clone())?;
                        let agent = NodeAgent::new(sim.clone(), client, AgentConfig::default());
                        tokio::spawn(agent.run());
                    }
                    // The simulated cloud has no interruption queue; INTERRUPTION_QUEUE is AWS's.
                    (sim, None)
                }
                #[cfg(feature = "aws")]
                Provider::Aws => aws::start(&args.settings, &args.aws, &config).await?,
                #[cfg(not(feature = "aws"))]
                Provider::Aws => return Err(aws_unavailable()),
            };
        nodewright_controller::run::run(config, cloud, interruption, args.settings, identity)
            .await?;
        Ok(ExitCode::SUCCESS)
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser;

    use super::Args;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn termination_delay(argv: &[&str]) -> Duration {
        let base = [
            "nodewright",
            "--cluster-name",
            "c",
            "--aws-region",
            "us-east-1",
        ];
        let cli = Cli::try_parse_from([&base[..], argv].concat()).expect("arguments parse");
        cli.args
            .sim_cloud_config()
            .expect("the sim cloud's configuration")
            .fleet
            .termination_delay
    }

    #[test]
    fn the_sim_clouds_termination_delay_is_an_ec2_instances_unless_set() {
        assert_eq!(termination_delay(&[]), Duration::from_secs(30));
        assert_eq!(
            termination_delay(&["--sim-termination-delay", "0s"]),
            Duration::ZERO
        );
        assert_eq!(
            termination_delay(&["--sim-termination-delay", "2m"]),
            Duration::from_secs(120)
        );
        let bad = [
            "nodewright",
            "--cluster-name",
            "c",
            "--sim-termination-delay",
            "soon",
        ];
        assert!(Cli::try_parse_from(bad).is_err());
    }
}
