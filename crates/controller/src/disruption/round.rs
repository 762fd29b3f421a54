//! One disruption round as computed off the runtime: the planner's commands on the snapshot
//! (running commands' targets already deleting in it), each with its replacements' requests,
//! and what the round has to tell: every node's verdict, the budgets, the candidates per
//! reason, the pods whose `do-not-disrupt` is invalid or timed, and whether the cluster is
//! consolidated. No I/O (only the consolidation searches' wall-clock limits): the loop
//! publishes and writes what it returns.

use std::collections::{BTreeMap, BTreeSet};

use nodewright_core::cadence::plan_is_consolidated;
use nodewright_core::disruption::allowed_disruptions;
use nodewright_core::disruption::candidates::{
    Selection, budget_node_counts, invalid_do_not_disrupt, select_both_counted,
    timed_do_not_disrupt as timed_protection,
};
use nodewright_core::disruption::plan::{self, Move, NodeMemo, Settings, Verdict};
use nodewright_core::disruption::{Command, EngineSimulator, Method, replacement_requests};
use nodewright_core::model::{DisruptionReason, Snapshot};
use nodewright_core::resources::Resources;
use nodewright_core::time::Timestamp;

use super::consolidated::next_timed_change;
use super::deadline::{SearchTimeouts, WallDeadline};
use super::journal::brief;
use super::metrics::BudgetRow;
use crate::events::ObjectRef;

/// A planned command with its replacements' resource requests.
#[derive(Clone, Debug)]
pub(super) struct Queued {
    pub command: Command,
    pub requests: Vec<Resources>,
}

/// What one planning pass computes off the runtime.
pub(super) struct RoundResult {
    pub commands: Vec<Queued>,
    pub verdicts: Vec<Verdict>,
    pub eligible: BTreeMap<&'static str, usize>,
    pub allowed: Vec<BudgetRow>,
    pub claims_by_node: BTreeMap<String, String>,
    /// The consolidation moves the round weighed.
    pub moves: Vec<Move>,
    /// The round found nothing and no scheduled budget held it back.
    pub consolidated: bool,
    /// When this round's verdicts change with time alone.
    pub timed: Option<Timestamp>,
    /// Per NodePool: nodes counted for budgets and those already disrupting.
    pub counts: BTreeMap<String, (u32, u32)>,
    /// Pods on nodes whose `do-not-disrupt` value is ignored as invalid, with the value.
    pub invalid_do_not_disrupt: Vec<(String, String, String)>,
    /// Pods on nodes whose `do-not-disrupt` is a duration: when it ends, and whether it has.
    pub timed_do_not_disrupt: Vec<(ObjectRef, Timestamp, bool)>,
    /// The consolidation searches that ran out of time.
    pub timed_out: Vec<Method>,
}

/// Plans a round on `snap` with `settings`, simulated by `sim`, what unchanged nodes' labels
/// say taken from `kept`, the consolidation searches bounded by `timeouts`; `busy` holds the
/// nodes of running commands, which no new command may take.
pub(super) fn plan_round(
    snap: &Snapshot,
    sim: &EngineSimulator,
    kept: &NodeMemo,
    settings: Settings,
    timeouts: SearchTimeouts,
    busy: &BTreeSet<String>,
) -> RoundResult {
    let mut result = plan::plan_kept(snap, sim, settings, kept, &WallDeadline::new(timeouts));
    // The planner sees the running commands' targets as deleting; this only guards
    // against a node joining two commands.
    result
        .commands
        .retain(|c| c.targets.iter().all(|t| !busy.contains(&t.node)));
    let consolidated = plan_is_consolidated(&result, &snap.nodepools);
    let (graceful, eventual, counts) = select_both_counted(snap);
    let timed = consolidated
        .then(|| next_timed_change(snap, &graceful.blocked))
        .flatten();
    let commands = result
        .commands
        .into_iter()
        .map(|command| Queued {
            requests: replacement_requests(snap, &command, sim),
            command,
        })
        .collect();
    RoundResult {
        commands,
        verdicts: result.verdicts,
        moves: result.moves,
        eligible: eligible(&graceful, &eventual),
        allowed: allowed_by_nodepool(snap),
        counts,
        claims_by_node: snap
            .node_claims
            .iter()
            .filter_map(|c| Some((c.node_name.clone()?, c.name.clone())))
            .collect(),
        invalid_do_not_disrupt: snap
            .pods
            .iter()
            .filter(|p| p.node_name.is_some())
            .filter_map(|p| {
                let value = invalid_do_not_disrupt(p)?;
                Some((p.namespace.clone(), p.name.clone(), value.to_string()))
            })
            .collect(),
        timed_do_not_disrupt: timed_do_not_disrupt(snap),
        consolidated,
        timed,
        timed_out: result.timed_out,
    }
}

/// Each NodePool's budget per reason, as upstream's budget mapping sets
/// `karpenter_nodepools_allowed_disruptions` and `_nodes_consuming_budgets`: what the active
/// budgets allow against the pool's node count, before subtracting nodes already disrupting
/// (an unbounded pool reports 2147483647, upstream's MaxInt32), and those disrupting nodes.
pub fn allowed_by_nodepool(snap: &Snapshot) -> Vec<BudgetRow> {
    let counts = budget_node_counts(snap);
    let mut out = Vec::new();
    for np in &snap.nodepools {
        let (nodes, disrupting) = counts.get(&np.name).copied().unwrap_or((0, 0));
        for (reason, label) in [
            (DisruptionReason::Empty, "empty"),
            (DisruptionReason::Drifted, "drifted"),
            (DisruptionReason::Underutilized, "underutilized"),
        ] {
            let a = allowed_disruptions(np, reason, nodes, 0, snap.now);
            out.push(BudgetRow {
                nodepool: np.name.clone(),
                reason: label,
                allowed: a.allowed,
                nodes,
                consuming: disrupting,
            });
        }
    }
    out
}

/// The pods on nodes whose `do-not-disrupt` is a duration, with when it ends and whether it
/// has: upstream tells each such pod it weighs which, every round.
fn timed_do_not_disrupt(snap: &Snapshot) -> Vec<(ObjectRef, Timestamp, bool)> {
    snap.pods
        .iter()
        .filter(|p| p.node_name.is_some() && !p.is_terminal())
        .filter_map(|p| {
            let (until, elapsed) = timed_protection(p, snap.now)?;
            let pod = ObjectRef::pod(&p.namespace, &p.name);
            let pod = if p.uid.is_empty() {
                pod
            } else {
                pod.with_uid(p.uid.clone())
            };
            Some((pod, until, elapsed))
        })
        .collect()
}

/// Candidates per metric reason: every graceful candidate may be consolidated, the empty ones
/// may go by emptiness, the drifted ones by drift.
fn eligible(graceful: &Selection<'_>, eventual: &Selection<'_>) -> BTreeMap<&'static str, usize> {
    BTreeMap::from([
        (
            Method::Emptiness.reason_label(),
            graceful.candidates.iter().filter(|c| c.is_empty()).count(),
        ),
        (
            Method::SingleNodeConsolidation.reason_label(),
            graceful.candidates.len(),
        ),
        (
            Method::Drift.reason_label(),
            eventual
                .candidates
                .iter()
                .filter(|c| c.claim.drifted.is_some())
                .count(),
        ),
    ])
}

/// The journal's line for a planning round: its commands, its cost and the budgets it saw.
pub(super) fn round_summary(round: &RoundResult, secs: f64, running: usize) -> String {
    let budgets: Vec<String> = round
        .counts
        .iter()
        .map(|(pool, (nodes, disrupting))| {
            let allowed = round
                .allowed
                .iter()
                .find(|b| &b.nodepool == pool && b.reason == "underutilized")
                .map_or(0, |b| b.allowed);
            format!("{pool}: {disrupting} of {nodes} disrupting, budget {allowed}")
        })
        .collect();
    let commands: Vec<String> = round.commands.iter().map(|q| brief(&q.command)).collect();
    format!(
        "{} command(s) in {:.0} ms with {running} running [{}]; {}",
        commands.len(),
        secs * 1000.0,
        budgets.join(", "),
        commands.join("; ")
    )
}
