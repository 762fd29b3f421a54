use std::collections::BTreeMap;
use std::time::Duration;

use crate::requirements::Requirement;
use crate::resources::Resources;
use crate::taints::Taint;

/// The node class a NodePool's claims use.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct NodeClassRef {
    /// The node class's API group (`karpenter.k8s.aws` for an `EC2NodeClass`).
    pub group: String,
    /// The node class's kind (`EC2NodeClass`).
    pub kind: String,
    /// The node class's name.
    pub name: String,
}

/// A NodePool's `consolidationPolicy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ConsolidationPolicy {
    /// Only empty nodes are consolidated.
    WhenEmpty,
    /// Empty and underutilized nodes are consolidated (upstream's default).
    #[default]
    WhenEmptyOrUnderutilized,
    /// As `WhenEmptyOrUnderutilized`, but a move must score at least
    /// [`BALANCED_THRESHOLD`](crate::disruption::BALANCED_THRESHOLD): its share of the
    /// NodePool's cost saved over its share of disruption caused.
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
    /// The node has no pod to move (emptiness).
    Empty,
    /// Its pods fit elsewhere or on a cheaper node (consolidation).
    Underutilized,
    /// It no longer matches what its NodePool would launch today (drift).
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
    /// At most this many nodes.
    Count(u32),
    /// 0..=100, rounded up against the node count.
    Percent(u32),
}

/// One disruption budget of a NodePool.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Budget {
    /// `nodes`: how many of the NodePool's nodes may be disrupting at once.
    pub nodes: BudgetNodes,
    /// Cron (UTC); `None` means always active.
    pub schedule: Option<String>,
    /// How long the budget is active from each time `schedule` fires; a scheduled budget
    /// without one allows nothing.
    pub duration: Option<Duration>,
    /// Empty means every reason.
    pub reasons: Vec<DisruptionReason>,
}

/// A NodePool's `disruption` block.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Disruption {
    /// `consolidationPolicy`: which nodes consolidation may take.
    pub consolidation_policy: ConsolidationPolicy,
    /// `None` is `Never`: no consolidation at all, emptiness included.
    pub consolidate_after: Option<Duration>,
    /// `budgets`: for a reason, the smallest allowance among the active budgets that cover
    /// it binds.
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
    /// `metadata.labels` every claim (and its Node) gets.
    pub labels: BTreeMap<String, String>,
    /// `metadata.annotations` every claim gets.
    pub annotations: BTreeMap<String, String>,
    /// `spec.taints` every claim's Node gets.
    pub taints: Vec<Taint>,
    /// `spec.startupTaints`: taints the Node starts with and something else removes; pods
    /// need not tolerate them.
    pub startup_taints: Vec<Taint>,
    /// `spec.requirements` every instance launched must satisfy.
    pub requirements: Vec<Requirement>,
    /// `spec.nodeClassRef`: the cloud-specific settings of the claims' instances.
    pub node_class: NodeClassRef,
    /// `None` is `Never`.
    pub expire_after: Option<Duration>,
    /// `None` waits forever.
    pub termination_grace_period: Option<Duration>,
}

/// A NodePool: the template of the claims it makes, its limits and its disruption rules.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodePool {
    /// `metadata.name`.
    pub name: String,
    /// Higher first; unset is 0.
    pub weight: i32,
    /// `spec.template`.
    pub template: NodeClaimTemplate,
    /// `spec.disruption`.
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
