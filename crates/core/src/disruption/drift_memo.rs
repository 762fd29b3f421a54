//! Drift checks of node labels, kept from one planning round to the next.
//!
//! Every round asks every candidate whether it drifted, and two of the checks read the node's
//! labels: do they still satisfy the NodePool's requirements, and does the instance type they
//! name still offer their zone and capacity type. Between two rounds few nodes change. A node
//! at a `resourceVersion` its answers were worked out at has the labels they were worked out
//! on (the node cache makes the same assumption), so the answers are kept per node and worked
//! out again only when the node's version, its NodePool's requirements or its NodePool's
//! instance types moved. A node without a version is always checked afresh. The other checks
//! (the NodePool hash, the claim's age, provider drift) read the claim and cost nothing.

use std::cell::Cell;
use std::sync::{Arc, Mutex, MutexGuard};

use super::drift::{labels_hold, offering_found, reason_in_order};
use crate::model::{InstanceType, Node, NodeClaim, NodePool, Snapshot};
use crate::requirements::Requirement;
use crate::scheduling::intern::FastMap;
use crate::time::Timestamp;

/// Answers kept across rounds; see the module header. Share one between the rounds of one
/// cluster ([`super::plan::plan_kept`]); answers are the same with or without it.
#[derive(Debug, Default)]
pub struct DriftMemo {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    nodes: FastMap<String, Kept>,
    /// Per NodePool name, what its kept answers were worked out against.
    pools: FastMap<String, PoolSeen>,
    /// Numbers every change of a NodePool's requirements or instance types, so an answer's
    /// stamp names exactly one version of one NodePool.
    epochs: u64,
    rounds: u64,
    /// Label checks answered from memory and worked out, for tests.
    hits: u64,
    misses: u64,
}

#[derive(Debug)]
struct PoolSeen {
    requirements: Vec<Requirement>,
    requirements_epoch: u64,
    /// Held so its address cannot be reused by another list while answers refer to it.
    catalog: Option<Arc<Vec<InstanceType>>>,
    catalog_epoch: u64,
}

#[derive(Debug)]
struct Kept {
    version: String,
    /// `labels_hold`, stamped with the requirements epoch it was worked out against.
    labels: Option<(u64, bool)>,
    /// `offering_found`, stamped with the catalog epoch it was worked out against.
    offering: Option<(u64, Option<bool>)>,
    used: u64,
}

impl DriftMemo {
    /// Opens a round over `snapshot`: answers for nodes the round does not ask about are
    /// dropped when it ends.
    pub fn round<'a>(&'a self, snapshot: &'a Snapshot) -> DriftRound<'a> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.rounds += 1;
        DriftRound {
            inner,
            snapshot,
            last_pool: None,
        }
    }

    /// `(answered from memory, worked out)` label checks so far.
    pub fn counts(&self) -> (u64, u64) {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        (inner.hits, inner.misses)
    }
}

/// One planning round's drift checks (see [`DriftMemo::round`]).
pub struct DriftRound<'a> {
    inner: MutexGuard<'a, Inner>,
    snapshot: &'a Snapshot,
    /// The NodePool object last synced this round, with its epochs: most rounds see one
    /// NodePool object over and over, whose requirements are then compared once, not per
    /// node. It lives as long as the round, so its address names it.
    last_pool: Option<(*const NodePool, u64, u64)>,
}

impl<'a> DriftRound<'a> {
    /// [`super::drift::drift_reason_with`], with the label checks kept across rounds.
    pub fn reason<'t>(
        &mut self,
        claim: &NodeClaim,
        node: &Node,
        nodepool: &'a NodePool,
        instance_type: impl FnOnce(&str) -> Option<&'t InstanceType>,
        now: Timestamp,
    ) -> Option<String> {
        if node.resource_version.is_empty() {
            return super::drift::drift_reason_with(claim, node, nodepool, instance_type, now);
        }
        let (requirements_epoch, catalog_epoch) = self.epochs_of(nodepool);
        let inner = &mut *self.inner;
        let round = inner.rounds;
        let kept = match inner.nodes.get_mut(&node.name) {
            Some(k) if k.version == node.resource_version => k,
            Some(k) => {
                k.version.clone_from(&node.resource_version);
                k.labels = None;
                k.offering = None;
                k
            }
            None => inner.nodes.entry(node.name.clone()).or_insert(Kept {
                version: node.resource_version.clone(),
                labels: None,
                offering: None,
                used: round,
            }),
        };
        kept.used = round;
        // Both checks may fill the entry; they run one after the other.
        let labels = Cell::new(kept.labels);
        let offering = Cell::new(kept.offering);
        let (hits, misses) = (&mut inner.hits, &mut inner.misses);
        let reason = reason_in_order(
            claim,
            nodepool,
            now,
            || match labels.get() {
                Some((epoch, hold)) if epoch == requirements_epoch => {
                    *hits += 1;
                    hold
                }
                _ => {
                    *misses += 1;
                    let hold = labels_hold(node, nodepool);
                    labels.set(Some((requirements_epoch, hold)));
                    hold
                }
            },
            || match offering.get() {
                Some((epoch, found)) if epoch == catalog_epoch => found,
                _ => {
                    let found = offering_found(node, instance_type);
                    offering.set(Some((catalog_epoch, found)));
                    found
                }
            },
        );
        kept.labels = labels.get();
        kept.offering = offering.get();
        reason
    }

    /// The epochs of `nodepool`'s requirements and of its instance types in the snapshot,
    /// new ones when either differs from what kept answers were worked out against.
    fn epochs_of(&mut self, nodepool: &'a NodePool) -> (u64, u64) {
        if let Some((p, r, c)) = self.last_pool
            && std::ptr::eq(p, nodepool)
        {
            return (r, c);
        }
        let catalog = self.snapshot.instance_types.get(&nodepool.name);
        let inner = &mut *self.inner;
        let epochs = &mut inner.epochs;
        let mut next = || {
            *epochs += 1;
            *epochs
        };
        let seen = match inner.pools.get_mut(&nodepool.name) {
            Some(seen) => seen,
            None => inner
                .pools
                .entry(nodepool.name.clone())
                .or_insert(PoolSeen {
                    requirements: nodepool.template.requirements.clone(),
                    requirements_epoch: next(),
                    catalog: catalog.cloned(),
                    catalog_epoch: next(),
                }),
        };
        if seen.requirements != nodepool.template.requirements {
            seen.requirements = nodepool.template.requirements.clone();
            seen.requirements_epoch = next();
        }
        let same_catalog = match (&seen.catalog, catalog) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b) || a == b,
            (None, None) => true,
            _ => false,
        };
        if !same_catalog {
            seen.catalog_epoch = next();
        }
        // Held even when equal: comparing by address then settles the next round.
        seen.catalog = catalog.cloned();
        let found = (seen.requirements_epoch, seen.catalog_epoch);
        self.last_pool = Some((nodepool, found.0, found.1));
        found
    }
}

impl Drop for DriftRound<'_> {
    fn drop(&mut self) {
        let round = self.inner.rounds;
        self.inner.nodes.retain(|_, k| k.used == round);
    }
}

#[cfg(test)]
mod tests;
