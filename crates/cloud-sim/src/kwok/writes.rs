//! The agent's own writes that its watches may not show yet. A watch lags behind the API
//! server, so a pass that read only the watch's cache would undo or repeat what the last pass
//! did: start a pod twice, finish a finished pod again, create a Node that exists, or delete
//! one that is gone. Each write is laid over the cache until the watch shows it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::cached::KeptPod;

/// The cached pods, with this agent's own writes the watch has not shown yet laid over
/// them (pods it deleted or finished, `done`, are left out); forgets writes the watch has
/// caught up with.
pub(crate) fn overlay(
    cached: Vec<Arc<KeptPod>>,
    started: &mut BTreeMap<String, Arc<KeptPod>>,
    done: &mut BTreeSet<String>,
) -> Vec<Arc<KeptPod>> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(cached.len());
    for pod in cached {
        let uid = pod.uid().unwrap_or_default().to_string();
        if matches!(pod.phase(), Some("Succeeded" | "Failed")) {
            // The watch shows the pod finished: nothing of ours is newer.
            started.remove(&uid);
            done.remove(&uid);
            out.push(pod);
            continue;
        }
        if done.contains(&uid) {
            seen.insert(uid);
            continue;
        }
        // A deletion the watch shows is newer than any start this agent wrote.
        let newer = pod.phase() == Some("Running") || pod.deleting();
        match started.get(&uid) {
            Some(written) if !newer => out.push(written.clone()),
            _ => {
                started.remove(&uid);
                out.push(pod);
            }
        }
        seen.insert(uid);
    }
    started.retain(|uid, _| seen.contains(uid));
    done.retain(|uid| seen.contains(uid));
    out
}

/// The Nodes this agent created or deleted, by name, until its watch over its Nodes shows
/// the change.
#[derive(Debug, Default)]
pub(crate) struct NodeWrites {
    created: BTreeSet<String>,
    deleted: BTreeSet<String>,
}

impl NodeWrites {
    pub fn created(&mut self, name: &str) {
        self.deleted.remove(name);
        self.created.insert(name.to_owned());
    }

    pub fn deleted(&mut self, name: &str) {
        self.created.remove(name);
        self.deleted.insert(name.to_owned());
    }

    /// A write to the Node found none: whatever the watch last showed, it is gone. (Forgets
    /// a creation the watch never showed because the Node was deleted before it caught up.)
    pub fn gone(&mut self, name: &str) {
        self.created.remove(name);
    }

    /// The agent's Nodes: those the watch shows (`watched`), with the ones this agent created
    /// and the watch does not show yet, less the ones it deleted and the watch still shows;
    /// forgets the writes the watch has caught up with.
    pub fn registered(&mut self, mut watched: BTreeSet<String>) -> BTreeSet<String> {
        self.created.retain(|n| !watched.contains(n));
        self.deleted.retain(|n| watched.contains(n));
        watched.extend(self.created.iter().cloned());
        for name in &self.deleted {
            watched.remove(name);
        }
        watched
    }
}

#[cfg(test)]
mod tests;
