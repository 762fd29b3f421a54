//! Consolidation: delete nodes whose pods fit elsewhere, or replace them with one strictly
//! cheaper node.
//!
//! Multi-node consolidation binary-searches the longest prefix of the ranked candidates that
//! can go together (without upstream's 100-candidate cap; its time limits are the caller's
//! [`super::plan::Deadline`]); single-node consolidation evaluates every candidate and keeps
//! the best saving, so each node gets a verdict.

use std::collections::BTreeSet;

use super::candidates::Candidate;
use super::command::{Command, Method, Replacement, Target};
use super::simulate::{Job, Purpose, ReplacementOption, SimulatedClaim, Simulation, Simulator};
use crate::labels;
use crate::model::{CapacityType, ConsolidationPolicy, Snapshot};
use crate::requirements::{Operator, Requirement};

/// Karpenter's minimum number of cheaper spot options for single-node spot-to-spot.
pub(crate) const MIN_SPOT_TO_SPOT_OPTIONS: usize = 15;
/// Balanced policy threshold: score must reach 1/k with k = 2.
pub const BALANCED_THRESHOLD: f64 = 0.5;

/// Consolidation behaviours behind a feature gate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Features {
    /// The `SpotToSpotConsolidation` feature gate: spot nodes may be replaced by cheaper
    /// spot capacity (off, such a replacement is refused; deleting them is not).
    pub spot_to_spot_consolidation: bool,
}

pub(crate) fn target(c: &Candidate<'_>) -> Target {
    Target {
        node: c.node.name.clone(),
        nodeclaim: c.claim.name.clone(),
        nodepool: c.nodepool.name.clone(),
        instance_type: c.instance_type.to_string(),
        zone: c.zone.to_string(),
        capacity_type: c
            .capacity_type
            .map(|ct| ct.as_str().to_string())
            .unwrap_or_default(),
        price: c.price,
        pods: c.reschedulable_pods.iter().map(|p| p.key()).collect(),
    }
}

/// Why a set of candidates cannot be consolidated.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Rejection {
    PodsDoNotFit {
        pod: String,
        reason: String,
    },
    NeedsMultipleNodes {
        count: usize,
    },
    /// The candidates cost `price` $/h; the cheapest option the simulated replacement had,
    /// at the price the comparison used, when it had any.
    NoCheaperReplacement {
        price: f64,
        cheapest: Option<(String, f64)>,
    },
    SpotToSpotDisabled,
    TooFewSpotOptions {
        found: usize,
    },
    BalancedScoreTooLow {
        score: BalancedScore,
    },
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rejection::PodsDoNotFit { pod, reason } => {
                write!(f, "pods do not fit elsewhere: pod {pod}: {reason}")
            }
            Rejection::NeedsMultipleNodes { count } => {
                write!(f, "can't remove without creating {count} nodes")
            }
            Rejection::NoCheaperReplacement { price, cheapest } => {
                write!(f, "no cheaper replacement: now ${price:.4}/h")?;
                match cheapest {
                    Some((name, p)) => write!(
                        f,
                        ", the cheapest that holds the pods is {name} at ${p:.4}/h ({:+.4} $/h)",
                        p - price
                    ),
                    None => f.write_str(", and no option that holds the pods"),
                }
            }
            Rejection::SpotToSpotDisabled => f.write_str(
                "spot-to-spot consolidation is disabled (feature gate SpotToSpotConsolidation)",
            ),
            Rejection::TooFewSpotOptions { found } => write!(
                f,
                "only {found} cheaper spot instance types (spot-to-spot needs {MIN_SPOT_TO_SPOT_OPTIONS})"
            ),
            Rejection::BalancedScoreTooLow { score } => {
                write!(
                    f,
                    "balanced policy rejected the move (score {:.2} < {BALANCED_THRESHOLD})",
                    score.score
                )
            }
        }
    }
}

impl Rejection {
    pub(crate) fn code(&self) -> &'static str {
        match self {
            Rejection::PodsDoNotFit { .. } => "pods-do-not-fit",
            Rejection::NeedsMultipleNodes { .. } => "needs-multiple-nodes",
            Rejection::NoCheaperReplacement { .. } => "no-cheaper-replacement",
            Rejection::SpotToSpotDisabled => "spot-to-spot-disabled",
            Rejection::TooFewSpotOptions { .. } => "too-few-spot-options",
            Rejection::BalancedScoreTooLow { .. } => "balanced-rejected",
        }
    }
}

fn replacement(
    claim: &SimulatedClaim,
    options: Vec<ReplacementOption>,
    force_spot: bool,
) -> Replacement {
    let mut requirements: Vec<Requirement> = claim
        .requirements
        .iter()
        .filter(|r| r.key != labels::INSTANCE_TYPE)
        .cloned()
        .collect();
    let names: Vec<String> = options.iter().map(|o| o.instance_type.clone()).collect();
    requirements.push(Requirement {
        key: labels::INSTANCE_TYPE.into(),
        operator: Operator::In,
        values: names.as_slice().into(),
        min_values: None,
    });
    let price = if force_spot {
        options
            .iter()
            .filter_map(|o| o.spot_price)
            .fold(f64::INFINITY, f64::min)
    } else {
        options
            .iter()
            .map(|o| o.cheapest_price)
            .fold(f64::INFINITY, f64::min)
    };
    if force_spot {
        requirements.retain(|r| r.key != labels::CAPACITY_TYPE);
        requirements.push(Requirement::single(
            labels::CAPACITY_TYPE,
            labels::CAPACITY_TYPE_SPOT,
        ));
    }
    Replacement {
        nodepool: claim.nodepool.clone(),
        requirements,
        instance_types: names,
        price,
    }
}

/// Karpenter's computeConsolidation for one set of candidates.
pub(crate) fn compute(
    snapshot: &Snapshot,
    simulator: &dyn Simulator,
    candidates: &[&Candidate<'_>],
    method: Method,
    features: Features,
) -> Result<Command, Rejection> {
    let j = job(candidates);
    let sim = simulator.simulate(snapshot, Purpose::Consolidation, &j.without, &j.pods);
    decide(&sim, candidates, method, features)
}

/// The simulation consolidating `candidates` needs: their nodes gone, their pods moved.
pub(crate) fn job<'p>(candidates: &[&Candidate<'p>]) -> Job<'p> {
    Job {
        without: candidates.iter().map(|c| c.node.name.clone()).collect(),
        pods: candidates
            .iter()
            .flat_map(|c| c.reschedulable_pods.iter().copied())
            .collect(),
    }
}

/// The rejection for candidates costing `price` when no option is cheaper, naming the
/// cheapest of `options` at the price `price_of` compares (ties: name).
fn no_cheaper(
    price: f64,
    options: &[ReplacementOption],
    price_of: fn(&ReplacementOption) -> Option<f64>,
) -> Rejection {
    let cheapest = options
        .iter()
        .filter_map(|o| Some((o.instance_type.clone(), price_of(o)?)))
        .min_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    Rejection::NoCheaperReplacement { price, cheapest }
}

/// What the simulation of [`job`] means for `candidates`: a command or why not.
pub(crate) fn decide(
    sim: &Simulation,
    candidates: &[&Candidate<'_>],
    method: Method,
    features: Features,
) -> Result<Command, Rejection> {
    if let Some((pod, reason)) = sim.failures.first() {
        return Err(Rejection::PodsDoNotFit {
            pod: pod.clone(),
            reason: reason.clone(),
        });
    }
    let targets: Vec<Target> = candidates.iter().map(|c| target(c)).collect();
    match sim.new_claims.len() {
        0 => return Ok(Command::new(method, targets, vec![])),
        1 => {}
        n => return Err(Rejection::NeedsMultipleNodes { count: n }),
    }
    let claim = &sim.new_claims[0];
    let total: f64 = candidates.iter().map(|c| c.price).sum();
    let all_spot = candidates
        .iter()
        .all(|c| c.capacity_type == Some(CapacityType::Spot));
    let allows_spot = claim.capacity_types.contains(&CapacityType::Spot);
    if all_spot && allows_spot {
        if !features.spot_to_spot_consolidation {
            return Err(Rejection::SpotToSpotDisabled);
        }
        let mut cheaper: Vec<ReplacementOption> = claim
            .options
            .iter()
            .filter(|o| o.spot_price.is_some_and(|p| p < total))
            .cloned()
            .collect();
        cheaper.sort_by(|a, b| {
            a.spot_price
                .unwrap_or(f64::INFINITY)
                .total_cmp(&b.spot_price.unwrap_or(f64::INFINITY))
                .then_with(|| a.instance_type.cmp(&b.instance_type))
        });
        if cheaper.is_empty() {
            return Err(no_cheaper(total, &claim.options, |o| o.spot_price));
        }
        if method == Method::SingleNodeConsolidation {
            if cheaper.len() < MIN_SPOT_TO_SPOT_OPTIONS {
                return Err(Rejection::TooFewSpotOptions {
                    found: cheaper.len(),
                });
            }
            cheaper.truncate(MIN_SPOT_TO_SPOT_OPTIONS);
        }
        return Ok(Command::new(
            method,
            targets,
            vec![replacement(claim, cheaper, true)],
        ));
    }
    let mut options: Vec<ReplacementOption> = claim
        .options
        .iter()
        .filter(|o| o.worst_launch_price < total)
        .cloned()
        .collect();
    // Replacing a node with its own type (or a pricier one) only churns.
    let removed_types: BTreeSet<&str> = candidates.iter().map(|c| &*c.instance_type).collect();
    if method == Method::MultiNodeConsolidation
        && let Some(floor) = candidates
            .iter()
            .filter(|c| options.iter().any(|o| *o.instance_type == *c.instance_type))
            .map(|c| c.price)
            .min_by(f64::total_cmp)
    {
        options.retain(|o| {
            !removed_types.contains(o.instance_type.as_str()) && o.cheapest_price < floor
        });
    }
    if options.is_empty() {
        return Err(no_cheaper(total, &claim.options, |o| {
            Some(o.worst_launch_price)
        }));
    }
    let force_spot = allows_spot && claim.capacity_types.contains(&CapacityType::OnDemand);
    if force_spot {
        options.retain(|o| o.spot_price.is_some());
        if options.is_empty() {
            return Err(no_cheaper(total, &claim.options, |o| o.spot_price));
        }
    }
    Ok(Command::new(
        method,
        targets,
        vec![replacement(claim, options, force_spot)],
    ))
}

/// The Balanced policy's score for a command: share of the NodePool's cost saved per share of
/// its disruption caused. `pool_cost` and `pool_disruption` sum over the pool's nodes.
pub(crate) fn balanced_score(
    command: &Command,
    moved_disruption: f64,
    pool_cost: f64,
    pool_disruption: f64,
) -> f64 {
    if moved_disruption <= 0.0 {
        return f64::INFINITY;
    }
    if pool_cost <= 0.0 || pool_disruption <= 0.0 {
        return 0.0;
    }
    (command.savings_per_hour / pool_cost) / (moved_disruption / pool_disruption)
}

/// What the Balanced policy made of a move for the NodePool it weighs: the score and the
/// two shares it divides, the NodePool's cost saved and its disruption cost caused.
#[derive(Clone, Debug, PartialEq)]
pub struct BalancedScore {
    /// The NodePool weighed.
    pub nodepool: String,
    /// `savings_fraction / disruption_fraction`; the move passes at [`BALANCED_THRESHOLD`]
    /// or more.
    pub score: f64,
    /// The move's savings per hour over the hourly price of the NodePool's candidates.
    pub savings_fraction: f64,
    /// The reschedule cost the move causes over that of the NodePool's candidates.
    pub disruption_fraction: f64,
}

impl BalancedScore {
    pub(crate) fn approved(&self) -> bool {
        self.score >= BALANCED_THRESHOLD
    }
}

/// A share of `total`, 0 when there is no total to share.
fn share(part: f64, total: f64) -> f64 {
    if total > 0.0 { part / total } else { 0.0 }
}

/// Applies the Balanced policy when the candidates' NodePool uses it; an approved command
/// carries its score.
pub(crate) fn approve_balanced(
    mut command: Command,
    candidates: &[&Candidate<'_>],
    all: &[Candidate<'_>],
) -> Result<Command, Rejection> {
    let Some(first) = candidates.first() else {
        return Ok(command);
    };
    if first.nodepool.disruption.consolidation_policy != ConsolidationPolicy::Balanced {
        return Ok(command);
    }
    let pool = &first.nodepool.name;
    let pool_cost: f64 = all
        .iter()
        .filter(|c| &c.nodepool.name == pool)
        .map(|c| c.price)
        .sum();
    let pool_disruption: f64 = all
        .iter()
        .filter(|c| &c.nodepool.name == pool)
        .map(|c| c.reschedule_cost)
        .sum();
    let moved: f64 = candidates.iter().map(|c| c.reschedule_cost).sum();
    let score = BalancedScore {
        nodepool: pool.clone(),
        score: balanced_score(&command, moved, pool_cost, pool_disruption),
        savings_fraction: share(command.savings_per_hour, pool_cost),
        disruption_fraction: share(moved, pool_disruption),
    };
    if score.approved() {
        command.balanced = Some(score);
        Ok(command)
    } else {
        Err(Rejection::BalancedScoreTooLow { score })
    }
}
