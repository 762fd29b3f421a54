//! Simulations over the cluster's own view: incremental, and remembered while it stands still.
//!
//! A graceful command is re-checked on a fresh snapshot after the validation delay, with one
//! simulation of its nodes gone. That simulation runs on the view's compile (nodes come from
//! the node cache kept across rounds, `nodewright_core::scheduling::NodeCache`) instead of a
//! full solve. The clock reaches a simulation only through the nodes a consolidation keeps its
//! pods off, so over one
//! [`Cluster::view_generation`](crate::cluster::Cluster::view_generation), with the same
//! commands running, its answer is fixed by the question and those nodes, and kept for the
//! same question asked again. A planning round's many simulations are not kept (copying each
//! answer costs more than the rare repeat saves); simulations of any other snapshot pass
//! straight through.
//!
//! The view's compile itself is kept too: within a generation, with the same commands running,
//! the view differs only in its time, which a compile does not read, so a planning round and
//! the re-checks after it over an unchanged cluster share one compile (`NodeCache::same_as`),
//! and so do rounds while nothing changes.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use nodewright_core::disruption::InFlight;
use nodewright_core::disruption::candidates::closed_nodes;
use nodewright_core::disruption::simulate::{PreparedSimulation, Purpose, Simulation, Simulator};
use nodewright_core::disruption::{EngineSimulator, warm};
use nodewright_core::model::{Pod, Snapshot};
use nodewright_core::scheduling::NodeCache;

/// `(purpose, nodes the moving pods may not land on, nodes removed, pods moved in the order
/// given)`.
type Key = (Purpose, BTreeSet<String>, BTreeSet<String>, Vec<String>);

/// The answers of one view generation, as the running commands leave it.
#[derive(Debug, Default)]
pub(crate) struct Memo {
    generation: Option<(u64, InFlight)>,
    /// Moves whenever `generation` does: the key of the view's kept compile.
    epoch: u64,
    answers: BTreeMap<Key, Simulation>,
    /// Simulations answered from memory, for tests.
    pub(crate) reused: u64,
    /// Nodes compiled by earlier rounds (see `nodewright_core::scheduling::NodeCache`).
    nodes: Arc<Mutex<NodeCache>>,
}

impl Memo {
    /// Forgets everything when `generation` and `held` are not what the answers belong to.
    fn enter(&mut self, generation: u64, held: &InFlight) {
        let current = self.generation.as_ref();
        if current.is_none_or(|(g, h)| *g != generation || h != held) {
            self.generation = Some((generation, held.clone()));
            self.epoch += 1;
            self.answers.clear();
        }
    }
}

fn key(view: &Snapshot, purpose: Purpose, without: &BTreeSet<String>, pods: &[&Pod]) -> Key {
    let closed = match purpose {
        Purpose::Consolidation => closed_nodes(view),
        Purpose::Drift => BTreeSet::new(),
    };
    (
        purpose,
        closed,
        without.clone(),
        pods.iter().map(|p| p.key()).collect(),
    )
}

/// The engine-backed simulator, remembering its answers about `view`.
pub(crate) struct Remembering<'m, 'v> {
    inner: EngineSimulator,
    memo: &'m RefCell<Memo>,
    /// Told apart from other snapshots by its address: it is borrowed for as long as this
    /// simulator lives, so no other snapshot can have it.
    view: &'v Snapshot,
    /// The memo's epoch for this view: it changes with the generation and with the commands
    /// running, both of which change the view.
    epoch: u64,
}

impl<'m, 'v> Remembering<'m, 'v> {
    /// A simulator for decisions over `view`: the cluster's view of `generation` as the
    /// running commands (`held`) leave it.
    pub(crate) fn new(
        memo: &'m RefCell<Memo>,
        generation: u64,
        held: &InFlight,
        view: &'v Snapshot,
    ) -> Self {
        memo.borrow_mut().enter(generation, held);
        let epoch = memo.borrow().epoch;
        Remembering {
            inner: EngineSimulator {
                nodes: Some(memo.borrow().nodes.clone()),
                ..EngineSimulator::default()
            },
            memo,
            view,
            epoch,
        }
    }

    fn is_view(&self, s: &Snapshot) -> bool {
        std::ptr::eq(s, self.view)
    }

    /// The inner simulator prepared for `snapshot`; the view's compile is kept for its
    /// generation and running commands.
    fn prepare_inner<'a>(
        &'a self,
        snapshot: &'a Snapshot,
        purpose: Purpose,
    ) -> Option<Box<dyn PreparedSimulation + 'a>> {
        let same = self.is_view(snapshot).then_some(self.epoch);
        self.inner.prepare_as(snapshot, purpose, same)
    }

    /// Work that compiles the view this simulator was made for, given it, into the kept
    /// compile, to run on another thread beside a planning round or a re-check: their first
    /// simulation of the view then finds it compiled, or waits for it rather than compiling
    /// it again. A round that simulates nothing does not wait for it. With `one_thread`, the
    /// compile starts no threads of its own (`Compile::one_thread`).
    pub(crate) fn warm_up(&self, one_thread: bool) -> impl FnOnce(&Snapshot) + Send + 'static {
        let nodes = self.memo.borrow().nodes.clone();
        let epoch = self.epoch;
        let view = std::ptr::from_ref(self.view) as usize;
        move |snapshot| {
            debug_assert_eq!(std::ptr::from_ref(snapshot) as usize, view, "not the view");
            warm(&nodes, snapshot, epoch, one_thread)
        }
    }

    fn recall(&self, k: &Key) -> Option<Simulation> {
        let mut m = self.memo.borrow_mut();
        let found = m.answers.get(k).cloned();
        if found.is_some() {
            m.reused += 1;
        }
        found
    }

    fn keep(&self, k: Key, s: &Simulation) {
        self.memo.borrow_mut().answers.insert(k, s.clone());
    }
}

impl Simulator for Remembering<'_, '_> {
    fn simulate(
        &self,
        snapshot: &Snapshot,
        purpose: Purpose,
        without: &BTreeSet<String>,
        pods: &[&Pod],
    ) -> Simulation {
        if !self.is_view(snapshot) {
            return self.inner.simulate(snapshot, purpose, without, pods);
        }
        let k = key(snapshot, purpose, without, pods);
        if let Some(s) = self.recall(&k) {
            return s;
        }
        // The view's nodes are mostly compiled already (the node cache): an incremental solve
        // over its compile costs less than a full one, and answers the same.
        let s = match self.prepare_inner(snapshot, purpose) {
            Some(p) => p.simulate(without, pods),
            None => self.inner.simulate(snapshot, purpose, without, pods),
        };
        self.keep(k, &s);
        s
    }

    fn prepare<'a>(
        &'a self,
        snapshot: &'a Snapshot,
        purpose: Purpose,
    ) -> Option<Box<dyn PreparedSimulation + 'a>> {
        // A planning round runs many simulations whose answers a re-check rarely asks again:
        // copying each into memory would cost more than it saves.
        self.prepare_inner(snapshot, purpose)
    }
}

#[cfg(test)]
mod tests;
