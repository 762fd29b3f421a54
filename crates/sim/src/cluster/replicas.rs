//! The controllers that keep each workload's replicas (Deployments, StatefulSets, Jobs):
//! new pods for missing replicas, the pods a scale-down deletes first, and each new pod's
//! name, labels and volumes.

use std::collections::BTreeMap;
use std::sync::Arc;

use nodewright_core::model::{OwnerRef, Pod, PodPhase};
use nodewright_core::scheduling::FastMap;
use nodewright_core::time::Timestamp;

use super::{Cluster, Workload, WorkloadKind};
use crate::volumes;

impl Cluster {
    /// Creates and deletes pods so every workload has its replica count. Returns the keys of
    /// created and deleted pods.
    pub fn reconcile(&mut self, now: Timestamp) -> (Vec<String>, Vec<String>) {
        let mut created = Vec::new();
        let mut deleted = Vec::new();
        let keys: Vec<(String, String)> = self.workloads.keys().cloned().collect();
        // How many pods each (namespace, controller name) controls, terminating ones apart,
        // from the ledger; their keys only for workloads that own too many (building one per
        // pod of every workload each time cost more than the rest of the pass).
        self.sync_ledger();
        // A ReplicaSet replaces a terminating pod at once; a StatefulSet waits for it to be
        // gone, since the replacement takes its name.
        let counts_terminating = |w: &Workload| w.kind == WorkloadKind::StatefulSet;
        let mut owned_by: BTreeMap<(String, String), (usize, Vec<String>)> = BTreeMap::new();
        let mut excess: FastMap<(&str, &str), bool> = FastMap::default();
        for key in &keys {
            let w = &self.workloads[key];
            let (all, live) = self.ledger.controlled(key);
            let count = if counts_terminating(w) { all } else { live };
            if count > w.wanted() as usize {
                excess.insert((key.0.as_str(), key.1.as_str()), counts_terminating(w));
            }
            owned_by.insert(key.clone(), (count, Vec::new()));
        }
        if !excess.is_empty() {
            for p in self.pods.values() {
                let Some(o) = p.owner.as_ref().filter(|o| o.controller) else {
                    continue;
                };
                let owner = (p.namespace.as_str(), o.name.as_str());
                if let Some(&terminating_too) = excess.get(&owner)
                    && (terminating_too || p.deletion_timestamp.is_none())
                {
                    let k = (owner.0.to_string(), owner.1.to_string());
                    if let Some(e) = owned_by.get_mut(&k) {
                        e.1.push(p.key());
                    }
                }
            }
        }
        for key in keys {
            let w = &self.workloads[&key];
            // A bare pod has no controller: it is made once, and once gone it stays gone.
            if w.kind == WorkloadKind::Pod && w.next_ordinal > 0 {
                continue;
            }
            let (count, owned) = owned_by.remove(&key).unwrap_or_default();
            let want = w.wanted() as usize;
            if count > want {
                let excess = count - want;
                for victim in self.scale_down_order(w, owned).into_iter().take(excess) {
                    self.remove_pod(&victim, now);
                    deleted.push(victim);
                }
            } else {
                for _ in count..want {
                    let pod = self.new_replica(&key, now);
                    let templates = &self.workloads[&key].claim_templates;
                    if !templates.is_empty() {
                        let templates = templates.clone();
                        volumes::ensure_claims(self, &key.0, &templates, &pod.name);
                    }
                    created.push(pod.key());
                    self.insert_pod(pod);
                    self.changes += 1;
                }
            }
        }
        (created, deleted)
    }

    /// Kubernetes' ReplicaSet scale-down preference: unbound pods first, then pods sharing a
    /// node with more replicas, then the newest; StatefulSets remove the highest ordinals.
    fn scale_down_order(&self, w: &Workload, owned: Vec<String>) -> Vec<String> {
        let mut pods: Vec<&Pod> = owned
            .iter()
            .filter_map(|k| self.pods.get(k).map(Arc::as_ref))
            .collect();
        if w.kind == WorkloadKind::StatefulSet {
            pods.sort_by(|a, b| {
                b.creation_timestamp
                    .cmp(&a.creation_timestamp)
                    .then(b.name.cmp(&a.name))
            });
            return pods.into_iter().map(|p| p.key()).collect();
        }
        let mut colocated: BTreeMap<&str, usize> = BTreeMap::new();
        for p in &pods {
            if let Some(n) = &p.node_name {
                *colocated.entry(n.as_str()).or_default() += 1;
            }
        }
        pods.sort_by(|a, b| {
            let rank = |p: &Pod| {
                (
                    p.node_name.is_some(),
                    std::cmp::Reverse(p.node_name.as_deref().map_or(0, |n| colocated[n])),
                    std::cmp::Reverse(p.creation_timestamp),
                )
            };
            rank(a).cmp(&rank(b)).then_with(|| b.name.cmp(&a.name))
        });
        pods.into_iter().map(|p| p.key()).collect()
    }

    fn new_replica(&mut self, key: &(String, String), now: Timestamp) -> Pod {
        let w = self.workloads.get_mut(key).expect("workload exists");
        let name = match w.kind {
            WorkloadKind::StatefulSet => {
                let ordinal = (0..)
                    .find(|i| {
                        !self
                            .pods
                            .contains_key(&format!("{}/{}-{i}", w.namespace, w.name))
                    })
                    .unwrap_or(0);
                format!("{}-{ordinal}", w.name)
            }
            WorkloadKind::Pod => {
                w.next_ordinal = 1;
                w.name.clone()
            }
            WorkloadKind::Deployment | WorkloadKind::Job => {
                w.next_ordinal += 1;
                format!("{}-{:05}", w.name, w.next_ordinal)
            }
        };
        let mut pod = w.template.clone();
        pod.namespace = w.namespace.clone();
        pod.name = name.clone();
        pod.volume_claims.extend(
            w.claim_templates
                .iter()
                .map(|t| volumes::claim_name(t, &name)),
        );
        pod.uid = format!("{}/{}", w.namespace, name);
        pod.owner = Some(OwnerRef {
            kind: match w.kind {
                WorkloadKind::Deployment => "ReplicaSet",
                WorkloadKind::StatefulSet => "StatefulSet",
                WorkloadKind::Pod => "Scenario",
                WorkloadKind::Job => "Job",
            }
            .to_string(),
            name: w.name.clone(),
            controller: w.kind != WorkloadKind::Pod,
        });
        if w.kind == WorkloadKind::Pod {
            pod.owner = None;
        }
        pod.node_name = None;
        pod.phase = PodPhase::Pending;
        pod.creation_timestamp = now;
        pod.start_time = None;
        pod.ready = false;
        pod
    }
}
