//! The instance-status poller: once a minute the leader asks the cloud which instances fail a
//! health check and acts as upstream does. An instance or system status check failing for
//! [`UNHEALTHY_AFTER`] or longer deletes the claim forcefully (the termination deadline is
//! stamped as now, so the drain does not wait on pods); a scheduled event (reboot,
//! maintenance, retirement, stop) deletes it at once through the ordinary drain. Each
//! (instance, category) episode is counted once in
//! `karpenter_interruption_instance_status_unhealthy_total{category}`.
//!
//! [`decide`] is the pure half: the cloud's report, what the [`Tracker`] remembers from
//! earlier polls, the cluster state and the time in; events, deletions and the categories to
//! count out. [`InstanceHealthController`] is the shell.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nodewright_cloud::{CloudProvider, HealthCategory, InstanceHealth};
use nodewright_core::time::Timestamp;
use tokio::sync::watch;
use tracing::warn;

use super::events;
use super::{Deleter, Deletion, InstanceIndex, claim_ref, deletion};
use crate::clock::{Clock, rfc3339};
use crate::context::Context;
use crate::events::{Event, EventSink, ObjectRef};
use crate::lifecycle::TERMINATION_TIMESTAMP;
use crate::metrics::Metrics;
use crate::state::{ClusterState, SharedState, lock};
use crate::write::{KubeWriter, MetaPatch, WriteError};

/// How often the cloud is asked (upstream's).
pub const POLL_EVERY: Duration = Duration::from_secs(60);

/// How long a status check must fail before the instance is replaced (upstream's).
pub const UNHEALTHY_AFTER: Duration = Duration::from_secs(120);

type Key = (String, HealthCategory);

/// What earlier polls saw: when each failing (instance, category) was first reported, for
/// checks the cloud gives no start time for, and which episodes were already counted.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tracker {
    first_seen: BTreeMap<Key, Timestamp>,
    counted: BTreeSet<Key>,
}

/// A claim to delete because its instance is unhealthy.
#[derive(Clone, Debug, PartialEq)]
pub struct Unhealthy {
    pub deletion: Deletion,
    pub category: HealthCategory,
    /// Stamp the termination deadline as now before deleting (status checks), rather than
    /// draining at the pace of the claim's own grace period (scheduled events).
    pub forceful: bool,
}

/// What one poll calls for.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HealthDecision {
    pub notify: Vec<Event>,
    /// At most one per claim; claims already deleting are left alone.
    pub delete: Vec<Unhealthy>,
    /// Categories newly found unhealthy on a claim's instance, one per (instance, category)
    /// episode, for the metric.
    pub count: Vec<HealthCategory>,
    /// Failing instances no claim runs on (other clusters, other tools): nothing is done.
    pub unknown: Vec<String>,
}

/// Which categories of `report` count as unhealthy at `now`, given when each was first seen.
/// Updates `tracker` for this report: recovered checks are forgotten, so a later failure
/// starts its own clock and is counted again.
fn unhealthy_categories(
    reports: &[InstanceHealth],
    tracker: &mut Tracker,
    now: Timestamp,
) -> BTreeMap<String, BTreeSet<HealthCategory>> {
    let mut current: BTreeMap<Key, Timestamp> = BTreeMap::new();
    for r in reports {
        for check in &r.failed {
            let key = (r.instance_id.clone(), check.category);
            let seen = *tracker.first_seen.get(&key).unwrap_or(&now);
            let since = check.since.map_or(seen, |s| s.min(seen));
            current
                .entry(key)
                .and_modify(|t| *t = (*t).min(since))
                .or_insert(since);
        }
    }
    tracker.counted.retain(|k| current.contains_key(k));
    let mut out: BTreeMap<String, BTreeSet<HealthCategory>> = BTreeMap::new();
    for ((instance, category), since) in &current {
        // Scheduled events are acted on at once: their start is often in the future, and an
        // announced event means the host is going away.
        let due =
            *category == HealthCategory::ScheduledEvent || now.since(*since) >= UNHEALTHY_AFTER;
        if due {
            out.entry(instance.clone()).or_default().insert(*category);
        }
    }
    tracker.first_seen = current;
    out
}

/// What the cloud's `reports` call for at `now`.
pub fn decide(
    reports: &[InstanceHealth],
    tracker: &mut Tracker,
    state: &ClusterState,
    index: &InstanceIndex<'_>,
    now: Timestamp,
) -> HealthDecision {
    let mut out = HealthDecision::default();
    for (instance, categories) in unhealthy_categories(reports, tracker, now) {
        let Some(claim) = index.get(&instance) else {
            out.unknown.push(instance);
            continue;
        };
        for c in &categories {
            if tracker.counted.insert((instance.clone(), *c)) {
                out.count.push(*c);
            }
        }
        if claim.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let Some(deletion) = deletion(claim, state) else {
            continue;
        };
        out.notify
            .push(events::instance_unhealthy(claim_ref(claim)));
        if let Some(n) = &deletion.node {
            out.notify
                .push(events::instance_unhealthy(ObjectRef::node(n)));
        }
        // A failed status check outranks an event: it is the one that deletes forcefully.
        let category = *categories
            .iter()
            .find(|c| **c != HealthCategory::ScheduledEvent)
            .unwrap_or(&HealthCategory::ScheduledEvent);
        let forceful = category != HealthCategory::ScheduledEvent;
        out.delete.push(Unhealthy {
            deletion: Deletion {
                termination_mode: if forceful {
                    "forceful"
                } else {
                    deletion.termination_mode
                },
                ..deletion
            },
            category,
            forceful,
        });
    }
    out
}

pub struct InstanceHealthController {
    state: SharedState,
    writer: Arc<dyn KubeWriter>,
    cloud: Arc<dyn CloudProvider>,
    clock: Clock,
    metrics: Arc<Metrics>,
    events: Arc<dyn EventSink>,
    leader: watch::Receiver<bool>,
    tracker: Mutex<Tracker>,
}

impl InstanceHealthController {
    pub fn new(ctx: &Context) -> Self {
        let Context {
            state,
            writer,
            cloud,
            clock,
            metrics,
            events,
            ..
        } = ctx.clone();
        InstanceHealthController {
            state,
            writer,
            cloud,
            clock,
            metrics,
            events,
            leader: watch::channel(true).1,
            tracker: Mutex::new(Tracker::default()),
        }
    }

    /// Polls only while `leader` is true.
    pub fn with_leader(mut self, leader: watch::Receiver<bool>) -> Self {
        self.leader = leader;
        self
    }

    fn active(&self) -> bool {
        *self.leader.borrow() && lock(&self.state).synced()
    }

    /// One poll: ask the cloud, decide, act. Returns the claims deleted, sorted.
    pub async fn poll_once(&self) -> Result<Vec<String>, String> {
        let reports = self
            .cloud
            .unhealthy_instances()
            .await
            .map_err(|e| format!("listing instance health: {e}"))?;
        let now = self.clock.now();
        let decision = {
            let s = lock(&self.state);
            let index = InstanceIndex::new(&s);
            let mut tracker = self.tracker.lock().unwrap_or_else(|p| p.into_inner());
            decide(&reports, &mut tracker, &s, &index, now)
        };
        for c in &decision.count {
            self.metrics
                .interruption
                .instance_status_unhealthy(c.as_str());
        }
        if !decision.unknown.is_empty() {
            tracing::debug!(instances = ?decision.unknown, "unhealthy instances without a nodeclaim");
        }
        for e in decision.notify {
            self.events.publish(e);
        }
        let mut deleted = Vec::new();
        let mut failures = Vec::new();
        for u in &decision.delete {
            match self.delete(u, now).await {
                Ok(true) => deleted.push(u.deletion.nodeclaim.clone()),
                Ok(false) => {}
                Err(e) => failures.push(format!("NodeClaim {}: {e}", u.deletion.nodeclaim)),
            }
        }
        deleted.sort();
        if failures.is_empty() {
            Ok(deleted)
        } else {
            Err(failures.join("; "))
        }
    }

    /// Deletes one claim (stamping its deadline first when forceful); `Ok(false)` when it
    /// was already gone.
    async fn delete(&self, u: &Unhealthy, now: Timestamp) -> Result<bool, WriteError> {
        let d = &u.deletion;
        if u.forceful {
            let mut p = MetaPatch::default();
            p.annotations
                .insert(TERMINATION_TIMESTAMP.into(), Some(rfc3339(now)));
            match self.writer.patch_nodeclaim_meta(&d.nodeclaim, &p).await {
                Ok(()) => {}
                Err(e) if e.is_not_found() => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        let message = if u.forceful {
            "initiating forceful delete for an unhealthy instance"
        } else {
            "initiating delete for an instance with a scheduled event"
        };
        Deleter {
            writer: self.writer.as_ref(),
            events: self.events.as_ref(),
            metrics: &self.metrics,
        }
        .delete(u.category.reason(), d, message)
        .await
    }

    /// Polls every [`POLL_EVERY`] while active.
    pub async fn run(self: Arc<Self>, r: crate::metrics::Reconciler) {
        loop {
            if self.active()
                && let Err(e) = r.now(self.poll_once()).await
            {
                warn!(error = %e, "instance health poll failed");
            }
            tokio::time::sleep(POLL_EVERY).await;
        }
    }
}

#[cfg(test)]
mod tests;
