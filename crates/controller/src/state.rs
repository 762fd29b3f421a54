//! `ClusterState`: a synchronous index of everything the controller reads, fed by watch events
//! (from kube-runtime watchers in a cluster, from the in-memory API in tests). Loops read it
//! under a short lock and never await while holding it.

pub mod ages;
pub mod changes;
pub mod conditions;
pub mod convert;
pub mod gauges;
pub mod heartbeat;
pub mod metrics;
mod models;
mod nominations;
pub mod object;
pub mod pod;
pub mod registration;
mod snapshot;

use std::borrow::Borrow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{StorageClass, VolumeAttachment};
use nodewright_api::aws::v1::EC2NodeClass;
use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_api::v1::nodepool::NodePool;
use nodewright_core::model::{PodTemplates, Shared};
use tokio::sync::Notify;

use changes::ChangeLog;
pub use nominations::{NOMINATION_WINDOW, Nomination, PodScheduling};
pub use object::{Kind, Object, key_of};
pub use pod::{NodeUsage, PodRecord};
pub use snapshot::pending_pods;

/// One change, in the shape kube-runtime's watcher reports it.
#[derive(Clone, Debug)]
pub enum WatchEvent {
    Apply(Object),
    Delete(Object),
    /// A (re)list of `kind` starts; objects follow as `InitApply` until `InitDone`.
    Init(Kind),
    InitApply(Object),
    InitDone(Kind),
}

#[derive(Clone, Debug, Default)]
pub struct ClusterState {
    /// Pods as the loops read them (see [`PodRecord`]), each with its model in the engine when
    /// a snapshot takes it. Boxed: a map's node holds eleven values inline, most unused.
    pub pods: BTreeMap<PodKey, Box<PodRecord>>,
    /// Nodes by name, each without its labels when it converted: its conversion holds them
    /// (see [`ClusterState::put_node`]); read them with [`ClusterState::node_labels`], or
    /// take a whole copy with [`ClusterState::node_object`]. Boxed, as the pods are: a Node
    /// inline is over a kilobyte, mostly fields stripped on the way in.
    pub nodes: BTreeMap<String, Box<Node>>,
    /// Shared, so a loop takes the claims it reads without copying them.
    pub nodeclaims: BTreeMap<String, Arc<NodeClaim>>,
    pub nodepools: BTreeMap<String, NodePool>,
    pub nodeclasses: BTreeMap<String, EC2NodeClass>,
    pub daemonsets: BTreeMap<String, DaemonSet>,
    pub pdbs: BTreeMap<String, PodDisruptionBudget>,
    pub pvs: BTreeMap<String, PersistentVolume>,
    pub pvcs: BTreeMap<String, PersistentVolumeClaim>,
    pub storage_classes: BTreeMap<String, StorageClass>,
    /// VolumeAttachments by name: the termination waits for a node's to go.
    pub volume_attachments: BTreeMap<String, VolumeAttachment>,
    /// Namespaces by name, labels only.
    pub namespaces: BTreeMap<String, Namespace>,
    /// Pending pods the provisioner placed on a claim, by pod key (see [`Nomination`]).
    nominations: BTreeMap<PodKey, Nomination>,
    /// What the provisioner made of each pod it has seen pending, by pod key (see
    /// [`PodScheduling`]); a deleted pod's goes with it.
    pod_scheduling: BTreeMap<PodKey, PodScheduling>,
    /// Claims this controller created that the NodeClaim watch has not reported yet. They
    /// count towards limits and hold their pods, so the next loop cannot launch them twice.
    in_flight: BTreeMap<String, NodeClaim>,
    synced: BTreeSet<Kind>,
    relisting: BTreeMap<Kind, Vec<Entry>>,
    /// Keys of the provisionable pods (see [`provisionable`]), kept as pods change so the
    /// provisioner's every-tick look at them does not walk every pod.
    pending: BTreeSet<PodKey>,
    /// Pod keys by the node they are bound to, so per-node questions do not scan every pod.
    pods_by_node: BTreeMap<String, BTreeSet<PodKey>>,
    /// Node names by `spec.providerID`.
    nodes_by_provider_id: BTreeMap<String, BTreeSet<String>>,
    /// Observed claim keys by `status.providerID`.
    claims_by_provider_id: BTreeMap<String, BTreeSet<String>>,
    /// What the pods bound to each node request and limit, kept as pods change.
    usage: BTreeMap<String, NodeUsage>,
    /// Pods changed (their own change, or their node's labels), for incremental readers.
    pub pod_log: ChangeLog,
    /// Nodes changed (their own change, or a change of the pods bound to them).
    pub node_log: ChangeLog,
    /// Nodes, NodeClaims, NodePools and EC2NodeClasses changed (their own change only), keyed
    /// by [`status_key`], for the status-condition metrics.
    pub status_log: ChangeLog,
    /// Objects that failed to parse and were skipped.
    pub skipped: u64,
    /// Each NodePool's recent registrations and liveness failures, for its
    /// `NodeRegistrationHealthy` condition.
    pub registration_health: BTreeMap<String, nodewright_core::registration_health::Health>,
    /// Moves with every change to the index, so a loop can tell nothing changed since it
    /// last looked (see [`ClusterState::changes`]).
    changes: u64,
    /// Told of every move of `changes`, for a loop that sleeps until the index changes.
    changed: Arc<Notify>,
    /// The Nodes and observed NodeClaims as core's model, which every snapshot shares.
    models: models::Models,
    /// One copy of each pod template the pods' models hold: a Deployment's replicas share it.
    templates: PodTemplates,
    /// One copy of each shape (labels, owner, ...) the pods' records hold, shared as the
    /// templates are.
    pod_shapes: pod::PodShapes,
    /// One copy of each list of requirement values the NodeClaims hold (and their
    /// conversions): claims made for alike pods list the same instance types.
    value_lists: Shared<[String]>,
}

/// A pod's key in the index, `namespace/name`: one copy, held by every map of the index and
/// change log that names the pod.
pub type PodKey = Arc<str>;

/// An object on its way into the index: a pod already reduced to its record, so a relist
/// buffers records rather than whole pods.
#[derive(Clone, Debug)]
enum Entry {
    Pod(Box<PodRecord>),
    Other(Object),
}

impl Entry {
    fn of(mut o: Object) -> Entry {
        match o {
            Object::Pod(p) => Entry::Pod(Box::new(PodRecord::from_api(&p))),
            _ => {
                o.strip();
                Entry::Other(o)
            }
        }
    }

    fn kind(&self) -> Kind {
        match self {
            Entry::Pod(..) => Kind::Pod,
            Entry::Other(o) => o.kind(),
        }
    }
}

/// The kinds whose status conditions are metered (`state::conditions`).
pub const STATUS_KINDS: [Kind; 4] = [Kind::Node, Kind::NodeClaim, Kind::NodePool, Kind::NodeClass];

/// An object's key in [`ClusterState::status_log`]: its kind's name, `/`, its key (these kinds
/// are cluster-scoped, so the key is the name and has no `/`).
pub fn status_key(kind: Kind, key: &str) -> String {
    format!("{}/{key}", kind.name())
}

pub type SharedState = Arc<Mutex<ClusterState>>;

/// Locks the state; a poisoned lock (a panic elsewhere) still yields the index, which is only
/// ever replaced whole-object at a time.
pub fn lock(state: &SharedState) -> MutexGuard<'_, ClusterState> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

impl ClusterState {
    pub fn shared() -> SharedState {
        Arc::new(Mutex::new(ClusterState::default()))
    }

    /// True once every kind has been listed at least once.
    pub fn synced(&self) -> bool {
        Kind::ALL.iter().all(|k| self.synced.contains(k))
    }

    pub fn is_synced(&self, kind: Kind) -> bool {
        self.synced.contains(&kind)
    }

    pub fn apply(&mut self, event: WatchEvent) {
        match event {
            WatchEvent::Apply(o) => self.put(Entry::of(o)),
            WatchEvent::Delete(o) => self.remove(o.kind(), &o.key()),
            WatchEvent::Init(kind) => {
                self.relisting.insert(kind, Vec::new());
            }
            WatchEvent::InitApply(o) => {
                let entry = Entry::of(o);
                match self.relisting.get_mut(&entry.kind()) {
                    Some(buffer) => buffer.push(entry),
                    None => self.put(entry),
                }
            }
            WatchEvent::InitDone(kind) => {
                let listed = self.relisting.remove(&kind).unwrap_or_default();
                self.clear(kind);
                for o in listed {
                    self.put(o);
                }
                if kind == Kind::Pod {
                    // Pods deleted while the watch was down take their nominations along;
                    // the others' entries take the relisted pods' keys.
                    self.nominations = rekeyed(&self.pods, std::mem::take(&mut self.nominations));
                    self.pod_scheduling =
                        rekeyed(&self.pods, std::mem::take(&mut self.pod_scheduling));
                }
                self.synced.insert(kind);
            }
        }
    }

    /// Records a skipped object (it failed to parse).
    pub fn skip(&mut self) {
        self.skipped += 1;
    }

    fn put(&mut self, entry: Entry) {
        let o = match entry {
            Entry::Pod(p) => return self.put_pod(p),
            Entry::Other(Object::Node(n)) => return self.put_node(n),
            Entry::Other(o) => o,
        };
        self.changed();
        let key = o.key();
        self.touch_status(o.kind(), &key);
        match o {
            Object::Pod(_) => unreachable!("pods enter as records (Entry::of)"),
            Object::Node(_) => unreachable!("nodes enter through put_node"),
            Object::NodeClaim(mut c) => {
                for r in &mut c.spec.requirements {
                    if let Some(values) = &mut r.values {
                        self.value_lists.share(values);
                    }
                }
                self.in_flight.remove(&key);
                if let Some(old) = self.nodeclaims.get(&key) {
                    unindex(
                        &mut self.claims_by_provider_id,
                        claim_provider_id(old),
                        &key,
                    );
                }
                index(
                    &mut self.claims_by_provider_id,
                    claim_provider_id(&c),
                    key.clone(),
                );
                self.models.put_claim(&key, &c);
                self.nodeclaims.insert(key, Arc::from(c));
            }
            Object::NodePool(p) => {
                // A NodePool made anew under an old name starts without the old one's record.
                if self
                    .nodepools
                    .get(&key)
                    .is_some_and(|old| old.metadata.uid != p.metadata.uid)
                {
                    self.registration_health.remove(&key);
                }
                self.nodepools.insert(key, *p);
            }
            Object::NodeClass(c) => {
                self.nodeclasses.insert(key, *c);
            }
            Object::DaemonSet(d) => {
                self.daemonsets.insert(key, *d);
            }
            Object::Pdb(p) => {
                self.pdbs.insert(key, *p);
            }
            Object::PersistentVolume(p) => {
                self.pvs.insert(key, *p);
            }
            Object::PersistentVolumeClaim(p) => {
                self.pvcs.insert(key, *p);
            }
            Object::StorageClass(s) => {
                self.storage_classes.insert(key, *s);
            }
            Object::VolumeAttachment(v) => {
                self.volume_attachments.insert(key, *v);
            }
            Object::Namespace(n) => {
                self.namespaces.insert(key, *n);
            }
        }
    }

    /// Takes a Node's new copy; one that moved only its heartbeat (see [`heartbeat`]) is
    /// stored without counting as a change. Its labels are held once, by its conversion: a
    /// Node's thirty-odd labels as parsed were some 3.7 KiB, held again by the conversion
    /// (`docs/reliability-log.md`). Only a Node that did not convert keeps them in its object.
    fn put_node(&mut self, mut n: Box<Node>) {
        let key = key_of(&n.metadata);
        let labels = n.metadata.labels.take().unwrap_or_default();
        let (relabelled, same_labels) = match self.nodes.contains_key(&key) {
            false => (true, false),
            true => {
                let old = self.node_labels(&key);
                let same = old.map_or(labels.is_empty(), |old| *old == labels);
                (gauge_labels(old) != gauge_labels(Some(&labels)), same)
            }
        };
        let old = self.nodes.insert(key.clone(), n);
        let new = &self.nodes[&key];
        if let Some(mut old) = old {
            unindex(&mut self.nodes_by_provider_id, node_provider_id(&old), &key);
            index(
                &mut self.nodes_by_provider_id,
                node_provider_id(new),
                key.clone(),
            );
            // Compared apart, above: a copy that did not convert kept its labels.
            old.metadata.labels = None;
            if same_labels && heartbeat::only_heartbeat(*old, new) {
                self.keep_labels_unless_converted(&key, labels);
                return;
            }
        } else {
            index(
                &mut self.nodes_by_provider_id,
                node_provider_id(new),
                key.clone(),
            );
        }
        self.changed();
        let stored = self.nodes.get_mut(&key).expect("inserted above");
        stored.metadata.labels = Some(labels);
        self.models.put_node(&key, stored);
        if self.models.node_labels(&key).is_some() {
            stored.metadata.labels = None;
        }
        self.touch_status(Kind::Node, &key);
        self.node_log.touch(&key, self.nodes.len());
        if relabelled {
            self.touch_pods_on(&key);
        }
    }

    /// Puts `labels` back into the Node at `key` if its conversion does not hold them.
    fn keep_labels_unless_converted(&mut self, key: &str, labels: BTreeMap<String, String>) {
        if self.models.node_labels(key).is_none()
            && let Some(n) = self.nodes.get_mut(key)
        {
            n.metadata.labels = Some(labels);
        }
    }

    /// The labels of the Node `name`: its conversion's, or its object's when it did not
    /// convert (or was put into [`ClusterState::nodes`] directly).
    pub fn node_labels(&self, name: &str) -> Option<&BTreeMap<String, String>> {
        self.models
            .node_labels(name)
            .or_else(|| self.nodes.get(name)?.metadata.labels.as_ref())
    }

    /// A copy of the Node `name` with its labels, for a loop that works on it outside the
    /// lock.
    pub fn node_object(&self, name: &str) -> Option<Node> {
        let mut n = Node::clone(self.nodes.get(name)?);
        if n.metadata.labels.is_none() {
            n.metadata.labels = self.models.node_labels(name).cloned();
        }
        Some(n)
    }

    /// Takes a pod's new record; one equal to the record held (the pod changed only in what
    /// the index does not keep, such as its container statuses) changes nothing.
    fn put_pod(&mut self, mut p: Box<PodRecord>) {
        p.share(&mut self.pod_shapes, &mut self.templates);
        // The key held already, so the maps and sets that name the pod keep one copy of it.
        if let Some((held, _)) = self.pods.get_key_value(&p.key) {
            p.key = Arc::clone(held);
        }
        let key = Arc::clone(&p.key);
        if p.node_name.is_some() && self.nominations.remove(&*key).is_some() {
            self.changed();
        }
        if self.pods.get(&key).is_some_and(|old| **old == *p) {
            return;
        }
        self.changed();
        if let Some(old) = self.pods.remove(&key) {
            unindex(&mut self.pods_by_node, old.node_name.as_deref(), &key);
            self.forget_usage(&old);
        }
        index(
            &mut self.pods_by_node,
            p.node_name.as_deref(),
            Arc::clone(&key),
        );
        if p.provisionable() {
            self.pending.insert(Arc::clone(&key));
        } else {
            self.pending.remove(&key);
        }
        if let Some((node, u)) = p.counts_on() {
            self.usage.entry(node.to_owned()).or_default().add(u);
            self.node_log.touch(node, self.nodes.len());
        }
        self.pod_log.touch_shared(&key, self.pods.len() + 1);
        self.pods.insert(key, p);
    }

    fn remove(&mut self, kind: Kind, key: &str) {
        self.changed();
        self.touch_status(kind, key);
        match kind {
            Kind::Pod => {
                self.nominations.remove(key);
                self.pod_scheduling.remove(key);
                self.pending.remove(key);
                if let Some(old) = self.pods.remove(key) {
                    unindex(&mut self.pods_by_node, old.node_name.as_deref(), key);
                    self.forget_usage(&old);
                    self.pod_log.touch(key, self.pods.len());
                }
            }
            Kind::Node => {
                self.models.remove_node(key);
                if let Some(old) = self.nodes.remove(key) {
                    unindex(&mut self.nodes_by_provider_id, node_provider_id(&old), key);
                    self.node_log.touch(key, self.nodes.len());
                    self.touch_pods_on(key);
                }
            }
            Kind::NodeClaim => {
                self.in_flight.remove(key);
                self.models.remove_claim(key);
                if let Some(old) = self.nodeclaims.remove(key) {
                    unindex(
                        &mut self.claims_by_provider_id,
                        claim_provider_id(&old),
                        key,
                    );
                }
            }
            Kind::NodePool => {
                self.nodepools.remove(key);
                self.registration_health.remove(key);
            }
            Kind::NodeClass => drop(self.nodeclasses.remove(key)),
            Kind::DaemonSet => drop(self.daemonsets.remove(key)),
            Kind::Pdb => drop(self.pdbs.remove(key)),
            Kind::PersistentVolume => drop(self.pvs.remove(key)),
            Kind::PersistentVolumeClaim => drop(self.pvcs.remove(key)),
            Kind::StorageClass => drop(self.storage_classes.remove(key)),
            Kind::VolumeAttachment => drop(self.volume_attachments.remove(key)),
            Kind::Namespace => drop(self.namespaces.remove(key)),
        }
    }

    fn clear(&mut self, kind: Kind) {
        self.changed();
        if STATUS_KINDS.contains(&kind) {
            // Objects deleted while the watch was down are in no log: readers resync.
            self.status_log.reset();
        }
        match kind {
            Kind::Pod => {
                self.pods.clear();
                self.pods_by_node.clear();
                self.pending.clear();
                self.usage.clear();
                self.pod_log.reset();
                self.node_log.reset();
            }
            Kind::Node => {
                self.nodes.clear();
                self.models.clear_nodes();
                self.nodes_by_provider_id.clear();
                self.node_log.reset();
                self.pod_log.reset();
            }
            Kind::NodeClaim => {
                self.nodeclaims.clear();
                self.models.clear_claims();
                self.claims_by_provider_id.clear();
            }
            Kind::NodePool => self.nodepools.clear(),
            Kind::NodeClass => self.nodeclasses.clear(),
            Kind::DaemonSet => self.daemonsets.clear(),
            Kind::Pdb => self.pdbs.clear(),
            Kind::PersistentVolume => self.pvs.clear(),
            Kind::PersistentVolumeClaim => self.pvcs.clear(),
            Kind::StorageClass => self.storage_classes.clear(),
            Kind::VolumeAttachment => self.volume_attachments.clear(),
            Kind::Namespace => self.namespaces.clear(),
        }
    }

    fn touch_status(&mut self, kind: Kind, key: &str) {
        if STATUS_KINDS.contains(&kind) {
            let live = self.nodes.len()
                + self.nodeclaims.len()
                + self.nodepools.len()
                + self.nodeclasses.len();
            self.status_log.touch(&status_key(kind, key), live);
        }
    }

    /// Records a claim the moment its create call returned, before the watch reports it.
    pub fn record_created(&mut self, claim: NodeClaim) {
        self.changed();
        let name = claim.metadata.name.clone().unwrap_or_default();
        if !self.nodeclaims.contains_key(&name) {
            self.in_flight.insert(name, claim);
        }
    }

    /// Every claim: observed ones and those created but not yet observed.
    pub fn all_claims(&self) -> impl Iterator<Item = &NodeClaim> {
        self.nodeclaims
            .values()
            .map(|c| &**c)
            .chain(self.in_flight.values())
    }

    /// Keys of the provisionable pods, sorted.
    pub fn pending(&self) -> &BTreeSet<PodKey> {
        &self.pending
    }

    /// Provisionable pods that do not convert to the engine's model, so no pass places them.
    pub fn ignored_pods(&self) -> usize {
        self.pending
            .iter()
            .filter(|k| {
                self.pods
                    .get(*k)
                    .is_some_and(|p| p.model().is_some_and(|m| m.is_err()))
            })
            .count()
    }

    /// The claim named `name`, observed or in flight (claims are cluster-scoped: the key is
    /// the name).
    pub fn claim_named(&self, name: &str) -> Option<&NodeClaim> {
        self.nodeclaims
            .get(name)
            .map(|c| &**c)
            .or_else(|| self.in_flight.get(name))
    }

    /// A counter that moves whenever an object is applied (but for a Node's heartbeat and a
    /// pod whose record stays the same), deleted or relisted, a claim is recorded in flight or
    /// a pod nominated: equal readings mean an index unchanged in anything the loops read.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// Notified at every move of [`changes`](Self::changes). It keeps one wake-up for a
    /// waiter that was not yet waiting, so a change between a loop's look at the index and its
    /// wait still wakes it. Meant for one waiter: the provisioner.
    pub fn on_change(&self) -> Arc<Notify> {
        self.changed.clone()
    }

    fn changed(&mut self) {
        self.changes += 1;
        self.changed.notify_one();
    }

    pub fn in_flight_count(&self) -> usize {
        self.in_flight.len()
    }

    /// The Node whose `spec.providerID` is `provider_id`.
    pub fn node_by_provider_id(&self, provider_id: &str) -> Vec<&Node> {
        self.nodes_by_provider_id
            .get(provider_id)
            .into_iter()
            .flatten()
            .filter_map(|k| self.nodes.get(k).map(|n| &**n))
            .collect()
    }

    /// The claim whose `status.providerID` is `provider_id`.
    pub fn claim_by_provider_id(&self, provider_id: &str) -> Option<&NodeClaim> {
        self.claims_by_provider_id
            .get(provider_id)?
            .iter()
            .find_map(|k| self.nodeclaims.get(k).map(|c| &**c))
    }

    /// What the running pods bound to `node` request and limit.
    pub fn node_usage(&self, node: &str) -> Option<&NodeUsage> {
        self.usage.get(node)
    }

    /// Takes the pod `old`, leaving the index, out of its node's usage.
    fn forget_usage(&mut self, old: &PodRecord) {
        if let Some((node, u)) = old.counts_on()
            && let Some(sum) = self.usage.get_mut(node)
        {
            sum.sub(u);
            if sum.pods == 0 {
                self.usage.remove(node);
            }
            self.node_log.touch(node, self.nodes.len());
        }
    }

    /// Marks every pod bound to `node` changed: their gauges carry the node's labels.
    fn touch_pods_on(&mut self, node: &str) {
        let live = self.pods.len();
        for key in self.pods_by_node.get(node).into_iter().flatten() {
            self.pod_log.touch(key, live);
        }
    }

    /// Pods bound to `node`.
    pub fn pods_on(&self, node: &str) -> Vec<&PodRecord> {
        self.pods_by_node
            .get(node)
            .into_iter()
            .flatten()
            .filter_map(|k| self.pods.get(k).map(|p| &**p))
            .collect()
    }
}

/// The node labels a pod's gauge row carries, of a Node's labels `l`.
fn gauge_labels(l: Option<&BTreeMap<String, String>>) -> [Option<&String>; 5] {
    let get = |k: &str| l.and_then(|l| l.get(k));
    use nodewright_core::labels;
    [
        get(labels::NODEPOOL),
        get(labels::ZONE),
        get(labels::INSTANCE_TYPE),
        get(labels::CAPACITY_TYPE),
        get(labels::ARCH),
    ]
}

fn node_provider_id(n: &Node) -> Option<&str> {
    n.spec.as_ref().and_then(|s| s.provider_id.as_deref())
}

/// The entries of `map` whose pod is in `pods`, each under the index's copy of its key.
fn rekeyed<V>(
    pods: &BTreeMap<PodKey, Box<PodRecord>>,
    map: BTreeMap<PodKey, V>,
) -> BTreeMap<PodKey, V> {
    map.into_iter()
        .filter_map(|(k, v)| Some((Arc::clone(pods.get_key_value(&k)?.0), v)))
        .collect()
}

fn claim_provider_id(c: &NodeClaim) -> Option<&str> {
    c.status.as_ref().and_then(|s| s.provider_id.as_deref())
}

fn index<K: Ord>(idx: &mut BTreeMap<String, BTreeSet<K>>, by: Option<&str>, key: K) {
    if let Some(by) = by {
        idx.entry(by.to_string()).or_default().insert(key);
    }
}

fn unindex<K: Ord + Borrow<str>>(
    idx: &mut BTreeMap<String, BTreeSet<K>>,
    by: Option<&str>,
    key: &str,
) {
    if let Some(by) = by
        && let Some(keys) = idx.get_mut(by)
    {
        keys.remove(key);
        if keys.is_empty() {
            idx.remove(by);
        }
    }
}

#[cfg(test)]
mod tests;
