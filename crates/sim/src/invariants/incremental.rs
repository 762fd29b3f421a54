//! The invariant check looking again at only what changed.
//!
//! The full check is a pass over every Ready node and every pod, with a map lookup per bound
//! pod; it runs after every step that changed the cluster, which during a ramp-up is nearly
//! every step. Almost all of it is about one node and the pods bound to it, so the checker
//! keeps what each node and each pod gave last time and, from the cluster's journal of changed
//! pods and claims, works out which nodes (by name) may now read differently:
//! - a changed claim: its node before and after (Ready or gone, labels, taints, allocatable);
//! - a changed pod: the node it was bound to before and the one it is bound to now.
//!
//! Those nodes' over-commitment and every pod bound to them is checked again; a claim's
//! NodePool requirements are checked again when the claim changed, and all of them when a
//! NodePool did. What the journal cannot see is checked in full every time: pods that mount
//! volumes (PersistentVolumes and their claims change outside the pods) and the NodePool
//! limits (a sum over every claim, cheap). In debug builds the result is compared with the
//! full check after every step, and a property test drives both over random changes.

use std::collections::{BTreeMap, BTreeSet};

use nodewright_core::model::{Node, NodePool};

use super::{index_check, limits, over_commit, pod_violations, pool_requirement};
use crate::cluster::Cluster;

/// What the last check found, by node and by pod (see the module header).
#[derive(Clone, Debug, Default)]
pub struct Checker {
    /// Per claim with a Ready node, the node's name.
    node_of: BTreeMap<String, String>,
    /// Node name → the claims whose Ready node has that name.
    ready_by_node: BTreeMap<String, BTreeSet<String>>,
    /// Per claim, its node's over-commitment.
    over: BTreeMap<String, String>,
    /// Per claim, the NodePool requirement its node breaks.
    breaks: BTreeMap<String, String>,
    /// Per bound pod, the node name it was bound to when last checked.
    pod_node: BTreeMap<String, String>,
    /// Per pod without volumes, what is wrong with where it runs (only non-empty lists).
    pod_found: BTreeMap<String, Vec<String>>,
    /// Pods with volumes, checked in full every time.
    with_volumes: BTreeSet<String>,
    /// The NodePools `breaks` was found against.
    pools: Vec<NodePool>,
}

impl Checker {
    /// Every violation of `cluster`, as [`super::violations`] finds them.
    pub fn violations(&mut self, cluster: &mut Cluster) -> Vec<String> {
        let journal = cluster.take_journal();
        let cluster = &*cluster;
        let (claims, pods): (Vec<String>, Vec<String>) = if journal.everything {
            *self = Checker::default();
            (
                cluster.claims().keys().cloned().collect(),
                cluster.pods().keys().cloned().collect(),
            )
        } else {
            (
                journal.claims.into_iter().collect(),
                journal.pods.into_iter().collect(),
            )
        };
        // Node names whose over-commitment and pods are checked again.
        let mut nodes: BTreeSet<String> = BTreeSet::new();
        self.claims_changed(cluster, &claims, &mut nodes);
        if self.pools != cluster.nodepools {
            self.pools_changed(cluster);
        }
        self.pods_moved(cluster, &pods, &mut nodes);
        self.over_commit_on(cluster, &nodes);
        self.pods_on(cluster, &pods, &nodes);
        self.collect(cluster)
    }

    /// Where each changed claim's Ready node is now, and whether it breaks its NodePool's
    /// requirements; the nodes it left and joined go into `nodes`.
    fn claims_changed(
        &mut self,
        cluster: &Cluster,
        claims: &[String],
        nodes: &mut BTreeSet<String>,
    ) {
        for name in claims {
            self.over.remove(name);
            self.breaks.remove(name);
            if let Some(old) = self.node_of.remove(name) {
                if let Some(set) = self.ready_by_node.get_mut(&old) {
                    set.remove(name);
                    if set.is_empty() {
                        self.ready_by_node.remove(&old);
                    }
                }
                nodes.insert(old);
            }
            let Some(c) = cluster.claims().get(name) else {
                continue;
            };
            let Some(node) = c.ready_node() else {
                continue;
            };
            self.node_of.insert(name.clone(), node.name.clone());
            self.ready_by_node
                .entry(node.name.clone())
                .or_default()
                .insert(name.clone());
            nodes.insert(node.name.clone());
            if let Some(v) = pool_requirement(cluster, c, node) {
                self.breaks.insert(name.clone(), v);
            }
        }
    }

    /// The NodePools changed: every Ready claim is held against them again.
    fn pools_changed(&mut self, cluster: &Cluster) {
        self.pools = cluster.nodepools.clone();
        self.breaks.clear();
        for name in self.node_of.keys() {
            let c = &cluster.claims()[name];
            let node = c.ready_node().expect("a claim in node_of has a Ready node");
            if let Some(v) = pool_requirement(cluster, c, node) {
                self.breaks.insert(name.clone(), v);
            }
        }
    }

    /// Where each changed pod is bound now; the nodes it left and joined go into `nodes`.
    fn pods_moved(&mut self, cluster: &Cluster, pods: &[String], nodes: &mut BTreeSet<String>) {
        for key in pods {
            if let Some(old) = self.pod_node.remove(key) {
                nodes.insert(old);
            }
            self.pod_found.remove(key);
            self.with_volumes.remove(key);
            if let Some(n) = cluster.pods().get(key).and_then(|p| p.node_name.as_ref()) {
                self.pod_node.insert(key.clone(), n.clone());
                nodes.insert(n.clone());
            }
        }
    }

    /// Over-commitment of the Ready claims on `nodes`.
    fn over_commit_on(&mut self, cluster: &Cluster, nodes: &BTreeSet<String>) {
        for n in nodes {
            for claim in self.ready_by_node.get(n).into_iter().flatten() {
                let node = self.ready(cluster, claim);
                match over_commit(cluster, node) {
                    Some(v) => self.over.insert(claim.clone(), v),
                    None => self.over.remove(claim),
                };
            }
        }
    }

    /// The rules of every changed pod and of every pod bound to `nodes`.
    fn pods_on(&mut self, cluster: &Cluster, pods: &[String], nodes: &BTreeSet<String>) {
        // Every pod bound to a node named above, and every changed pod (bound or not).
        let mut recheck: BTreeSet<&str> = pods.iter().map(String::as_str).collect();
        for n in nodes {
            recheck.extend(cluster.pod_keys_on(n));
        }
        for key in recheck {
            let Some(p) = cluster.pods().get(key) else {
                continue;
            };
            if !p.volume_claims.is_empty() {
                self.pod_found.remove(key);
                self.with_volumes.insert(key.to_string());
                continue;
            }
            self.with_volumes.remove(key);
            let mut found = Vec::new();
            pod_violations(cluster, p, &|n| self.ready_named(cluster, n), &mut found);
            if found.is_empty() {
                self.pod_found.remove(key);
            } else {
                self.pod_found.insert(key.to_string(), found);
            }
        }
    }

    /// The Ready node of `claim`, which `node_of` lists.
    fn ready<'c>(&self, cluster: &'c Cluster, claim: &str) -> &'c Node {
        cluster.claims()[claim]
            .ready_node()
            .expect("a claim in ready_by_node has a Ready node")
    }

    /// The Ready node named `n`: of several, the last claim's, as a map built in claim order
    /// keeps it.
    fn ready_named<'c>(&self, cluster: &'c Cluster, n: &str) -> Option<&'c Node> {
        let claim = self.ready_by_node.get(n)?.last()?;
        Some(self.ready(cluster, claim))
    }

    /// The findings in the full check's order.
    fn collect(&self, cluster: &Cluster) -> Vec<String> {
        let mut out: Vec<String> = self.over.values().cloned().collect();
        index_check(cluster, &mut out);
        if self.with_volumes.is_empty() {
            out.extend(self.pod_found.values().flatten().cloned());
        } else {
            let mut merged: BTreeMap<&str, Vec<String>> = self
                .pod_found
                .iter()
                .map(|(k, v)| (k.as_str(), v.clone()))
                .collect();
            for key in &self.with_volumes {
                let p = &cluster.pods()[key];
                let mut found = Vec::new();
                pod_violations(cluster, p, &|n| self.ready_named(cluster, n), &mut found);
                if !found.is_empty() {
                    merged.insert(key.as_str(), found);
                }
            }
            out.extend(merged.into_values().flatten());
        }
        out.extend(self.breaks.values().cloned());
        limits(cluster, &mut out);
        out
    }
}

#[cfg(test)]
mod tests;
