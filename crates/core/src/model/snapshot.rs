use std::collections::BTreeMap;
use std::sync::Arc;

use super::{
    InstanceType, Node, NodeClaim, NodePool, PersistentVolume, PersistentVolumeClaim, Pod,
    PodDisruptionBudget, StorageClass,
};
use crate::time::Timestamp;

/// A DaemonSet reduced to the pod it would run on every matching node.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DaemonSet {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// The pod template, as the pod it makes: its requests count against every new node
    /// it would run on.
    pub pod: Pod,
}

/// Everything a decision needs, captured at one instant. Nothing in `core` fetches more.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// The instant the snapshot stands for; every decision reads time from here.
    pub now: Timestamp,
    /// Every NodePool.
    pub nodepools: Vec<NodePool>,
    /// The instance types each NodePool may launch, by NodePool name.
    pub instance_types: BTreeMap<String, Arc<Vec<InstanceType>>>,
    /// Every Node, Karpenter's or not. Shared, as pods are, so that a shell keeping each
    /// Node's conversion hands every snapshot a reference rather than a copy; a decision that
    /// changes one copies it ([`Snapshot::node_mut`]).
    pub nodes: Vec<Arc<Node>>,
    /// Every NodeClaim, launched or in flight; shared as Nodes are ([`Snapshot::claim_mut`]).
    pub node_claims: Vec<Arc<NodeClaim>>,
    /// Pending and bound pods alike. Shared, so a shell's snapshot of every pod is a count
    /// of references, not a copy of each pod; a decision that changes a pod copies it
    /// (`Arc::make_mut`).
    pub pods: Vec<Arc<Pod>>,
    /// Every DaemonSet, for the overhead its pods add to a new node.
    pub daemonsets: Vec<DaemonSet>,
    /// Every PodDisruptionBudget, for the evictions disruption may make.
    pub pdbs: Vec<PodDisruptionBudget>,
    /// Every PersistentVolumeClaim, for the volumes pods mount.
    pub persistent_volume_claims: Vec<PersistentVolumeClaim>,
    /// Every PersistentVolume, for where bound claims may be used.
    pub persistent_volumes: Vec<PersistentVolume>,
    /// Every StorageClass, for where unbound claims may be provisioned.
    pub storage_classes: Vec<StorageClass>,
    /// Namespace labels, for pod-affinity `namespaceSelector`s.
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    /// The running disruption commands, which claims each waits for before its targets
    /// drain. The cluster does not record it: `InFlight::view` sets it for later rounds.
    pub commands_in_flight: Vec<CommandInFlight>,
}

impl Snapshot {
    /// The pod at `i` to change: copied first if anything else (another snapshot, the
    /// controller's index, the simulator's cluster) still holds it.
    pub fn pod_mut(&mut self, i: usize) -> &mut Pod {
        Arc::make_mut(&mut self.pods[i])
    }

    /// The Node at `i` to change, copied first if anything else still holds it.
    pub fn node_mut(&mut self, i: usize) -> &mut Node {
        Arc::make_mut(&mut self.nodes[i])
    }

    /// The NodeClaim at `i` to change, copied first if anything else still holds it.
    pub fn claim_mut(&mut self, i: usize) -> &mut NodeClaim {
        Arc::make_mut(&mut self.node_claims[i])
    }
}

/// One running disruption command, by NodeClaim names: its targets drain once every one of
/// its replacements is initialized.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CommandInFlight {
    /// The NodeClaims it removes.
    pub(crate) targets: Vec<String>,
    /// The NodeClaims it launched, which must be initialized before the targets drain.
    pub(crate) replacements: Vec<String>,
}
