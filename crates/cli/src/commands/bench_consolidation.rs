//! `nodewright bench consolidation --nodes N --pods M`: time one full disruption planning round
//! (every candidate evaluated) on a generated cluster.

use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use nodewright_core::disruption::EngineSimulator;
use nodewright_core::disruption::bench::{cluster, with_zone_spread};
use nodewright_core::disruption::plan::{Settings, plan};

#[derive(Args, Debug)]
pub struct ConsolidationArgs {
    /// Nodes in the generated cluster.
    #[arg(long, default_value_t = 200)]
    pub nodes: usize,
    /// Pods spread over them (fewer if they do not fit).
    #[arg(long, default_value_t = 2000)]
    pub pods: usize,
    /// Percent of the apps whose pods carry a zone topology spread.
    #[arg(long, default_value_t = 0)]
    pub spread_percent: usize,
    #[arg(long, default_value_t = nodewright_core::bench::SEED)]
    pub seed: u64,
}

pub fn run(a: ConsolidationArgs) -> anyhow::Result<ExitCode> {
    let s = with_zone_spread(cluster(a.nodes, a.pods, a.seed), a.spread_percent);
    let start = Instant::now();
    let p = plan(&s, &EngineSimulator::default(), Settings::default());
    let elapsed = start.elapsed();
    let mut codes: std::collections::BTreeMap<&str, usize> = Default::default();
    for v in &p.verdicts {
        *codes.entry(v.code.as_str()).or_default() += 1;
    }
    let mut out = format!(
        "cluster: {} nodes, {} pods, {}% of apps zone-spread (seed {})\nplanning round: {:.3} s, {} nodes evaluated, {} commands, ${:.4}/h saved\n",
        s.nodes.len(),
        s.pods.len(),
        a.spread_percent,
        a.seed,
        elapsed.as_secs_f64(),
        p.verdicts.len(),
        p.commands.len(),
        p.savings_per_hour(),
    );
    for c in &p.commands {
        out.push_str(&format!("  {c}\n"));
    }
    out.push_str("verdicts:\n");
    for (code, n) in codes {
        out.push_str(&format!("  {code:<24} {n}\n"));
    }
    crate::output::emit(&out)?;
    Ok(ExitCode::SUCCESS)
}
