//! Every disruption method's verdict for one node (`nodewright explain node`): what
//! expiration, drift, emptiness and both consolidations would each say of it on this snapshot,
//! not only the first refusal a round gives.
//!
//! Each method is asked of the node alone, with the pieces the round runs: candidate
//! selection and its blockers for the method's class, the budgets, the drift reasons, the same
//! simulations and consolidation's decision. Multi-node consolidation is a search over ranked
//! candidates, so its answer is the round's own: whether the round's multi-node command takes
//! the node.
//!
//! Offers the per-method verdicts for one node; not a round (use [`super::plan`] for that).

use std::collections::BTreeSet;
use std::time::Duration;

use super::budget::{Budgets, exhausted};
use super::{
    DisruptionPlan, Settings, Verdict, drift, expiration, plan, single_node, underutilized,
};
use crate::disruption::candidates::{
    Candidate, MethodClass, budget_node_counts, select, select_only,
};
use crate::disruption::command::{Command, Decision, Method};
use crate::disruption::consolidation;
use crate::disruption::drift::drift_reason;
use crate::disruption::simulate::{Purpose, Simulator};
use crate::model::{DisruptionReason, Snapshot};

/// One method's verdict for the node: `code` is stable for machines (the round's codes, plus
/// `not-expired`, `expired`, `never-expires`, `not-drifted`, `drifted`, `not-empty`,
/// `empty`, `consolidatable`, `not-in-command`, `no-command`); `message` is for people.
#[derive(Clone, Debug, PartialEq)]
pub struct MethodVerdict {
    /// The method asked.
    pub method: Method,
    /// Stable machine-readable code, one of those listed on [`MethodVerdict`].
    pub code: String,
    /// The same, for people.
    pub message: String,
}

/// What one round does with the node, and what each method alone says of it.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeExplanation {
    /// The node's verdict in a full round ([`plan`]).
    pub round: Option<Verdict>,
    /// The round's commands that take the node.
    pub commands: Vec<Command>,
    /// In Karpenter's order: expiration, drift, emptiness, multi-node and single-node
    /// consolidation.
    pub methods: Vec<MethodVerdict>,
}

/// Explains node `name` of `snapshot`; `None` when the snapshot has no such node.
pub fn explain_node(
    snapshot: &Snapshot,
    simulator: &dyn Simulator,
    settings: Settings,
    name: &str,
) -> Option<NodeExplanation> {
    snapshot.nodes.iter().find(|n| n.name == name)?;
    let settings = Settings {
        commands_only: false,
        ..settings
    };
    let round = plan(snapshot, simulator, settings);
    let ask = Ask {
        snapshot,
        simulator,
        settings,
        name,
        budgets: Budgets::new(snapshot, budget_node_counts(snapshot)),
    };
    let methods = vec![
        ask.expiration(),
        ask.drift(),
        ask.emptiness(),
        ask.multi_node(&round),
        ask.single_node(),
    ];
    Some(NodeExplanation {
        round: round.verdicts.iter().find(|v| v.node == name).cloned(),
        commands: round
            .commands
            .into_iter()
            .filter(|c| c.targets.iter().any(|t| t.node == name))
            .collect(),
        methods,
    })
}

/// The node and what every method's question reads.
struct Ask<'s> {
    snapshot: &'s Snapshot,
    simulator: &'s dyn Simulator,
    settings: Settings,
    name: &'s str,
    budgets: Budgets<'s>,
}

fn verdict(method: Method, code: &str, message: impl Into<String>) -> MethodVerdict {
    MethodVerdict {
        method,
        code: code.to_string(),
        message: message.into(),
    }
}

fn from_round(method: Method, v: Verdict) -> MethodVerdict {
    verdict(method, &v.code, v.message)
}

impl<'s> Ask<'s> {
    /// The node as a candidate of `class`, or the verdict of what blocks it.
    fn candidate(
        &self,
        method: Method,
        class: MethodClass,
    ) -> Result<Candidate<'s>, MethodVerdict> {
        let mut s = select_only(self.snapshot, class, &[self.name]);
        match (s.candidates.pop(), s.blocked.pop()) {
            (Some(c), _) => Ok(c),
            (None, Some((_, b))) => Err(verdict(method, b.code(), b.to_string())),
            (None, None) => Err(verdict(method, "not-managed", "not a managed node")),
        }
    }

    /// The budget of the node's NodePool that binds for `reason`, when it has nothing left.
    fn exhausted(&self, c: &Candidate<'_>, reason: DisruptionReason) -> Option<String> {
        let (left, binding) = self.budgets.remaining(&c.nodepool.name, reason);
        (left == 0).then_some(binding)
    }

    /// [`Ask::exhausted`] as the method's verdict.
    fn no_budget(
        &self,
        method: Method,
        c: &Candidate<'_>,
        reason: DisruptionReason,
    ) -> Option<MethodVerdict> {
        let binding = self.exhausted(c, reason)?;
        Some(from_round(method, exhausted(self.name, &binding, reason)))
    }

    /// Forceful: no blockers, no budgets; only the claim's age against its `expireAfter`.
    fn expiration(&self) -> MethodVerdict {
        let m = Method::Expiration;
        let Some(claim) = self
            .snapshot
            .node_claims
            .iter()
            .find(|c| c.node_name.as_deref() == Some(self.name))
        else {
            return verdict(m, "no-nodeclaim", "node has no NodeClaim");
        };
        if claim.deletion_timestamp.is_some() {
            return verdict(m, "deleting", "its NodeClaim is already being deleted");
        }
        let Some(after) = expiration::expire_after(&self.budgets.pools, claim) else {
            return verdict(m, "never-expires", "never expires (expireAfter: Never)");
        };
        let age = self.snapshot.now.since(claim.creation_timestamp);
        match after.checked_sub(age).filter(|left| !left.is_zero()) {
            Some(left) => verdict(
                m,
                "not-expired",
                format!("expires in {} (expireAfter {})", short(left), short(after)),
            ),
            None => verdict(
                m,
                "expired",
                format!(
                    "expired (expireAfter {}): replaced now, whatever protects it",
                    short(after)
                ),
            ),
        }
    }

    /// Eventual: pod blockers only without a termination grace period; the drift reason, the
    /// `Drifted` budget, and whether the pods fit elsewhere or on replacements.
    fn drift(&self) -> MethodVerdict {
        let m = Method::Drift;
        let c = match self.candidate(m, MethodClass::Eventual) {
            Ok(c) => c,
            Err(v) => return v,
        };
        let types = self
            .snapshot
            .instance_types
            .get(&c.nodepool.name)
            .map_or(&[][..], |t| &t[..]);
        let Some(reason) = drift_reason(c.claim, c.node, c.nodepool, types, self.snapshot.now)
        else {
            return verdict(m, "not-drifted", "not drifted");
        };
        if let Some(v) = self.no_budget(m, &c, DisruptionReason::Drifted) {
            return v;
        }
        let without = BTreeSet::from([self.name.to_string()]);
        let sim = self.simulator.simulate(
            self.snapshot,
            Purpose::Drift,
            &without,
            &c.reschedulable_pods,
        );
        if let Some(v) = drift::unfit(self.name, &reason, &sim) {
            return from_round(m, v);
        }
        let cmd = Command::new(
            m,
            vec![consolidation::target(&c)],
            drift::replacements(&sim),
        );
        verdict(
            m,
            "drifted",
            format!("drifted ({reason}): {}", outcome(&cmd)),
        )
    }

    /// Graceful: the node's blockers and `consolidateAfter`, its pods, the `Empty` budget.
    fn emptiness(&self) -> MethodVerdict {
        let m = Method::Emptiness;
        let c = match self.candidate(m, MethodClass::Graceful) {
            Ok(c) => c,
            Err(v) => return v,
        };
        if !c.is_empty() {
            let pods: Vec<String> = c.reschedulable_pods.iter().map(|p| p.key()).collect();
            return verdict(
                m,
                "not-empty",
                format!(
                    "not empty: {} pod(s) to move ({})",
                    pods.len(),
                    pods.join(", ")
                ),
            );
        }
        self.no_budget(m, &c, DisruptionReason::Empty)
            .unwrap_or_else(|| verdict(m, "empty", "empty: would be deleted"))
    }

    /// What both consolidations ask first: a graceful candidate, not empty (emptiness's), and
    /// a policy that consolidates it; with the binding budget when `Underutilized` has none
    /// left.
    fn consolidation_candidate(
        &self,
        m: Method,
    ) -> Result<(Candidate<'s>, Option<String>), MethodVerdict> {
        let c = self.candidate(m, MethodClass::Graceful)?;
        if c.is_empty() {
            return Err(verdict(
                m,
                "empty",
                "empty: emptiness removes it, not consolidation",
            ));
        }
        if let Some(v) = underutilized::policy_refusal(&c) {
            return Err(from_round(m, v));
        }
        let over = self.exhausted(&c, DisruptionReason::Underutilized);
        Ok((c, over))
    }

    /// Whether the round's multi-node command takes the node.
    fn multi_node(&self, round: &DisruptionPlan) -> MethodVerdict {
        let m = Method::MultiNodeConsolidation;
        match self.consolidation_candidate(m) {
            Err(v) => return v,
            Ok((_, Some(b))) => {
                return from_round(m, exhausted(self.name, &b, DisruptionReason::Underutilized));
            }
            Ok(_) => {}
        }
        let takes = |c: &&Command| c.targets.iter().any(|t| t.node == self.name);
        if let Some(cmd) = round.commands.iter().find(takes) {
            return if cmd.method == m {
                verdict(
                    m,
                    "disrupted",
                    format!(
                        "with {} other node(s): {}",
                        cmd.targets.len() - 1,
                        outcome(cmd)
                    ),
                )
            } else {
                verdict(
                    m,
                    "taken",
                    format!("this round's {} command takes it", cmd.method.as_str()),
                )
            };
        }
        match round.commands.iter().find(|c| c.method == m) {
            Some(cmd) => {
                let nodes: Vec<&str> = cmd.targets.iter().map(|t| t.node.as_str()).collect();
                verdict(
                    m,
                    "not-in-command",
                    format!(
                        "not in this round's multi-node command (of {})",
                        nodes.join(", ")
                    ),
                )
            }
            None => verdict(
                m,
                "no-command",
                "no two or more candidates consolidate together this round",
            ),
        }
    }

    /// The node consolidated alone: deleted, replaced by a cheaper node, or why not (past its
    /// budget: what it would do).
    fn single_node(&self) -> MethodVerdict {
        let m = Method::SingleNodeConsolidation;
        let (c, over) = match self.consolidation_candidate(m) {
            Ok(found) => found,
            Err(v) => return v,
        };
        let job = consolidation::job(&[&c]);
        let sim = self.simulator.simulate(
            self.snapshot,
            Purpose::Consolidation,
            &job.without,
            &job.pods,
        );
        let all = select(self.snapshot, MethodClass::Graceful).candidates;
        // Past its budget it is still simulated, as the round does, to say what it would do.
        match (
            single_node::alone(&sim, &c, self.settings.features, &all),
            over,
        ) {
            (Ok(cmd), Some(b)) => from_round(m, single_node::over_budget(self.name, &b, cmd)),
            (Ok(cmd), None) => verdict(m, "consolidatable", outcome(&cmd)),
            (Err(rej), _) => verdict(m, rej.code(), rej.to_string()),
        }
    }
}

/// What a command would do to the node, for people.
fn outcome(cmd: &Command) -> String {
    match (cmd.decision, cmd.replacements.first()) {
        (Decision::Replace, Some(r)) => format!(
            "would be replaced by {} (${:.4}/h, saves ${:.4}/h)",
            r.instance_types.first().map_or("-", String::as_str),
            r.price,
            cmd.savings_per_hour
        ),
        _ => format!(
            "would be deleted, its pods fitting on other nodes (saves ${:.4}/h)",
            cmd.savings_per_hour
        ),
    }
}

/// `29d23h`, `5h3m`, `3m20s`, `42s`: the two largest units.
fn short(d: Duration) -> String {
    let s = d.as_secs();
    let (days, hours, mins, secs) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    match (days, hours, mins) {
        (0, 0, 0) => format!("{secs}s"),
        (0, 0, _) if secs == 0 => format!("{mins}m"),
        (0, 0, _) => format!("{mins}m{secs}s"),
        (0, _, 0) => format!("{hours}h"),
        (0, _, _) => format!("{hours}h{mins}m"),
        (_, 0, _) => format!("{days}d"),
        _ => format!("{days}d{hours}h"),
    }
}

#[cfg(test)]
mod tests;
