//! A disruption command's writes: marking its targets (the disrupted taint on the Node, the
//! `DisruptionReason` condition on the NodeClaim) and unmarking them on a rollback, creating
//! its replacements, deleting its targets, and carrying out the effects core's orchestration
//! queue hands back, with upstream's events and metrics for each.

use nodewright_core::disruption::queue::Effect;
use nodewright_core::disruption::{Command, Method};
use nodewright_core::labels;
use nodewright_core::time::Timestamp;
use tracing::{info, warn};

use super::journal::{What, finished_entry, rolled_back_entry};
use super::round::Queued;
use super::{Disruptor, events, metrics};
use crate::claims::{self, ClaimRequest};
use crate::conditions::{self as cond, DISRUPTION_REASON};
use crate::events::ObjectRef;
use crate::lifecycle::{consolidation_policy, termination_mode};
use crate::provisioner::submit_claim;
use crate::state::lock;
use crate::termination::with_disrupted_taint;
use crate::write::claim_status::write_status;
use crate::write::{NodePatch, WriteError, retry_transient};

/// Tries per write when a command's targets are marked, unmarked or deleted: a command of ten
/// nodes makes twenty writes, and one throttled write would otherwise drop the whole command.
const MARK_ATTEMPTS: u32 = 3;

impl Disruptor {
    /// Marks the targets (taint, DisruptionReason) and creates the replacements. A command
    /// that cannot be marked whole is unmarked again, as upstream does: a target left tainted
    /// would take no pods while nothing is disrupting it.
    pub(super) async fn start(&self, q: &Queued) -> Result<(), WriteError> {
        let c = &q.command;
        let now = self.clock.now();
        if let Err(e) = self.mark(c).await {
            self.unmark(c).await;
            return Err(e);
        }
        if let Some(t) = c.targets.first() {
            self.metrics.disruption.decision(
                c.decision.as_str(),
                c.method.reason_label(),
                c.method.consolidation_type(),
                &t.nodepool,
            );
            if !c.method.consolidation_type().is_empty() {
                self.metrics.disruption.consolidation_savings(
                    &t.nodepool,
                    c.method.consolidation_type(),
                    c.savings_per_hour,
                );
            }
        }
        let mut replacements = Vec::new();
        for (i, r) in c.replacements.iter().enumerate() {
            let pool = lock(&self.state).nodepools.get(&r.nodepool).cloned();
            let Some(pool) = pool else { continue };
            let request = ClaimRequest {
                nodepool: r.nodepool.clone(),
                requirements: r.requirements.clone(),
                instance_types: r.instance_types.clone(),
                capacity_types: r
                    .requirements
                    .iter()
                    .filter(|q| q.key == labels::CAPACITY_TYPE)
                    .flat_map(|q| q.values.iter().cloned())
                    .collect(),
                requests: q.requests.get(i).cloned().unwrap_or_default(),
                min_values_relaxed: false,
            };
            let name = format!("{}-{}", r.nodepool, claims::random_suffix());
            submit_claim(
                &self.state,
                self.writer.as_ref(),
                &self.metrics,
                &claims::build(&pool, &request, &name),
                c.method.reason_label(),
            )
            .await?;
            self.events.publish(events::disruption_launching(
                ObjectRef::nodeclaim(&name),
                c.method.reason_label(),
            ));
            replacements.push(name);
        }
        // A forceful command (expiration) does not wait for replacements: the queue says
        // to delete its targets now.
        let effects = self.queue().started(c.clone(), replacements, now);
        self.carry_out(effects, now).await?;
        Ok(())
    }

    /// The disrupted taint and the `DisruptionReason` condition on every target.
    async fn mark(&self, c: &Command) -> Result<(), WriteError> {
        for t in &c.targets {
            retry_transient(MARK_ATTEMPTS, || self.set_taint(&t.node, true)).await?;
            retry_transient(MARK_ATTEMPTS, || {
                self.set_reason(&t.nodeclaim, Some(c.method))
            })
            .await?;
        }
        Ok(())
    }

    /// Takes the disrupted taint and `DisruptionReason` off every target, each write tried
    /// again on a transient failure; a target that still fails is logged and left.
    async fn unmark(&self, c: &Command) {
        for t in &c.targets {
            let untainted = retry_transient(MARK_ATTEMPTS, || self.set_taint(&t.node, false)).await;
            let unreasoned =
                retry_transient(MARK_ATTEMPTS, || self.set_reason(&t.nodeclaim, None)).await;
            if let Err(e) = untainted.and(unreasoned) {
                warn!(node = %t.node, error = %e, "unmarking a disruption target failed");
            }
        }
    }

    /// Deletes the command's target claims (the termination controller drains them), with
    /// upstream's `DisruptionTerminating` events and `nodeclaims_disrupted_total`.
    async fn terminate_targets(&self, c: &Command) -> Result<(), WriteError> {
        let reason = c.method.reason_label();
        // Every target is tried, each write again on a transient failure: the queue does not
        // hand the command back, so a target skipped here would keep its node.
        let mut failed = None;
        for t in &c.targets {
            let deleted = retry_transient(MARK_ATTEMPTS, || self.delete_claim(&t.nodeclaim)).await;
            if let Err(e) = deleted {
                warn!(nodeclaim = %t.nodeclaim, error = %e, "deleting a disruption target failed");
                failed.get_or_insert(e);
                continue;
            }
            self.events.publish(events::disruption_terminating(
                ObjectRef::node(&t.node),
                reason,
            ));
            self.events.publish(events::disruption_terminating(
                ObjectRef::nodeclaim(&t.nodeclaim),
                reason,
            ));
            let (policy, mode) = {
                let s = lock(&self.state);
                (
                    consolidation_policy(&s, &t.nodepool),
                    s.nodeclaims
                        .get(&t.nodeclaim)
                        .map(|c| termination_mode(c))
                        .unwrap_or("graceful"),
                )
            };
            self.metrics.nodeclaim_disrupted_with_mode(
                reason,
                &t.nodepool,
                &t.capacity_type,
                &policy,
                mode,
            );
            let disrupted = metrics::Disrupted {
                reason,
                nodepool: &t.nodepool,
                capacity_type: &t.capacity_type,
                consolidation_policy: &policy,
                termination_mode: mode,
            };
            self.metrics
                .disruption
                .pods_initiated(&disrupted, t.pods.len());
        }
        failed.map_or(Ok(()), Err)
    }

    async fn delete_claim(&self, name: &str) -> Result<(), WriteError> {
        match self.writer.delete_nodeclaim(name).await {
            Err(e) if !e.is_not_found() => Err(e),
            _ => Ok(()),
        }
    }

    async fn set_taint(&self, node: &str, on: bool) -> Result<(), WriteError> {
        let Some(n) = lock(&self.state).nodes.get(node).cloned() else {
            return Ok(());
        };
        let taints = n.spec.and_then(|s| s.taints).unwrap_or_default();
        let Some(next) = with_disrupted_taint(&taints, on) else {
            return Ok(());
        };
        self.writer
            .patch_node(
                node,
                &NodePatch {
                    taints: Some(next),
                    ..Default::default()
                },
            )
            .await
    }

    async fn set_reason(&self, claim: &str, method: Option<Method>) -> Result<(), WriteError> {
        let Some(c) = lock(&self.state).nodeclaims.get(claim).cloned() else {
            return Ok(());
        };
        let mut status = c.status.clone().unwrap_or_default();
        let mut conds = status.conditions.clone().unwrap_or_default();
        let changed = match method {
            Some(m) => {
                let reason = reason_of(m);
                cond::set(
                    &mut conds,
                    DISRUPTION_REASON,
                    "True",
                    reason,
                    reason,
                    self.clock.now(),
                )
            }
            None => cond::remove(&mut conds, DISRUPTION_REASON),
        };
        if changed {
            status.conditions = Some(conds);
            write_status(&*self.writer, &self.state, &c, &status).await?;
        }
        Ok(())
    }

    /// Turns the queue's effects into writes, events, metrics and journal entries; returns
    /// what finished, for tests and logs.
    pub(super) async fn carry_out(
        &self,
        effects: Vec<Effect>,
        now: Timestamp,
    ) -> Result<Vec<String>, WriteError> {
        let mut finished = Vec::new();
        let mut failed = None;
        for effect in effects {
            match effect {
                Effect::Terminate(r) => {
                    // The other effects still happen; the first failure is reported after.
                    if let Err(e) = self.terminate_targets(&r.command).await {
                        failed.get_or_insert(e);
                    }
                    info!(command = %r.command, "disruption command finished; terminating its targets");
                    self.journal
                        .record(|| finished_entry(now, What::Terminated, &r));
                    finished.push(format!("terminated: {}", r.command));
                }
                Effect::RollBack(r, why) => {
                    warn!(command = %r.command, reason = %why, "disruption command failed; rolling back");
                    self.metrics.disruption.queue_failure(
                        r.command.decision.as_str(),
                        r.command.method.reason_label(),
                        r.command.method.consolidation_type(),
                    );
                    self.unmark(&r.command).await;
                    self.journal.record(|| rolled_back_entry(now, &r, &why));
                    finished.push(format!("rolled back: {}", r.command));
                }
                Effect::Waiting(names) => {
                    for name in &names {
                        self.events.publish(events::disruption_waiting_readiness(
                            ObjectRef::nodeclaim(name),
                        ));
                    }
                }
            }
        }
        failed.map_or(Ok(finished), Err)
    }
}

pub fn reason_of(m: Method) -> &'static str {
    match m {
        Method::Expiration => "Expired",
        Method::Emptiness => "Empty",
        Method::Drift => "Drifted",
        Method::MultiNodeConsolidation | Method::SingleNodeConsolidation => "Underutilized",
    }
}
