use std::collections::BTreeMap;
use std::time::Duration;

use crate::requirements::Requirement;
use crate::resources::Resources;
use crate::taints::Taint;

/// The node class a NodePool's claims use.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct NodeClassRef {
    pub group: String,
    pub kind: String,
    pub name: String,
}

/// A NodePool's `consolidationPolicy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ConsolidationPolicy {
    WhenEmpty,
    #[default]
    WhenEmptyOrUnderutilized,
    Balanced,
}

impl ConsolidationPolicy {
    /// The spelling of `spec.disruption.consolidationPolicy`, as upstream's metric labels
    /// carry it.
    pub fn as_str(self) -> &'static str {
        match self {
            ConsolidationPolicy::WhenEmpty => "WhenEmpty",
            ConsolidationPolicy::WhenEmptyOrUnderutilized => "WhenEmptyOrUnderutilized",
            ConsolidationPolicy::Balanced => "Balanced",
        }
    }
}

/// Why a node is voluntarily disrupted; budgets may be scoped to some of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DisruptionReason {
    Empty,
    Underutilized,
    Drifted,
}

impl DisruptionReason {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            DisruptionReason::Empty => "Empty",
            DisruptionReason::Underutilized => "Underutilized",
            DisruptionReason::Drifted => "Drifted",
        }
    }
}

/// How many nodes a disruption budget allows: a count or a percentage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BudgetNodes {
    Count(u32),
    /// 0..=100, rounded up against the node count.
    Percent(u32),
}

/// One disruption budget of a NodePool.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Budget {
    pub nodes: BudgetNodes,
    /// Cron (UTC); `None` means always active.
    pub schedule: Option<String>,
    pub duration: Option<Duration>,
    /// Empty means every reason.
    pub reasons: Vec<DisruptionReason>,
}

/// A NodePool's `disruption` block.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Disruption {
    pub consolidation_policy: ConsolidationPolicy,
    /// `None` is `Never`: no consolidation at all, emptiness included.
    pub consolidate_after: Option<Duration>,
    pub budgets: Vec<Budget>,
}

impl Default for Disruption {
    fn default() -> Self {
        Disruption {
            consolidation_policy: ConsolidationPolicy::WhenEmptyOrUnderutilized,
            consolidate_after: Some(Duration::ZERO),
            budgets: vec![Budget {
                nodes: BudgetNodes::Percent(10),
                schedule: None,
                duration: None,
                reasons: vec![],
            }],
        }
    }
}

/// What every NodeClaim of a NodePool starts from.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeClaimTemplate {
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub startup_taints: Vec<Taint>,
    pub requirements: Vec<Requirement>,
    pub node_class: NodeClassRef,
    /// `None` is `Never`.
    pub expire_after: Option<Duration>,
    /// `None` waits forever.
    pub termination_grace_period: Option<Duration>,
}

/// A NodePool: the template of the claims it makes, its limits and its disruption rules.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodePool {
    pub name: String,
    /// Higher first; unset is 0.
    pub weight: i32,
    pub template: NodeClaimTemplate,
    pub disruption: Disruption,
    /// May include the `nodes` pseudo-resource. Absent resources are unlimited.
    pub limits: Resources,
    /// Static-capacity mode when set.
    pub replicas: Option<i64>,
    /// The drift hash of the template (`karpenter.sh/nodepool-hash`).
    pub hash: String,
    /// NodePools that are not Ready are not used for scheduling.
    pub ready: bool,
}
