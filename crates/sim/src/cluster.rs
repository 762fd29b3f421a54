//! The simulated cluster: NodePools, NodeClaims with their instances and nodes, pods, and the
//! controllers (Deployments, StatefulSets, bare pods) that keep replicas alive (`replicas`);
//! the snapshots the engine's decisions see are built in `view`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use nodewright_core::labels;
use nodewright_core::model::{
    CapacityType, DaemonSet, InstanceType, Node, NodeClaim, NodePool, PersistentVolume,
    PersistentVolumeClaim, Pod, PodPhase, StorageClass,
};
use nodewright_core::requirements::Operator;
use nodewright_core::resources::Resources;
use nodewright_core::scheduling::FastMap;
use nodewright_core::time::Timestamp;

use crate::disruption_budget::SimPdb;
use crate::volumes::{self, ClaimTemplate, Provisioned};
use free::FreeTable;
pub use free::{ReadyCpu, Room};
use ledger::Ledger;
use maintained::Maintained;
use nodewright_cloud_sim::Fleet;
use nodewright_cloud_sim::fleet::Launch;

#[derive(Clone, Debug)]
pub struct SimClaim {
    pub claim: NodeClaim,
    pub instance: Option<Launch>,
    /// Present from the moment the node is Ready.
    pub node: Option<Node>,
    pub launched_at: Option<Timestamp>,
    /// When its instance was told to terminate: from then until the cloud reports the
    /// instance terminated, the claim and its Node stay, deleting and cordoned, as the
    /// controller's termination keeps their finalizers until then.
    pub terminating: Option<Timestamp>,
    /// When the claim and its Node went.
    pub deleted_at: Option<Timestamp>,
    /// Why it was created, for the timeline.
    pub reason: String,
}

/// The Node of claim `key` as a snapshot holds it, when Ready: stamped with the claim's last
/// write as its `resourceVersion`.
pub(crate) fn snapshot_node(
    key: &str,
    c: &SimClaim,
    versions: &FastMap<String, u64>,
) -> Option<Node> {
    let mut n = c.ready_node()?.clone();
    n.resource_version = versions.get(key).map(u64::to_string).unwrap_or_default();
    Some(n)
}

impl SimClaim {
    pub fn is_live(&self) -> bool {
        self.deleted_at.is_none()
    }

    /// Live and not yet told to terminate: its instance runs and is billed.
    pub fn is_running(&self) -> bool {
        self.is_live() && self.terminating.is_none()
    }

    pub fn ready_node(&self) -> Option<&Node> {
        self.node.as_ref().filter(|_| self.is_live())
    }

    /// Price per hour while the instance runs.
    pub fn price(&self) -> f64 {
        self.instance.as_ref().map_or(0.0, |i| i.price)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkloadKind {
    Deployment,
    StatefulSet,
    /// A bare pod: nothing recreates it.
    Pod,
    /// Runs pods until `completions` of them succeeded, at most `replicas` (parallelism) at
    /// a time.
    Job,
}

/// How a Job's pods finish: each runs this long once bound, then succeeds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobSpec {
    pub completions: u32,
    /// `None`: the pods never finish on their own.
    pub run_for: Option<std::time::Duration>,
    pub succeeded: u32,
}

#[derive(Clone, Debug)]
pub struct Workload {
    pub kind: WorkloadKind,
    pub namespace: String,
    pub name: String,
    pub replicas: u32,
    /// The pod every replica is made from (`name` and `namespace` are filled per replica).
    pub template: Pod,
    /// Set for Jobs.
    pub job: Option<JobSpec>,
    /// A StatefulSet's `volumeClaimTemplates`.
    pub claim_templates: Vec<ClaimTemplate>,
    /// The last replica number used; for a bare pod, 1 once it was made.
    next_ordinal: u64,
}

impl Workload {
    pub fn new(
        kind: WorkloadKind,
        namespace: &str,
        name: &str,
        replicas: u32,
        template: Pod,
    ) -> Self {
        Workload {
            kind,
            namespace: namespace.to_string(),
            name: name.to_string(),
            replicas,
            template,
            job: None,
            claim_templates: Vec::new(),
            next_ordinal: 0,
        }
    }

    /// How many pods the controller wants now.
    pub fn wanted(&self) -> u32 {
        match &self.job {
            Some(j) => self.replicas.min(j.completions.saturating_sub(j.succeeded)),
            None => self.replicas,
        }
    }
}

impl Workload {
    /// Takes a re-applied manifest's replicas and template; existing pods keep running and
    /// new replicas continue the naming sequence.
    pub fn update_from(&mut self, newer: Workload) {
        self.kind = newer.kind;
        self.replicas = newer.replicas;
        self.template = newer.template;
        self.claim_templates = newer.claim_templates;
        if let (Some(j), Some(n)) = (self.job.as_mut(), newer.job) {
            j.completions = n.completions;
            j.run_for = n.run_for;
        } else {
            self.job = newer.job;
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct Cluster {
    pub nodepools: Vec<NodePool>,
    /// Instance types each NodePool may launch, before ICE marks.
    pub catalog: BTreeMap<String, Arc<Vec<InstanceType>>>,
    /// The simulated cloud: its launches, faults and the offerings it remembers as out of
    /// capacity, which every snapshot's catalog shows unavailable.
    pub cloud: Fleet,
    /// Read with [`Cluster::claims`]; change with [`Cluster::insert_claim`] and
    /// [`Cluster::claim_mut`], which keep the maintained snapshot in step.
    claims: BTreeMap<String, SimClaim>,
    /// Every pod by key. Read with [`Cluster::pods`]; add pods with [`Cluster::insert_pod`],
    /// move them with [`Cluster::bind`] / [`Cluster::remove_pod`] and change them with
    /// [`Cluster::pod_mut`], which keep the per-node index and the maintained snapshot.
    /// Shared with that snapshot: a change copies the one pod while a snapshot holds it.
    pods: BTreeMap<String, Arc<Pod>>,
    /// Node name → keys of the pods bound to it, so per-node questions cost the node's pods
    /// rather than a scan of every pod.
    on_node: BTreeMap<String, BTreeSet<String>>,
    /// What is free on each Ready node ([`Cluster::room`]), told of every claim changed and
    /// every node whose pods were added, moved, changed or removed.
    free: FreeTable,
    pub workloads: BTreeMap<(String, String), Workload>,
    pub daemonsets: Vec<DaemonSet>,
    /// PodDisruptionBudgets by (namespace, name).
    pub pdbs: BTreeMap<(String, String), SimPdb>,
    pub storage_classes: BTreeMap<String, StorageClass>,
    /// PersistentVolumeClaims by (namespace, name); a StatefulSet's outlive its pods.
    pub pvcs: BTreeMap<(String, String), PersistentVolumeClaim>,
    pub pvs: BTreeMap<String, PersistentVolume>,
    /// Volumes provisioned since the engine last took this list, for the timeline.
    pub provisioned: Vec<Provisioned>,
    claim_seq: u64,
    /// Counts every change a provisioning or disruption decision could depend on (pods bound,
    /// created or removed; claims created, launched, Ready, tainted or deleted; objects
    /// applied), so decisions over an unchanged cluster can be skipped.
    pub changes: u64,
    /// The snapshot decisions see, kept up to date (see [`Cluster::view`]).
    maintained: Maintained,
    /// Pods and claims changed since the invariant check last looked (see [`Journal`]).
    journal: Journal,
    /// Pods per controller, pending pods and cpu requested per node, kept per pod change.
    ledger: Ledger,
    /// Per claim, the write that last changed it: its Node's `resourceVersion` in snapshots.
    versions: FastMap<String, u64>,
    /// Writes to claims so far, numbering them.
    writes: u64,
    /// Keys of the pods with a required pod anti-affinity term: the kube-scheduler keeps every
    /// other pod such a term selects out of its domain, so it reads these for every placement.
    anti_affine: BTreeSet<String>,
}

/// The pods and claims changed since [`Cluster::take_journal`] was last called, so a check of
/// the whole cluster can look again at only what they touch. Nothing is recorded before the
/// first call: the first answer is `everything`.
#[derive(Clone, Debug, Default)]
pub struct Journal {
    /// Whether anything may have changed that the sets do not name (the first call).
    pub everything: bool,
    pub pods: BTreeSet<String>,
    pub claims: BTreeSet<String>,
    /// Whether the journal records (set by the first take).
    recording: bool,
}

impl Journal {
    fn pod(&mut self, key: &str) {
        if self.recording && !self.pods.contains(key) {
            self.pods.insert(key.to_string());
        }
    }

    fn claim(&mut self, name: &str) {
        if self.recording && !self.claims.contains(name) {
            self.claims.insert(name.to_string());
        }
    }
}

impl Cluster {
    pub fn next_claim_name(&mut self, nodepool: &str) -> String {
        self.claim_seq += 1;
        format!("{nodepool}-{:05}", self.claim_seq)
    }

    /// Every pod by key.
    pub fn pods(&self) -> &BTreeMap<String, Arc<Pod>> {
        &self.pods
    }

    /// Every NodeClaim ever made by name, live or deleted.
    pub fn claims(&self) -> &BTreeMap<String, SimClaim> {
        &self.claims
    }

    fn pod_changed(&mut self, key: &str) {
        self.maintained.pod_changed(key);
        self.journal.pod(key);
        self.ledger.note(key);
    }

    fn claim_changed(&mut self, name: &str) {
        self.maintained.claim_changed(name);
        self.journal.claim(name);
        self.free.claim_changed(name);
    }

    /// The pods and claims changed since the last call (everything, at the first), and a
    /// fresh journal.
    pub fn take_journal(&mut self) -> Journal {
        let mut j = std::mem::take(&mut self.journal);
        self.journal.recording = true;
        j.everything = !j.recording;
        j
    }

    /// A pod to change in place (not its node: that is [`Cluster::bind`], nor its pod
    /// anti-affinity terms, which [`Cluster::insert_pod`] indexes and Kubernetes never changes).
    pub fn pod_mut(&mut self, key: &str) -> Option<&mut Pod> {
        let p = Arc::make_mut(self.pods.get_mut(key)?);
        if let Some(n) = &p.node_name {
            self.free.node_changed(n);
        }
        self.maintained.pod_changed(key);
        self.journal.pod(key);
        self.ledger.note(key);
        Some(p)
    }

    /// A claim (with its instance and node) to change in place.
    pub fn claim_mut(&mut self, name: &str) -> Option<&mut SimClaim> {
        if !self.claims.contains_key(name) {
            return None;
        }
        self.wrote(name);
        self.maintained.claim_changed(name);
        self.journal.claim(name);
        self.free.claim_changed(name);
        self.claims.get_mut(name)
    }

    /// A NodeClaim's status to change in place: unlike [`Cluster::claim_mut`], the claim's
    /// Node and the Node's version stay as they are, as a status write leaves them.
    fn claim_status_mut(&mut self, name: &str) -> Option<&mut NodeClaim> {
        let c = self.claims.get_mut(name)?;
        self.maintained.claim_status_changed(name);
        self.journal.claim(name);
        Some(&mut c.claim)
    }

    /// Adds (or replaces) a claim.
    pub fn insert_claim(&mut self, name: &str, claim: SimClaim) {
        self.wrote(name);
        self.claim_changed(name);
        self.claims.insert(name.to_string(), claim);
    }

    /// Numbers a write to claim `name`, made before the change it stands for: the change is
    /// done by the time a snapshot is taken, so a Node version in a snapshot always names its
    /// current state.
    fn wrote(&mut self, name: &str) {
        self.writes += 1;
        match self.versions.get_mut(name) {
            Some(v) => *v = self.writes,
            None => {
                self.versions.insert(name.to_string(), self.writes);
            }
        }
    }

    pub fn nodepool(&self, name: &str) -> Option<&NodePool> {
        self.nodepools.iter().find(|p| p.name == name)
    }

    /// Live nodes that are Ready, by name.
    pub fn ready_nodes(&self) -> impl Iterator<Item = (&SimClaim, &Node)> {
        self.claims
            .values()
            .filter_map(|c| c.ready_node().map(|n| (c, n)))
    }

    pub fn claim_of_node(&self, node: &str) -> Option<&SimClaim> {
        self.claims
            .values()
            .find(|c| c.is_live() && c.claim.node_name.as_deref() == Some(node))
    }

    /// Brings the per-pod figures ([`Cluster::pending_keys`], [`Cluster::workload_pods`])
    /// up to date with the pods.
    pub fn sync_ledger(&mut self) {
        self.ledger.sync(&self.pods);
    }

    /// The keys of [`Cluster::pending_pods`], in the same order.
    pub fn pending_keys(&mut self) -> &BTreeSet<String> {
        self.sync_ledger();
        self.ledger.pending()
    }

    /// Pods no DaemonSet owns, as of the last [`Cluster::sync_ledger`].
    pub fn workload_pods(&self) -> usize {
        self.ledger.workload_pods()
    }

    /// How many keys [`Cluster::pending_keys`] holds, as of the last [`Cluster::sync_ledger`].
    pub fn pending_count(&self) -> usize {
        self.ledger.pending().len()
    }

    /// Unbound pods no DaemonSet owns, by key (a scan of every pod; see
    /// [`Cluster::pending_keys`]).
    pub fn pending_pods(&self) -> Vec<&Pod> {
        self.pods
            .values()
            .filter(|p| p.node_name.is_none() && !p.is_daemonset_pod())
            .map(|p| &**p)
            .collect()
    }

    /// The pods with a required pod anti-affinity term, by key.
    pub fn anti_affine_pods(&self) -> impl Iterator<Item = &Pod> {
        self.anti_affine
            .iter()
            .filter_map(|k| self.pods.get(k).map(Arc::as_ref))
    }

    pub fn pods_on(&self, node: &str) -> impl Iterator<Item = &Pod> {
        self.on_node
            .get(node)
            .into_iter()
            .flatten()
            .filter_map(|k| self.pods.get(k).map(Arc::as_ref))
    }

    /// The keys of the pods bound to `node`.
    pub fn pod_keys_on(&self, node: &str) -> impl Iterator<Item = &str> {
        self.on_node
            .get(node)
            .into_iter()
            .flatten()
            .map(String::as_str)
    }

    /// Adds (or replaces) a pod, bound or not.
    pub fn insert_pod(&mut self, pod: Pod) {
        let key = pod.key();
        self.unindex(&key);
        self.pod_changed(&key);
        if pod.pod_anti_affinity.is_empty() {
            self.anti_affine.remove(&key);
        } else {
            self.anti_affine.insert(key.clone());
        }
        if let Some(n) = &pod.node_name {
            self.free.node_changed(n);
            self.on_node
                .entry(n.clone())
                .or_default()
                .insert(key.clone());
        }
        self.pods.insert(key, Arc::new(pod));
    }

    fn unindex(&mut self, key: &str) {
        let Some(node) = self.pods.get(key).and_then(|p| p.node_name.as_ref()) else {
            return;
        };
        self.free.node_changed(node);
        if let Some(set) = self.on_node.get_mut(node) {
            set.remove(key);
            if set.is_empty() {
                self.on_node.remove(node);
            }
        }
    }

    /// Whether the per-node index agrees with the pods' `node_name`s (checked with the
    /// invariants).
    pub fn index_is_consistent(&self) -> bool {
        let mut want: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for (k, p) in &self.pods {
            if let Some(n) = &p.node_name {
                want.entry(n.as_str()).or_default().insert(k.as_str());
            }
        }
        want.len() == self.on_node.len()
            && want.iter().all(|(n, keys)| {
                self.on_node
                    .get(*n)
                    .is_some_and(|have| have.iter().map(String::as_str).eq(keys.iter().copied()))
            })
    }

    /// Allocatable minus the requests of the pods bound to `node`.
    pub fn free(&self, node: &Node) -> Resources {
        let mut free = node.allocatable.clone();
        for p in self.pods_on(&node.name) {
            free.sub(&p.requests);
        }
        free
    }

    /// [`Cluster::free`] of every Ready node, in [`Cluster::ready_nodes`] order, with a column
    /// for each of `names` (see [`Room`]). Only the nodes whose pods or claim changed since
    /// the last call are summed again.
    pub fn room(&mut self, names: &[&str]) -> Room {
        self.sync_free();
        self.free.room(names)
    }

    /// Brings what [`Cluster::ready_cpu`] reads up to date.
    pub fn sync_free(&mut self) {
        self.free.refresh(&self.claims, &self.pods, &self.on_node);
    }

    /// How many nodes are Ready, their summed allocatable cpu and the summed cpu requests of
    /// the pods bound to their names, as of the last [`Cluster::sync_free`].
    pub fn ready_cpu(&self) -> ReadyCpu {
        self.free.cpu()
    }

    /// Records a pod bind or unbind on the node's claim, for `consolidateAfter`.
    pub fn touch(&mut self, node: &str, now: Timestamp) {
        let owns = |c: &SimClaim| c.is_live() && c.claim.node_name.as_deref() == Some(node);
        // Simulated nodes take their claim's name; look there before scanning.
        let key = match self.claims.get(node) {
            Some(c) if owns(c) => Some(node.to_string()),
            _ => self
                .claims
                .iter()
                .find(|(_, c)| owns(c))
                .map(|(k, _)| k.clone()),
        };
        if let Some(c) = key.and_then(|k| self.claim_status_mut(&k)) {
            c.last_pod_event_time = Some(now);
        }
    }

    /// How many times a pod or a claim was added, changed or removed. Together with
    /// [`Cluster::changes`] (bumped by every applied object) it tells whether anything a check
    /// of the whole cluster reads may differ since the check last ran.
    pub fn edits(&self) -> u64 {
        self.maintained.edits
    }

    /// Records a change (see [`Cluster::changes`]).
    pub fn changed(&mut self) {
        self.changes += 1;
    }

    pub fn bind(&mut self, pod: &str, node: &str, now: Timestamp) {
        self.changes += 1;
        self.unindex(pod);
        self.pod_changed(pod);
        if let Some(p) = self.pods.get_mut(pod).map(Arc::make_mut) {
            self.free.node_changed(node);
            self.on_node
                .entry(node.to_string())
                .or_default()
                .insert(pod.to_string());
            p.node_name = Some(node.to_string());
            p.phase = PodPhase::Running;
            p.start_time = Some(now);
            p.ready = true;
            let daemon = p.is_daemonset_pod();
            let has_volumes = !p.volume_claims.is_empty();
            if !daemon {
                self.touch(node, now);
            }
            if has_volumes {
                volumes::provision_at_first_bind(self, pod, node);
            }
        }
    }

    /// Removes a pod; its controller replaces it at the next [`Cluster::reconcile`].
    pub fn remove_pod(&mut self, key: &str, now: Timestamp) -> Option<Pod> {
        self.unindex(key);
        self.pod_changed(key);
        self.anti_affine.remove(key);
        let p = self.pods.remove(key)?;
        self.changes += 1;
        if let Some(node) = &p.node_name
            && !p.is_daemonset_pod()
        {
            self.touch(&node.clone(), now);
        }
        Some(Arc::unwrap_or_clone(p))
    }
}

/// The labels a node of `it` launched in `zone` as `capacity_type` for `pool` carries.
pub fn node_labels(
    pool: &NodePool,
    it: &InstanceType,
    zone: &str,
    capacity_type: CapacityType,
    region: &str,
    node: &str,
) -> BTreeMap<String, String> {
    let mut l: BTreeMap<String, String> = pool.template.labels.clone();
    for r in &it.requirements {
        if r.operator == Operator::In && r.values.len() == 1 {
            l.insert(r.key.clone(), r.values[0].clone());
        }
    }
    for r in &pool.template.requirements {
        if r.operator == Operator::In && r.values.len() == 1 && !l.contains_key(&r.key) {
            l.insert(r.key.clone(), r.values[0].clone());
        }
    }
    l.insert(labels::NODEPOOL.into(), pool.name.clone());
    l.insert(labels::INSTANCE_TYPE.into(), it.name.clone());
    l.insert(labels::ZONE.into(), zone.to_string());
    l.insert(labels::REGION.into(), region.to_string());
    l.insert(labels::CAPACITY_TYPE.into(), capacity_type.as_str().into());
    l.insert(labels::HOSTNAME.into(), node.to_string());
    l.insert(labels::REGISTERED.into(), "true".into());
    l.insert(labels::INITIALIZED.into(), "true".into());
    l
}

mod beside;
mod free;
mod ledger;
mod maintained;
mod replicas;
#[cfg(test)]
mod tests;
mod view;
