//! NodeClaim `status.lastPodEventTime`: the last time a pod was bound to a claim's node, went
//! terminal or terminating there, or left it. `consolidateAfter` counts from this time (or
//! from initialization), so without it a node that just lost its pods would be consolidated
//! at once instead of after the wait its NodePool asks for.
//!
//! As upstream's pod-events controller: DaemonSet pods are ignored, and a claim whose time
//! was written less than ten seconds ago is left alone (the event is dropped, not deferred),
//! so a burst of pods costs one write per claim per ten seconds. Which nodes saw a pod event
//! is worked out from the index's pod change log by [`Tracker`], a pure function of what it
//! saw before and the index now.
//!
//! This loop is the field's only writer: every other NodeClaim status write leaves it out
//! (`KubeWriter::patch_nodeclaim_status`), so a status computed from a copy of the claim read
//! before the last pod event cannot put the older time back.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nodewright_core::time::Timestamp;
use tokio::sync::watch;
use tracing::warn;

use crate::clock::{Clock, parse_rfc3339, rfc3339};
use crate::context::Context;
use crate::state::changes::{Cursor, Since};
use crate::state::{ClusterState, PodKey, PodRecord, SharedState, lock};
use crate::write::KubeWriter;

/// Upstream's pod-event dedupe window.
pub const DEDUPE: Duration = Duration::from_secs(10);

/// How far a pod has got on its node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    Running,
    Terminating,
    Finished,
}

/// Where a pod that counts (bound, not a DaemonSet's) was last seen, and how far along.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Seen {
    node: String,
    stage: Stage,
}

fn seen(p: &PodRecord) -> Option<Seen> {
    let node = p.bound_to()?;
    if p.owned_by("DaemonSet") {
        return None;
    }
    let stage = if p.finished() {
        Stage::Finished
    } else if p.deleted.is_some() {
        Stage::Terminating
    } else {
        Stage::Running
    };
    Some(Seen {
        node: node.to_string(),
        stage,
    })
}

/// The nodes a change from `before` to `after` is a pod event on.
fn events(before: Option<&Seen>, after: Option<&Seen>, out: &mut BTreeSet<String>) {
    match (before, after) {
        (None, Some(a)) => {
            out.insert(a.node.clone());
        }
        // Leaving after it already finished or started terminating was counted then.
        (Some(b), None) if b.stage == Stage::Running => {
            out.insert(b.node.clone());
        }
        (Some(b), Some(a)) if b.node != a.node => {
            out.insert(b.node.clone());
            out.insert(a.node.clone());
        }
        (Some(b), Some(a)) if a.stage > b.stage => {
            out.insert(a.node.clone());
        }
        _ => {}
    }
}

/// What the pods looked like when last read, so the next read can tell binds, finishes and
/// departures from other pod updates.
#[derive(Debug, Default)]
pub struct Tracker {
    read: Option<Cursor>,
    /// By the index's own copy of each key: at 20,000 pods, copies of their own were some
    /// 0.8 MiB.
    pods: HashMap<PodKey, Seen>,
}

impl Tracker {
    /// The nodes that had a pod event since the last call. The first call only learns where
    /// pods are: what happened before it is not news.
    pub fn observe(&mut self, s: &ClusterState) -> BTreeSet<String> {
        let first = self.read.is_none();
        let mut out = BTreeSet::new();
        match s.pod_log.since(self.read) {
            Since::Keys(keys) => {
                for key in keys {
                    let pod = s.pods.get_key_value(key).map(|(k, p)| (k, &**p));
                    self.look_at(key, pod, &mut out);
                }
            }
            Since::Resync => {
                let gone: Vec<PodKey> = self
                    .pods
                    .keys()
                    .filter(|k| !s.pods.contains_key(&***k))
                    .cloned()
                    .collect();
                for key in &gone {
                    self.look_at(key, None, &mut out);
                }
                for (key, pod) in &s.pods {
                    self.look_at(key, Some((key, pod)), &mut out);
                }
            }
        }
        self.read = Some(s.pod_log.head());
        if first {
            out.clear();
        }
        out
    }

    /// `pod` is the index's key and record of the pod at `key`, if it has one.
    fn look_at(
        &mut self,
        key: &str,
        pod: Option<(&PodKey, &PodRecord)>,
        out: &mut BTreeSet<String>,
    ) {
        let after = pod.and_then(|(_, p)| seen(p));
        events(self.pods.get(key), after.as_ref(), out);
        match (after, pod) {
            (Some(a), Some((held, _))) => {
                self.pods.insert(Arc::clone(held), a);
            }
            _ => {
                self.pods.remove(key);
            }
        }
    }
}

/// The claims of `nodes` whose pod-event time should be written at `now`: those with none,
/// or with one at least [`DEDUPE`] old (by the index or by `written`, whichever is later,
/// since the index may not show this controller's last write yet).
pub fn due(
    s: &ClusterState,
    nodes: &BTreeSet<String>,
    written: &BTreeMap<String, Timestamp>,
    now: Timestamp,
) -> Vec<String> {
    let window = DEDUPE.as_millis() as i64;
    let mut out = BTreeSet::new();
    for node in nodes {
        let Some(provider_id) = s
            .nodes
            .get(node)
            .and_then(|n| n.spec.as_ref())
            .and_then(|sp| sp.provider_id.as_deref())
        else {
            continue;
        };
        let Some(claim) = s.claim_by_provider_id(provider_id) else {
            continue;
        };
        let Some(name) = claim.metadata.name.clone() else {
            continue;
        };
        let stored = claim
            .status
            .as_ref()
            .and_then(|st| st.last_pod_event_time.as_deref())
            .and_then(parse_rfc3339);
        let last = stored.max(written.get(&name).copied());
        if last.is_none_or(|t| now.0 - t.0 >= window) {
            out.insert(name);
        }
    }
    out.into_iter().collect()
}

/// The loop: every second on the leader, the pod events since the last look become
/// `lastPodEventTime` writes.
pub struct PodEvents {
    state: SharedState,
    writer: Arc<dyn KubeWriter>,
    clock: Clock,
    leader: watch::Receiver<bool>,
    seen: Mutex<(Tracker, BTreeMap<String, Timestamp>)>,
}

impl PodEvents {
    pub fn new(ctx: &Context) -> Self {
        let Context {
            state,
            writer,
            clock,
            ..
        } = ctx.clone();
        PodEvents {
            state,
            writer,
            clock,
            leader: watch::channel(true).1,
            seen: Mutex::new((Tracker::default(), BTreeMap::new())),
        }
    }

    pub fn with_leader(mut self, leader: watch::Receiver<bool>) -> Self {
        self.leader = leader;
        self
    }

    /// One look: returns the claims written.
    pub async fn pass(&self) -> Vec<String> {
        let now = self.clock.now();
        let claims = {
            let s = lock(&self.state);
            if !s.synced() {
                return Vec::new();
            }
            let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            let (tracker, written) = &mut *seen;
            let nodes = tracker.observe(&s);
            // A standby keeps reading, so it takes over knowing where pods are.
            if !*self.leader.borrow() {
                return Vec::new();
            }
            written.retain(|name, _| s.nodeclaims.contains_key(name));
            due(&s, &nodes, written, now)
        };
        let time = rfc3339(now);
        let mut done = Vec::new();
        for name in claims {
            match self
                .writer
                .patch_nodeclaim_pod_event_time(&name, &time)
                .await
            {
                Ok(()) => done.push(name),
                Err(e) if e.is_not_found() => {}
                Err(e) => warn!(nodeclaim = %name, error = %e, "writing lastPodEventTime"),
            }
        }
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        for name in &done {
            seen.1.insert(name.clone(), now);
        }
        done
    }

    pub async fn run(self: Arc<Self>, every: Duration, r: crate::metrics::Reconciler) {
        loop {
            r.now(async {
                self.pass().await;
            })
            .await;
            self.clock.sleep_on_grid(every).await;
        }
    }
}

#[cfg(test)]
mod tests;
