//! `nodewright install aws` and `nodewright uninstall aws`: the AWS side of a cluster (node
//! role and instance profile, controller role and policies, interruption queue and its
//! EventBridge rules, spot service-linked role, the nodes' access entry or aws-auth mapping),
//! made or removed idempotently; `--dry-run` prints the plan and writes nothing. The AWS work
//! is in `nodewright_cloud_aws::install`, behind the `aws` feature; the aws-auth ConfigMap is
//! written through the kubeconfig ([`aws_auth`]).

#[cfg(feature = "aws")]
mod aws_auth;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};

#[derive(Args)]
pub struct InstallArgs {
    #[command(subcommand)]
    pub target: Target,
}

#[derive(Subcommand)]
pub enum Target {
    /// The AWS resources a cluster's controller and nodes need (binaries built with `--features aws`).
    Aws(AwsArgs),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum IdentityArg {
    /// IAM roles for service accounts: the role trusts the cluster's OIDC provider.
    Irsa,
    /// EKS Pod Identity: an association gives the service account the role.
    PodIdentity,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum NodeAccessArg {
    /// An EKS access entry (type EC2_LINUX) for the node role.
    AccessEntry,
    /// An entry for the node role in the `kube-system/aws-auth` ConfigMap, written through
    /// the kubeconfig (`--kubeconfig`).
    AwsAuth,
    /// Nothing: the node role is mapped elsewhere.
    None,
}

#[derive(Args, Clone, Debug)]
pub struct AwsArgs {
    /// The EKS cluster.
    #[arg(long, env = "CLUSTER_NAME")]
    pub cluster_name: String,
    /// The cluster's region (`AWS_DEFAULT_REGION` when unset).
    #[arg(long, env = "AWS_REGION")]
    pub region: Option<String>,
    /// Sends every AWS call to this URL (a local test peer).
    #[arg(long, env = "AWS_ENDPOINT_URL")]
    pub aws_endpoint_url: Option<String>,
    /// How the controller's pods get the controller role.
    #[arg(long, value_enum, default_value = "irsa")]
    pub identity: IdentityArg,
    /// How nodes with the node role are let into the cluster.
    #[arg(long, value_enum, default_value = "access-entry")]
    pub node_access: NodeAccessArg,
    /// The cluster's kubeconfig, for `--node-access aws-auth` (default: `KUBECONFIG`, then
    /// `~/.kube/config`).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// The namespace the chart is installed in.
    #[arg(long, default_value = "karpenter")]
    pub namespace: String,
    /// The controller's service account.
    #[arg(long, default_value = "karpenter")]
    pub service_account: String,
    /// Print what would be created, changed or deleted; write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

pub fn install(args: InstallArgs) -> anyhow::Result<ExitCode> {
    let Target::Aws(a) = args.target;
    run(a, false)
}

pub fn uninstall(args: InstallArgs) -> anyhow::Result<ExitCode> {
    let Target::Aws(a) = args.target;
    run(a, true)
}

#[cfg(not(feature = "aws"))]
fn run(_: AwsArgs, _: bool) -> anyhow::Result<ExitCode> {
    anyhow::bail!(
        "this nodewright was built without AWS support; build it with `cargo build --release --features aws` to install the AWS side"
    )
}

#[cfg(feature = "aws")]
fn run(a: AwsArgs, remove: bool) -> anyhow::Result<ExitCode> {
    use anyhow::Context;
    use nodewright_cloud_aws::install::{self, Clients, Identity, NodeAccess, Request};
    use nodewright_cloud_aws::{ClientOptions, sdk_config};

    let region = a
        .region
        .clone()
        .or_else(|| std::env::var("AWS_DEFAULT_REGION").ok())
        .filter(|r| !r.trim().is_empty())
        .context("no AWS region: pass --region or set AWS_REGION")?;
    let request = Request {
        cluster: a.cluster_name.clone(),
        region: region.clone(),
        identity: match a.identity {
            IdentityArg::Irsa => Identity::Irsa,
            IdentityArg::PodIdentity => Identity::PodIdentity,
        },
        node_access: match a.node_access {
            NodeAccessArg::AccessEntry => NodeAccess::AccessEntry,
            // The ConfigMap is the cluster's, not AWS's: written below.
            NodeAccessArg::AwsAuth | NodeAccessArg::None => NodeAccess::None,
        },
        namespace: a.namespace.clone(),
        service_account: a.service_account.clone(),
        dry_run: a.dry_run,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let outcome = runtime.block_on(async {
        let options = ClientOptions {
            region,
            endpoint_url: a.aws_endpoint_url.clone().filter(|u| !u.trim().is_empty()),
            credentials: None,
        };
        let clients = Clients::new(&sdk_config(&options).await);
        let mut outcome = install::apply(&clients, &request, remove).await?;
        if a.node_access == NodeAccessArg::AwsAuth && outcome.error.is_none() {
            let arn = install::desired::iam_arn(&outcome.inputs, "role", &outcome.names.node_role);
            let step = aws_auth::apply(a.kubeconfig.as_deref(), &arn, remove, a.dry_run).await?;
            outcome.steps.push(step);
        }
        anyhow::Ok(outcome)
    })?;
    if a.dry_run {
        println!("dry run: nothing was written");
    }
    for step in &outcome.steps {
        println!("{step}");
    }
    if let Some(e) = outcome.error {
        return Err(e.into());
    }
    if !remove && !a.dry_run {
        println!();
        println!(
            "Nodes launch with the role {}: give your EC2NodeClasses",
            outcome.names.node_role
        );
        println!("  spec.role: {}", outcome.names.node_role);
        println!();
        println!("Install the chart with:");
        println!(
            "{}",
            install::desired::helm_command(&outcome.inputs, &outcome.names)
        );
    }
    Ok(ExitCode::SUCCESS)
}
