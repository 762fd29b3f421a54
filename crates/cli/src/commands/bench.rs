//! `nodewright bench scheduling`: upstream's scheduling benchmark, regenerated from its
//! description, with throughput, node count, cost and the gap to the LP lower bound per size.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Args, Subcommand};
use nodewright_api::interchange;
use nodewright_core::bench;
use nodewright_core::model::Snapshot;
use nodewright_core::rng::Rng;
use nodewright_core::scheduling::{self, Options, Plan};

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub which: Which,
}

#[derive(Subcommand, Debug)]
pub enum Which {
    /// Diverse pods at upstream's sizes, then the two 4,000-pod preference runs.
    Scheduling(SchedulingArgs),
    /// One full disruption planning round on a generated cluster.
    Consolidation(super::bench_consolidation::ConsolidationArgs),
    /// Hours of hourly scaling on a generated cluster, run on the simulator.
    Sim(super::bench_sim::SimArgs),
    /// Consolidation savings to a fixed point, ours against upstream's search, after a
    /// scale-down of the diverse benchmark.
    Savings(super::bench_savings::SavingsArgs),
    /// The controller's loops against the in-memory API server with thousands of pods.
    Controller(super::bench_controller::ControllerArgs),
    /// nodewright and upstream Karpenter's scheduler on the same inputs, side by side.
    Compare(super::bench_compare::CompareArgs),
    /// The controller with its simulated cloud on a real control plane: thousands of pods
    /// and nodes, its memory sampled every second.
    Cluster(super::bench_cluster::ClusterArgs),
}

#[derive(Args, Debug)]
pub struct SchedulingArgs {
    /// Sizes to run (default: 1 50 100 500 1000 2000 5000 10000 20000).
    #[arg(long, value_delimiter = ',')]
    pub sizes: Vec<usize>,
    /// Skip the preference runs.
    #[arg(long)]
    pub no_preferences: bool,
    /// Repeat each solve for at least this long and report the best run.
    #[arg(long, default_value = "1.0")]
    pub min_seconds: f64,
    /// Write every input in the interchange format into this directory.
    #[arg(long)]
    pub dump: Option<PathBuf>,
    #[arg(long, default_value_t = bench::SEED)]
    pub seed: u64,
    /// Also give every diverse run this many existing nodes (8 cpu each, 1 cpu and 2 GiB free).
    #[arg(long, default_value_t = 0)]
    pub existing_nodes: usize,
}

pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    match args.which {
        Which::Scheduling(a) => scheduling(a),
        Which::Consolidation(a) => super::bench_consolidation::run(a),
        Which::Sim(a) => super::bench_sim::run(a),
        Which::Savings(a) => super::bench_savings::run(a),
        Which::Controller(a) => super::bench_controller::run(a),
        Which::Compare(a) => super::bench_compare::run(a),
        Which::Cluster(a) => super::bench_cluster::run(a),
    }
}

struct Row {
    name: String,
    pods: usize,
    best: Duration,
    runs: usize,
    plan: Plan,
}

fn measure(name: String, s: &Snapshot, opts: &Options, min_seconds: f64) -> Row {
    let mut best = Duration::MAX;
    let mut runs = 0;
    let started = Instant::now();
    let mut plan = Plan::default();
    while runs == 0 || started.elapsed().as_secs_f64() < min_seconds {
        let t = Instant::now();
        plan = scheduling::solve(s, opts);
        best = best.min(t.elapsed());
        runs += 1;
    }
    Row {
        name,
        pods: s.pods.len(),
        best,
        runs,
        plan,
    }
}

fn dump(
    dir: &Option<PathBuf>,
    file: &str,
    s: &Snapshot,
    kind: &str,
    seed: u64,
    ignore: bool,
) -> anyhow::Result<()> {
    let Some(dir) = dir else { return Ok(()) };
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let meta = serde_json::json!({
        "kind": kind, "pods": s.pods.len(), "seed": seed,
        "options": {"ignorePreferences": ignore},
        "note": "cpu/memoryMiB/pods are ALLOCATABLE (capacity minus 100m CPU / 10Mi overhead)",
        "source": "nodewright bench scheduling",
    });
    let path = dir.join(file);
    let text = serde_json::to_string_pretty(&interchange::write_input(s, meta))?;
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

fn scheduling(a: SchedulingArgs) -> anyhow::Result<ExitCode> {
    let sizes = if a.sizes.is_empty() {
        bench::SIZES.to_vec()
    } else {
        a.sizes.clone()
    };
    println!(
        "{:<24} {:>7} {:>10} {:>12} {:>6} {:>7} {:>12} {:>12} {:>8} {:>6}",
        "BENCHMARK",
        "PODS",
        "SOLVE",
        "PODS/S",
        "RUNS",
        "NODES",
        "$/H",
        "BOUND $/H",
        "GAP",
        "ERRORS"
    );
    let mut failed = false;
    let mut print = |r: &Row| {
        let secs = r.best.as_secs_f64();
        println!(
            "{:<24} {:>7} {:>9.4}s {:>12.0} {:>6} {:>7} {:>12.4} {:>12.4} {:>7.2}% {:>6}",
            r.name,
            r.pods,
            secs,
            r.pods as f64 / secs.max(1e-9),
            r.runs,
            r.plan.new_claims.len(),
            r.plan.cost,
            r.plan.lower_bound,
            r.plan.gap() * 100.0,
            r.plan.unplaced.len()
        );
        failed |= !r.plan.unplaced.is_empty();
    };
    for &n in &sizes {
        let mut s = bench::snapshot(bench::diverse_pods(n, &mut Rng::new(a.seed)), 400);
        let mut name = format!("diverse-{n}");
        if a.existing_nodes > 0 {
            bench::add_existing_nodes(&mut s, a.existing_nodes);
            name = format!("{name}+{}nodes", a.existing_nodes);
        }
        dump(
            &a.dump,
            &format!("{name}.json"),
            &s,
            "diverse",
            a.seed,
            false,
        )?;
        let mut row = measure(name, &s, &Options::default(), a.min_seconds);
        // Count the pods to place, not the ones already running.
        row.pods = row.plan.pods;
        print(&row);
    }
    if !a.no_preferences {
        let s = bench::snapshot(bench::preference_pods(4000, &mut Rng::new(a.seed)), 400);
        dump(
            &a.dump,
            "respect-preferences-4000.json",
            &s,
            "preferences",
            a.seed,
            false,
        )?;
        dump(
            &a.dump,
            "ignore-preferences-4000.json",
            &s,
            "preferences",
            a.seed,
            true,
        )?;
        print(&measure(
            "respect-preferences-4000".into(),
            &s,
            &Options::default(),
            a.min_seconds,
        ));
        let ignore = Options {
            ignore_preferences: true,
            ..Options::default()
        };
        print(&measure(
            "ignore-preferences-4000".into(),
            &s,
            &ignore,
            a.min_seconds,
        ));
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
