//! A round's budget bookkeeping: nodes taken earlier in the round count as disrupting for
//! every later decision, exactly as they would once their command is running.

use std::collections::BTreeMap;

use super::Verdict;
use crate::disruption::budgets::allowed_disruptions;
use crate::model::{DisruptionReason, NodePool, Snapshot};
use crate::scheduling::intern::FastMap;

pub(super) struct Budgets<'s> {
    snapshot: &'s Snapshot,
    /// The first NodePool of each name, as a scan of the list would find it.
    pub(super) pools: FastMap<&'s str, &'s NodePool>,
    counts: BTreeMap<String, (u32, u32)>,
    taken: BTreeMap<String, u32>,
}

impl<'s> Budgets<'s> {
    /// `counts` are the snapshot's [`crate::disruption::candidates::budget_node_counts`].
    pub(super) fn new(snapshot: &'s Snapshot, counts: BTreeMap<String, (u32, u32)>) -> Self {
        let mut pools: FastMap<&str, &NodePool> = FastMap::default();
        for p in &snapshot.nodepools {
            pools.entry(p.name.as_str()).or_insert(p);
        }
        Budgets {
            snapshot,
            pools,
            counts,
            taken: BTreeMap::new(),
        }
    }

    /// How many more nodes of `pool` may be disrupted for `reason`, and the budget that binds.
    pub(super) fn remaining(&self, pool: &str, reason: DisruptionReason) -> (u32, String) {
        let Some(np) = self.pools.get(pool).copied() else {
            return (0, String::new());
        };
        let (count, disrupting) = self.counts.get(pool).copied().unwrap_or((0, 0));
        let taken = self.taken.get(pool).copied().unwrap_or(0);
        let a = allowed_disruptions(np, reason, count, disrupting + taken, self.snapshot.now);
        (a.allowed, a.binding.unwrap_or_default())
    }

    /// Takes one node from the budget; `Err(binding)` when it is exhausted.
    pub(super) fn take(&mut self, pool: &str, reason: DisruptionReason) -> Result<(), String> {
        let (left, binding) = self.remaining(pool, reason);
        if left == 0 {
            return Err(binding);
        }
        *self.taken.entry(pool.to_string()).or_default() += 1;
        Ok(())
    }

    /// Records nodes taken by a command whose budget was checked another way.
    pub(super) fn record(&mut self, pool: &str, n: u32) {
        *self.taken.entry(pool.to_string()).or_default() += n;
    }
}

/// The verdict of a node whose NodePool has no budget left for `reason`.
pub(super) fn exhausted(node: &str, binding: &str, reason: DisruptionReason) -> Verdict {
    Verdict::new(
        node,
        "budget-exhausted",
        format!("budget {binding} exhausted for reason {}", reason.as_str()),
    )
}
