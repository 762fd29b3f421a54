//! The provisioning decision the engine asks for, and the disruption [`Simulator`] built on it.
//!
//! The engine never decides where pods go on new capacity itself: it hands a snapshot to a
//! [`Provisioner`] (the core scheduler) and launches what comes back. The same provisioner
//! answers the disruption planner's "if these nodes were gone" question.

use std::collections::BTreeSet;

use nodewright_core::disruption::simulate::{
    ReplacementOption, SimulatedClaim, Simulation, Simulator,
};
use nodewright_core::model::{CapacityType, Pod, Snapshot};

use nodewright_core::scheduling::{self, Options, Target};

use crate::cloud::LaunchOption;

/// Where a planned pod goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlacementTarget {
    Node(String),
    InFlight(String),
    NewClaim(usize),
}

/// A NodeClaim to create.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimRequest {
    pub nodepool: String,
    /// Rendered requirements, for the timeline.
    pub requirements: Vec<String>,
    /// Cheapest first; each with its cheapest compatible offering.
    pub options: Vec<LaunchOption>,
    /// `namespace/name` of the pods it is for.
    pub pods: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProvisionPlan {
    pub placements: Vec<(String, PlacementTarget)>,
    pub new_claims: Vec<ClaimRequest>,
    /// `(pod, reason)`.
    pub unplaced: Vec<(String, String)>,
    /// US dollars per hour of the new claims at their cheapest option.
    pub cost: f64,
    /// A lower bound on that cost.
    pub lower_bound: f64,
}

/// Plans the snapshot's pending pods onto nodes, in-flight claims and new claims.
pub trait Provisioner {
    fn provision(&self, snapshot: &Snapshot) -> ProvisionPlan;
}

/// Answers the disruption planner through a [`Provisioner`]: the nodes in `without` and their
/// claims are removed, the given pods become pending, and the provisioner places them.
pub struct ProvisionerSimulator<'a> {
    pub provisioner: &'a dyn Provisioner,
}

impl Simulator for ProvisionerSimulator<'_> {
    fn simulate(
        &self,
        snapshot: &Snapshot,
        without: &BTreeSet<String>,
        pods: &[&Pod],
    ) -> Simulation {
        let mut s = snapshot.clone();
        s.nodes.retain(|n| !without.contains(&n.name));
        s.node_claims
            .retain(|c| c.node_name.as_ref().is_none_or(|n| !without.contains(n)));
        let moving: BTreeSet<String> = pods.iter().map(|p| p.key()).collect();
        // Pods left on removed nodes that are not moving (daemons) go with their node.
        s.pods.retain(|p| {
            moving.contains(&p.key()) || p.node_name.as_ref().is_none_or(|n| !without.contains(n))
        });
        for p in &mut s.pods {
            if moving.contains(&p.key()) {
                p.node_name = None;
                p.phase = nodewright_core::model::PodPhase::Pending;
            }
        }
        let plan = self.provisioner.provision(&s);
        let mut failures: Vec<(String, String)> = plan
            .unplaced
            .iter()
            .filter(|(p, _)| moving.contains(p))
            .cloned()
            .collect();
        // A pod that would only fit on a claim still launching cannot be counted on.
        for (pod, target) in &plan.placements {
            if let PlacementTarget::InFlight(claim) = target
                && moving.contains(pod)
            {
                failures.push((
                    pod.clone(),
                    format!("would wait for uninitialized claim {claim}"),
                ));
            }
        }
        failures.sort();
        let new_claims = plan
            .new_claims
            .iter()
            .map(|c| simulated_claim(&s, c))
            .collect();
        Simulation {
            failures,
            new_claims,
        }
    }
}

fn simulated_claim(s: &Snapshot, c: &ClaimRequest) -> SimulatedClaim {
    let pool = s.nodepools.iter().find(|p| p.name == c.nodepool);
    let types = s.instance_types.get(&c.nodepool);
    let mut capacity_types: BTreeSet<CapacityType> = BTreeSet::new();
    let options = c
        .options
        .iter()
        .map(|o| {
            capacity_types.insert(o.capacity_type);
            let offerings: Vec<_> = types
                .and_then(|t| t.iter().find(|it| it.name == o.instance_type))
                .map(|it| it.offerings.iter().filter(|of| of.available).collect())
                .unwrap_or_default();
            let cheapest = |ct: CapacityType| {
                offerings
                    .iter()
                    .filter(|of| of.capacity_type == ct)
                    .map(|of| of.price)
                    .min_by(f64::total_cmp)
            };
            ReplacementOption {
                instance_type: o.instance_type.clone(),
                cheapest_price: o.price,
                worst_launch_price: offerings
                    .iter()
                    .filter(|of| of.capacity_type == o.capacity_type)
                    .map(|of| of.price)
                    .max_by(f64::total_cmp)
                    .unwrap_or(o.price),
                spot_price: cheapest(CapacityType::Spot),
                on_demand_price: cheapest(CapacityType::OnDemand),
            }
        })
        .collect();
    SimulatedClaim {
        nodepool: c.nodepool.clone(),
        requirements: pool
            .map(|p| p.template.requirements.clone())
            .unwrap_or_default(),
        options,
        capacity_types: capacity_types.into_iter().collect(),
    }
}

/// The core scheduling engine as the simulator's provisioner.
#[derive(Clone, Debug, Default)]
pub struct CoreProvisioner {
    pub options: Options,
}

impl Provisioner for CoreProvisioner {
    fn provision(&self, snapshot: &Snapshot) -> ProvisionPlan {
        let plan = scheduling::solve(snapshot, &self.options);
        ProvisionPlan {
            placements: plan
                .placements
                .into_iter()
                .map(|p| {
                    let t = match p.target {
                        Target::Node(n) => PlacementTarget::Node(n),
                        Target::InFlight(c) => PlacementTarget::InFlight(c),
                        Target::NewClaim(i) => PlacementTarget::NewClaim(i),
                    };
                    (p.pod, t)
                })
                .collect(),
            new_claims: plan
                .new_claims
                .into_iter()
                .map(|c| ClaimRequest {
                    nodepool: c.nodepool,
                    requirements: c.requirements,
                    options: c
                        .instance_types
                        .into_iter()
                        .map(|o| LaunchOption {
                            instance_type: o.name,
                            zone: o.zone,
                            capacity_type: o.capacity_type,
                            price: o.price,
                        })
                        .collect(),
                    pods: c.pods,
                })
                .collect(),
            unplaced: plan
                .unplaced
                .into_iter()
                .map(|u| (u.pod, u.reason))
                .collect(),
            cost: plan.cost,
            lower_bound: plan.lower_bound,
        }
    }
}
