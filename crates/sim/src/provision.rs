//! The provisioning decision the engine asks for.
//!
//! The engine never decides where pods go on new capacity itself: it hands a snapshot to a
//! [`Provisioner`] (the core scheduler, [`CoreProvisioner`]) and launches what comes back.
//! Disruption asks the core's own engine-backed simulator the same way.

use std::sync::{Arc, Mutex};

use nodewright_cloud_sim::select::Choice;
use nodewright_core::model::Snapshot;
use nodewright_core::requirements::Requirement;
use nodewright_core::resources::Resources;
use nodewright_core::scheduling::{self, Compile, NodeCache, Options, Target};

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
    /// The same requirements as data, without the instance-type list: with the options'
    /// types, what the cloud launches for.
    pub requirement_list: Vec<Requirement>,
    /// What the claim asks the cloud to hold.
    pub requests: Resources,
    /// Cheapest first; each with its cheapest compatible offering.
    pub options: Vec<Choice>,
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

/// The core scheduling engine as the simulator's provisioner.
#[derive(Clone, Debug, Default)]
pub struct CoreProvisioner {
    pub options: Options,
    /// Nodes compiled by earlier solves: the cluster changes little between two, and the plan
    /// is the same with or without them.
    pub nodes: Arc<Mutex<NodeCache>>,
}

impl Provisioner for CoreProvisioner {
    fn provision(&self, snapshot: &Snapshot) -> ProvisionPlan {
        let mut nodes = self.nodes.lock().unwrap_or_else(|e| e.into_inner());
        let plan = scheduling::solve_with(snapshot, &self.options, Compile::cached(&mut nodes));
        drop(nodes);
        let rendered: Vec<Vec<String>> = plan
            .new_claims
            .iter()
            .map(|c| plan.claim_requirements(c))
            .collect();
        let it_names = plan.instance_type_names.clone();
        let zone_names = plan.zone_names.clone();
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
                .zip(rendered)
                .map(|(c, requirements)| ClaimRequest {
                    nodepool: c.nodepool,
                    requirements,
                    requirement_list: c.requirement_list,
                    requests: c.requests,
                    options: c
                        .instance_types
                        .into_iter()
                        .map(|o| Choice {
                            instance_type: it_names[o.instance_type as usize].clone(),
                            zone: zone_names[o.zone as usize].clone(),
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
