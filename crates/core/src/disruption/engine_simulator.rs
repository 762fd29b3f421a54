//! [`Simulator`] backed by the scheduling engine: the cluster without the candidate nodes,
//! the moving pods made pending again, and one solve.

use std::collections::BTreeSet;

use super::simulate::{ReplacementOption, SimulatedClaim, Simulation, Simulator};
use crate::labels;
use crate::model::{CapacityType, InstanceType, PodPhase, Snapshot};
use crate::requirements::Operator;
use crate::scheduling::{self, Options, Target};

#[derive(Clone, Debug, Default)]
pub struct EngineSimulator {
    pub options: Options,
}

fn option(
    it: &InstanceType,
    zones: Option<&[String]>,
    cts: &[CapacityType],
) -> Option<ReplacementOption> {
    let offers: Vec<_> = it
        .offerings
        .iter()
        .filter(|o| o.available)
        .filter(|o| zones.is_none_or(|z| z.contains(&o.zone)))
        .filter(|o| cts.contains(&o.capacity_type))
        .collect();
    let cheapest = offers.iter().map(|o| o.price).reduce(f64::min)?;
    let price_of = |ct: CapacityType| {
        offers
            .iter()
            .filter(|o| o.capacity_type == ct)
            .map(|o| o.price)
            .reduce(f64::min)
    };
    // The most expensive offering a launch could land on, within the first capacity type
    // (reserved, then spot, then on-demand) that has one.
    let worst = [
        CapacityType::Reserved,
        CapacityType::Spot,
        CapacityType::OnDemand,
    ]
    .into_iter()
    .find_map(|ct| {
        offers
            .iter()
            .filter(|o| o.capacity_type == ct)
            .map(|o| o.price)
            .reduce(f64::max)
    })
    .unwrap_or(cheapest);
    Some(ReplacementOption {
        instance_type: it.name.clone(),
        cheapest_price: cheapest,
        worst_launch_price: worst,
        spot_price: price_of(CapacityType::Spot),
        on_demand_price: price_of(CapacityType::OnDemand),
    })
}

impl Simulator for EngineSimulator {
    fn simulate(
        &self,
        snapshot: &Snapshot,
        without: &BTreeSet<String>,
        pods: &[&crate::model::Pod],
    ) -> Simulation {
        let moving: BTreeSet<String> = pods.iter().map(|p| p.key()).collect();
        let mut s = snapshot.clone();
        s.nodes.retain(|n| !without.contains(&n.name));
        s.node_claims
            .retain(|c| c.node_name.as_ref().is_none_or(|n| !without.contains(n)));
        // Only the moving pods are in question: pods already pending are the provisioner's,
        // and daemon pods on removed nodes go with their nodes.
        s.pods.retain(|p| {
            !moving.contains(&p.key()) && p.node_name.as_ref().is_some_and(|n| !without.contains(n))
        });
        s.pods.extend(pods.iter().map(|p| {
            let mut q = (*p).clone();
            q.node_name = None;
            q.phase = PodPhase::Pending;
            q
        }));
        let plan = scheduling::solve(&s, &self.options);
        let mut failures: Vec<(String, String)> = plan
            .unplaced
            .iter()
            .map(|u| (u.pod.clone(), u.reason.clone()))
            .collect();
        // A pod placed on a node that is not initialized yet is not a safe landing spot.
        for p in &plan.placements {
            if let Target::Node(name) | Target::InFlight(name) = &p.target {
                let initialized = s
                    .node_claims
                    .iter()
                    .find(|c| c.node_name.as_deref() == Some(name.as_str()) || &c.name == name)
                    .is_none_or(|c| c.initialized);
                if !initialized {
                    failures.push((
                        p.pod.clone(),
                        format!("would land on {name}, which is not initialized"),
                    ));
                }
            }
        }
        let new_claims = plan
            .new_claims
            .iter()
            .map(|c| {
                let zones: Option<Vec<String>> = c
                    .requirement_list
                    .iter()
                    .find(|r| r.key == labels::ZONE && r.operator == Operator::In)
                    .map(|r| r.values.clone());
                let mut cts: Vec<CapacityType> = c
                    .requirement_list
                    .iter()
                    .find(|r| r.key == labels::CAPACITY_TYPE && r.operator == Operator::In)
                    .map(|r| {
                        r.values
                            .iter()
                            .filter_map(|v| CapacityType::parse(v))
                            .collect()
                    })
                    .unwrap_or_else(|| vec![CapacityType::OnDemand, CapacityType::Spot]);
                cts.sort();
                let its = s.instance_types.get(&c.nodepool);
                let options: Vec<ReplacementOption> = c
                    .instance_types
                    .iter()
                    .filter_map(|o| its.and_then(|v| v.iter().find(|it| it.name == o.name)))
                    .filter_map(|it| option(it, zones.as_deref(), &cts))
                    .collect();
                let mut offered: Vec<CapacityType> = cts
                    .iter()
                    .copied()
                    .filter(|ct| match ct {
                        CapacityType::Spot => options.iter().any(|o| o.spot_price.is_some()),
                        CapacityType::OnDemand => {
                            options.iter().any(|o| o.on_demand_price.is_some())
                        }
                        CapacityType::Reserved => false,
                    })
                    .collect();
                offered.dedup();
                SimulatedClaim {
                    nodepool: c.nodepool.clone(),
                    requirements: c.requirement_list.clone(),
                    options,
                    capacity_types: offered,
                }
            })
            .collect();
        failures.sort();
        Simulation {
            failures,
            new_claims,
        }
    }
}
