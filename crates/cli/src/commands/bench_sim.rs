//! `nodewright bench sim`: a generated scenario of hourly scaling on a large cluster, run on
//! the simulator with the wall time it took and how many decisions it made and skipped.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use nodewright_sim::bench::{BenchSpec, scenario_yaml};
use nodewright_sim::report::summary_text;
use nodewright_sim::scenario::parse_scenario;

#[derive(Args, Debug)]
pub struct SimArgs {
    /// Peak node count the workloads are sized for.
    #[arg(long, default_value_t = 1000)]
    pub nodes: usize,
    /// Simulated hours (one scale event per Deployment per hour).
    #[arg(long, default_value_t = 24)]
    pub hours: u32,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write the generated scenario here (it runs again with `nodewright simulate FILE`).
    #[arg(long, value_name = "FILE.yaml")]
    pub write_scenario: Option<PathBuf>,
    /// Print each percent of virtual time with the wall time so far to stderr.
    #[arg(long)]
    pub progress: bool,
}

pub fn run(args: SimArgs) -> anyhow::Result<ExitCode> {
    let spec = BenchSpec {
        nodes: args.nodes,
        hours: args.hours,
        seed: args.seed,
    };
    let text = scenario_yaml(&spec);
    if let Some(path) = &args.write_scenario {
        std::fs::write(path, &text).with_context(|| format!("writing {}", path.display()))?;
    }
    let scenario = parse_scenario(
        "bench-sim.yaml",
        &text,
        &std::collections::BTreeMap::<&str, &str>::new(),
    )?;
    let catalog =
        nodewright_aws_model::catalog::embedded().context("loading the embedded AWS catalog")?;
    let started = Instant::now();
    let mut shown = -1i64;
    let mut progress = |f: f64| {
        let pct = (f.clamp(0.0, 1.0) * 100.0) as i64;
        if args.progress && pct != shown {
            shown = pct;
            eprintln!(
                "{pct:>3}% of virtual time after {:.1} s",
                started.elapsed().as_secs_f64()
            );
        }
    };
    let report = nodewright_sim::run(&scenario, &catalog, &mut progress)?;
    let wall = started.elapsed();
    let min_nodes = report
        .samples
        .iter()
        .skip_while(|s| s.nodes < report.summary.max_nodes / 2)
        .map(|s| s.nodes)
        .min()
        .unwrap_or(0);
    let w = report.work;
    println!(
        "bench sim: {} nodes, {} h, seed {}",
        spec.nodes, spec.hours, spec.seed
    );
    println!("  wall time        {:.2} s", wall.as_secs_f64());
    println!(
        "  nodes            peak {}, lowest after the first ramp-up {}, at end {}",
        report.summary.max_nodes, min_nodes, report.summary.nodes_at_end
    );
    println!("  clock steps      {}", w.steps);
    println!(
        "  provisioning     {} solve(s), {} skipped (unchanged cluster)",
        w.solves, w.solves_skipped
    );
    println!(
        "  disruption       {} plan(s), {} skipped (consolidated, unchanged)",
        w.plans, w.plans_skipped
    );
    println!();
    print!("{}", summary_text(&report));
    if !report.violations.is_empty() {
        eprintln!("{} invariant violation(s):", report.violations.len());
        for v in report.violations.iter().take(10) {
            eprintln!("  {v}");
        }
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
