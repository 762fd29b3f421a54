//! The executor's re-check: after the validation delay, is a planned command still right on a
//! fresh snapshot? Anything that changed in a way that matters rejects the command.

use std::collections::BTreeSet;
use std::fmt;

use super::budgets::allowed_disruptions;
use super::candidates::{Candidate, MethodClass, Selection, budget_node_counts, select_only};
use super::command::{Command, Method};
use super::consolidation;
use super::drift::drift_reason;
use super::plan::pending;
use super::scheduler_replay::Replay;
use super::simulate::{Purpose, Simulation, Simulator};
use crate::model::{Pod, Snapshot};

/// Why a command was rejected on re-check; `kind()` matches Karpenter's
/// `failed_validations_total` reasons (churn, budget, scheduling).
#[derive(Clone, Debug, PartialEq)]
pub enum Invalid {
    /// A target is now blocked, or gone with its node or NodeClaim.
    NoLongerCandidate {
        /// The target node.
        node: String,
        /// Why: the blocker, or what is gone.
        reason: String,
    },
    /// An emptiness target now has pods to move.
    NoLongerEmpty {
        /// The target node.
        node: String,
    },
    /// A drift target no longer drifts.
    NoLongerDrifted {
        /// The target node.
        node: String,
    },
    /// A NodePool's budget no longer allows as many of its nodes as the command takes.
    BudgetExhausted {
        /// The NodePool.
        nodepool: String,
    },
    /// The moving pods no longer fit as planned: which pod, and why.
    Scheduling(String),
    /// The cluster changed under a consolidation: an instance type the replacement planned
    /// is no longer an option.
    Churn(String),
}

impl Invalid {
    /// A short label for the reason (`budget`, `scheduling` or `churn`), for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Invalid::BudgetExhausted { .. } => "budget",
            Invalid::Scheduling(_) => "scheduling",
            _ => "churn",
        }
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Invalid::NoLongerCandidate { node, reason } => {
                write!(f, "node {node} is no longer a candidate: {reason}")
            }
            Invalid::NoLongerEmpty { node } => write!(f, "node {node} is no longer empty"),
            Invalid::NoLongerDrifted { node } => write!(f, "node {node} is no longer drifted"),
            Invalid::BudgetExhausted { nodepool } => {
                write!(f, "NodePool {nodepool} has no disruption budget left")
            }
            Invalid::Scheduling(why) => write!(f, "scheduling changed: {why}"),
            Invalid::Churn(why) => write!(f, "cluster changed: {why}"),
        }
    }
}

/// Re-checks `command` against `fresh`. Expiration is forceful and only needs its claim.
pub fn validate(
    command: &Command,
    fresh: &Snapshot,
    simulator: &dyn Simulator,
) -> Result<(), Invalid> {
    if command.method == Method::Expiration {
        return match command
            .targets
            .iter()
            .find(|t| !fresh.node_claims.iter().any(|c| c.name == t.nodeclaim))
        {
            Some(t) => Err(Invalid::NoLongerCandidate {
                node: t.node.clone(),
                reason: "nodeclaim is gone".into(),
            }),
            None => Ok(()),
        };
    }
    let class = if command.method == Method::Drift {
        MethodClass::Eventual
    } else {
        MethodClass::Graceful
    };
    let names: Vec<&str> = command.targets.iter().map(|t| t.node.as_str()).collect();
    let selection = select_only(fresh, class, &names);
    let current = still_candidates(command, &selection)?;
    within_budgets(command, fresh, &current)?;
    still_holds(command, fresh, simulator, &current)
}

/// The command's nodes as candidates again; the first that is blocked now or gone fails.
fn still_candidates<'s, 'a>(
    command: &Command,
    selection: &'s Selection<'a>,
) -> Result<Vec<&'s Candidate<'a>>, Invalid> {
    let mut current = Vec::new();
    for t in &command.targets {
        if let Some((_, b)) = selection.blocked.iter().find(|(n, _)| n == &t.node) {
            return Err(Invalid::NoLongerCandidate {
                node: t.node.clone(),
                reason: b.to_string(),
            });
        }
        match selection.candidates.iter().find(|c| c.node.name == t.node) {
            Some(c) => current.push(c),
            None => {
                return Err(Invalid::NoLongerCandidate {
                    node: t.node.clone(),
                    reason: "node is gone".into(),
                });
            }
        }
    }
    Ok(current)
}

/// The command's nodes per NodePool still fit what the pool's budgets allow now.
fn within_budgets(
    command: &Command,
    fresh: &Snapshot,
    current: &[&Candidate<'_>],
) -> Result<(), Invalid> {
    let reason = command
        .method
        .budget_reason()
        .expect("only expiration has no budget reason");
    let counts = budget_node_counts(fresh);
    let pools: BTreeSet<&str> = current.iter().map(|c| c.nodepool.name.as_str()).collect();
    for pool in pools {
        let np = fresh.nodepools.iter().find(|p| p.name == pool);
        let (count, disrupting) = counts.get(pool).copied().unwrap_or((0, 0));
        let wanted = current.iter().filter(|c| c.nodepool.name == pool).count() as u32;
        let allowed = np
            .map(|np| allowed_disruptions(np, reason, count, disrupting, fresh.now).allowed)
            .unwrap_or(0);
        if wanted > allowed {
            return Err(Invalid::BudgetExhausted {
                nodepool: pool.to_string(),
            });
        }
    }
    Ok(())
}

/// What made the command still holds: its nodes are empty (emptiness), drifted and their
/// pods placed (drift), or no pending pod needs a new node once its nodes are gone and the
/// consolidation's simulation and the cluster's scheduler still agree on it.
fn still_holds(
    command: &Command,
    fresh: &Snapshot,
    simulator: &dyn Simulator,
    current: &[&Candidate<'_>],
) -> Result<(), Invalid> {
    match command.method {
        Method::Emptiness => match current.iter().find(|c| !c.is_empty()) {
            Some(c) => Err(Invalid::NoLongerEmpty {
                node: c.node.name.clone(),
            }),
            None => Ok(()),
        },
        Method::Drift => {
            for c in current {
                let its = fresh
                    .instance_types
                    .get(&c.nodepool.name)
                    .map(|v| v.as_slice())
                    .unwrap_or(&[]);
                if drift_reason(c.claim, c.node, c.nodepool, its, fresh.now).is_none() {
                    return Err(Invalid::NoLongerDrifted {
                        node: c.node.name.clone(),
                    });
                }
            }
            let without: BTreeSet<String> = current.iter().map(|c| c.node.name.clone()).collect();
            let pods: Vec<&Pod> = current
                .iter()
                .flat_map(|c| c.reschedulable_pods.iter().copied())
                .collect();
            let sim = simulator.simulate(fresh, Purpose::Drift, &without, &pods);
            match sim.failures.first() {
                Some((pod, why)) => Err(Invalid::Scheduling(format!("pod {pod}: {why}"))),
                None => Ok(()),
            }
        }
        Method::MultiNodeConsolidation | Method::SingleNodeConsolidation => {
            let job = consolidation::job(current);
            if let Some(backlog) = pending::backlog(fresh, &job.without, simulator) {
                return Err(Invalid::Scheduling(backlog.to_string()));
            }
            let sim = simulator.simulate(fresh, Purpose::Consolidation, &job.without, &job.pods);
            same_outcome(command, &sim)?;
            // The cluster's scheduler, not the simulation, places the pods once they move.
            let replay = Replay::new(fresh);
            match replay.unplaced(command, &job.pods, &BTreeSet::new()) {
                Some((pod, why)) => Err(Invalid::Scheduling(format!("pod {pod}: {why}"))),
                None => Ok(()),
            }
        }
        Method::Expiration => Ok(()),
    }
}

/// Upstream's rule for a consolidation re-simulated on a fresh snapshot: every moving pod
/// still schedules, and the simulation asks for exactly the new nodes the command planned. A
/// delete must still need none. A replace must still need one, and every instance type
/// planned for it must still be an option of that one: the simulation does no price
/// filtering, so its options are a superset of a still-valid plan's. A replace whose pods now
/// fit without a new node is rejected too, since launching the replacement would only add a
/// node; the next round finds the better command (a delete). No consolidation ever asks for
/// more than one new node.
fn same_outcome(command: &Command, sim: &Simulation) -> Result<(), Invalid> {
    if let Some((pod, why)) = sim.failures.first() {
        return Err(Invalid::Scheduling(format!("pod {pod}: {why}")));
    }
    match (sim.new_claims.as_slice(), command.replacements.as_slice()) {
        ([], []) => Ok(()),
        ([], [_, ..]) => Err(Invalid::Scheduling(
            "the pods now fit without a new node; a better consolidation is likely".into(),
        )),
        ([_], []) => Err(Invalid::Scheduling("the pods now need a new node".into())),
        ([claim], [planned]) => {
            let now: BTreeSet<&str> = claim
                .options
                .iter()
                .map(|o| o.instance_type.as_str())
                .collect();
            match planned
                .instance_types
                .iter()
                .find(|it| !now.contains(it.as_str()))
            {
                Some(it) => Err(Invalid::Churn(format!(
                    "instance type {it} is no longer a valid replacement"
                ))),
                None => Ok(()),
            }
        }
        (claims, planned) => Err(Invalid::Scheduling(format!(
            "the pods now need {} new nodes, the command planned {}",
            claims.len(),
            planned.len()
        ))),
    }
}

#[cfg(test)]
mod tests;
