//! Why one pod goes where it goes, or nowhere. The whole snapshot is solved as the provisioner
//! solves it, for the pod's outcome; then every NodePool and every existing node (registered
//! or in flight) answers for the pod alone, through the engine's own checks
//! (`eval_new`, `eval_existing`), relaxing preferences in the order a placement does. A
//! NodePool that takes the pod names the instance types that remain, cheapest first; one that
//! refuses says which requirement, taint, limit, resource, topology or volume rule it was.
//!
//! Offers the explanation of one pod; it never changes a plan.

use std::sync::Arc;

use super::engine::Engine;
use super::setup::{self, Class};
use super::solver::{Relax, active_constraints, effective_reqs};
use super::{Options, Target, solve};
use crate::model::{PodPhase, Snapshot};

/// What the solve of the whole snapshot does with the pod.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Already bound to this node; the answers say where it would go if it were pending.
    Bound(String),
    /// Not the autoscaler's to place (a daemonset or mirror pod, finished, terminating).
    Ignored(String),
    /// Onto a registered node, or a NodeClaim still launching (`in_flight`).
    Existing {
        /// The node's name, or the in-flight NodeClaim's.
        node: String,
        /// Whether `node` is a NodeClaim still launching.
        in_flight: bool,
    },
    /// Onto a new NodeClaim of `nodepool` that may be any of `instance_types` (cheapest first,
    /// the cheapest at `price` $/h).
    NewClaim {
        /// The NodePool that launches the claim.
        nodepool: String,
        /// The claim's instance-type options, cheapest first.
        instance_types: Vec<String>,
        /// US dollars per hour of the cheapest option.
        price: f64,
    },
    /// Nowhere, and why (every NodePool's refusal, joined).
    Unplaced(String),
}

/// One target's answer for the pod alone.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// The NodePool, node or in-flight claim.
    pub name: String,
    /// For a NodePool the instance types that remain, cheapest first; empty for a node. The
    /// error is the refusal.
    pub verdict: Result<Vec<String>, String>,
}

/// Why one pod goes where it goes: its outcome and every NodePool's and node's answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Explanation {
    /// `namespace/name`.
    pub pod: String,
    /// Where the solve of the whole snapshot puts it.
    pub outcome: Outcome,
    /// Every NodePool: those the engine tries, in its order, then those it leaves out.
    pub nodepools: Vec<Answer>,
    /// Every registered node, then every in-flight claim.
    pub nodes: Vec<Answer>,
}

/// Explains the pod `key` (`namespace/name`) of `s`; `None` when the snapshot has no such pod.
pub fn explain_pod(s: &Snapshot, options: &Options, key: &str) -> Option<Explanation> {
    let pi = s.pods.iter().position(|p| p.key() == key)?;
    let pod = &s.pods[pi];
    let ignored = if pod.is_daemonset_pod() {
        Some("a daemonset pod: its node is chosen by its DaemonSet")
    } else if pod.is_mirror_pod() {
        Some("a mirror (static) pod: its node is fixed")
    } else if pod.is_terminal() {
        Some("finished (Succeeded or Failed)")
    } else if pod.is_terminating() {
        Some("terminating")
    } else {
        None
    };
    let mut explanation = Explanation {
        pod: key.to_string(),
        outcome: Outcome::Unplaced(String::new()),
        nodepools: Vec::new(),
        nodes: Vec::new(),
    };
    if let Some(why) = ignored {
        explanation.outcome = Outcome::Ignored(why.to_string());
        return Some(explanation);
    }
    // A bound pod is asked about as if it were pending again, off its node.
    let unbound;
    let s = match &pod.node_name {
        Some(node) => {
            explanation.outcome = Outcome::Bound(node.clone());
            let mut copy = s.clone();
            let asked = Arc::make_mut(&mut copy.pods[pi]);
            asked.node_name = None;
            asked.phase = PodPhase::Pending;
            unbound = copy;
            &unbound
        }
        None => {
            explanation.outcome = outcome(s, options, key);
            s
        }
    };
    (explanation.nodepools, explanation.nodes) = answers(s, options, pi);
    Some(explanation)
}

/// The pod's fate in the solve of the whole snapshot.
fn outcome(s: &Snapshot, options: &Options, key: &str) -> Outcome {
    let plan = solve(s, options);
    if let Some(u) = plan.unplaced.iter().find(|u| u.pod == key) {
        return Outcome::Unplaced(u.reason.clone());
    }
    match plan
        .placements
        .iter()
        .find(|p| p.pod == key)
        .map(|p| &p.target)
    {
        Some(Target::Node(n)) => Outcome::Existing {
            node: n.clone(),
            in_flight: false,
        },
        Some(Target::InFlight(n)) => Outcome::Existing {
            node: n.clone(),
            in_flight: true,
        },
        Some(Target::NewClaim(i)) => {
            let c = &plan.new_claims[*i];
            Outcome::NewClaim {
                nodepool: c.nodepool.clone(),
                instance_types: c
                    .instance_types
                    .iter()
                    .map(|o| plan.name_of(o).to_string())
                    .collect(),
                price: c.cheapest().map_or(0.0, |o| o.price),
            }
        }
        None => Outcome::Unplaced("the solve did not consider it".to_string()),
    }
}

/// Each NodePool's and each existing target's answer for pod `pi` alone.
fn answers(s: &Snapshot, options: &Options, pi: usize) -> (Vec<Answer>, Vec<Answer>) {
    let order = if options.emptiest_first {
        setup::kube_queue_cmp
    } else {
        setup::karpenter_queue_cmp
    };
    let mut world = setup::build_ordered(s, Default::default(), false, order);
    let Some(ci) = world.classes.iter().position(|c| c.pods.contains(&pi)) else {
        return (Vec::new(), Vec::new());
    };
    // The name the engine gives its first new claim.
    let host = world.interner.intern("hostname-placeholder-00001");
    let engine = Engine::new(&mut world, options.clone());
    let w = &*engine.w;
    let c = &w.classes[ci];
    let ask = |f: &dyn Fn(&Relax) -> Result<Vec<String>, String>| match &c.error {
        Some(e) => Err(e.clone()),
        None => relaxing(c, options.ignore_preferences, w.any_prefer_no_schedule, f),
    };
    let mut pools: Vec<Answer> = (0..w.pools.len())
        .map(|p| Answer {
            name: w.pools[p].name.clone(),
            verdict: ask(&|relax| {
                let cons = active_constraints(w, c, relax);
                let alts = effective_reqs(w, c, relax);
                engine
                    .eval_new(c, &cons, &alts, relax, p, host)
                    .map(|(_, bits, _, _)| {
                        bits.iter()
                            .map(|i| w.pools[p].its[i].name.clone())
                            .collect()
                    })
            }),
        })
        .collect();
    // The engine never sees these.
    for np in &s.nodepools {
        if np.replicas.is_some() {
            pools.push(refused(
                &np.name,
                "a static-capacity NodePool (replicas set)",
            ));
        } else if !np.ready {
            pools.push(refused(
                &np.name,
                "not Ready (its Ready condition is not True)",
            ));
        }
    }
    let nodes = (0..w.existing.len())
        .map(|ei| Answer {
            name: w.existing[ei].name.clone(),
            verdict: ask(&|relax| {
                let cons = active_constraints(w, c, relax);
                let alts = effective_reqs(w, c, relax);
                engine
                    .eval_existing(c, &cons, &alts, relax, ei, 1, true)
                    .map(|_| Vec::new())
                    .map_err(|r| w.describe_refusal(c, &r))
            }),
        })
        .collect();
    (pools, nodes)
}

fn refused(name: &str, why: &str) -> Answer {
    Answer {
        name: name.to_string(),
        verdict: Err(why.to_string()),
    }
}

/// The first answer `f` accepts, dropping one preference at a time as a placement does; the
/// last refusal when none is left to drop.
fn relaxing<T>(
    c: &Class,
    ignore_preferences: bool,
    any_prefer_no_schedule: bool,
    f: &dyn Fn(&Relax) -> Result<T, String>,
) -> Result<T, String> {
    let mut relax = Relax::initial(c, ignore_preferences);
    loop {
        match f(&relax) {
            Ok(v) => return Ok(v),
            Err(e) if !relax.next(c, any_prefer_no_schedule) => return Err(e),
            Err(_) => {}
        }
    }
}
