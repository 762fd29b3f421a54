//! The zonal-shift poller (upstream's `zonalshift` controller, on with `ENABLE_ZONAL_SHIFT`):
//! every 30 s the leader asks the cloud which zones traffic is shifted away from. The provider
//! keeps the answer and acts on it (no launches in a shifted zone, no terminations there); this
//! loop reports the changes: a zone becoming shifted raises `ZonalShiftActive` on each claim in
//! it, a shift ending raises `ZonalShiftCleared`, each change is logged at info and counted.
//!
//! [`decide`] is the pure half: the zones before and now and the claims in, the changes and
//! events out. A failed poll changes nothing; the provider keeps its last answer too.

pub mod events;
pub mod metrics;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_cloud::CloudProvider;
use nodewright_core::labels;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::context::Context;
use crate::events::{Event, EventSink, ObjectRef};
use crate::metrics::Metrics;
use crate::state::{SharedState, lock};

/// How often the cloud is asked (upstream's).
pub const POLL_EVERY: Duration = Duration::from_secs(30);

/// What one poll changed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ShiftChanges {
    /// Zones shifted now and not at the last poll, sorted.
    pub active: Vec<String>,
    /// Zones shifted at the last poll and not now, sorted.
    pub cleared: Vec<String>,
    pub notify: Vec<Event>,
}

fn claim_ref(c: &NodeClaim) -> ObjectRef {
    let r = ObjectRef::nodeclaim(c.metadata.name.as_deref().unwrap_or_default());
    match c.metadata.uid.clone() {
        Some(uid) => r.with_uid(uid),
        None => r,
    }
}

fn zone_of(c: &NodeClaim) -> Option<&str> {
    c.metadata
        .labels
        .as_ref()?
        .get(labels::ZONE)
        .map(String::as_str)
}

/// The changes from `before` to `now`, with an event for each claim in a zone that changed.
pub fn decide<'a>(
    before: &BTreeSet<String>,
    now: &BTreeSet<String>,
    claims: impl Iterator<Item = &'a NodeClaim>,
) -> ShiftChanges {
    let active: Vec<String> = now.difference(before).cloned().collect();
    let cleared: Vec<String> = before.difference(now).cloned().collect();
    let mut notify = Vec::new();
    if !active.is_empty() || !cleared.is_empty() {
        for c in claims {
            let Some(zone) = zone_of(c) else { continue };
            if active.iter().any(|z| z == zone) {
                notify.push(events::zonal_shift_active(claim_ref(c), zone));
            } else if cleared.iter().any(|z| z == zone) {
                notify.push(events::zonal_shift_cleared(claim_ref(c), zone));
            }
        }
    }
    ShiftChanges {
        active,
        cleared,
        notify,
    }
}

pub struct ZonalShiftController {
    state: SharedState,
    cloud: Arc<dyn CloudProvider>,
    metrics: Arc<Metrics>,
    events: Arc<dyn EventSink>,
    leader: watch::Receiver<bool>,
    shifted: Mutex<BTreeSet<String>>,
}

impl ZonalShiftController {
    pub fn new(ctx: &Context) -> Self {
        let Context {
            state,
            cloud,
            metrics,
            events,
            ..
        } = ctx.clone();
        ZonalShiftController {
            state,
            cloud,
            metrics,
            events,
            leader: watch::channel(true).1,
            shifted: Mutex::new(BTreeSet::new()),
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

    /// One poll: ask the cloud, report what changed. Returns the changes.
    pub async fn poll_once(&self) -> Result<ShiftChanges, String> {
        let now: BTreeSet<String> = self
            .cloud
            .zonal_shifts()
            .await
            .map_err(|e| format!("reading zonal shifts: {e}"))?
            .into_iter()
            .collect();
        let changes = {
            let mut shifted = self.shifted.lock().unwrap_or_else(|p| p.into_inner());
            let s = lock(&self.state);
            let changes = decide(&shifted, &now, s.all_claims());
            *shifted = now;
            changes
        };
        for zone in &changes.active {
            info!(zone = %zone, "zonal shift active: no launches in the zone and terminations there wait");
            self.metrics.zonal_shift.shifted(zone, true);
        }
        for zone in &changes.cleared {
            info!(zone = %zone, "zonal shift cleared: launches and terminations in the zone resume");
            self.metrics.zonal_shift.shifted(zone, false);
        }
        for e in changes.notify.iter().cloned() {
            self.events.publish(e);
        }
        Ok(changes)
    }

    /// Polls every [`POLL_EVERY`] while active.
    pub async fn run(self: Arc<Self>, r: crate::metrics::Reconciler) {
        loop {
            if self.active()
                && let Err(e) = r.now(self.poll_once()).await
            {
                warn!(error = %e, "zonal shift poll failed; keeping the last known shifts");
            }
            tokio::time::sleep(POLL_EVERY).await;
        }
    }
}

#[cfg(test)]
mod tests;
