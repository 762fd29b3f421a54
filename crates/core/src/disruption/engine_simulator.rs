//! [`Simulator`] backed by the scheduling engine: the cluster without the candidate nodes,
//! the moving pods made pending again, and one solve. A consolidation's solve closes the nodes
//! still inside their NodePool's `consolidateAfter` to those pods ([`closed_nodes`]).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use super::candidates::closed_nodes;
use super::simulate::{
    Job, PreparedSimulation, Purpose, ReplacementOption, SimulatedClaim, Simulation, Simulator,
};
use super::type_index::TypeIndex;
use crate::labels;
use crate::model::{CapacityType, InstanceType, NodeClaim, Pod, PodPhase, Snapshot};
use crate::requirements::Operator;
use crate::scheduling::NodeCache;
use crate::scheduling::intern::FastMap;
use crate::scheduling::prepared::Prepared;
use crate::scheduling::{self, Compile, Options, Plan, Target};

/// The [`Simulator`] backed by the scheduling engine: the one planning and validation use
/// unless a shell brings its own.
#[derive(Clone, Debug, Default)]
pub struct EngineSimulator {
    /// The settings of every solve it runs.
    pub options: Options,
    /// Nodes compiled by earlier preparations, for callers that prepare one cluster over and
    /// over as it changes (answers are the same with or without it).
    pub nodes: Option<Arc<Mutex<NodeCache>>>,
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
        purpose: Purpose,
        without: &BTreeSet<String>,
        pods: &[&crate::model::Pod],
    ) -> Simulation {
        let options = self.options_for(snapshot, purpose);
        simulate_with(snapshot, &options, without, pods, self.nodes.as_deref())
    }

    fn prepare<'a>(
        &'a self,
        snapshot: &'a Snapshot,
        purpose: Purpose,
    ) -> Option<Box<dyn PreparedSimulation + 'a>> {
        self.prepare_as(snapshot, purpose, None)
    }
}

/// A full solve of the simulation: `snapshot` reduced, then solved under `options`, compiled
/// with the nodes `cache` holds when there is one.
fn simulate_with(
    snapshot: &Snapshot,
    options: &Options,
    without: &BTreeSet<String>,
    pods: &[&Pod],
    cache: Option<&Mutex<NodeCache>>,
) -> Simulation {
    let s = reduced(snapshot, without, pods);
    let plan = match cache {
        Some(cache) => {
            let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
            scheduling::solve_with(&s, options, Compile::cached(&mut cache))
        }
        None => scheduling::solve(&s, options),
    };
    simulation(snapshot, without, &plan)
}

impl EngineSimulator {
    /// This simulator's solve options for `purpose` on `snapshot`.
    pub(crate) fn options_for(&self, snapshot: &Snapshot, purpose: Purpose) -> Options {
        let mut options = self.options.clone();
        if purpose == Purpose::Consolidation {
            options.closed = Arc::new(closed_nodes(snapshot));
            options.emptiest_first = true;
            // A consolidation launches at most one node, grown as the greedy grows it (as
            // upstream's simulation does). The improvement pass would split that node into
            // cheaper smaller ones no consolidation may launch: the re-check then saw two new
            // nodes where the plan saw one, and rejected the command round after round.
            options.repack = false;
        }
        options
    }

    /// [`Simulator::prepare`], telling the node cache (when there is one) that `snapshot`
    /// equals every other snapshot prepared under `same` ([`NodeCache::same_as`]). The key is
    /// given under the same lock as the compile, so a [`warm`] running beside it cannot take
    /// it first.
    pub fn prepare_as<'a>(
        &'a self,
        snapshot: &'a Snapshot,
        purpose: Purpose,
        same: Option<u64>,
    ) -> Option<Box<dyn PreparedSimulation + 'a>> {
        let compiled = match &self.nodes {
            Some(cache) => compile_in(cache, snapshot, same, false),
            None => Prepared::new(snapshot),
        }?;
        Some(Box::new(EnginePrepared {
            options: self.options_for(snapshot, purpose),
            snapshot,
            compiled,
            claims_by_name: OnceLock::new(),
            types: OnceLock::new(),
        }))
    }
}

/// How many simulations run at once: the cores this process may use, read once (reading it
/// costs system calls, and a planning round asks for every batch).
pub(crate) fn workers() -> usize {
    static WORKERS: OnceLock<usize> = OnceLock::new();
    *WORKERS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Compiles `snapshot` into `cache` under `same` and keeps nothing else: a later
/// [`EngineSimulator::prepare_as`] of a snapshot equal to it, under the same key, then finds
/// the compile made. Meant to run on another thread while the caller does work that needs no
/// compile; whichever of the two locks the cache first compiles, and the other reuses it.
/// With `one_thread`, the compile stays on the calling thread rather than moving parts of
/// its work onto threads of its own.
pub fn warm(cache: &Mutex<NodeCache>, snapshot: &Snapshot, same: u64, one_thread: bool) {
    // The kept compile is what is wanted; this handle to it is not.
    let _ = compile_in(cache, snapshot, Some(same), one_thread);
}

/// Compiles `snapshot` with the nodes `cache` holds, keyed by `same` ([`NodeCache::same_as`])
/// under the same lock as the compile.
fn compile_in(
    cache: &Mutex<NodeCache>,
    snapshot: &Snapshot,
    same: Option<u64>,
    one_thread: bool,
) -> Option<Prepared> {
    let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(key) = same {
        cache.same_as(key);
    }
    let compile = Compile {
        cache: Some(&mut cache),
        one_thread,
    };
    Prepared::new_with(snapshot, compile)
}

/// The snapshot a simulation solves: without the nodes in `without` (and their claims), the
/// moving pods pending again.
pub(crate) fn reduced(snapshot: &Snapshot, without: &BTreeSet<String>, pods: &[&Pod]) -> Snapshot {
    let moving: BTreeSet<String> = pods.iter().map(|p| p.key()).collect();
    // Pod keys built in one buffer: this runs over every pod of the cluster.
    let mut key = String::new();
    let mut is_moving = |p: &Pod| {
        key.clear();
        key.push_str(&p.namespace);
        key.push('/');
        key.push_str(&p.name);
        moving.contains(key.as_str())
    };
    // Only the moving pods are in question: pods already pending are the provisioner's,
    // and daemon pods on removed nodes go with their nodes. What stays is shared, not copied.
    let mut kept_pods: Vec<Arc<Pod>> = snapshot
        .pods
        .iter()
        .filter(|p| p.node_name.as_ref().is_some_and(|n| !without.contains(n)) && !is_moving(p))
        .cloned()
        .collect();
    kept_pods.extend(pods.iter().map(|p| {
        let mut q = (*p).clone();
        q.node_name = None;
        q.phase = PodPhase::Pending;
        Arc::new(q)
    }));
    Snapshot {
        now: snapshot.now,
        nodepools: snapshot.nodepools.clone(),
        instance_types: snapshot.instance_types.clone(),
        nodes: snapshot
            .nodes
            .iter()
            .filter(|n| !without.contains(&n.name))
            .cloned()
            .collect(),
        node_claims: snapshot
            .node_claims
            .iter()
            .filter(|c| c.node_name.as_ref().is_none_or(|n| !without.contains(n)))
            .cloned()
            .collect(),
        pods: kept_pods,
        daemonsets: snapshot.daemonsets.clone(),
        pdbs: snapshot.pdbs.clone(),
        persistent_volume_claims: snapshot.persistent_volume_claims.clone(),
        persistent_volumes: snapshot.persistent_volumes.clone(),
        storage_classes: snapshot.storage_classes.clone(),
        namespaces: snapshot.namespaces.clone(),
        commands_in_flight: snapshot.commands_in_flight.clone(),
    }
}

/// What a solve of the reduced snapshot means for disruption.
fn simulation(snapshot: &Snapshot, without: &BTreeSet<String>, plan: &Plan) -> Simulation {
    let claims: Vec<&NodeClaim> = snapshot
        .node_claims
        .iter()
        .filter(|c| c.node_name.as_ref().is_none_or(|n| !without.contains(n)))
        .map(Arc::as_ref)
        .collect();
    let initialized = |name: &str| {
        claims
            .iter()
            .find(|c| c.node_name.as_deref() == Some(name) || c.name == name)
            .is_none_or(|c| c.initialized)
    };
    let types = TypeIndex::new(snapshot);
    simulation_with(&|pool, name| types.get(pool, name), plan, &initialized)
}

/// [`simulation`] with the lookup "is the claim behind this target initialized?" given.
fn simulation_with<'t>(
    type_of: &dyn Fn(&str, &str) -> Option<&'t InstanceType>,
    plan: &Plan,
    initialized: &dyn Fn(&str) -> bool,
) -> Simulation {
    let mut failures: Vec<(String, String)> = plan
        .unplaced
        .iter()
        .map(|u| (u.pod.clone(), u.reason.clone()))
        .collect();
    // A pod placed on a node that is not initialized yet is not a safe landing spot.
    for p in &plan.placements {
        if let Target::Node(name) | Target::InFlight(name) = &p.target
            && !initialized(name)
        {
            failures.push((
                p.pod.clone(),
                format!("would land on {name}, which is not initialized"),
            ));
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
                .map(|r| r.values.to_vec());
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
            let options: Vec<ReplacementOption> = c
                .instance_types
                .iter()
                .filter_map(|o| type_of(&c.nodepool, plan.name_of(o)))
                .filter_map(|it| option(it, zones.as_deref(), &cts))
                .collect();
            let mut offered: Vec<CapacityType> = cts
                .iter()
                .copied()
                .filter(|ct| match ct {
                    CapacityType::Spot => options.iter().any(|o| o.spot_price.is_some()),
                    CapacityType::OnDemand => options.iter().any(|o| o.on_demand_price.is_some()),
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

/// [`EngineSimulator`] over a compiled snapshot: incremental solves, several at once.
struct EnginePrepared<'a> {
    /// The simulator's options for the purpose prepared for.
    options: Options,
    snapshot: &'a Snapshot,
    compiled: Prepared,
    /// Claim indices by node name and by claim name, in snapshot order. Both indexes are
    /// built on first use: a solve that places no pod on a node needs no claim, and one that
    /// makes no new claim needs no instance type.
    claims_by_name: OnceLock<FastMap<&'a str, Vec<usize>>>,
    types: OnceLock<TypeIndex<'a>>,
}

impl<'a> EnginePrepared<'a> {
    fn claims_by_name(&self) -> &FastMap<&'a str, Vec<usize>> {
        self.claims_by_name.get_or_init(|| {
            let mut by_name: FastMap<&str, Vec<usize>> = FastMap::default();
            for (i, c) in self.snapshot.node_claims.iter().enumerate() {
                if let Some(n) = c.node_name.as_deref() {
                    by_name.entry(n).or_default().push(i);
                }
                let v = by_name.entry(c.name.as_str()).or_default();
                if v.last() != Some(&i) {
                    v.push(i);
                }
            }
            by_name
        })
    }
}

impl PreparedSimulation for EnginePrepared<'_> {
    fn simulate(&self, without: &BTreeSet<String>, pods: &[&Pod]) -> Simulation {
        match self
            .compiled
            .solve(self.snapshot, without, pods, &self.options)
        {
            Some(plan) => {
                let initialized = |name: &str| {
                    self.claims_by_name()
                        .get(name)
                        .and_then(|ids| {
                            ids.iter()
                                .map(|&i| &self.snapshot.node_claims[i])
                                .find(|c| c.node_name.as_ref().is_none_or(|n| !without.contains(n)))
                        })
                        .is_none_or(|c| c.initialized)
                };
                let type_of = |pool: &str, name: &str| {
                    self.types
                        .get_or_init(|| TypeIndex::new(self.snapshot))
                        .get(pool, name)
                };
                simulation_with(&type_of, &plan, &initialized)
            }
            None => simulate_with(self.snapshot, &self.options, without, pods, None),
        }
    }

    fn simulate_all(&self, jobs: &[Job<'_>]) -> Vec<Simulation> {
        // A thread costs about as much to start as a simulation takes: a worker is worth
        // starting for two simulations or more.
        let threads = workers().min(jobs.len() / 2);
        if threads <= 1 {
            return jobs
                .iter()
                .map(|j| self.simulate(&j.without, &j.pods))
                .collect();
        }
        // Workers take the next job as they finish one; answers go back in job order, so the
        // result does not depend on scheduling. The calling thread is one of the workers: it
        // would otherwise only wait for the others.
        let next = AtomicUsize::new(0);
        let work = || {
            let mut out = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(j) = jobs.get(i) else { break };
                out.push((i, self.simulate(&j.without, &j.pods)));
            }
            out
        };
        let mut done: Vec<(usize, Simulation)> = std::thread::scope(|scope| {
            let helpers: Vec<_> = (1..threads).map(|_| scope.spawn(work)).collect();
            let mut done = work();
            for h in helpers {
                done.extend(h.join().expect("a simulation worker panicked"));
            }
            done
        });
        done.sort_by_key(|d| d.0);
        done.into_iter().map(|d| d.1).collect()
    }
}

#[cfg(test)]
mod differential;

#[cfg(test)]
mod tests;
