//! The seam between disruption planning and the scheduler: "if these nodes were gone, where
//! would these pods go?". The scheduling engine implements it; planning only reads the answer.
//!
//! Offers the trait and a prepared simulation's types for a shell's own simulator; the engine's
//! implementation is [`super::EngineSimulator`].

use std::collections::BTreeSet;

use super::command::Method;
use crate::model::{CapacityType, Pod, Snapshot};
use crate::requirements::Requirement;

/// One instance type a simulated new claim could launch as, with its prices.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ReplacementOption {
    pub instance_type: String,
    /// Cheapest available compatible offering.
    pub cheapest_price: f64,
    /// The most expensive offering a launch could land on (Karpenter's `WorstLaunchPrice`).
    pub worst_launch_price: f64,
    /// Cheapest available spot offering, if any.
    pub spot_price: Option<f64>,
    /// Cheapest available on-demand offering, if any.
    pub on_demand_price: Option<f64>,
}

/// A new node the simulation needed.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SimulatedClaim {
    pub nodepool: String,
    pub requirements: Vec<Requirement>,
    /// Cheapest first.
    pub options: Vec<ReplacementOption>,
    pub capacity_types: Vec<CapacityType>,
}

/// Where a simulation put the pods: those it could not place, and the claims it would launch.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Simulation {
    /// `(pod key, reason)` for every pod that found no place.
    pub(crate) failures: Vec<(String, String)>,
    pub(crate) new_claims: Vec<SimulatedClaim>,
}

/// Which method a simulation answers for: its rules differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Purpose {
    /// Consolidation (Karpenter's `IsConsolidationSimulation`): the moving pods do not land
    /// on nodes still inside their NodePool's `consolidateAfter`.
    Consolidation,
    /// Drift and other replacements: every node that stays may take the moving pods.
    Drift,
}

impl Purpose {
    /// The purpose of the simulations behind a command of `method`.
    pub(crate) fn of(method: Method) -> Purpose {
        match method {
            Method::Emptiness
            | Method::MultiNodeConsolidation
            | Method::SingleNodeConsolidation => Purpose::Consolidation,
            Method::Drift | Method::Expiration => Purpose::Drift,
        }
    }
}

/// Answers "where would these pods go without these nodes?" for disruption planning.
pub trait Simulator {
    /// Places `pods` on the snapshot's cluster without the nodes in `without`, launching new
    /// claims where needed, by the rules of `purpose`. Must be deterministic.
    fn simulate(
        &self,
        snapshot: &Snapshot,
        purpose: Purpose,
        without: &BTreeSet<String>,
        pods: &[&Pod],
    ) -> Simulation;

    /// Compiles `snapshot` once for many simulations against it for `purpose`. `None` (the
    /// default) means every simulation is answered by [`Simulator::simulate`].
    fn prepare<'a>(
        &'a self,
        snapshot: &'a Snapshot,
        purpose: Purpose,
    ) -> Option<Box<dyn PreparedSimulation + 'a>> {
        let _ = (snapshot, purpose);
        None
    }
}

/// One simulation request against a prepared snapshot.
#[derive(Clone, Debug)]
pub struct Job<'p> {
    /// The nodes the simulation removes, by name.
    pub without: BTreeSet<String>,
    /// The pods to place elsewhere.
    pub pods: Vec<&'p Pod>,
}

/// A snapshot compiled once for many simulations (see [`prepare`]).
pub trait PreparedSimulation {
    /// Same answer as [`Simulator::simulate`] on the prepared snapshot.
    fn simulate(&self, without: &BTreeSet<String>, pods: &[&Pod]) -> Simulation;

    /// Answers every job, in the order given. Implementations may work on several at once.
    fn simulate_all(&self, jobs: &[Job<'_>]) -> Vec<Simulation> {
        jobs.iter()
            .map(|j| self.simulate(&j.without, &j.pods))
            .collect()
    }
}

/// A simulator that prepares nothing: every simulation goes to [`Simulator::simulate`].
struct Unprepared<'a> {
    simulator: &'a dyn Simulator,
    snapshot: &'a Snapshot,
    purpose: Purpose,
}

impl PreparedSimulation for Unprepared<'_> {
    fn simulate(&self, without: &BTreeSet<String>, pods: &[&Pod]) -> Simulation {
        self.simulator
            .simulate(self.snapshot, self.purpose, without, pods)
    }
}

/// `simulator`'s prepared form of `snapshot` for `purpose`, or one that forwards every call.
pub fn prepare<'a>(
    simulator: &'a dyn Simulator,
    snapshot: &'a Snapshot,
    purpose: Purpose,
) -> Box<dyn PreparedSimulation + 'a> {
    simulator.prepare(snapshot, purpose).unwrap_or_else(|| {
        Box::new(Unprepared {
            simulator,
            snapshot,
            purpose,
        })
    })
}
