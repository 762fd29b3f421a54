//! Disruption budgets: how many of a NodePool's nodes may be voluntarily disrupted at once.
//!
//! A budget without a schedule is always active. A scheduled budget is active from each cron
//! hit for `duration`. Percentages round up against the node count. The effective allowance for
//! a reason is the minimum over the active budgets that apply to it; a budget that cannot be
//! evaluated fails closed (allows nothing). Nodes already disrupting count against it.

use crate::cron::Cron;
use crate::model::{Budget, BudgetNodes, DisruptionReason, NodePool};
use crate::time::Timestamp;

/// What an inactive budget allows: effectively unlimited (Karpenter uses MaxInt32).
pub(crate) const UNLIMITED: u32 = i32::MAX as u32;

/// Whether `budget` is in force at `now`. Errors are malformed schedules.
pub(crate) fn is_active(budget: &Budget, now: Timestamp) -> Result<bool, String> {
    let Some(schedule) = &budget.schedule else {
        return Ok(true);
    };
    let Some(duration) = budget.duration else {
        return Err("a budget with a schedule needs a duration".into());
    };
    let cron = Cron::parse(schedule).map_err(|e| e.to_string())?;
    let window_start = Timestamp(now.0 - duration.as_millis() as i64);
    // Active when the first hit after the window start has already happened.
    Ok(cron.next_after(window_start).is_some_and(|hit| hit <= now))
}

/// How many nodes one budget allows out of `node_count`, before subtracting those disrupting.
pub(crate) fn budget_allows(budget: &Budget, node_count: u32, now: Timestamp) -> u32 {
    match is_active(budget, now) {
        Ok(false) => UNLIMITED,
        Err(_) => 0,
        Ok(true) => match budget.nodes {
            BudgetNodes::Count(n) => n,
            BudgetNodes::Percent(p) => {
                ((u64::from(node_count) * u64::from(p.min(100))).div_ceil(100)) as u32
            }
        },
    }
}

/// The budget that limits disruptions for `reason`, if any limits it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allowance {
    /// Nodes that may still start disrupting now.
    pub allowed: u32,
    /// The binding budget, as written (`"10%"`, `"0"`), when one limits the answer.
    pub(crate) binding: Option<String>,
}

/// `min over applicable active budgets − disrupting`, floored at zero.
pub fn allowed_disruptions(
    nodepool: &NodePool,
    reason: DisruptionReason,
    node_count: u32,
    disrupting: u32,
    now: Timestamp,
) -> Allowance {
    let mut best = UNLIMITED;
    let mut binding = None;
    for b in &nodepool.disruption.budgets {
        if !b.reasons.is_empty() && !b.reasons.contains(&reason) {
            continue;
        }
        let allows = budget_allows(b, node_count, now);
        if allows < best {
            best = allows;
            binding = Some(match b.nodes {
                BudgetNodes::Count(n) => n.to_string(),
                BudgetNodes::Percent(p) => format!("{p}%"),
            });
        }
    }
    Allowance {
        allowed: best.saturating_sub(disrupting),
        binding,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::calendar::CivilMinute;
    use crate::model::Disruption;

    fn at(h: u32, m: u32) -> Timestamp {
        CivilMinute {
            year: 2026,
            month: 11,
            day: 23,
            hour: h,
            minute: m,
            weekday: 0,
        }
        .to_timestamp()
    }

    fn pool(budgets: Vec<Budget>) -> NodePool {
        NodePool {
            disruption: Disruption {
                budgets,
                ..Disruption::default()
            },
            ..NodePool::default()
        }
    }

    fn budget(
        nodes: BudgetNodes,
        schedule: Option<&str>,
        hours: u64,
        reasons: Vec<DisruptionReason>,
    ) -> Budget {
        Budget {
            nodes,
            schedule: schedule.map(str::to_string),
            duration: schedule.map(|_| Duration::from_secs(hours * 3600)),
            reasons,
        }
    }

    #[test]
    fn percentages_round_up_and_disrupting_counts() {
        let np = pool(vec![budget(BudgetNodes::Percent(10), None, 0, vec![])]);
        let a = allowed_disruptions(&np, DisruptionReason::Empty, 11, 0, at(0, 0));
        assert_eq!(
            a,
            Allowance {
                allowed: 2,
                binding: Some("10%".into())
            }
        );
        assert_eq!(
            allowed_disruptions(&np, DisruptionReason::Empty, 11, 1, at(0, 0)).allowed,
            1
        );
        assert_eq!(
            allowed_disruptions(&np, DisruptionReason::Empty, 11, 5, at(0, 0)).allowed,
            0
        );
    }

    #[test]
    fn cron_window_at_fixed_instants() {
        // Business hours Monday 2026-11-23: no disruptions 09:00–17:00.
        let np = pool(vec![
            budget(BudgetNodes::Percent(100), None, 0, vec![]),
            budget(BudgetNodes::Count(0), Some("0 9 * * mon-fri"), 8, vec![]),
        ]);
        assert_eq!(
            allowed_disruptions(&np, DisruptionReason::Drifted, 4, 0, at(8, 59)).allowed,
            4
        );
        assert_eq!(
            allowed_disruptions(&np, DisruptionReason::Drifted, 4, 0, at(9, 0)).allowed,
            0
        );
        assert_eq!(
            allowed_disruptions(&np, DisruptionReason::Drifted, 4, 0, at(16, 59)).allowed,
            0
        );
        assert_eq!(
            allowed_disruptions(&np, DisruptionReason::Drifted, 4, 0, at(17, 0)).allowed,
            4
        );
    }

    #[test]
    fn reasons_scope_budgets_and_bad_schedules_fail_closed() {
        let np = pool(vec![budget(
            BudgetNodes::Count(0),
            None,
            0,
            vec![DisruptionReason::Underutilized],
        )]);
        assert_eq!(
            allowed_disruptions(&np, DisruptionReason::Empty, 3, 0, at(0, 0)).allowed,
            UNLIMITED
        );
        assert_eq!(
            allowed_disruptions(&np, DisruptionReason::Underutilized, 3, 0, at(0, 0)).allowed,
            0
        );
        let bad = pool(vec![budget(
            BudgetNodes::Count(5),
            Some("not a cron"),
            1,
            vec![],
        )]);
        assert_eq!(
            allowed_disruptions(&bad, DisruptionReason::Empty, 3, 0, at(0, 0)).allowed,
            0
        );
    }
}
