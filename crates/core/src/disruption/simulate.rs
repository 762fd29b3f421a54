//! The seam between disruption planning and the scheduler: "if these nodes were gone, where
//! would these pods go?". The scheduling engine implements it; planning only reads the answer.

use std::collections::BTreeSet;

use crate::model::{CapacityType, Pod, Snapshot};
use crate::requirements::Requirement;

/// One instance type a simulated new claim could launch as, with its prices.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplacementOption {
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
pub struct SimulatedClaim {
    pub nodepool: String,
    pub requirements: Vec<Requirement>,
    /// Cheapest first.
    pub options: Vec<ReplacementOption>,
    pub capacity_types: Vec<CapacityType>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Simulation {
    /// `(pod key, reason)` for every pod that found no place.
    pub failures: Vec<(String, String)>,
    pub new_claims: Vec<SimulatedClaim>,
}

pub trait Simulator {
    /// Places `pods` on the snapshot's cluster without the nodes in `without`, launching new
    /// claims where needed. Must be deterministic.
    fn simulate(
        &self,
        snapshot: &Snapshot,
        without: &BTreeSet<String>,
        pods: &[&Pod],
    ) -> Simulation;
}
