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
    pub namespace: String,
    pub name: String,
    pub pod: Pod,
}

/// Everything a decision needs, captured at one instant. Nothing in `core` fetches more.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub now: Timestamp,
    pub nodepools: Vec<NodePool>,
    /// The instance types each NodePool may launch, by NodePool name.
    pub instance_types: BTreeMap<String, Arc<Vec<InstanceType>>>,
    pub nodes: Vec<Node>,
    pub node_claims: Vec<NodeClaim>,
    /// Pending and bound pods alike.
    pub pods: Vec<Pod>,
    pub daemonsets: Vec<DaemonSet>,
    pub pdbs: Vec<PodDisruptionBudget>,
    pub persistent_volume_claims: Vec<PersistentVolumeClaim>,
    pub persistent_volumes: Vec<PersistentVolume>,
    pub storage_classes: Vec<StorageClass>,
    /// Namespace labels, for pod-affinity `namespaceSelector`s.
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    /// The running disruption commands, which claims each waits for before its targets
    /// drain. The cluster does not record it: `InFlight::view` sets it for later rounds.
    pub commands_in_flight: Vec<CommandInFlight>,
}

/// One running disruption command, by NodeClaim names: its targets drain once every one of
/// its replacements is initialized.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CommandInFlight {
    pub targets: Vec<String>,
    pub replacements: Vec<String>,
}
