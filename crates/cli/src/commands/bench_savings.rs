//! `nodewright bench savings`: how much consolidation saves, ours against upstream's search.
//!
//! The cluster is upstream's diverse scheduling benchmark: `--pods` pods solved and launched
//! onto new nodes, then scaled down by deleting all but `--keep` pods (chosen with the seeded
//! generator). Both searches then run rounds to a fixed point on that same cluster, each
//! round's commands applied by placing the evicted pods with the scheduler.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use nodewright_core::bench;
use nodewright_core::disruption::EngineSimulator;
use nodewright_core::disruption::Features;
use nodewright_core::disruption::plan::{Settings, plan};
use nodewright_core::disruption::upstream::{Search, cluster_cost, round, run_to_fixed_point};
use nodewright_core::model::{OwnerRef, Snapshot};
use nodewright_core::rng::Rng;
use nodewright_core::scheduling::{self, launch};
use nodewright_core::time::Timestamp;

#[derive(Args, Debug)]
pub struct SavingsArgs {
    /// Pods of the diverse benchmark placed first.
    #[arg(long, default_value_t = 10_000)]
    pub pods: usize,
    /// Pods left after the scale-down.
    #[arg(long, default_value_t = 5_000)]
    pub keep: usize,
    /// Stop after this many rounds even if a search still finds something.
    #[arg(long, default_value_t = 10_000)]
    pub max_rounds: usize,
    #[arg(long, default_value_t = bench::SEED)]
    pub seed: u64,
    /// Run only this search (`upstream` or `ours`); both by default.
    #[arg(long, value_parser = ["upstream", "ours"])]
    pub only: Option<String>,
}

/// 2026-01-01T00:00:00Z: the cluster's launch time and the planning time.
const NOW: Timestamp = Timestamp(1_767_225_600_000);

/// The scaled-down cluster. Every pod gets a ReplicaSet owner: the benchmark's pods stand for
/// Deployment replicas, and an ownerless pod would block its node.
pub fn scaled_down_cluster(pods: usize, keep: usize, seed: u64) -> (Snapshot, f64, usize) {
    let mut rng = Rng::new(seed);
    let mut s = bench::snapshot(bench::diverse_pods(pods, &mut rng), 400);
    s.now = NOW;
    for p in s.pods.iter_mut().map(Arc::make_mut) {
        p.owner = Some(OwnerRef {
            kind: "ReplicaSet".into(),
            name: "bench".into(),
            controller: true,
        });
    }
    let placed = scheduling::solve(&s, &scheduling::Options::default());
    let mut s = launch(&s, &placed, "node", NOW);
    let full_cost = cluster_cost(&s);
    let full_nodes = s.nodes.len();
    // A seeded shuffle; the first `keep` pods stay.
    let mut order: Vec<usize> = (0..s.pods.len()).collect();
    for i in (1..order.len()).rev() {
        let j = rng.below(i + 1);
        order.swap(i, j);
    }
    let kept: std::collections::BTreeSet<usize> = order.into_iter().take(keep).collect();
    let mut i = 0;
    s.pods.retain(|_| {
        let k = kept.contains(&i);
        i += 1;
        k
    });
    (s, full_cost, full_nodes)
}

pub fn run(a: SavingsArgs) -> anyhow::Result<ExitCode> {
    let (s, full_cost, full_nodes) = scaled_down_cluster(a.pods, a.keep, a.seed);
    let pending = s.pods.iter().filter(|p| p.node_name.is_none()).count();
    let mut out = format!(
        "cluster: diverse-{} on {} nodes (${:.4}/h), scaled down to {} pods ({} pending), seed {}\n",
        a.pods,
        full_nodes,
        full_cost,
        s.pods.len(),
        pending,
        a.seed
    );
    out.push_str(&format!(
        "{:<10} {:>7} {:>9} {:>13} {:>12} {:>12} {:>12} {:>8} {:>8} {:>9}\n",
        "SEARCH",
        "ROUNDS",
        "COMMANDS",
        "NODES",
        "$/H BEFORE",
        "$/H AFTER",
        "SAVED $/H",
        "SAVED",
        "PENDING",
        "TIME"
    ));
    crate::output::emit(&out)?;
    let sim = EngineSimulator::default();
    for (name, search) in [("upstream", Search::Upstream), ("ours", Search::Ours)] {
        if a.only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        let start = Instant::now();
        let o = run_to_fixed_point(&s, &sim, search, Settings::default(), a.max_rounds);
        let secs = start.elapsed().as_secs_f64();
        let saved = o.cost_before - o.cost_after;
        crate::output::emit(&format!(
            "{:<10} {:>7} {:>9} {:>13} {:>12.4} {:>12.4} {:>12.4} {:>7.2}% {:>8} {:>8.1}s\n",
            name,
            o.rounds,
            o.commands,
            format!("{} -> {}", o.nodes_before, o.nodes_after),
            o.cost_before,
            o.cost_after,
            saved,
            100.0 * saved / o.cost_before.max(1e-9),
            o.pending_after,
            secs
        ))?;
        let kinds: Vec<String> = o.by_kind.iter().map(|(k, n)| format!("{n} {k}")).collect();
        crate::output::emit(&format!("{:<10} {}\n", "", kinds.join(", ")))?;
        if o.stalled {
            crate::output::emit(&format!(
                "{:<10} stopped: the last round's commands would not have lowered the cost\n",
                ""
            ))?;
        }
        // Would the other search still find something where this one stopped?
        let other: Vec<String> = match search {
            Search::Upstream => plan(&o.snapshot, &sim, Settings::default())
                .commands
                .iter()
                .map(|c| c.to_string())
                .collect(),
            Search::Ours => round(&o.snapshot, &sim, Features::default())
                .iter()
                .map(|c| c.to_string())
                .collect(),
        };
        let other_name = if search == Search::Ours {
            "upstream"
        } else {
            "ours"
        };
        if other.is_empty() {
            crate::output::emit(&format!(
                "{:<10} at this fixed point {other_name} finds nothing more\n",
                ""
            ))?;
        }
        for c in other {
            crate::output::emit(&format!(
                "{:<10} at this fixed point {other_name} still finds: {c}\n",
                ""
            ))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
