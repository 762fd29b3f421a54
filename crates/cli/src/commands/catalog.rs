//! `nodewright catalog`: the instance types `controller --cloud-provider sim` offers for an
//! EC2NodeClass's AMI family, as an interchange catalog (`instanceTypes`, the file `plan
//! --instance-types` and `simulate --instance-types` read). The whole-loop benchmark
//! (`scripts/bench-cluster-compare`) converts it into upstream Karpenter's kwok provider's
//! instance types, so both controllers choose among the same types at the same prices.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args as ClapArgs;
use nodewright_api::interchange;
use nodewright_aws_model::AmiFamily;
use nodewright_cloud_sim::SimCloud;
use serde_json::json;

#[derive(ClapArgs)]
pub struct Args {
    /// The EC2NodeClass's `amiFamily` whose allocatable the types get (AL2, AL2023,
    /// Bottlerocket, ...); the simulated cloud takes AL2023 for a class without one.
    #[arg(long, default_value = "AL2023")]
    pub ami_family: String,
    /// The simulated cloud's region, as `controller --aws-region` (us-east-1a, b and c when unset).
    #[arg(long, env = "AWS_REGION")]
    pub aws_region: Option<String>,
    /// Write the catalog to this file instead of printing it.
    #[arg(long)]
    pub output: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let family = AmiFamily::from_name(&args.ami_family).with_context(|| {
        format!(
            "--ami-family {:?}: not an AMI family (AL2, AL2023, Bottlerocket, Custom, \
             Windows2019, Windows2022, Windows2025)",
            args.ami_family
        )
    })?;
    let config = super::controller::sim_config("nodewright", args.aws_region.as_deref())?;
    let meta = json!({
        "source": "nodewright catalog",
        "cloudProvider": "sim",
        "region": config.region,
        "zones": config.zones,
        "amiFamily": args.ami_family,
        "spotPrices": "synthetic",
    });
    let cloud = SimCloud::new(config).context("loading the simulated cloud's catalog")?;
    let text = interchange::write_catalog(&cloud.family_types(family), meta).to_string();
    match &args.output {
        None => crate::output::emit_line(&text)?,
        Some(path) => {
            std::fs::write(path, text + "\n")
                .with_context(|| format!("writing {}", path.display()))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
