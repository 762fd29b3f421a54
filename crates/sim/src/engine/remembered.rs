//! Simulations remembered while the cluster stands still.
//!
//! A graceful command is planned, then re-checked on a fresh snapshot after the validation
//! delay; more often than not nothing changed in between but the time, and the re-check asks
//! the very simulation the planning round already ran. A simulation reads no clock, so over
//! one [`Cluster::view_generation`](crate::cluster::Cluster::view_generation) its answer is
//! fixed: this simulator keeps the answers given for the cluster's own view and hands them
//! back instead of solving again. Simulations of any other snapshot (a planning round's copy
//! without the nodes taken earlier in the round) pass straight through.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use nodewright_core::disruption::engine_simulator::EngineSimulator;
use nodewright_core::disruption::simulate::{Job, PreparedSimulation, Simulation, Simulator};
use nodewright_core::model::{Pod, Snapshot};
use nodewright_core::scheduling::node_cache::NodeCache;

/// `(nodes removed, pods moved in the order given)`.
type Key = (BTreeSet<String>, Vec<String>);

/// The answers of one view generation.
#[derive(Debug, Default)]
pub(crate) struct Memo {
    generation: Option<u64>,
    answers: BTreeMap<Key, Simulation>,
    /// Simulations answered from memory, for tests.
    pub(crate) reused: u64,
    /// Nodes compiled by earlier rounds (see `nodewright_core::scheduling::node_cache`).
    nodes: Arc<Mutex<NodeCache>>,
}

impl Memo {
    /// Forgets everything when `generation` is not the one the answers belong to.
    fn enter(&mut self, generation: u64) {
        if self.generation != Some(generation) {
            self.generation = Some(generation);
            self.answers.clear();
        }
    }
}

fn key(without: &BTreeSet<String>, pods: &[&Pod]) -> Key {
    (without.clone(), pods.iter().map(|p| p.key()).collect())
}

/// The engine-backed simulator, remembering its answers about `view`.
pub(crate) struct Remembering<'m> {
    inner: EngineSimulator,
    memo: &'m RefCell<Memo>,
    view: *const Snapshot,
}

impl<'m> Remembering<'m> {
    /// A simulator for decisions over `view`, the cluster's view of `generation`.
    pub(crate) fn new(memo: &'m RefCell<Memo>, generation: u64, view: &Snapshot) -> Self {
        memo.borrow_mut().enter(generation);
        Remembering {
            inner: EngineSimulator {
                nodes: Some(memo.borrow().nodes.clone()),
                ..EngineSimulator::default()
            },
            memo,
            view,
        }
    }

    fn is_view(&self, s: &Snapshot) -> bool {
        std::ptr::eq(s, self.view)
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

impl Simulator for Remembering<'_> {
    fn simulate(
        &self,
        snapshot: &Snapshot,
        without: &BTreeSet<String>,
        pods: &[&Pod],
    ) -> Simulation {
        if !self.is_view(snapshot) {
            return self.inner.simulate(snapshot, without, pods);
        }
        let k = key(without, pods);
        if let Some(s) = self.recall(&k) {
            return s;
        }
        let s = self.inner.simulate(snapshot, without, pods);
        self.keep(k, &s);
        s
    }

    fn prepare<'a>(&'a self, snapshot: &'a Snapshot) -> Option<Box<dyn PreparedSimulation + 'a>> {
        let inner = self.inner.prepare(snapshot)?;
        if !self.is_view(snapshot) {
            return Some(inner);
        }
        Some(Box::new(RememberingPrepared { outer: self, inner }))
    }
}

/// The prepared form of the view: the engine's incremental solves, with the same memory.
struct RememberingPrepared<'a> {
    outer: &'a Remembering<'a>,
    inner: Box<dyn PreparedSimulation + 'a>,
}

impl PreparedSimulation for RememberingPrepared<'_> {
    fn simulate(&self, without: &BTreeSet<String>, pods: &[&Pod]) -> Simulation {
        let k = key(without, pods);
        if let Some(s) = self.outer.recall(&k) {
            return s;
        }
        let s = self.inner.simulate(without, pods);
        self.outer.keep(k, &s);
        s
    }

    fn simulate_all(&self, jobs: &[Job<'_>]) -> Vec<Simulation> {
        let keys: Vec<Key> = jobs.iter().map(|j| key(&j.without, &j.pods)).collect();
        let mut out: Vec<Option<Simulation>> = keys.iter().map(|k| self.outer.recall(k)).collect();
        let missing: Vec<usize> = (0..jobs.len()).filter(|&i| out[i].is_none()).collect();
        if !missing.is_empty() {
            let asked: Vec<Job<'_>> = missing.iter().map(|&i| jobs[i].clone()).collect();
            for (&i, s) in missing.iter().zip(self.inner.simulate_all(&asked)) {
                self.outer.keep(keys[i].clone(), &s);
                out[i] = Some(s);
            }
        }
        out.into_iter()
            .map(|s| s.expect("every job answered"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use nodewright_core::disruption::bench::cluster;
    use nodewright_core::disruption::simulate::prepare;
    use nodewright_core::resources::CPU;

    use super::*;

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
                    .collect(),
            })
            .collect()
    }

    fn plain(s: &Snapshot) -> Vec<Simulation> {
        let engine = EngineSimulator::default();
        jobs(s)
            .iter()
            .map(|j| engine.simulate(s, &j.without, &j.pods))
            .collect()
    }

    #[test]
    fn answers_are_reused_within_a_generation_only() {
        let memo = RefCell::new(Memo::default());
        let first = cluster(20, 120, 7);
        let expected = plain(&first);
        {
            let sim = Remembering::new(&memo, 1, &first);
            let prepared = prepare(&sim, &first);
            assert_eq!(prepared.simulate_all(&jobs(&first)), expected);
            assert_eq!(memo.borrow().reused, 0);
            // The re-check asks again, unprepared: every answer comes from memory.
            for (j, e) in jobs(&first).iter().zip(&expected) {
                assert_eq!(&sim.simulate(&first, &j.without, &j.pods), e);
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
        let sim = Remembering::new(&memo, 2, &second);
        let before = memo.borrow().reused;
        for (j, e) in jobs(&second).iter().zip(&expected) {
            assert_eq!(&sim.simulate(&second, &j.without, &j.pods), e);
        }
        assert_eq!(memo.borrow().reused, before);
        // Another snapshot than the view passes through, remembered or not.
        let other = cluster(20, 120, 7);
        for (j, e) in jobs(&other).iter().zip(plain(&other)) {
            assert_eq!(sim.simulate(&other, &j.without, &j.pods), e);
        }
        assert_eq!(memo.borrow().reused, before);
    }
}
