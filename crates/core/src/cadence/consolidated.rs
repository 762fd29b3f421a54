//! The "consolidated" marker: once a disruption round finds nothing to do, the next rounds skip
//! the costly consolidation search until the cluster changes (any pod, node or NodeClaim
//! event, or a NodeClaim becoming consolidatable) or five minutes pass.
//!
//! The cluster state carries a change stamp that every relevant event moves to `now`, and that
//! moves on its own once it is five minutes old. A round that found nothing, with no budget
//! holding it back, records the stamp; while the stamp is still the recorded one, rounds skip.

use std::time::Duration;

use crate::disruption::plan::DisruptionPlan;
use crate::model::NodePool;
use crate::time::Timestamp;

/// How long a "consolidated" verdict holds without any change.
pub(crate) const CONSOLIDATION_STATE_TTL: Duration = Duration::from_secs(5 * 60);

/// Whether the cluster is "consolidated": a round found nothing to do and nothing has changed
/// since (or the verdict has not yet lapsed), so the next round may skip the search.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConsolidationState {
    ttl: Duration,
    /// When the cluster last changed (or the stamp last refreshed itself).
    stamp: Timestamp,
    /// The stamp a round that found nothing saw.
    consolidated_at: Option<Timestamp>,
}

impl ConsolidationState {
    /// A state that counts as changed at `start`, so the first round always runs.
    pub fn new(start: Timestamp) -> Self {
        Self::with_ttl(start, CONSOLIDATION_STATE_TTL)
    }

    pub(crate) fn with_ttl(start: Timestamp, ttl: Duration) -> Self {
        ConsolidationState {
            ttl,
            stamp: start,
            consolidated_at: None,
        }
    }

    /// Something the disruption decision depends on changed at `now`.
    pub fn changed(&mut self, now: Timestamp) {
        self.stamp = self.stamp.max(now);
        self.consolidated_at = None;
    }

    /// The change stamp seen at `now`: refreshed once it is older than the TTL.
    pub(crate) fn stamp(&mut self, now: Timestamp) -> Timestamp {
        if now.since(self.stamp) >= self.ttl {
            self.stamp = now;
        }
        self.stamp
    }

    /// Whether a round at `now` may skip the consolidation search.
    pub fn is_consolidated(&mut self, now: Timestamp) -> bool {
        let stamp = self.stamp(now);
        self.consolidated_at == Some(stamp)
    }

    /// A round at `now` found nothing and no budget constrained it.
    pub fn mark_consolidated(&mut self, now: Timestamp) {
        let stamp = self.stamp(now);
        self.consolidated_at = Some(stamp);
    }

    /// When the current verdict lapses on its own, if one is recorded.
    #[cfg(test)]
    fn expires(&self) -> Option<Timestamp> {
        self.consolidated_at.map(|s| s.plus(self.ttl))
    }
}

/// Whether a round's plan lets the cluster be marked consolidated: it found nothing to do,
/// no search ran out of time before it could say so, and no disruption budget that can open on its own held a node back. A budget's allowance
/// moves only with the cluster (nodes added, disrupted or deleted: all changes that clear the
/// mark) or with its cron schedule, so only NodePools with scheduled budgets keep a
/// budget-held round from being marked.
pub fn plan_is_consolidated(plan: &DisruptionPlan, nodepools: &[NodePool]) -> bool {
    let scheduled = nodepools
        .iter()
        .any(|p| p.disruption.budgets.iter().any(|b| b.schedule.is_some()));
    // A search cut short by its deadline has not shown that there is nothing to do.
    plan.commands.is_empty()
        && plan.timed_out.is_empty()
        && !(scheduled && plan.verdicts.iter().any(|v| v.code == "budget-exhausted"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(secs: i64) -> Timestamp {
        Timestamp(secs * 1000)
    }

    #[test]
    fn the_first_round_always_runs() {
        let mut c = ConsolidationState::new(s(0));
        assert!(!c.is_consolidated(s(0)));
        assert!(!c.is_consolidated(s(10)));
    }

    #[test]
    fn a_round_that_found_nothing_skips_the_next_until_a_change() {
        let mut c = ConsolidationState::new(s(0));
        c.mark_consolidated(s(10));
        assert!(c.is_consolidated(s(20)));
        assert!(c.is_consolidated(s(200)));
        c.changed(s(205));
        assert!(!c.is_consolidated(s(210)));
        c.mark_consolidated(s(210));
        assert!(c.is_consolidated(s(220)));
    }

    #[test]
    fn the_verdict_lapses_five_minutes_after_the_last_change() {
        let mut c = ConsolidationState::new(s(0));
        c.mark_consolidated(s(10));
        assert_eq!(c.expires(), Some(s(300)));
        assert!(c.is_consolidated(s(299)));
        assert!(!c.is_consolidated(s(300)));
        // The refreshed stamp can itself be marked and lapses five minutes later.
        c.mark_consolidated(s(300));
        assert!(c.is_consolidated(s(599)));
        assert!(!c.is_consolidated(s(600)));
    }

    #[test]
    fn a_change_in_the_same_instant_as_the_verdict_clears_it() {
        let mut c = ConsolidationState::new(s(0));
        c.mark_consolidated(s(0));
        assert!(c.is_consolidated(s(0)));
        c.changed(s(0));
        assert!(!c.is_consolidated(s(0)));
    }

    #[test]
    fn a_round_held_by_a_scheduled_budget_is_not_consolidated() {
        use crate::disruption::plan::Verdict;
        use crate::model::{Budget, BudgetNodes};
        let mut plan = DisruptionPlan::default();
        let mut pool = NodePool::default();
        assert!(plan_is_consolidated(&plan, std::slice::from_ref(&pool)));
        plan.verdicts.push(Verdict {
            node: "m".into(),
            code: "budget-exhausted".into(),
            message: String::new(),
        });
        // An always-on budget opens only when the cluster changes.
        assert!(plan_is_consolidated(&plan, std::slice::from_ref(&pool)));
        pool.disruption.budgets.push(Budget {
            nodes: BudgetNodes::Count(0),
            schedule: Some("0 9 * * *".into()),
            duration: Some(Duration::from_secs(3600)),
            reasons: vec![],
        });
        assert!(!plan_is_consolidated(&plan, std::slice::from_ref(&pool)));
    }

    #[test]
    fn a_round_whose_search_ran_out_of_time_is_not_consolidated() {
        use crate::disruption::command::Method;
        let mut plan = DisruptionPlan::default();
        assert!(plan_is_consolidated(&plan, &[]));
        plan.timed_out.push(Method::SingleNodeConsolidation);
        assert!(!plan_is_consolidated(&plan, &[]));
    }
}
