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
mod tests {
    use nodewright_core::disruption::bench::cluster;
    use nodewright_core::disruption::simulate::prepare;
    use nodewright_core::resources::CPU;

    use super::*;
    use nodewright_core::disruption::simulate::Job;

    /// A job per node: the node gone, its pods moved.
    fn jobs(s: &Snapshot) -> Vec<Job<'_>> {
        s.nodes
            .iter()
            .take(12)
            .map(|n| Job {
                without: [n.name.clone()].into_iter().collect(),
                pods: s
                    .pods
                    .iter()
                    .filter(|p| p.node_name.as_deref() == Some(n.name.as_str()))
                    .map(|p| &**p)
                    .collect(),
            })
            .collect()
    }

    fn plain(s: &Snapshot) -> Vec<Simulation> {
        let engine = EngineSimulator::default();
        jobs(s)
            .iter()
            .map(|j| engine.simulate(s, Purpose::Consolidation, &j.without, &j.pods))
            .collect()
    }

    #[test]
    fn commands_starting_within_a_generation_change_the_kept_compile() {
        let memo = RefCell::new(Memo::default());
        let first = cluster(20, 120, 7);
        {
            let sim = Remembering::new(&memo, 1, &InFlight::default(), &first);
            prepare(&sim, &first, Purpose::Consolidation).simulate_all(&jobs(&first));
        }
        // Same generation, commands now running on every node: no node takes moving pods.
        let mut held = InFlight::default();
        held.targets
            .extend(first.node_claims.iter().map(|c| c.name.clone()));
        let view = held.view(&first);
        let expected = plain(&view);
        let sim = Remembering::new(&memo, 1, &held, &view);
        assert_eq!(
            prepare(&sim, &view, Purpose::Consolidation).simulate_all(&jobs(&view)),
            expected
        );
    }

    #[test]
    fn a_view_warmed_on_another_thread_is_not_compiled_again() {
        let memo = RefCell::new(Memo::default());
        let view = cluster(20, 120, 7);
        let expected = plain(&view);
        let sim = Remembering::new(&memo, 1, &InFlight::default(), &view);
        let warm_up = sim.warm_up(false);
        std::thread::scope(|scope| {
            scope.spawn(|| warm_up(&view));
        });
        let nodes = memo.borrow().nodes.clone();
        // Nodes looked up by compiles, and compiles answered whole from the kept one.
        let counts = NodeCache::counts;
        let (looked_up, reused) = counts(&nodes.lock().unwrap());
        assert!(looked_up > 0, "the warm-up compiled the view");
        assert_eq!(
            prepare(&sim, &view, Purpose::Consolidation).simulate_all(&jobs(&view)),
            expected
        );
        assert_eq!(counts(&nodes.lock().unwrap()), (looked_up, reused + 1));
    }

    #[test]
    fn an_answer_is_not_reused_once_the_closed_nodes_change() {
        // Most nodes had a pod event a minute ago, under a 5-minute consolidateAfter: a
        // consolidation keeps moving pods off them until it passes.
        let mut early = cluster(20, 120, 7);
        for np in &mut early.nodepools {
            np.disruption.consolidate_after = Some(std::time::Duration::from_secs(300));
        }
        let minute_ago = nodewright_core::time::Timestamp(early.now.0 - 60_000);
        for c in early
            .node_claims
            .iter_mut()
            .filter(|c| !c.name.ends_with('0'))
        {
            c.last_pod_event_time = Some(minute_ago);
        }
        let mut late = early.clone();
        late.now = nodewright_core::time::Timestamp(early.now.0 + 300_000);
        let (before, after) = (plain(&early), plain(&late));
        assert_ne!(before, after, "closing the nodes changes some answer");
        let memo = RefCell::new(Memo::default());
        for (view, expected) in [(&early, &before), (&late, &after)] {
            // The same generation: only the clock moved.
            let sim = Remembering::new(&memo, 1, &InFlight::default(), view);
            for (j, e) in jobs(view).iter().zip(expected) {
                let got = sim.simulate(view, Purpose::Consolidation, &j.without, &j.pods);
                assert_eq!(&got, e, "{:?}", j.without);
            }
        }
    }

    #[test]
    fn answers_are_reused_within_a_generation_only() {
        let memo = RefCell::new(Memo::default());
        let first = cluster(20, 120, 7);
        let expected = plain(&first);
        {
            let sim = Remembering::new(&memo, 1, &InFlight::default(), &first);
            let prepared = prepare(&sim, &first, Purpose::Consolidation);
            assert_eq!(prepared.simulate_all(&jobs(&first)), expected);
            for (j, e) in jobs(&first).iter().zip(&expected) {
                assert_eq!(
                    &sim.simulate(&first, Purpose::Consolidation, &j.without, &j.pods),
                    e
                );
            }
            assert_eq!(memo.borrow().reused, 0);
            // Asked again within the generation: every answer comes from memory.
            for (j, e) in jobs(&first).iter().zip(&expected) {
                assert_eq!(
                    &sim.simulate(&first, Purpose::Consolidation, &j.without, &j.pods),
                    e
                );
            }
            assert_eq!(memo.borrow().reused, expected.len() as u64);
        }
        // A new generation, the same jobs over nodes with no room left: nothing remembered may answer.
        let mut second = first.clone();
        for n in &mut second.nodes {
            n.allocatable.set(CPU, 1);
        }
        let expected = plain(&second);
        assert_ne!(expected, plain(&first));
        let sim = Remembering::new(&memo, 2, &InFlight::default(), &second);
        let before = memo.borrow().reused;
        for (j, e) in jobs(&second).iter().zip(&expected) {
            assert_eq!(
                &sim.simulate(&second, Purpose::Consolidation, &j.without, &j.pods),
                e
            );
        }
        assert_eq!(memo.borrow().reused, before);
        // Another snapshot than the view passes through, remembered or not.
        let other = cluster(20, 120, 7);
        for (j, e) in jobs(&other).iter().zip(plain(&other)) {
            assert_eq!(
                sim.simulate(&other, Purpose::Consolidation, &j.without, &j.pods),
                e
            );
        }
        assert_eq!(memo.borrow().reused, before);
    }
}
