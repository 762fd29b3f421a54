//! Why a node is no candidate: each blocker, its short code for verdicts and events, and the
//! message upstream's events carry.

use super::*;

/// Why a node is not a disruption candidate. `code()` is stable for machines; `Display` is
/// for people.
#[derive(Clone, Debug, PartialEq)]
pub enum Blocker {
    /// The node has no `karpenter.sh/nodepool` label: Karpenter does not manage it.
    NotManaged,
    /// No NodeClaim names the node, by node name or provider ID.
    NoNodeClaim,
    /// The node's `karpenter.sh/nodepool` label names a NodePool the snapshot lacks.
    NodePoolNotFound {
        /// The NodePool the label names.
        nodepool: String,
    },
    /// The node's NodeClaim is not `Initialized` yet.
    NotInitialized,
    /// The node or its NodeClaim has a deletion timestamp.
    Deleting,
    /// The node carries `karpenter.sh/do-not-disrupt: "true"`.
    NodeDoNotDisrupt,
    /// An active pod on the node carries `karpenter.sh/do-not-disrupt`, not lapsed.
    PodDoNotDisrupt {
        /// The pod, `namespace/name`.
        pod: String,
        /// When a duration value's protection lapses; `None` for `"true"` (forever).
        until: Option<Timestamp>,
    },
    /// An active pod on the node has no owner reference: nothing would recreate it.
    PodHasNoController {
        /// The pod, `namespace/name`.
        pod: String,
    },
    /// The PodDisruptionBudget covering a pod on the node allows no eviction now.
    PdbAllowsNoEviction {
        /// The budget, `namespace/name`.
        pdb: String,
        /// The pod, `namespace/name`.
        pod: String,
    },
    /// A pod on the node is selected by more than one PodDisruptionBudget, which the
    /// eviction API refuses.
    MultiplePdbs {
        /// The pod, `namespace/name`.
        pod: String,
        /// The budgets selecting it, `namespace/name`, sorted.
        pdbs: Vec<String>,
    },
    /// The NodePool is static (`spec.replicas`): static capacity keeps its size.
    StaticNodePool {
        /// The static NodePool.
        nodepool: String,
    },
    /// The node's NodePool has `spec.disruption.consolidateAfter: Never` (graceful methods
    /// only).
    ConsolidationDisabled {
        /// The NodePool.
        nodepool: String,
    },
    /// Less than the NodePool's `consolidateAfter` has passed since the claim's last pod
    /// event (graceful methods only).
    ConsolidateAfter {
        /// How much of `consolidateAfter` is still to run.
        remaining: Duration,
    },
}

impl fmt::Display for Blocker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Blocker::NotManaged => f.write_str("node has no karpenter.sh/nodepool label"),
            Blocker::NoNodeClaim => f.write_str("node has no NodeClaim"),
            Blocker::NodePoolNotFound { nodepool } => write!(f, "NodePool {nodepool} not found"),
            Blocker::NotInitialized => f.write_str("node is not initialized"),
            Blocker::Deleting => f.write_str("node is already being deleted"),
            Blocker::NodeDoNotDisrupt => write!(f, "node has {DO_NOT_DISRUPT}=true"),
            Blocker::PodDoNotDisrupt { pod, until: None } => write!(f, "do-not-disrupt pod {pod}"),
            Blocker::PodDoNotDisrupt {
                pod,
                until: Some(t),
            } => {
                write!(
                    f,
                    "do-not-disrupt pod {pod} (until {}s after epoch)",
                    t.unix_seconds()
                )
            }
            Blocker::PodHasNoController { pod } => write!(f, "pod {pod} has no controller"),
            Blocker::PdbAllowsNoEviction { pdb, pod } => {
                write!(f, "PDB {pdb} allows 0 evictions (pod {pod})")
            }
            Blocker::MultiplePdbs { pod, pdbs } => {
                write!(
                    f,
                    "pod {pod} is selected by more than one PDB ({})",
                    pdbs.join(", ")
                )
            }
            Blocker::StaticNodePool { nodepool } => write!(
                f,
                "NodePool {nodepool} is static (spec.replicas): its size is kept, not consolidated"
            ),
            Blocker::ConsolidationDisabled { nodepool } => {
                write!(f, "NodePool {nodepool} has consolidateAfter: Never")
            }
            Blocker::ConsolidateAfter { remaining } => {
                write!(
                    f,
                    "consolidateAfter not elapsed ({}s left)",
                    remaining.as_secs().max(1)
                )
            }
        }
    }
}
