//! What a planning round works out from a node's labels, kept from one round to the next.
//!
//! Every round reads every managed node's labels: selection takes its instance type, zone and
//! capacity type and looks up its offering's price; drift asks whether the labels still
//! satisfy the NodePool's requirements and whether the instance type they name still offers
//! their zone and capacity type. Between two rounds few nodes change. A node at a
//! `resourceVersion` these answers were worked out at has the labels they were worked out on
//! (the node cache makes the same assumption), so they are kept per node and worked out again
//! only when the node's version, its NodePool's requirements or its NodePool's instance types
//! moved. A node without a version is always worked out afresh. The rest of selection and of
//! drift reads pods and claims, which change all the time, and is not kept.

use std::cell::Cell;
use std::sync::{Arc, Mutex, MutexGuard};

use super::drift::{labels_hold, offering_found, reason_in_order};
use crate::labels;
use crate::model::{CapacityType, InstanceType, Node, NodeClaim, NodePool, Snapshot};
use crate::requirements::Requirement;
use crate::scheduling::intern::FastMap;
use crate::time::Timestamp;

/// Answers kept across rounds; see the module header. Share one between the rounds of one
/// cluster ([`super::plan::plan_kept`]); answers are the same with or without it.
#[derive(Debug, Default)]
pub struct NodeMemo {
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
    /// Drift label checks answered from memory and worked out, for tests.
    hits: u64,
    misses: u64,
    /// Selection's node facts answered from memory and worked out, for tests.
    facts_hits: u64,
    facts_misses: u64,
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
    /// Selection's facts, stamped with the catalog epoch their price came from.
    facts: Option<(u64, NodeFacts)>,
    used: u64,
}

impl NodeMemo {
    /// Opens a round over `snapshot`: answers for nodes the round does not ask about are
    /// dropped when it ends.
    pub(crate) fn round<'s>(&self, snapshot: &'s Snapshot) -> NodeRound<'_, 's> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.rounds += 1;
        NodeRound {
            inner,
            snapshot,
            last_pool: None,
        }
    }

    /// `(answered from memory, worked out)` drift label checks so far.
    #[cfg(test)]
    pub(crate) fn counts(&self) -> (u64, u64) {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        (inner.hits, inner.misses)
    }

    /// `(answered from memory, worked out)` node facts so far: for callers' tests that the
    /// memo is kept between their rounds.
    pub fn facts_counts(&self) -> (u64, u64) {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        (inner.facts_hits, inner.facts_misses)
    }
}

/// One planning round's node checks (see [`NodeMemo::round`]).
pub(crate) struct NodeRound<'m, 's> {
    inner: MutexGuard<'m, Inner>,
    snapshot: &'s Snapshot,
    /// The NodePool object last synced this round, with its epochs: most rounds see one
    /// NodePool object over and over, whose requirements are then compared once, not per
    /// node. It lives as long as the round, so its address names it.
    last_pool: Option<(&'s NodePool, u64, u64)>,
}

impl<'s> NodeRound<'_, 's> {
    /// [`NodeFacts::of`], kept across rounds; `price` looks up the price of an offering of
    /// `nodepool` (see [`NodeFacts::of`]).
    pub(super) fn facts(
        &mut self,
        node: &Node,
        nodepool: &'s NodePool,
        price: impl FnOnce(&str, &str, Option<CapacityType>) -> f64,
    ) -> NodeFacts {
        if node.resource_version.is_empty() {
            return NodeFacts::of(node, price);
        }
        let (_, catalog_epoch) = self.epochs_of(nodepool);
        let inner = &mut *self.inner;
        let (hits, misses) = (&mut inner.facts_hits, &mut inner.facts_misses);
        with_kept(&mut inner.nodes, node, inner.rounds, |kept| {
            match &kept.facts {
                Some((epoch, facts)) if *epoch == catalog_epoch => {
                    *hits += 1;
                    facts.clone()
                }
                _ => {
                    *misses += 1;
                    let facts = NodeFacts::of(node, price);
                    kept.facts = Some((catalog_epoch, facts.clone()));
                    facts
                }
            }
        })
    }

    /// [`super::drift::drift_reason_with`], with the label checks kept across rounds.
    pub(crate) fn reason<'t>(
        &mut self,
        claim: &NodeClaim,
        node: &Node,
        nodepool: &'s NodePool,
        instance_type: impl FnOnce(&str) -> Option<&'t InstanceType>,
        now: Timestamp,
    ) -> Option<String> {
        if node.resource_version.is_empty() {
            return super::drift::drift_reason_with(claim, node, nodepool, instance_type, now);
        }
        let (requirements_epoch, catalog_epoch) = self.epochs_of(nodepool);
        let inner = &mut *self.inner;
        let (hits, misses) = (&mut inner.hits, &mut inner.misses);
        with_kept(&mut inner.nodes, node, inner.rounds, |kept| {
            // Both checks may fill the entry; they run one after the other.
            let held = Cell::new(kept.labels);
            let offering = Cell::new(kept.offering);
            let reason = reason_in_order(
                claim,
                nodepool,
                now,
                || match held.get() {
                    Some((epoch, hold)) if epoch == requirements_epoch => {
                        *hits += 1;
                        hold
                    }
                    _ => {
                        *misses += 1;
                        let hold = labels_hold(node, nodepool);
                        held.set(Some((requirements_epoch, hold)));
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
            kept.labels = held.get();
            kept.offering = offering.get();
            reason
        })
    }

    /// The epochs of `nodepool`'s requirements and of its instance types in the snapshot,
    /// new ones when either differs from what kept answers were worked out against.
    fn epochs_of(&mut self, nodepool: &'s NodePool) -> (u64, u64) {
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

/// Runs `f` on `node`'s entry (one lookup when it exists), marked used in `round` and emptied
/// first when the node's version moved.
fn with_kept<R>(
    nodes: &mut FastMap<String, Kept>,
    node: &Node,
    round: u64,
    f: impl FnOnce(&mut Kept) -> R,
) -> R {
    if let Some(kept) = nodes.get_mut(&node.name) {
        if kept.version != node.resource_version {
            kept.version.clone_from(&node.resource_version);
            kept.labels = None;
            kept.offering = None;
            kept.facts = None;
        }
        kept.used = round;
        return f(kept);
    }
    let mut kept = Kept {
        version: node.resource_version.clone(),
        labels: None,
        offering: None,
        facts: None,
        used: round,
    };
    let out = f(&mut kept);
    nodes.insert(node.name.clone(), kept);
    out
}

/// What selection reads from a node's labels: its instance type, zone and capacity type, and
/// the hourly price of the offering they name (0 when unknown).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct NodeFacts {
    pub instance_type: Arc<str>,
    pub zone: Arc<str>,
    pub capacity_type: Option<CapacityType>,
    pub price: f64,
}

impl NodeFacts {
    /// Read from `node`'s labels; `price` gives the price of the offering of an instance type
    /// in a zone with a capacity type.
    pub(super) fn of(
        node: &Node,
        price: impl FnOnce(&str, &str, Option<CapacityType>) -> f64,
    ) -> NodeFacts {
        let label =
            |k: &str| -> Arc<str> { node.labels.get(k).map(String::as_str).unwrap_or("").into() };
        let instance_type = label(labels::INSTANCE_TYPE);
        let zone = label(labels::ZONE);
        let capacity_type = node
            .labels
            .get(labels::CAPACITY_TYPE)
            .and_then(|c| CapacityType::parse(c));
        let price = price(&instance_type, &zone, capacity_type);
        NodeFacts {
            instance_type,
            zone,
            capacity_type,
            price,
        }
    }
}

impl Drop for NodeRound<'_, '_> {
    fn drop(&mut self) {
        let round = self.inner.rounds;
        self.inner.nodes.retain(|_, k| k.used == round);
    }
}

#[cfg(test)]
mod tests;
