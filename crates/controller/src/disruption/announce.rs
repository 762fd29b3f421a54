//! What a disruption round tells people: its metrics (evaluations, timeouts, eligible nodes,
//! budgets) and upstream's events on Nodes, NodeClaims, NodePools and pods: why a node is not
//! disrupted (`DisruptionBlocked`, `Unconsolidatable`), which budgets block a NodePool, the
//! consolidation candidates a round found or a re-check rejected, a Balanced NodePool's
//! approved moves, and `do-not-disrupt` values that are invalid or timed.

use std::collections::BTreeMap;
use std::time::Duration;

use nodewright_core::disruption::plan::{Move, Verdict};
use nodewright_core::disruption::{Command, Method};
use tracing::info;

use super::Disruptor;
use super::events;
use super::journal::{Entry, What};
use super::metrics::BudgetRow;
use super::round::{RoundResult, round_summary};
use crate::clock::rfc3339;
use crate::events::{Event, ObjectRef};
use crate::state::lock;
use nodewright_core::time::Timestamp;

/// Verdict codes that mean "something forbids disrupting this node now" (upstream's
/// `DisruptionBlocked`), and those that mean "consolidation found nothing better"
/// (`Unconsolidatable`). Other codes (not managed, not initialized, deleting, disrupted) say
/// nothing a person needs to act on.
const BLOCKED: &[&str] = &[
    "nodepool-not-found",
    "node-do-not-disrupt",
    "pod-do-not-disrupt",
    "pod-has-no-controller",
    "pdb-blocked",
    "multiple-pdbs",
    "budget-exhausted",
];
const UNCONSOLIDATABLE: &[&str] = &[
    "pods-do-not-fit",
    "policy-when-empty",
    "consolidation-disabled",
];

/// The graceful methods every round evaluates, as `(reason, consolidation_type)` labels.
const EVALUATED: [Method; 4] = [
    Method::Emptiness,
    Method::Drift,
    Method::MultiNodeConsolidation,
    Method::SingleNodeConsolidation,
];

impl Disruptor {
    /// Publishes what a round planned at `now`, `secs` after it started, found: its metrics,
    /// events and journal line.
    pub(super) fn announce_round(&self, round: &RoundResult, now: Timestamp, secs: f64) {
        for m in EVALUATED {
            self.metrics
                .disruption
                .evaluation(m.reason_label(), m.consolidation_type(), secs);
        }
        for m in &round.timed_out {
            info!(
                method = m.as_str(),
                "consolidation search out of time; kept what it found"
            );
            self.metrics
                .disruption
                .consolidation_timeout(m.consolidation_type());
        }
        for (reason, n) in &round.eligible {
            self.metrics.disruption.eligible_nodes(reason, *n);
        }
        self.metrics.disruption.set_budgets(&round.allowed);
        self.publish_blocked_budgets(&round.allowed);
        self.publish_verdicts(&round.verdicts, &round.claims_by_node);
        for (namespace, name, value) in &round.invalid_do_not_disrupt {
            self.events.publish(events::invalid_do_not_disrupt(
                ObjectRef::pod(namespace, name),
                value,
            ));
        }
        for (pod, until, elapsed) in &round.timed_do_not_disrupt {
            self.events.publish(if *elapsed {
                events::do_not_disrupt_grace_period_elapsed(pod.clone())
            } else {
                events::do_not_disrupt_until(pod.clone(), &rfc3339(*until))
            });
        }
        self.record_moves(&round.moves, &round.claims_by_node);
        for q in &round.commands {
            self.publish_consolidation(&q.command, None);
        }
        self.journal.record(|| {
            let n = round.commands.iter().map(|q| q.command.targets.len()).sum();
            let summary = round_summary(round, secs, self.running().len());
            Entry::new(now, What::Planned, summary)
                .nodes(n)
                .took(Duration::from_secs_f64(secs))
        });
    }

    /// A NodePool with nodes whose budgets allow no disruption for a reason gets a
    /// `DisruptionBlocked` event naming the reason, as upstream's budget mapping publishes
    /// one; a pool with nodes
    /// that its budgets allow no disruption at all, for any reason, gets the one that names
    /// none as well.
    fn publish_blocked_budgets(&self, rows: &[BudgetRow]) {
        let mut pools: BTreeMap<&str, bool> = BTreeMap::new();
        for row in rows {
            let blocked = pools.entry(&row.nodepool).or_insert(row.nodes > 0);
            *blocked &= row.allowed == 0;
            // Upstream tells only a pool with nodes: an empty one has nothing to disrupt.
            let blocks = row.allowed == 0 && row.nodes > 0;
            let Some(reason) = reason_named(row.reason).filter(|_| blocks) else {
                continue;
            };
            self.events.publish(events::nodepool_blocked_for_reason(
                self.nodepool_ref(&row.nodepool),
                reason,
            ));
        }
        for (pool, _) in pools.into_iter().filter(|(_, blocked)| *blocked) {
            self.events
                .publish(events::nodepool_blocked(self.nodepool_ref(pool)));
        }
    }

    fn nodepool_ref(&self, pool: &str) -> ObjectRef {
        let uid = lock(&self.state)
            .nodepools
            .get(pool)
            .and_then(|p| p.metadata.uid.clone());
        let object = ObjectRef::nodepool(pool);
        match uid {
            Some(uid) => object.with_uid(uid),
            None => object,
        }
    }

    /// Counts the consolidation moves the round weighed, as upstream's Balanced evaluator
    /// does, and tells each node (or, for a multi-node move, the NodePool) that a Balanced
    /// NodePool approved its move.
    fn record_moves(&self, moves: &[Move], claims_by_node: &BTreeMap<String, String>) {
        for m in moves {
            let score = m.balanced.as_ref().map(|b| b.score);
            self.metrics.disruption.consolidation_move(
                m.approved,
                &m.nodepool,
                m.policy.as_str(),
                score,
            );
            let Some(b) = m.balanced.as_ref().filter(|_| m.approved) else {
                continue;
            };
            if m.multi_node {
                self.events.publish(events::consolidation_approved(
                    self.nodepool_ref(&m.nodepool),
                    b,
                ));
                continue;
            }
            for node in &m.nodes {
                self.events
                    .publish(events::consolidation_approved(ObjectRef::node(node), b));
                if let Some(c) = claims_by_node.get(node) {
                    self.events
                        .publish(events::consolidation_approved(ObjectRef::nodeclaim(c), b));
                }
            }
        }
    }

    /// `ConsolidationCandidate` (or, with the re-check's `rejected` reason,
    /// `ConsolidationRejected`) on each target of a consolidation command, Node and NodeClaim.
    pub(super) fn publish_consolidation(&self, c: &Command, rejected: Option<&str>) {
        if !matches!(
            c.method,
            Method::MultiNodeConsolidation | Method::SingleNodeConsolidation
        ) {
            return;
        }
        for t in &c.targets {
            let what = events::command_for_node(c, &t.node);
            for object in [ObjectRef::node(&t.node), ObjectRef::nodeclaim(&t.nodeclaim)] {
                self.events.publish(match rejected {
                    None => events::consolidation_candidate(object, &what, c.savings_per_hour),
                    Some(why) => {
                        events::consolidation_rejected(object, &what, why, c.savings_per_hour)
                    }
                });
            }
        }
    }

    /// Says, on the Node and its NodeClaim, why a node is not disrupted.
    fn publish_verdicts(&self, verdicts: &[Verdict], claims_by_node: &BTreeMap<String, String>) {
        for v in verdicts {
            if !events::announces_block(&v.code) {
                continue;
            }
            let make: fn(ObjectRef, &str) -> Event = if BLOCKED.contains(&v.code.as_str()) {
                events::disruption_blocked
            } else if UNCONSOLIDATABLE.contains(&v.code.as_str()) {
                events::unconsolidatable
            } else {
                continue;
            };
            self.events
                .publish(make(ObjectRef::node(&v.node), &v.message));
            if let Some(c) = claims_by_node.get(&v.node) {
                self.events
                    .publish(make(ObjectRef::nodeclaim(c), &v.message));
            }
        }
    }
}

/// The budget reason behind an allowed-disruptions label.
fn reason_named(label: &str) -> Option<&'static str> {
    match label {
        "empty" => Some("Empty"),
        "drifted" => Some("Drifted"),
        "underutilized" => Some("Underutilized"),
        _ => None,
    }
}
