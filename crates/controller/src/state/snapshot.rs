//! Building the engine's [`Snapshot`] from the index: bound pods and provisionable pending
//! pods, nodes, claims (observed and in flight), NodePools, daemonsets, PDBs and volumes. An
//! object that does not convert is left out and reported, never fatal.

use std::collections::BTreeMap;
use std::sync::Arc;

use nodewright_core::model::{InstanceType, Snapshot};
use nodewright_core::time::Timestamp;

use super::{ClusterState, convert};

/// Keys (`namespace/name`) of the provisionable pods, sorted.
pub fn pending_pods(state: &ClusterState) -> Vec<String> {
    state.pending().iter().cloned().collect()
}

impl ClusterState {
    /// The snapshot at `now` with `instance_types` per NodePool. Returns the snapshot and a
    /// message for every object left out because it did not convert.
    pub fn snapshot(
        &self,
        now: Timestamp,
        instance_types: BTreeMap<String, Arc<Vec<InstanceType>>>,
    ) -> (Snapshot, Vec<String>) {
        let mut problems = Vec::new();
        let mut s = Snapshot {
            now,
            instance_types,
            ..Snapshot::default()
        };
        for np in self.nodepools.values() {
            if np.metadata.deletion_timestamp.is_some() {
                continue;
            }
            match nodewright_api::to_core::nodepool(np) {
                Ok(p) => s.nodepools.push(p),
                Err(errs) => problems.push(format!(
                    "NodePool {}: {}",
                    np.metadata.name.as_deref().unwrap_or_default(),
                    errs.iter()
                        .map(|e| e.to_string())
                        .collect::<Vec<_>>()
                        .join("; ")
                )),
            }
        }
        for n in self.nodes.values() {
            match convert::node(n) {
                Ok(n) => s.nodes.push(n),
                Err(e) => problems.push(e),
            }
        }
        for c in self.all_claims() {
            match convert::nodeclaim(c) {
                Ok(c) => s.node_claims.push(c),
                Err(e) => problems.push(e),
            }
        }
        for (key, p) in &self.pods {
            // The index keeps a model for exactly the pods a snapshot takes: bound ones and
            // provisionable ones.
            let Some(model) = p.model() else {
                continue;
            };
            match model {
                Ok(pod) => {
                    let mut pod = pod.clone();
                    // A pod nominated to a claim holds its place there: the solve counts
                    // it on that claim instead of launching for it again.
                    if p.bound_to().is_none()
                        && let Some(c) = self.nominated_claim(key, now)
                    {
                        pod.node_name = Some(
                            c.status
                                .as_ref()
                                .and_then(|s| s.node_name.clone())
                                .or_else(|| c.metadata.name.clone())
                                .unwrap_or_default(),
                        );
                    }
                    s.pods.push(pod)
                }
                Err(e) => problems.push(format!("Pod {key}: {e}")),
            }
        }
        for (key, d) in &self.daemonsets {
            match nodewright_api::workload::daemonset_pod(d) {
                Ok(d) => s.daemonsets.push(d),
                Err(e) => problems.push(format!("DaemonSet {key}: {e}")),
            }
        }
        for p in self.pdbs.values() {
            match convert::pdb(p) {
                Ok(p) => s.pdbs.push(p),
                Err(e) => problems.push(e),
            }
        }
        s.namespaces = self
            .namespaces
            .iter()
            .map(|(name, n)| (name.clone(), n.metadata.labels.clone().unwrap_or_default()))
            .collect();
        for v in self.pvs.values() {
            match convert::pv(v) {
                Ok(v) => s.persistent_volumes.push(v),
                Err(e) => problems.push(e),
            }
        }
        s.persistent_volume_claims = self.pvcs.values().map(convert::pvc).collect();
        for c in self.storage_classes.values() {
            match convert::storage_class(c) {
                Ok(c) => s.storage_classes.push(c),
                Err(e) => problems.push(e),
            }
        }
        (s, problems)
    }
}
