//! The snapshot the cluster keeps up to date between decisions.
//!
//! Building a [`Snapshot`] from scratch clones every pod, Node and NodeClaim; dropping it frees
//! them again. Decisions run a few times a minute of virtual time while only a handful of
//! objects change in between, so the cluster keeps one snapshot and remembers which pods and
//! claims changed since it was last brought up to date: only those are cloned again. The
//! small collections (NodePools, the ICE-marked catalog, DaemonSets, PDBs, volumes) are
//! rebuilt every time, exactly as [`super::Cluster::snapshot`] builds them.
//!
//! The maintained snapshot equals a fresh one as long as every change to a pod or a claim goes
//! through the cluster's methods, which mark it dirty; the fields are private to make that so.
//!
//! Work may read the snapshot on another thread between decisions ([`Maintained::beside`]):
//! the snapshot is shared with it, and any change to the snapshot first waits for that work to
//! end, so the work reads the snapshot as it was when the work started.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use nodewright_core::disruption::Applied;
use nodewright_core::model::{Node, NodeClaim, Pod, Snapshot};

use nodewright_core::scheduling::FastMap;

use super::beside::Beside;
use super::{SimClaim, snapshot_node};

#[derive(Clone, Debug, Default)]
pub(super) struct Maintained {
    /// Shared only with the work [`Maintained::beside`] started, and only until it ends.
    snapshot: Arc<Snapshot>,
    beside: Beside,
    /// The pods' keys, parallel to `snapshot.pods`.
    pod_keys: Vec<String>,
    /// The live claims' names, parallel to `snapshot.node_claims`.
    claim_keys: Vec<String>,
    /// The names of the claims whose Ready nodes `snapshot.nodes` holds, in the same order.
    node_keys: Vec<String>,
    dirty_pods: BTreeSet<String>,
    dirty_claims: BTreeSet<String>,
    /// Claims whose Node may have changed: a subset of `dirty_claims`.
    dirty_nodes: BTreeSet<String>,
    /// Whether the lists were ever built.
    built: bool,
    /// Counts every change to a pod or a claim, built or not.
    pub(super) edits: u64,
    /// Bumped by every [`Maintained::sync`] or [`Maintained::set_rest`] that may have changed
    /// the snapshot (its time aside).
    pub(super) generation: u64,
    /// Running commands applied to `snapshot` in place (see [`super::Cluster::view_held`]);
    /// reverted before anything else reads or updates it.
    pub(super) applied: Option<Applied>,
    /// The buffers the lists were last patched out of, kept to patch the next lists into
    /// (see [`patch`]).
    spare_keys: Vec<String>,
    spare_pods: Vec<Arc<Pod>>,
    spare_claims: Vec<Arc<NodeClaim>>,
    spare_nodes: Vec<Arc<Node>>,
}

/// `snapshot` to change, once the work `beside` reading it has ended: then nothing else
/// holds it, and nothing is copied.
fn own<'s>(beside: &mut Beside, snapshot: &'s mut Arc<Snapshot>) -> &'s mut Snapshot {
    beside.finish();
    Arc::make_mut(snapshot)
}

impl Maintained {
    /// The snapshot as last brought up to date.
    pub(super) fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// The snapshot to change, once the work reading it beside has ended.
    pub(super) fn snapshot_mut(&mut self) -> &mut Snapshot {
        own(&mut self.beside, &mut self.snapshot)
    }

    /// Runs `work` over the snapshot on another thread, meanwhile the caller goes on; the
    /// snapshot's next change waits for it (see the module header).
    pub(super) fn beside(&mut self, work: impl FnOnce(&Snapshot) + Send + 'static) {
        let snapshot = Arc::clone(&self.snapshot);
        self.beside.run(move || work(&snapshot));
    }

    /// Puts back the snapshot a [`super::Cluster::view_held`] changed in place.
    pub(super) fn revert(&mut self) {
        if let Some(a) = self.applied.take() {
            a.revert(self.snapshot_mut());
        }
    }

    pub(super) fn pod_changed(&mut self, key: &str) {
        self.edits += 1;
        if self.built && !self.dirty_pods.contains(key) {
            self.dirty_pods.insert(key.to_string());
        }
    }

    pub(super) fn claim_changed(&mut self, name: &str) {
        self.claim_status_changed(name);
        if self.built && !self.dirty_nodes.contains(name) {
            self.dirty_nodes.insert(name.to_string());
        }
    }

    /// A change to the claim `name` only, its Node untouched.
    pub(super) fn claim_status_changed(&mut self, name: &str) {
        self.edits += 1;
        if self.built && !self.dirty_claims.contains(name) {
            self.dirty_claims.insert(name.to_string());
        }
    }

    /// Brings the pod, Node and NodeClaim lists up to date with what the cluster holds now.
    pub(super) fn sync(
        &mut self,
        pods: &BTreeMap<String, Arc<Pod>>,
        claims: &BTreeMap<String, SimClaim>,
        versions: &FastMap<String, u64>,
    ) {
        self.revert();
        if !self.built || !self.dirty_pods.is_empty() || !self.dirty_claims.is_empty() {
            self.generation += 1;
        }
        let dirty_pods = std::mem::take(&mut self.dirty_pods);
        let s = own(&mut self.beside, &mut self.snapshot);
        // Once built, the lists are only patched: a patch clones the changed entries and
        // moves each other one at most once, where a rebuild would clone them all.
        if !self.built {
            (self.pod_keys, s.pods) = pods.iter().map(|(k, p)| (k.clone(), Arc::clone(p))).unzip();
        } else {
            let spare = (&mut self.spare_keys, &mut self.spare_pods);
            patch(&mut self.pod_keys, &mut s.pods, &dirty_pods, spare, |k| {
                pods.get(k).cloned()
            });
        }
        let live_claim = |c: &SimClaim| c.is_live().then(|| Arc::new(c.claim.clone()));
        let ready_node = |k: &str, c: &SimClaim| snapshot_node(k, c, versions).map(Arc::new);
        let dirty_claims = std::mem::take(&mut self.dirty_claims);
        let dirty_nodes = std::mem::take(&mut self.dirty_nodes);
        if !self.built {
            (self.claim_keys, s.node_claims) = claims
                .iter()
                .filter_map(|(k, c)| live_claim(c).map(|c| (k.clone(), c)))
                .unzip();
            (self.node_keys, s.nodes) = claims
                .iter()
                .filter_map(|(k, c)| ready_node(k, c).map(|n| (k.clone(), n)))
                .unzip();
        } else {
            patch(
                &mut self.claim_keys,
                &mut s.node_claims,
                &dirty_claims,
                (&mut self.spare_keys, &mut self.spare_claims),
                |k| claims.get(k).and_then(live_claim),
            );
            patch(
                &mut self.node_keys,
                &mut s.nodes,
                &dirty_nodes,
                (&mut self.spare_keys, &mut self.spare_nodes),
                |k| claims.get(k).and_then(|c| ready_node(k, c)),
            );
        }
        self.built = true;
    }
}

impl Maintained {
    /// Takes the small lists of `rest` (everything but the pods, Nodes and NodeClaims) and its
    /// time; a new generation starts unless the lists are the ones already held.
    pub(super) fn set_rest(&mut self, rest: Snapshot) {
        self.revert();
        let s = own(&mut self.beside, &mut self.snapshot);
        let same_types = s.instance_types.len() == rest.instance_types.len()
            && s.instance_types
                .iter()
                .zip(&rest.instance_types)
                .all(|((k, a), (l, b))| k == l && (Arc::ptr_eq(a, b) || a == b));
        let same = same_types
            && s.nodepools == rest.nodepools
            && s.daemonsets == rest.daemonsets
            && s.pdbs == rest.pdbs
            && s.persistent_volume_claims == rest.persistent_volume_claims
            && s.persistent_volumes == rest.persistent_volumes
            && s.storage_classes == rest.storage_classes
            && s.namespaces == rest.namespaces;
        if !same {
            self.generation += 1;
        }
        s.now = rest.now;
        s.nodepools = rest.nodepools;
        s.instance_types = rest.instance_types;
        s.daemonsets = rest.daemonsets;
        s.pdbs = rest.pdbs;
        s.persistent_volume_claims = rest.persistent_volume_claims;
        s.persistent_volumes = rest.persistent_volumes;
        s.storage_classes = rest.storage_classes;
        s.namespaces = rest.namespaces;
    }
}

/// Replaces, inserts or removes the entry of every key in `dirty`, keeping `keys` sorted and
/// `items` parallel to it. Replacements are made in place; when anything is inserted or
/// removed, the lists are merged once with the dirty keys, so each item moves once however
/// many keys changed (an insert or removal in place would shift the whole tail each time).
/// The merged lists are written into `spare`, whose buffers then hold the old lists' (empty):
/// a list of thousands of pods is megabytes, which a fresh allocation would have the kernel
/// zero again every time.
fn patch<T>(
    keys: &mut Vec<String>,
    items: &mut Vec<T>,
    dirty: &BTreeSet<String>,
    spare: (&mut Vec<String>, &mut Vec<T>),
    now: impl Fn(&str) -> Option<T>,
) {
    // Per insert or removal: where its key is (or would be) among `keys`, whether it is
    // there, and what replaces it.
    let mut moves = Vec::new();
    for k in dirty {
        match (keys.binary_search(k), now(k)) {
            (Ok(i), Some(t)) => items[i] = t,
            (Err(_), None) => {}
            (Ok(i), None) => moves.push((i, true, k, None)),
            (Err(i), t) => moves.push((i, false, k, t)),
        }
    }
    if moves.is_empty() {
        return;
    }
    let total = keys.len() + moves.len();
    let (new_keys, new_items) = spare;
    new_keys.clear();
    new_items.clear();
    new_keys.reserve(total);
    new_items.reserve(total);
    let mut old = keys.drain(..).zip(items.drain(..));
    let mut at = 0;
    for (i, present, k, t) in moves {
        for (o, item) in old.by_ref().take(i - at) {
            new_keys.push(o);
            new_items.push(item);
        }
        at = i;
        if present {
            old.next();
            at += 1;
        }
        if let Some(t) = t {
            new_keys.push(k.clone());
            new_items.push(t);
        }
    }
    for (o, item) in old {
        new_keys.push(o);
        new_items.push(item);
    }
    std::mem::swap(keys, new_keys);
    std::mem::swap(items, new_items);
}

#[cfg(test)]
mod tests;
