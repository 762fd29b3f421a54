//! Which candidates the consolidation methods may take this round: non-empty, their
//! NodePool's policy allows it (`WhenEmptyOrUnderutilized`), and within its `Underutilized`
//! budget. Those past the budget are still simulated, so their verdict says what
//! consolidating them would do.

use super::{Round, Verdict};
use crate::disruption::candidates::Candidate;
use crate::model::{ConsolidationPolicy, DisruptionReason};
use crate::scheduling::intern::FastMap;

pub(super) struct Admitted<'r, 's> {
    /// Within budget, in rank order.
    pub within: Vec<&'r Candidate<'s>>,
    /// Past their NodePool's budget, with the budget that binds.
    pub over_budget: Vec<(&'r Candidate<'s>, String)>,
}

/// `ranked` are the round's candidates, highest savings ratio first.
pub(super) fn admit<'r, 's>(
    round: &mut Round<'s>,
    ranked: &[&'r Candidate<'s>],
) -> Admitted<'r, 's> {
    let mut out = Admitted {
        within: Vec::new(),
        over_budget: Vec::new(),
    };
    // Per NodePool: its Underutilized allowance (nothing is taken during this pass) and how
    // many candidates it already admitted.
    let mut admitted: FastMap<&str, ((u32, String), u32)> = FastMap::default();
    for &c in ranked
        .iter()
        .filter(|c| !round.taken.contains(&c.node.name) && !c.is_empty())
    {
        if let Some(v) = policy_refusal(c) {
            round.verdicts.set(&c.node.name, || v);
            continue;
        }
        let ((left, binding), already) =
            admitted.entry(c.nodepool.name.as_str()).or_insert_with(|| {
                let allowance = round
                    .budgets
                    .remaining(&c.nodepool.name, DisruptionReason::Underutilized);
                (allowance, 0)
            });
        if *left <= *already {
            out.over_budget.push((c, binding.clone()));
            continue;
        }
        *already += 1;
        out.within.push(c);
    }
    out
}

/// The verdict of a candidate its NodePool's policy keeps from consolidation (`WhenEmpty`).
pub(super) fn policy_refusal(c: &Candidate<'_>) -> Option<Verdict> {
    (c.nodepool.disruption.consolidation_policy == ConsolidationPolicy::WhenEmpty).then(|| {
        Verdict::new(
            &c.node.name,
            "policy-when-empty",
            format!(
                "NodePool {} consolidates only empty nodes (WhenEmpty)",
                c.nodepool.name
            ),
        )
    })
}
