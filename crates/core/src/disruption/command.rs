//! Disruption decisions as data. The executor applies them; `core` never acts.

use std::fmt;

use crate::model::DisruptionReason;
use crate::requirements::Requirement;

/// The method that produced a command, in the order Karpenter runs them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Method {
    /// Claims past their `expireAfter`: forceful, no budget applies.
    Expiration,
    /// Candidates with no pod to move, deleted.
    Emptiness,
    /// Claims that no longer match what their NodePool would launch today, replaced if their
    /// pods need it.
    Drift,
    /// Several candidates removed at once, with at most one cheaper replacement.
    MultiNodeConsolidation,
    /// One candidate removed, or replaced by a cheaper node.
    SingleNodeConsolidation,
}

impl Method {
    /// The method's name in events, metrics and `nodewright explain`.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Expiration => "expiration",
            Method::Emptiness => "emptiness",
            Method::Drift => "drift",
            Method::MultiNodeConsolidation => "multi-node-consolidation",
            Method::SingleNodeConsolidation => "single-node-consolidation",
        }
    }

    /// The `consolidation_type` metric label: empty, multi, single, or "" (drift, expiration).
    pub fn consolidation_type(self) -> &'static str {
        match self {
            Method::Emptiness => "empty",
            Method::MultiNodeConsolidation => "multi",
            Method::SingleNodeConsolidation => "single",
            Method::Drift | Method::Expiration => "",
        }
    }

    /// The metric `reason` label.
    pub fn reason_label(self) -> &'static str {
        match self {
            Method::Expiration => "expired",
            Method::Emptiness => "empty",
            Method::Drift => "drifted",
            Method::MultiNodeConsolidation | Method::SingleNodeConsolidation => "underutilized",
        }
    }

    /// The budget reason this method consumes; expiration is forceful and has none.
    pub(crate) fn budget_reason(self) -> Option<DisruptionReason> {
        match self {
            Method::Expiration => None,
            Method::Emptiness => Some(DisruptionReason::Empty),
            Method::Drift => Some(DisruptionReason::Drifted),
            Method::MultiNodeConsolidation | Method::SingleNodeConsolidation => {
                Some(DisruptionReason::Underutilized)
            }
        }
    }
}

/// Whether a command only removes its targets or launches replacements first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Remove the targets; their pods fit elsewhere.
    Delete,
    /// Launch the replacements, then remove the targets.
    Replace,
}

impl Decision {
    /// `delete` or `replace`, as logs and `nodewright explain` show it.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Delete => "delete",
            Decision::Replace => "replace",
        }
    }
}

/// A node chosen for disruption.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// The Node's name.
    pub node: String,
    /// The name of the Node's NodeClaim.
    pub nodeclaim: String,
    /// The NodePool the claim belongs to.
    pub nodepool: String,
    /// The node's `node.kubernetes.io/instance-type` label; empty when it has none.
    pub instance_type: String,
    /// The node's `topology.kubernetes.io/zone` label; empty when it has none.
    pub zone: String,
    /// The node's `karpenter.sh/capacity-type` label; empty when it has none.
    pub capacity_type: String,
    /// US dollars per hour of the node's offering; 0 when it is unknown.
    pub price: f64,
    /// `namespace/name` of the pods that will be evicted.
    pub pods: Vec<String>,
}

#[cfg(test)]
impl Target {
    /// A target for tests: claim `claim` on node `n-<claim>`, an on-demand `large` in zone
    /// `a` of NodePool `default` at $0.4/h, no pods.
    pub(crate) fn for_claim(claim: &str) -> Target {
        Target {
            node: format!("n-{claim}"),
            nodeclaim: claim.into(),
            nodepool: "default".into(),
            instance_type: "large".into(),
            zone: "a".into(),
            capacity_type: "on-demand".into(),
            price: 0.4,
            pods: Vec::new(),
        }
    }
}

/// A node to launch before the targets go.
#[derive(Clone, Debug, PartialEq)]
pub struct Replacement {
    /// The NodePool that launches it.
    pub nodepool: String,
    /// The requirements to launch the NodeClaim with, as the simulation made them; a
    /// consolidation's instance-type requirement lists `instance_types`.
    pub requirements: Vec<Requirement>,
    /// Instance-type options, cheapest first.
    pub instance_types: Vec<String>,
    /// The cheapest available offering among the options.
    pub price: f64,
}

/// One disruption decision: the nodes to remove, what to launch first, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Command {
    /// The method that chose it.
    pub method: Method,
    /// Delete, or replace first.
    pub decision: Decision,
    /// The nodes to remove.
    pub targets: Vec<Target>,
    /// The nodes to launch before the targets go; empty for a delete.
    pub replacements: Vec<Replacement>,
    /// Dollars per hour saved: targets' prices minus replacements' prices.
    pub savings_per_hour: f64,
    /// Forceful commands (expiration) skip budgets and do not wait for replacements.
    pub(crate) forceful: bool,
    /// What the Balanced policy made of this move, when its NodePool uses that policy.
    pub(crate) balanced: Option<super::consolidation::BalancedScore>,
}

impl Command {
    /// Whether the command starts as soon as it is planned. Expiration is forceful, and
    /// upstream's drift method has no validation delay; every other method waits
    /// (`DisruptionTimings::validation_delay`, 15 s) and is re-checked before it starts. The
    /// controller and the simulator both split a round's commands by this.
    pub fn starts_at_once(&self) -> bool {
        self.forceful || self.method == Method::Drift
    }

    pub(crate) fn new(
        method: Method,
        targets: Vec<Target>,
        replacements: Vec<Replacement>,
    ) -> Command {
        let removed: f64 = targets.iter().map(|t| t.price).sum();
        let added: f64 = replacements.iter().map(|r| r.price).sum();
        Command {
            method,
            decision: if replacements.is_empty() {
                Decision::Delete
            } else {
                Decision::Replace
            },
            targets,
            replacements,
            savings_per_hour: removed - added,
            forceful: method == Method::Expiration,
            balanced: None,
        }
    }
}

impl fmt::Display for Command {
    /// `<method>: <decision>: nodepools=[…]: [nodes] -> [N replacement(s)] (savings: $X.XX/h)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut pools: Vec<&str> = self.targets.iter().map(|t| t.nodepool.as_str()).collect();
        pools.sort();
        pools.dedup();
        let nodes: Vec<String> = self
            .targets
            .iter()
            .map(|t| format!("{}/{}/{}", t.node, t.instance_type, t.capacity_type))
            .collect();
        let replacements: Vec<String> = self
            .replacements
            .iter()
            .map(|r| r.instance_types.first().cloned().unwrap_or_default())
            .collect();
        write!(
            f,
            "{}: {}: nodepools=[{}]: [{}] -> [{}] (savings: ${:.4}/h)",
            self.method.as_str(),
            self.decision.as_str(),
            pools.join(", "),
            nodes.join(", "),
            replacements.join(", "),
            self.savings_per_hour
        )
    }
}
