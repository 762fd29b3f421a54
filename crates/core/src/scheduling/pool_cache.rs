//! The NodePool part of a compile kept from one compile of a cluster to the next.
//!
//! Compiling a NodePool compiles every instance type it may launch (hundreds, each with a
//! dozen labels, offerings and daemon overhead) and interns their strings before any node is
//! compiled. It reads only the NodePools, their instance types, the DaemonSets and the
//! resource names, which between two decisions almost never change; the interner starts empty
//! every time, so the same inputs give the same ids. The cache keeps the last inputs and what
//! they compiled to, and hands out a copy while they stay equal, its interner an empty layer
//! over the pools' strings, which every copy shares.

use std::sync::Arc;

use super::intern::Interner;
use super::setup::{PoolsCompiled, compile_pools};
use crate::model::{DaemonSet, InstanceType, NodePool, Snapshot};

/// What a [`PoolsCompiled`] was compiled from.
#[derive(Clone, Debug)]
struct Inputs {
    nodepools: Vec<NodePool>,
    /// Per NodePool of the snapshot, in its order, its instance types (kept, so an unchanged
    /// list is recognised by its address).
    instance_types: Vec<Option<Arc<Vec<InstanceType>>>>,
    daemonsets: Vec<DaemonSet>,
    names: Vec<String>,
}

impl Inputs {
    fn of(s: &Snapshot, names: &Interner) -> Self {
        Inputs {
            nodepools: s.nodepools.clone(),
            instance_types: s
                .nodepools
                .iter()
                .map(|np| s.instance_types.get(&np.name).cloned())
                .collect(),
            daemonsets: s.daemonsets.clone(),
            names: names_of(names),
        }
    }

    fn matches(&self, s: &Snapshot, names: &Interner) -> bool {
        self.nodepools == s.nodepools
            && self.daemonsets == s.daemonsets
            && self.names.len() == names.len()
            && self
                .names
                .iter()
                .enumerate()
                .all(|(i, n)| names.name(i as u32) == n)
            && self
                .instance_types
                .iter()
                .zip(&s.nodepools)
                .all(|(kept, np)| {
                    match (kept, s.instance_types.get(&np.name)) {
                        (None, None) => true,
                        // The same list, or (ICE marks copy it each time) an equal one.
                        (Some(a), Some(b)) => Arc::ptr_eq(a, b) || a == b,
                        _ => false,
                    }
                })
    }
}

fn names_of(names: &Interner) -> Vec<String> {
    (0..names.len() as u32)
        .map(|i| names.name(i).to_string())
        .collect()
}

/// The last NodePool compile and its inputs (see the module header).
#[derive(Clone, Debug, Default)]
pub(crate) struct PoolCache {
    kept: Option<(Inputs, PoolsCompiled)>,
    /// Compiles answered from the cache and compiled afresh, for tests.
    pub hits: u64,
    pub misses: u64,
}

impl PoolCache {
    /// The NodePools of `s` compiled, as [`compile_pools`] would compile them.
    pub(crate) fn get(&mut self, s: &Snapshot, names: &Interner) -> PoolsCompiled {
        if let Some((inputs, compiled)) = &self.kept
            && inputs.matches(s, names)
        {
            self.hits += 1;
            return compiled.clone();
        }
        self.misses += 1;
        let mut compiled = compile_pools(s, names);
        // Handed out as a layer over the shared strings: a copy costs no map of thousands of
        // instance-type strings, and ids go on from the same place.
        let strings = Arc::new(std::mem::take(&mut compiled.interner));
        compiled.interner = Interner::layered(strings);
        self.kept = Some((Inputs::of(s, names), compiled.clone()));
        compiled
    }
}
