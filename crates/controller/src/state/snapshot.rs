//! Building the engine's [`Snapshot`] from the index: bound pods and provisionable pending
//! pods, nodes, claims (observed and in flight), NodePools, daemonsets, PDBs and volumes. An
//! object that does not convert is left out and reported, never fatal.

use std::collections::BTreeMap;
use std::sync::Arc;

use nodewright_core::model::{InstanceType, Snapshot};
use nodewright_core::time::Timestamp;

use super::{ClusterState, convert};

/// Frees the nominated pods (`held`, indices into `s.pods`) that no longer fit on their
/// claim's registered Node beside the pods kube-scheduler bound there. kube-scheduler does not
/// know the nominations: when a claim's Node arrives it binds whichever pending pods come
/// first, so a Node can fill up with pods nominated elsewhere while its own nominees wait.
/// Held there, those nominees would be counted on a full Node (and their places on the other
/// claims counted free) until the nomination lapsed, and only then launched for. Freed, the
/// next solve places them as upstream's does: in the room the other claims and nodes have
/// left, or on a new claim. Pods on a claim with no Node yet keep their places.
fn release_overflow(s: &mut Snapshot, held: &[usize]) {
    if held.is_empty() {
        return;
    }
    let mut free: BTreeMap<&str, nodewright_core::resources::Resources> = s
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n.allocatable.clone()))
        .collect();
    let held_set: std::collections::BTreeSet<usize> = held.iter().copied().collect();
    for (i, p) in s.pods.iter().enumerate() {
        if held_set.contains(&i) {
            continue;
        }
        if let Some(room) = p.node_name.as_deref().and_then(|n| free.get_mut(n)) {
            room.sub(&p.requests);
        }
    }
    let mut release = Vec::new();
    for &i in held {
        let p = &s.pods[i];
        let Some(room) = p.node_name.as_deref().and_then(|n| free.get_mut(n)) else {
            continue;
        };
        if p.requests.fits_in(room) {
            room.sub(&p.requests);
        } else {
            release.push(i);
        }
    }
    for i in release {
        s.pod_mut(i).node_name = None;
    }
}

/// Counts a Node whose claim is launched but not initialized as holding what its claim
/// holds, as upstream's cluster state does. Such a Node may not show its allocatable yet (its
/// kubelet writes status after creating it; device plugins add theirs later), and counted by
/// its own status it would hold nothing: its claim's nominees would be let go
/// ([`release_overflow`]) and launched for again, a second node for the same pods.
fn room_of_uninitialized_nodes(s: &mut Snapshot) {
    let launched: BTreeMap<&str, &nodewright_core::resources::Resources> = s
        .node_claims
        .iter()
        .filter(|c| !c.initialized && !c.allocatable.is_empty())
        .filter_map(|c| Some((c.node_name.as_deref()?, &c.allocatable)))
        .collect();
    if launched.is_empty() {
        return;
    }
    for n in &mut s.nodes {
        if let Some(&room) = launched.get(n.name.as_str())
            && n.allocatable != *room
        {
            Arc::make_mut(n).allocatable = room.clone();
        }
    }
}

/// Keys (`namespace/name`) of the provisionable pods, sorted.
pub fn pending_pods(state: &ClusterState) -> Vec<String> {
    state.pending().iter().map(|k| k.to_string()).collect()
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
        for (key, n) in &self.nodes {
            keep(&mut s.nodes, &mut problems, self.models.node(key, n));
        }
        for (key, c) in &self.nodeclaims {
            keep(&mut s.node_claims, &mut problems, self.models.claim(key, c));
        }
        for c in self.in_flight.values() {
            let converted = convert::nodeclaim(c).map(Arc::new);
            keep(&mut s.node_claims, &mut problems, converted);
        }
        room_of_uninitialized_nodes(&mut s);
        self.take_pods(&mut s, &mut problems);
        for (key, d) in &self.daemonsets {
            let d = nodewright_api::workload::daemonset_pod(d)
                .map_err(|e| format!("DaemonSet {key}: {e}"));
            keep(&mut s.daemonsets, &mut problems, d);
        }
        for p in self.pdbs.values() {
            keep(&mut s.pdbs, &mut problems, convert::pdb(p));
        }
        s.namespaces = self
            .namespaces
            .iter()
            .map(|(name, n)| (name.clone(), n.metadata.labels.clone().unwrap_or_default()))
            .collect();
        for v in self.pvs.values() {
            keep(&mut s.persistent_volumes, &mut problems, convert::pv(v));
        }
        s.persistent_volume_claims = self.pvcs.values().map(convert::pvc).collect();
        for c in self.storage_classes.values() {
            keep(
                &mut s.storage_classes,
                &mut problems,
                convert::storage_class(c),
            );
        }
        (s, problems)
    }

    /// The bound and provisionable pods, each shared with the index; a pod nominated to a
    /// claim is placed on it, then those that no longer fit on their Node are let go
    /// ([`release_overflow`]).
    fn take_pods(&self, s: &mut Snapshot, problems: &mut Vec<String>) {
        let mut held = Vec::new();
        for (key, p) in &self.pods {
            // The index keeps a model for exactly the pods a snapshot takes: bound ones and
            // provisionable ones.
            let Some(model) = p.model() else {
                continue;
            };
            match model {
                Ok(pod) => {
                    // Shared with the index; only a nominated pod is copied, to move it.
                    let mut pod = Arc::clone(pod);
                    // A pod nominated to a claim holds its place there: the solve counts
                    // it on that claim instead of launching for it again.
                    if p.bound_to().is_none()
                        && let Some(c) = self.nominated_claim(key, s.now)
                    {
                        Arc::make_mut(&mut pod).node_name = Some(
                            c.status
                                .as_ref()
                                .and_then(|s| s.node_name.clone())
                                .or_else(|| c.metadata.name.clone())
                                .unwrap_or_default(),
                        );
                        held.push(s.pods.len());
                    }
                    s.pods.push(pod)
                }
                Err(e) => problems.push(format!("Pod {key}: {e}")),
            }
        }
        release_overflow(s, &held);
    }
}

/// Keeps a converted object, or the reason it did not convert.
fn keep<T>(out: &mut Vec<T>, problems: &mut Vec<String>, converted: Result<T, String>) {
    match converted {
        Ok(t) => out.push(t),
        Err(e) => problems.push(e),
    }
}
