//! The subcommands. Each variant's arguments and behaviour live in `commands/<name>.rs`.

use std::process::ExitCode;

use clap::Subcommand;

pub mod bench;
pub mod bench_cluster;
pub mod bench_compare;
pub mod bench_consolidation;
pub mod bench_controller;
pub mod bench_savings;
pub mod bench_sim;
pub mod catalog;
pub mod controller;
pub mod convert;
pub mod crds;
pub mod explain;
pub mod huge_pages;
pub mod install;
pub mod live;
pub mod node_agent;
pub mod plan;
pub mod plan_disruption;
pub mod procstat;
pub mod simulate;
pub mod validate;
pub mod viewer;

#[derive(Subcommand)]
pub enum Command {
    /// Run a scenario on a simulated EKS cluster (no argument: the built-in eksdemo).
    Simulate(simulate::SimulateArgs),
    /// Check NodePools, NodeClaims and EC2NodeClasses (any supported version) with Karpenter's rules.
    Validate(validate::Args),
    /// Convert older Karpenter objects (v1beta1, v1alpha5) to v1; warnings go to stderr.
    Convert(convert::Args),
    /// Print the CustomResourceDefinitions nodewright serves (karpenter.sh and karpenter.k8s.aws v1).
    Crds(crds::Args),
    /// Plan one snapshot: where every pending pod goes and which nodes to launch.
    Plan(plan::PlanArgs),
    /// Ask a running cluster why a pod is pending (or where it would go) and why a node is or
    /// is not disrupted; instance types come from the embedded catalog, as for
    /// `controller --cloud-provider sim`.
    Explain(explain::Args),
    /// Benchmarks of the engine.
    Bench(bench::BenchArgs),
    /// Print the simulated cloud's instance types as an interchange catalog.
    Catalog(catalog::Args),
    /// Run the controller against the current cluster (`--cloud-provider sim` needs no cloud).
    Controller(Box<controller::Args>),
    /// A live terminal view of the cluster's nodes: type, zone, $/h, requests, pods, state.
    Viewer(viewer::Args),
    /// Create or update the AWS resources a cluster needs (`install aws --cluster-name C`; `--dry-run` only prints the plan).
    #[cfg_attr(not(feature = "aws"), command(hide = true))]
    Install(install::InstallArgs),
    /// Remove what `install aws` created for a cluster.
    #[cfg_attr(not(feature = "aws"), command(hide = true))]
    Uninstall(install::InstallArgs),
    /// Play the kubelet for a cloud's instances (Ready Nodes, pods reported Running), for
    /// running the controller against moto or an account without real nodes, or beside a
    /// controller whose simulated cloud runs without its node agent.
    NodeAgent(Box<node_agent::Args>),
}

pub fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Simulate(a) => simulate::run(a),
        Command::Validate(args) => validate::run(args),
        Command::Convert(args) => convert::run(args),
        Command::Crds(args) => crds::run(args),
        Command::Plan(a) => plan::run(a),
        Command::Explain(a) => explain::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Catalog(a) => catalog::run(a),
        Command::Controller(a) => controller::run(*a),
        Command::Viewer(a) => viewer::run(a),
        Command::Install(a) => install::install(a),
        Command::Uninstall(a) => install::uninstall(a),
        Command::NodeAgent(a) => node_agent::run(*a),
    }
}
