//! The executor's re-check: after the validation delay, is a planned command still right on a
//! fresh snapshot? Anything that changed in a way that matters rejects the command.

use std::collections::BTreeSet;
use std::fmt;

use super::budgets::allowed_disruptions;
use super::candidates::{Candidate, MethodClass, budget_node_counts, select_only};
use super::command::{Command, Decision, Method};
use super::consolidation;
use super::drift::drift_reason;
use super::plan::Settings;
use super::simulate::Simulator;
use crate::model::{Pod, Snapshot};

/// Why a command was rejected on re-check; `kind()` matches Karpenter's
/// `failed_validations_total` reasons (churn, budget, scheduling).
#[derive(Clone, Debug, PartialEq)]
pub enum Invalid {
    NoLongerCandidate { node: String, reason: String },
    NoLongerEmpty { node: String },
    NoLongerDrifted { node: String },
    BudgetExhausted { nodepool: String },
    Scheduling(String),
    Churn(String),
}

impl Invalid {
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
    settings: Settings,
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
    let mut current: Vec<&Candidate<'_>> = Vec::new();
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

    // Budgets: the command's nodes per pool must still fit what the pool allows.
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

    match command.method {
        Method::Emptiness => match current.iter().find(|c| !c.is_empty()) {
            Some(c) => Err(Invalid::NoLongerEmpty {
                node: c.node.name.clone(),
            }),
            None => Ok(()),
        },
        Method::Drift => {
            for c in &current {
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
            let sim = simulator.simulate(fresh, &without, &pods);
            match sim.failures.first() {
                Some((pod, why)) => Err(Invalid::Scheduling(format!("pod {pod}: {why}"))),
                None => Ok(()),
            }
        }
        Method::MultiNodeConsolidation | Method::SingleNodeConsolidation => {
            let again = consolidation::compute(
                fresh,
                simulator,
                &current,
                command.method,
                settings.features,
            )
            .map_err(|r| Invalid::Scheduling(r.to_string()))?;
            match (command.decision, again.decision) {
                (Decision::Delete, Decision::Delete) => Ok(()),
                (Decision::Delete, Decision::Replace) => {
                    Err(Invalid::Scheduling("pods now need a new node".into()))
                }
                (Decision::Replace, Decision::Replace) => {
                    let now: BTreeSet<&String> = again
                        .replacements
                        .iter()
                        .flat_map(|r| &r.instance_types)
                        .collect();
                    match command
                        .replacements
                        .iter()
                        .flat_map(|r| &r.instance_types)
                        .find(|it| !now.contains(it))
                    {
                        Some(it) => Err(Invalid::Churn(format!(
                            "instance type {it} is no longer a valid replacement"
                        ))),
                        None => Ok(()),
                    }
                }
                (Decision::Replace, Decision::Delete) => Ok(()),
            }
        }
        Method::Expiration => Ok(()),
    }
}
