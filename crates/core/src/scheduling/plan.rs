//! What the scheduler decides: placements, new NodeClaims and reasons, as plain data.

use crate::model::CapacityType;
use crate::resources::Resources;

/// Where a placed pod goes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Target {
    /// A registered node, by name.
    Node(String),
    /// A NodeClaim that is still launching, by name.
    InFlight(String),
    /// A new NodeClaim of this plan, by index into [`Plan::new_claims`].
    NewClaim(usize),
}

/// A pod placed on an existing node, an in-flight claim or a new claim.
#[derive(Clone, Debug, PartialEq)]
pub struct Placement {
    /// `namespace/name`.
    pub pod: String,
    /// Where it goes.
    pub target: Target,
}

/// One instance type a new claim may launch, with its cheapest compatible available offering.
/// Names are indices into [`Plan::instance_type_names`] and [`Plan::zone_names`]: a plan at
/// scale carries millions of options, and this keeps each to 24 bytes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct InstanceOption {
    /// The instance type, an index into [`Plan::instance_type_names`].
    pub instance_type: u32,
    /// The cheapest offering's zone, an index into [`Plan::zone_names`].
    pub zone: u32,
    /// The cheapest offering's capacity type.
    pub capacity_type: CapacityType,
    /// The cheapest offering's price, US dollars per hour.
    pub price: f64,
}

/// A NodeClaim to launch: its NodePool, requirements and instance-type options.
#[derive(Clone, Debug, PartialEq)]
pub struct NewClaim {
    /// The NodePool that launches it.
    pub nodepool: String,
    /// The claim's requirements, rendered (`key Operator [values]`), sorted by key; the
    /// instance-type requirement is the list of [`NewClaim::instance_types`].
    pub requirements: Vec<String>,
    /// The same requirements as data (without the instance-type list), for launching or
    /// comparing the claim.
    pub requirement_list: Vec<crate::requirements::Requirement>,
    /// Options sorted by price (ties: cheapest offering anywhere, then name); at most the
    /// per-claim cap.
    pub instance_types: Vec<InstanceOption>,
    /// `namespace/name` of the pods it was created for, in placement order.
    pub pods: Vec<String>,
    /// Summed pod requests plus the daemonset overhead of the cheapest option.
    pub requests: Resources,
    /// Some `minValues` is not met by the options (only under the BestEffort policy, or after
    /// the per-claim cap cut the options).
    pub min_values_relaxed: bool,
}

impl NewClaim {
    /// The launch price: the cheapest available offering among the options.
    pub fn cheapest(&self) -> Option<&InstanceOption> {
        self.instance_types.first()
    }
}

/// A pod the plan could not place, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Unplaced {
    /// `namespace/name`.
    pub pod: String,
    /// Which constraint, which NodePool, what was missing.
    pub reason: String,
}

/// What a solve decided: placements, new claims, pods left pending, cost and its lower bound.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// Pods placed, on existing nodes, in-flight claims or new claims.
    pub placements: Vec<Placement>,
    /// The NodeClaims to launch; [`Target::NewClaim`] indexes them.
    pub new_claims: Vec<NewClaim>,
    /// Pods left pending, with the reason.
    pub unplaced: Vec<Unplaced>,
    /// Pods considered (pending or being rescheduled).
    pub pods: usize,
    /// Sum over new claims of their cheapest option's price, US dollars per hour.
    pub cost: f64,
    /// A proven lower bound on the cost of new capacity for the pods placed on new claims.
    pub lower_bound: f64,
    /// Names the options' `instance_type` indices refer to.
    pub instance_type_names: std::sync::Arc<Vec<String>>,
    /// Names the options' `zone` indices refer to.
    pub zone_names: Vec<String>,
}

impl Plan {
    /// The instance type's name of an option.
    pub fn name_of(&self, o: &InstanceOption) -> &str {
        &self.instance_type_names[o.instance_type as usize]
    }

    /// The zone of an option's offering.
    pub fn zone_of(&self, o: &InstanceOption) -> &str {
        &self.zone_names[o.zone as usize]
    }

    /// The claim's full requirements, the instance-type list included.
    pub fn claim_requirements(&self, c: &NewClaim) -> Vec<String> {
        let names: Vec<&str> = c.instance_types.iter().map(|o| self.name_of(o)).collect();
        let mut r = c.requirements.clone();
        r.push(format!(
            "{} In [{}]",
            crate::labels::INSTANCE_TYPE,
            names.join(", ")
        ));
        r.sort();
        r
    }

    /// `(cost - bound) / bound`, or 0 when the bound is 0.
    pub fn gap(&self) -> f64 {
        if self.lower_bound > 0.0 {
            (self.cost - self.lower_bound) / self.lower_bound
        } else {
            0.0
        }
    }
}
