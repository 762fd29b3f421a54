//! `nodewright plan`: one snapshot in, one plan out.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use nodewright_api::{document, interchange};
use nodewright_core::model::Snapshot;
use nodewright_core::resources;
use nodewright_core::scheduling::{self, Options, Plan, Target};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Output {
    Table,
    Json,
}

#[derive(Args, Debug)]
pub struct PlanArgs {
    /// Interchange JSON input, or Kubernetes manifests (YAML/JSON, file or directory).
    #[arg(
        long,
        required_unless_present = "kubeconfig",
        conflicts_with = "kubeconfig"
    )]
    pub input: Option<PathBuf>,
    /// Plan the running cluster of this kubeconfig instead of `--input` (a what-if: nothing
    /// is written). Each NodePool's instance types are the embedded catalog's for its
    /// EC2NodeClass, as `controller --cloud-provider sim` sees them.
    #[command(flatten)]
    pub cluster: super::live::ClusterArgs,
    /// Instance-type catalog (interchange `instanceTypes`), required with manifests (with
    /// `--disruption` the embedded AWS catalog is the default).
    #[arg(long, conflicts_with = "kubeconfig")]
    pub instance_types: Option<PathBuf>,
    /// Plan voluntary disruption (emptiness, drift, consolidation) of the input's nodes instead
    /// of placing pending pods.
    #[arg(long)]
    pub disruption: bool,
    /// The snapshot's time for `--disruption`, RFC 3339 (default: now).
    #[arg(long, requires = "disruption")]
    pub now: Option<String>,
    #[arg(long, value_enum, default_value = "table")]
    pub output: Output,
    /// Drop preferred affinities and ScheduleAnyway spreads up front (PREFERENCE_POLICY=Ignore).
    #[arg(long)]
    pub ignore_preferences: bool,
    /// MIN_VALUES_POLICY=BestEffort: minValues never blocks a placement.
    #[arg(long)]
    pub min_values_best_effort: bool,
    /// Solve this many times and report the fastest (the plan is the same every time).
    #[arg(long, default_value_t = 1)]
    pub runs: u32,
}

/// Reads an interchange document or manifests plus a catalog.
pub fn load(input: &Path, catalog: Option<&Path>) -> anyhow::Result<Snapshot> {
    let name = input.display().to_string();
    if input.is_file() {
        let text = document::read_text(input)?;
        let is_interchange = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .is_some_and(|v| v.get("instanceTypes").is_some());
        if is_interchange {
            return Ok(interchange::read_input(&name, &text)?);
        }
    }
    let Some(cat) = catalog else {
        bail!(
            "{name} is not an interchange document; pass --instance-types with a catalog to plan manifests"
        )
    };
    let cat_name = cat.display().to_string();
    let cat_text = document::read_text(cat)?;
    let cat_value: serde_json::Value =
        serde_json::from_str(&cat_text).with_context(|| format!("{cat_name}: not valid JSON"))?;
    let its = interchange::read_catalog(&cat_name, &cat_value)?;
    let docs = document::read_documents(input)?;
    Ok(interchange::read_manifests(&docs, its)?)
}

pub fn run(args: PlanArgs) -> anyhow::Result<ExitCode> {
    if args.disruption {
        return super::plan_disruption::run(&args);
    }
    let snapshot = match &args.input {
        Some(input) => load(input, args.instance_types.as_deref())?,
        None => super::live::block_on(super::live::read(&args.cluster, super::live::wall_now()?))?,
    };
    let opts = Options {
        ignore_preferences: args.ignore_preferences,
        min_values_best_effort: args.min_values_best_effort,
        ..Options::default()
    };
    let mut secs = f64::MAX;
    let mut plan = scheduling::Plan::default();
    for _ in 0..args.runs.max(1) {
        let start = Instant::now();
        plan = scheduling::solve(&snapshot, &opts);
        secs = secs.min(start.elapsed().as_secs_f64());
    }
    let text = match args.output {
        Output::Json => {
            serde_json::to_string_pretty(&interchange::write_output(&plan, secs))? + "\n"
        }
        Output::Table => table(&plan, secs),
    };
    // A closed pipe (`| head`) is not an error worth a panic.
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        other => other.context("writing the plan")?,
    }
    Ok(if plan.unplaced.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn table(plan: &Plan, secs: f64) -> String {
    let mut out = String::new();
    let existing = plan
        .placements
        .iter()
        .filter(|p| !matches!(p.target, Target::NewClaim(_)))
        .count();
    out.push_str(&format!(
        "{} pods: {} placed ({} on existing nodes or in-flight claims), {} unplaced; {} new NodeClaims\n",
        plan.pods,
        plan.placements.len(),
        existing,
        plan.unplaced.len(),
        plan.new_claims.len()
    ));
    out.push_str(&format!(
        "cost ${:.4}/h, lower bound ${:.4}/h, gap {:.2}%, solved in {:.3}s\n\n",
        plan.cost,
        plan.lower_bound,
        plan.gap() * 100.0,
        secs
    ));
    if !plan.new_claims.is_empty() {
        out.push_str(&format!(
            "{:<5} {:<16} {:>5} {:>9} {:>11} {:<24} {:<14} {:<10} {:>10}  {}\n",
            "#",
            "NODEPOOL",
            "PODS",
            "CPU",
            "MEMORY",
            "CHEAPEST",
            "ZONE",
            "CAPACITY",
            "$/H",
            "OPTIONS"
        ));
        for (i, c) in plan.new_claims.iter().enumerate() {
            let ch = c.cheapest();
            out.push_str(&format!(
                "{:<5} {:<16} {:>5} {:>9} {:>11} {:<24} {:<14} {:<10} {:>10.4}  {}\n",
                i,
                c.nodepool,
                c.pods.len(),
                resources::format_amount(resources::CPU, c.requests.get(resources::CPU)),
                resources::format_amount(resources::MEMORY, c.requests.get(resources::MEMORY)),
                ch.map(|o| plan.name_of(o)).unwrap_or("-"),
                ch.map(|o| plan.zone_of(o)).unwrap_or("-"),
                ch.map(|o| o.capacity_type.as_str()).unwrap_or("-"),
                ch.map(|o| o.price).unwrap_or(0.0),
                c.instance_types.len()
            ));
        }
    }
    if !plan.unplaced.is_empty() {
        out.push_str("\nunplaced pods:\n");
        for u in &plan.unplaced {
            out.push_str(&format!("  {}: {}\n", u.pod, u.reason));
        }
    }
    out
}
