//! What wakes the provisioner: upstream's pod batcher input. Every provisionable pod triggers
//! the batcher when first seen and again every [`POD_REQUEUE`] while it stays pending.
//!
//! The trigger reads the index's pod change log, not the whole pending set: a look costs the
//! pods that changed since the last one and the requeues that came due. Walking every pending
//! pod at each change to the index (each pod bound, each Node updated) was 7% of the
//! controller's CPU in the first minute of the whole-loop benchmark at 1,000 pods, and grew
//! with the backlog.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use nodewright_core::cadence::{BatchWindow, Batcher, POD_REQUEUE};
use nodewright_core::time::Timestamp;

use super::IDLE_LOOK;
use crate::state::changes::{Cursor, Since};
use crate::state::{SharedState, lock};

pub struct Trigger {
    batcher: Batcher,
    /// When each pending pod last triggered the batcher.
    last_trigger: BTreeMap<Arc<str>, Timestamp>,
    /// The same pairs by time, so the requeues that came due are the first few.
    requeues: BTreeSet<(Timestamp, Arc<str>)>,
    /// When each pending pod was first seen, until its first scheduling decision
    /// (`karpenter_pods_scheduling_decision_duration_seconds`).
    first_seen: BTreeMap<String, Timestamp>,
    /// Where the last look stopped in the index's pod change log; `None` after
    /// [`retry_all`](Self::retry_all) or before the first look: the next looks at every
    /// pending pod.
    read: Option<Cursor>,
    /// Pods looked at, one per changed pod and per requeue, for tests.
    looked: u64,
}

impl Trigger {
    pub fn new(window: BatchWindow) -> Self {
        Trigger {
            batcher: Batcher::new(window),
            last_trigger: BTreeMap::new(),
            requeues: BTreeSet::new(),
            first_seen: BTreeMap::new(),
            read: None,
            looked: 0,
        }
    }

    /// Triggers for the pods that became pending since the last look and for those whose
    /// requeue came at `now`; true when a batch has closed. This runs every tick.
    pub fn due(&mut self, state: &SharedState, now: Timestamp) -> bool {
        let mut s = lock(state);
        let mut seen = Vec::new();
        let pending = s.pending();
        match s.pod_log.since(self.read) {
            Since::Keys(keys) => {
                for key in keys {
                    self.look_at(key, pending.contains(key), now, &mut seen);
                }
            }
            Since::Resync => {
                let gone: Vec<Arc<str>> = (self.last_trigger.keys())
                    .filter(|k| !pending.contains(&***k))
                    .cloned()
                    .collect();
                for key in gone {
                    self.look_at(&key, false, now, &mut seen);
                }
                self.first_seen.retain(|k, _| pending.contains(k.as_str()));
                for key in pending {
                    self.look_at(key, true, now, &mut seen);
                }
            }
        }
        self.read = Some(s.pod_log.head());
        self.requeue(now);
        // The state keeps when the provisioner first saw each pod, for the pod metrics.
        for key in seen {
            s.ack_pod(&key, now);
        }
        drop(s);
        self.batcher.poll(now).is_some()
    }

    /// Brings one changed pod's entries up to date: a new pending pod triggers, a pod no
    /// longer pending is forgotten.
    fn look_at(&mut self, key: &str, pending: bool, now: Timestamp, seen: &mut Vec<String>) {
        self.looked += 1;
        if !pending {
            if let Some((k, t)) = self.last_trigger.remove_entry(key) {
                self.requeues.remove(&(t, k));
            }
            self.first_seen.remove(key);
            return;
        }
        if self.last_trigger.contains_key(key) {
            return;
        }
        if !self.first_seen.contains_key(key) {
            self.first_seen.insert(key.to_owned(), now);
            seen.push(key.to_owned());
        }
        self.fire(Arc::from(key), now);
    }

    /// Triggers again every pod whose requeue came.
    fn requeue(&mut self, now: Timestamp) {
        while (self.requeues.first()).is_some_and(|(t, _)| now.since(*t) >= POD_REQUEUE) {
            if let Some((_, key)) = self.requeues.pop_first() {
                self.looked += 1;
                self.fire(key, now);
            }
        }
    }

    fn fire(&mut self, key: Arc<str>, now: Timestamp) {
        self.batcher.trigger(now, &key);
        if let Some(old) = self.last_trigger.insert(key.clone(), now) {
            self.requeues.remove(&(old, key.clone()));
        }
        self.requeues.insert((now, key));
    }

    /// When `pod` was first seen pending, forgotten at its first scheduling decision.
    pub fn decided(&mut self, pod: &str) -> Option<Timestamp> {
        self.first_seen.remove(pod)
    }

    /// How long a look at `now` may wait if the index does not change: until the open batch
    /// closes or the first pending pod's requeue comes, and at most [`IDLE_LOOK`]; no wait
    /// while a look at every pod is owed (the pods were forgotten).
    pub fn idle_wait(&self, now: Timestamp) -> Duration {
        if self.read.is_none() {
            return Duration::ZERO;
        }
        let requeue = (self.requeues.first()).map(|(t, _)| t.plus(POD_REQUEUE));
        [self.batcher.deadline(), requeue]
            .into_iter()
            .flatten()
            .map(|t| t.since(now))
            .fold(IDLE_LOOK, Duration::min)
    }

    /// Forgets when pods last triggered, so all of them trigger again.
    pub fn retry_all(&mut self) {
        self.last_trigger.clear();
        self.requeues.clear();
        self.read = None;
    }

    /// How many pods [`Trigger::due`] has looked at.
    pub fn looked(&self) -> u64 {
        self.looked
    }
}
