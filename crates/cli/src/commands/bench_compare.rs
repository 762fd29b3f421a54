//! `nodewright bench compare`: nodewright's planner and upstream Karpenter's scheduler (through
//! the Go harness in `bench/karpenter`) on identical inputs, in one run, interleaved, best of
//! N: the diverse mix, the preference runs and workloads on the real AWS catalog.
//!
//! Every input is written in the interchange format and both planners read that file, so they
//! solve exactly the same problem.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use nodewright_api::interchange;
use nodewright_core::bench;
use nodewright_core::model::Snapshot;
use nodewright_core::rng::Rng;
use nodewright_core::scheduling::{self, Options, Plan};
use serde_json::{Value, json};

mod clusters;
mod harness;

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// Diverse-mix sizes (default: 1000,2000,5000,10000,20000).
    #[arg(long, value_delimiter = ',')]
    pub sizes: Vec<usize>,
    /// Skip the two 4,000-pod preference runs.
    #[arg(long)]
    pub no_preferences: bool,
    /// Skip the real-catalog workloads.
    #[arg(long)]
    pub no_real: bool,
    /// Only inputs whose name contains this.
    #[arg(long)]
    pub only: Option<String>,
    /// Solves of each input by each planner, alternating; the fastest of each is reported.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// The harness binary (default: built by scripts/bench-karpenter).
    #[arg(long)]
    pub karpenter: Option<PathBuf>,
    /// Keep the inputs in this directory (default: a temporary one, removed afterwards).
    #[arg(long)]
    pub dump: Option<PathBuf>,
    #[arg(long, default_value_t = bench::SEED)]
    pub seed: u64,
}

struct Input {
    name: String,
    set: &'static str,
    snapshot: Snapshot,
    options: Options,
}

fn inputs(a: &CompareArgs) -> anyhow::Result<Vec<Input>> {
    let sizes = if a.sizes.is_empty() {
        vec![1000, 2000, 5000, 10000, 20000]
    } else {
        a.sizes.clone()
    };
    let mut out = Vec::new();
    for &n in &sizes {
        out.push(Input {
            name: format!("diverse-{n}"),
            set: "diverse",
            snapshot: bench::snapshot(bench::diverse_pods(n, &mut Rng::new(a.seed)), 400),
            options: Options::default(),
        });
    }
    if !a.no_preferences {
        let s = bench::snapshot(bench::preference_pods(4000, &mut Rng::new(a.seed)), 400);
        for ignore in [false, true] {
            out.push(Input {
                name: format!(
                    "{}-preferences-4000",
                    if ignore { "ignore" } else { "respect" }
                ),
                set: "preferences",
                snapshot: s.clone(),
                options: Options {
                    ignore_preferences: ignore,
                    ..Options::default()
                },
            });
        }
    }
    if !a.no_real {
        let catalog = clusters::catalog()?;
        for w in clusters::all(&catalog, a.seed) {
            out.push(Input {
                name: w.name,
                set: "real-catalog",
                snapshot: w.snapshot,
                options: Options::default(),
            });
        }
    }
    if let Some(only) = &a.only {
        out.retain(|i| i.name.contains(only.as_str()));
    }
    Ok(out)
}

/// One planner's best run on one input (its plan is the one of its fastest run).
#[derive(Clone, Debug, Default)]
struct Side {
    nodes: usize,
    cost: f64,
    errors: usize,
    seconds: f64,
}

struct Row {
    name: String,
    set: &'static str,
    pods: usize,
    bound: f64,
    ours: Side,
    /// nodewright without the improvement pass after the greedy placement.
    before: Side,
    theirs: Side,
}

/// Writes the input, reads it back (so nodewright solves what the harness reads) and runs
/// both planners `runs` times each, alternating.
fn compare(
    input: &Input,
    dir: &Path,
    runs: usize,
    karpenter: &mut harness::Harness,
) -> anyhow::Result<Row> {
    let path = dir.join(format!("{}.json", input.name));
    let meta = json!({"kind": input.set, "name": input.name,
                      "options": {"ignorePreferences": input.options.ignore_preferences},
                      "source": "nodewright bench compare"});
    let text = interchange::write_input(&input.snapshot, meta).to_string();
    std::fs::write(&path, &text).with_context(|| format!("writing {}", path.display()))?;
    let snapshot = interchange::read_input(&path.display().to_string(), &text)?;
    let mut ours: Option<(f64, Plan)> = None;
    let mut before: Option<(f64, Plan)> = None;
    let mut theirs: Option<Side> = None;
    let no_repack = Options {
        repack: false,
        ..input.options.clone()
    };
    for _ in 0..runs.max(1) {
        for (best, options) in [(&mut ours, &input.options), (&mut before, &no_repack)] {
            let t = Instant::now();
            let plan = scheduling::solve(&snapshot, options);
            let secs = t.elapsed().as_secs_f64();
            if best.as_ref().is_none_or(|(b, _)| secs < *b) {
                *best = Some((secs, plan));
            }
        }
        let side = upstream_side(&karpenter.solve(&path)?);
        if theirs
            .as_ref()
            .is_none_or(|best| side.seconds < best.seconds)
        {
            theirs = Some(side);
        }
    }
    let side = |(seconds, plan): (f64, Plan)| Side {
        nodes: plan.new_claims.len(),
        cost: plan.cost,
        errors: plan.unplaced.len(),
        seconds,
    };
    let (secs, plan) = ours.expect("at least one run");
    Ok(Row {
        name: input.name.clone(),
        set: input.set,
        pods: plan.pods,
        bound: plan.lower_bound,
        ours: side((secs, plan)),
        before: side(before.expect("at least one run")),
        theirs: theirs.expect("at least one run"),
    })
}

fn upstream_side(v: &Value) -> Side {
    let n = |k: &str| v.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    Side {
        nodes: n("nodeClaims") as usize,
        cost: n("totalCheapestPricePerHour"),
        errors: n("podErrors") as usize,
        seconds: n("solveSeconds"),
    }
}

fn gap(cost: f64, bound: f64) -> f64 {
    if bound > 0.0 {
        (cost / bound - 1.0) * 100.0
    } else {
        0.0
    }
}

fn header() {
    println!(
        "{:<30} {:>6} {:>6} {:>6} {:>10} {:>10} {:>10} {:>10} {:>7} {:>7} {:>9} {:>9} {:>9} {:>7} {:>5} {:>5}",
        "INPUT",
        "PODS",
        "NODES",
        "KNODES",
        "$/H",
        "PRE $/H",
        "K $/H",
        "BOUND $/H",
        "GAP",
        "K GAP",
        "SOLVE",
        "PRE SOLVE",
        "K SOLVE",
        "SPEED",
        "ERR",
        "K ERR"
    );
}

fn print(r: &Row) {
    println!(
        "{:<30} {:>6} {:>6} {:>6} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>6.1}% {:>6.1}% {:>8.4}s {:>8.4}s {:>8.3}s {:>6.0}x {:>5} {:>5}",
        r.name,
        r.pods,
        r.ours.nodes,
        r.theirs.nodes,
        r.ours.cost,
        r.before.cost,
        r.theirs.cost,
        r.bound,
        gap(r.ours.cost, r.bound),
        gap(r.theirs.cost, r.bound),
        r.ours.seconds,
        r.before.seconds,
        r.theirs.seconds,
        r.theirs.seconds / r.ours.seconds.max(1e-9),
        r.ours.errors,
        r.theirs.errors
    );
}

/// The goals of the comparison, each with its verdict.
fn summary(rows: &[Row]) -> bool {
    let mut ok = true;
    let dearer: Vec<&str> = rows
        .iter()
        .filter(|r| r.ours.cost > r.theirs.cost + 1e-6)
        .map(|r| r.name.as_str())
        .collect();
    println!();
    println!(
        "nodewright $/h <= Karpenter's: {} of {} inputs{}",
        rows.len() - dearer.len(),
        rows.len(),
        if dearer.is_empty() {
            String::new()
        } else {
            format!(" (dearer on {})", dearer.join(", "))
        }
    );
    ok &= dearer.is_empty();
    let real: Vec<&Row> = rows.iter().filter(|r| r.set == "real-catalog").collect();
    if !real.is_empty() {
        let ours: f64 = real.iter().map(|r| r.ours.cost).sum();
        let theirs: f64 = real.iter().map(|r| r.theirs.cost).sum();
        let before: f64 = real.iter().map(|r| r.before.cost).sum();
        let cheaper = (1.0 - ours / theirs) * 100.0;
        println!(
            "real-catalog set: nodewright {ours:.2} $/h ({before:.2} without the improvement pass), \
             Karpenter {theirs:.2} $/h: {cheaper:.1}% cheaper (goal 15%)"
        );
        ok &= cheaper >= 15.0;
    }
    for r in rows.iter().filter(|r| r.name == "diverse-10000") {
        let speed = r.theirs.seconds / r.ours.seconds.max(1e-9);
        println!("speed at 10,000 diverse pods: {speed:.0}x (goal 100x)");
        ok &= speed >= 100.0;
    }
    let errors: usize = rows.iter().map(|r| r.ours.errors).sum();
    ok &= errors == rows.iter().map(|r| r.theirs.errors).sum::<usize>() || errors == 0;
    ok
}

pub fn run(a: CompareArgs) -> anyhow::Result<ExitCode> {
    let binary = harness::locate(a.karpenter.as_deref())?;
    let list = inputs(&a)?;
    let (dir, temporary) = match &a.dump {
        Some(d) => (d.clone(), false),
        None => (
            std::env::temp_dir().join(format!("nodewright-compare-{}", std::process::id())),
            true,
        ),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut karpenter = harness::Harness::start(&binary)?;
    println!("Karpenter harness: {}", binary.display());
    println!(
        "best of {} runs each, alternating; K = upstream Karpenter",
        a.runs.max(1)
    );
    header();
    let mut rows = Vec::new();
    let result = (|| {
        for input in &list {
            let row = compare(input, &dir, a.runs, &mut karpenter)?;
            print(&row);
            rows.push(row);
        }
        anyhow::Ok(())
    })();
    if temporary {
        let _ = std::fs::remove_dir_all(&dir);
    }
    result?;
    Ok(if summary(&rows) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
