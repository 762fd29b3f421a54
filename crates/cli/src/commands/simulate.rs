//! `nodewright simulate [SCENARIO]`: run a scenario on a simulated EKS cluster with a virtual
//! clock; with no argument, the built-in eksdemo scenario.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};
use nodewright_sim::cloud::CatalogFile;
use nodewright_sim::report;
use nodewright_sim::scenario::{FileSource, parse_scenario};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Output {
    /// Timeline and summary for people.
    Text,
    /// The whole report as JSON.
    Json,
}

#[derive(Args, Debug)]
pub struct SimulateArgs {
    /// Scenario file (YAML). Without one, the built-in demo (scenarios/eksdemo.yaml) runs.
    pub scenario: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "text")]
    pub output: Output,
    /// Also write an SVG chart of nodes, pending pods and $/h over time.
    #[arg(long, value_name = "FILE.svg")]
    pub chart: Option<PathBuf>,
    /// Override the scenario's seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Offer the instance types of this catalog file (the interchange format's
    /// `instanceTypes`) instead of the embedded AWS catalog's; overrides the scenario's
    /// `cloud.instanceTypes`.
    #[arg(long, value_name = "CATALOG.json")]
    pub instance_types: Option<PathBuf>,
    /// Never draw the progress bar (it is drawn only on a terminal).
    #[arg(long)]
    pub no_progress: bool,
}

pub fn run(args: SimulateArgs) -> anyhow::Result<ExitCode> {
    let mut scenario = match &args.scenario {
        None => nodewright_sim::demo::demo()?,
        Some(path) => {
            let text = nodewright_api::document::read_text(path)?;
            let base = path
                .parent()
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("."));
            parse_scenario(&path.display().to_string(), &text, &FileSource { base })?
        }
    };
    if let Some(seed) = args.seed {
        scenario.seed = seed;
    }
    if let Some(path) = &args.instance_types {
        let name = path.display().to_string();
        let text = nodewright_api::document::read_text(path)?;
        let file = CatalogFile::parse(&name, &text).map_err(anyhow::Error::msg)?;
        scenario.cloud.instance_types = Some(file);
    }
    let catalog =
        nodewright_aws_model::catalog::embedded().context("loading the embedded AWS catalog")?;
    let draw = !args.no_progress && std::io::stderr().is_terminal();
    let mut last_drawn = -1i64;
    let mut progress = |f: f64| {
        if !draw {
            return;
        }
        let pct = (f.clamp(0.0, 1.0) * 100.0) as i64;
        if pct != last_drawn {
            last_drawn = pct;
            let filled = (pct / 4) as usize;
            eprint!(
                "\r[{}{}] {pct:>3}% of virtual time",
                "#".repeat(filled),
                ".".repeat(25 - filled)
            );
            let _ = std::io::stderr().flush();
        }
    };
    let report = nodewright_sim::run(&scenario, &catalog, &mut progress)?;
    if draw {
        eprint!("\r{}\r", " ".repeat(50));
    }
    match args.output {
        Output::Text => {
            print!("{}", report::timeline_text(&report));
            println!();
            print!("{}", report::summary_text(&report));
        }
        Output::Json => println!(
            "{}",
            serde_json::to_string_pretty(&report::to_json(&report))?
        ),
    }
    if let Some(path) = &args.chart {
        std::fs::write(path, report::svg(&report))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(if report.violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
