//! The discrete-event loop: a virtual clock drives the controller's own cadence (the pod
//! batcher and the disruption loop from `nodewright_core::cadence`), the provisioner, the
//! disruption planner, the simulated cloud and the approximated kube-scheduler.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use nodewright_core::cadence::{
    BatchWindow, Batcher, ConsolidationState, DisruptionCadence, DisruptionTimings, Due, Planned,
    Validated, batcher::POD_REQUEUE, plan_is_consolidated,
};
use nodewright_core::disruption::command::{Command, Decision};
use nodewright_core::disruption::engine_simulator::EngineSimulator;
use nodewright_core::disruption::plan::{Settings, plan};
use nodewright_core::disruption::validate::validate;
use nodewright_core::model::{CapacityType, DaemonSet, InstanceType, Node, NodeClaim, NodePool};
use nodewright_core::requirements::Requirement;
use nodewright_core::resources::CPU;
use nodewright_core::taints::{Taint, TaintEffect};
use nodewright_core::time::Timestamp;

use crate::cloud::{LaunchError, LaunchOption, SimCloud};
use crate::cluster::{Cluster, ICE_TTL, SimClaim, Workload, label_matches, node_labels};
use crate::events::EventQueue;
use crate::kube_scheduler::bind_pending;
use crate::provision::{ClaimRequest, PlacementTarget, Provisioner};
use crate::report::{RunReport, Sample, Summary, TimelineEvent, Work};
use crate::scenario::InterruptTarget;

/// The instant virtual time starts at: 2026-01-01T00:00:00Z, so cron budgets see a real date.
pub const EPOCH: Timestamp = Timestamp(1_767_225_600_000);

/// The taint Karpenter puts on a node it is about to disrupt.
pub const DISRUPTED_TAINT: &str = "karpenter.sh/disrupted";

/// What a timed step does, in core terms.
#[derive(Clone, Debug)]
pub enum SimAction {
    /// Adds or replaces a NodePool with the instance types it may launch.
    ApplyNodePool(NodePool, Arc<Vec<InstanceType>>),
    ApplyWorkload(Workload),
    ApplyDaemonSet(DaemonSet),
    ApplyPdb(Box<crate::disruption_budget::SimPdb>),
    ApplyStorageClass(nodewright_core::model::StorageClass),
    /// `kind`, namespace (empty for cluster-scoped), name.
    Delete(String, String, String),
    Scale {
        namespace: String,
        name: String,
        replicas: u32,
    },
    Interrupt(InterruptTarget),
    /// Nothing but time passing.
    Advance,
}

#[derive(Clone, Debug)]
pub struct TimedAction {
    pub at: Duration,
    /// The scenario step it came from (`None` for the initial manifests).
    pub step: Option<usize>,
    pub action: SimAction,
}

#[derive(Clone, Debug)]
pub struct EngineInput {
    pub name: String,
    pub seed: u64,
    pub until: Duration,
    pub cloud: crate::cloud::CloudConfig,
    pub actions: Vec<TimedAction>,
    pub batch: BatchWindow,
    pub disruption: DisruptionTimings,
    /// Where spot prices come from (synthetic in the embedded catalog); said in every report.
    pub spot_price_note: String,
}

#[derive(Clone, Debug)]
enum Event {
    Action(usize),
    LaunchResult(String),
    NodeReady(String),
    /// A spot interruption notice for a claim: two minutes until the instance is reclaimed.
    Interrupt(String),
    /// The interrupted instance is reclaimed.
    InstanceGone(String),
    /// An evicted pod's grace period is over.
    PodGone(String),
    /// A Job's pod finished its run.
    PodSucceeded(String),
    /// The eviction queue asks again for the pods a draining claim still runs.
    RetryEviction(String),
}

/// How long the eviction queue waits before asking again for a pod whose eviction a
/// PodDisruptionBudget refused (its backoff tops out here).
pub const EVICTION_RETRY: Duration = Duration::from_secs(10);

/// How long EC2 gives between a spot interruption notice and reclaiming the instance.
pub const SPOT_NOTICE: Duration = Duration::from_secs(120);

/// A pod's `terminationGracePeriodSeconds` when it sets none.
pub const DEFAULT_POD_GRACE: Duration = Duration::from_secs(30);

/// A command that passed validation and waits for its replacements.
#[derive(Clone, Debug)]
struct Running {
    command: Command,
    replacements: Vec<String>,
}

pub struct Engine<'p> {
    input: EngineInput,
    provisioner: &'p dyn Provisioner,
    cluster: Cluster,
    cloud: SimCloud,
    queue: EventQueue<Event>,
    batcher: Batcher,
    cadence: DisruptionCadence,
    /// The "consolidated" marker: rounds over an unchanged cluster skip the plan.
    consolidation: ConsolidationState,
    /// `cluster.changes` when the disruption loop last looked.
    seen_changes: u64,
    /// When the disruption loop last looked, for changes that are only time passing.
    last_round: Timestamp,
    /// `cluster.changes` and the instant after the last provisioning solve.
    solved: Option<(u64, Timestamp)>,
    settled: Settled,
    work: Work,
    now: Timestamp,
    last_trigger: BTreeMap<String, Timestamp>,
    awaiting: Vec<Command>,
    running: Vec<Running>,
    /// Claims being drained, with why.
    draining: Vec<(String, String)>,
    /// Pods whose eviction was refused, already told on the timeline.
    refused: BTreeSet<String>,
    /// Job pods whose success is already scheduled.
    job_timers: BTreeSet<String>,
    /// Claim name → the pods the provisioner meant it for.
    nominated: BTreeMap<String, Vec<String>>,
    /// Claims waiting for the cloud's answer, with their launch options.
    pending_launch: BTreeMap<String, Vec<LaunchOption>>,
    timeline: Vec<TimelineEvent>,
    samples: Vec<Sample>,
    cost_usd: f64,
    stats: Stats,
    /// Invariant violations seen at any step (should stay empty).
    pub violations: Vec<String>,
    /// The cluster's `(changes, edits)` at the last invariant check, and what it found.
    checked: Option<((u64, u64), Vec<String>)>,
    /// The cluster's `(changes, edits)` when its sample figures were last counted, and them.
    counted: Option<((u64, u64), Sample)>,
}

/// What one eviction pass did.
#[derive(Clone, Copy, Debug, Default)]
struct Evictions {
    evicted: usize,
    refused: usize,
    longest: Duration,
}

/// `cluster.changes` after the last reconcile, and after the last scheduler pass that bound
/// nothing.
#[derive(Clone, Copy, Debug, Default)]
struct Settled {
    reconciled: Option<u64>,
    bound_nothing: Option<u64>,
}

#[derive(Clone, Debug, Default)]
struct Stats {
    launched: usize,
    launch_failures: usize,
    disrupted: usize,
    commands: usize,
    rejected: usize,
    savings_per_hour: f64,
    interruptions: usize,
    max_nodes: usize,
    last_gap: Option<(f64, f64)>,
}

impl<'p> Engine<'p> {
    pub fn new(input: EngineInput, provisioner: &'p dyn Provisioner) -> Self {
        let mut queue = EventQueue::default();
        for (i, a) in input.actions.iter().enumerate() {
            queue.push(EPOCH.plus(a.at), Event::Action(i));
        }
        Engine {
            cloud: SimCloud::new(input.cloud.clone(), input.seed),
            batcher: Batcher::new(input.batch),
            cadence: DisruptionCadence::new(input.disruption, EPOCH),
            consolidation: ConsolidationState::new(EPOCH),
            seen_changes: 0,
            last_round: EPOCH,
            solved: None,
            settled: Settled::default(),
            work: Work::default(),
            input,
            provisioner,
            cluster: Cluster::default(),
            queue,
            now: EPOCH,
            last_trigger: BTreeMap::new(),
            awaiting: Vec::new(),
            running: Vec::new(),
            draining: Vec::new(),
            refused: BTreeSet::new(),
            job_timers: BTreeSet::new(),
            nominated: BTreeMap::new(),
            pending_launch: BTreeMap::new(),
            timeline: Vec::new(),
            samples: Vec::new(),
            cost_usd: 0.0,
            stats: Stats::default(),
            violations: Vec::new(),
            checked: None,
            counted: None,
        }
    }

    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    fn end(&self) -> Timestamp {
        EPOCH.plus(self.input.until)
    }

    fn log(&mut self, kind: &str, message: String) {
        self.timeline.push(TimelineEvent {
            at: self.now.since(EPOCH),
            kind: kind.to_string(),
            message,
        });
    }

    /// The next instant anything is due.
    fn next_wake(&self) -> Timestamp {
        let mut next = self.end();
        if let Some(t) = self.queue.peek_time() {
            next = next.min(t);
        }
        if let Some(t) = self.batcher.deadline() {
            next = next.min(t);
        }
        next = next.min(self.cadence.next_wake());
        for t in self.last_trigger.values() {
            next = next.min(t.plus(POD_REQUEUE));
        }
        next.max(self.now)
    }

    /// Runs to the end and returns the report. `progress` is told the share of virtual time done.
    pub fn run(mut self, progress: &mut dyn FnMut(f64)) -> RunReport {
        let end = self.end();
        self.sample();
        loop {
            let next = self.next_wake();
            self.advance_to(next);
            self.work.steps += 1;
            while let Some((_, e)) = self.queue.pop_due(self.now) {
                self.handle(e);
            }
            self.settle();
            if let Some(batch) = self.batcher.poll(self.now) {
                self.provision(batch.keys.len());
                self.settle();
            }
            match self.cadence.due(self.now) {
                Some(Due::Plan) => self.disruption_round(),
                Some(Due::Validate) => self.validation(),
                None => {}
            }
            self.progress_commands();
            self.progress_drains();
            self.settle();
            self.check_invariants();
            self.sample();
            progress(self.now.since(EPOCH).as_secs_f64() / self.input.until.as_secs_f64().max(1.0));
            if self.now >= end {
                break;
            }
        }
        self.finish()
    }

    fn advance_to(&mut self, t: Timestamp) {
        let dt = t.since(self.now).as_secs_f64() / 3600.0;
        self.cost_usd += dt * self.price_per_hour();
        self.now = t;
    }

    fn price_per_hour(&mut self) -> f64 {
        self.state().price_per_hour
    }

    /// The cluster's figures for a [`Sample`] (its `at` left at zero). They read nothing but
    /// the cluster, so they are counted again only after it changed (see `check_invariants`).
    fn state(&mut self) -> &Sample {
        let key = (self.cluster.changes, self.cluster.edits());
        if self.counted.as_ref().is_none_or(|(at, _)| *at != key) {
            let s = count(&self.cluster);
            self.counted = Some((key, s));
        }
        &self.counted.as_ref().expect("just counted").1
    }

    /// Controllers create replicas, the kube-scheduler binds what fits, and pods that stay
    /// pending trigger the provisioner (again every 10 s while they wait).
    fn settle(&mut self) {
        // Both passes are idempotent: over a cluster unchanged since they last ran (the
        // reconcile) or last bound nothing (the scheduler), they would do nothing again.
        if self.settled.reconciled != Some(self.cluster.changes) {
            self.cluster.reconcile(self.now);
            self.settled.reconciled = Some(self.cluster.changes);
        }
        if self.settled.bound_nothing != Some(self.cluster.changes) {
            let bound = bind_pending(&mut self.cluster, self.now);
            if bound.is_empty() {
                self.settled.bound_nothing = Some(self.cluster.changes);
            }
            self.log_volume_placements(&bound);
        }
        self.schedule_job_runs();
        let pending: BTreeSet<String> = self
            .cluster
            .pending_pods()
            .into_iter()
            .map(|p| p.key())
            .collect();
        self.last_trigger.retain(|k, _| pending.contains(k));
        for key in pending {
            let due = self
                .last_trigger
                .get(&key)
                .is_none_or(|t| self.now >= t.plus(POD_REQUEUE));
            if due {
                self.batcher.trigger(self.now, &key);
                self.last_trigger.insert(key, self.now);
            }
        }
    }

    /// Volumes provisioned by these binds, and pods that went back to a volume they already
    /// had.
    fn log_volume_placements(&mut self, bound: &[(String, String)]) {
        let provisioned = std::mem::take(&mut self.cluster.provisioned);
        for v in &provisioned {
            let when = match &v.placement {
                Some((pod, node)) => format!("first placement of {pod} on {node}"),
                None => "Immediate binding".to_string(),
            };
            self.log(
                "volume",
                format!(
                    "{} provisioned in {} for {} ({when})",
                    v.volume, v.zone, v.claim
                ),
            );
        }
        for (pod, node) in bound {
            let Some(p) = self.cluster.pods().get(pod) else {
                continue;
            };
            let mut kept = Vec::new();
            for claim in &p.volume_claims {
                if provisioned
                    .iter()
                    .any(|v| v.claim == format!("{}/{claim}", p.namespace))
                {
                    continue;
                }
                let pv = self
                    .cluster
                    .pvcs
                    .get(&(p.namespace.clone(), claim.clone()))
                    .and_then(|c| c.volume_name.as_ref())
                    .and_then(|v| self.cluster.pvs.get(v));
                if let Some(pv) = pv {
                    kept.push(format!(
                        "{} ({})",
                        pv.name,
                        crate::volumes::volume_zone(pv).unwrap_or("?")
                    ));
                }
            }
            if !kept.is_empty() {
                let zone = self
                    .cluster
                    .claims()
                    .get(node)
                    .and_then(|c| c.node.as_ref())
                    .and_then(|n| n.labels.get(nodewright_core::labels::ZONE))
                    .cloned()
                    .unwrap_or_default();
                let msg = format!(
                    "{pod} rescheduled on {node} in {zone}, with its volume {}",
                    kept.join(", ")
                );
                self.log("volume", msg);
            }
        }
    }

    fn handle(&mut self, e: Event) {
        match e {
            Event::Action(i) => {
                let a = self.input.actions[i].clone();
                self.apply(a.action);
            }
            Event::LaunchResult(claim) => self.launch_result(&claim),
            Event::NodeReady(claim) => self.node_ready(&claim),
            Event::Interrupt(claim) => self.interruption_notice(&claim),
            Event::InstanceGone(claim) => {
                if self
                    .cluster
                    .claims()
                    .get(&claim)
                    .is_some_and(SimClaim::is_live)
                {
                    let what = self.describe_claim(&claim);
                    let left = self
                        .cluster
                        .pods_on(&claim)
                        .filter(|p| !p.is_daemonset_pod())
                        .count();
                    self.log(
                        "interrupted",
                        format!("{what} reclaimed by EC2, {left} pod(s) still on it"),
                    );
                    self.remove_claim(&claim);
                }
            }
            Event::PodSucceeded(key) => self.pod_succeeded(&key),
            Event::RetryEviction(claim) => self.retry_eviction(&claim),
            Event::PodGone(key) => {
                if self
                    .cluster
                    .pods()
                    .get(&key)
                    .is_some_and(|p| p.deletion_timestamp.is_some())
                {
                    self.cluster.remove_pod(&key, self.now);
                }
            }
        }
    }

    fn apply(&mut self, action: SimAction) {
        self.cluster.changed();
        match action {
            SimAction::ApplyNodePool(pool, types) => {
                self.log(
                    "apply",
                    format!("NodePool/{} ({} instance types)", pool.name, types.len()),
                );
                self.cluster.catalog.insert(pool.name.clone(), types);
                self.cluster.nodepools.retain(|p| p.name != pool.name);
                self.cluster.nodepools.push(pool);
                self.cluster.nodepools.sort_by(|a, b| a.name.cmp(&b.name));
            }
            SimAction::ApplyWorkload(w) => {
                self.log(
                    "apply",
                    format!(
                        "{:?}/{}/{} replicas={}",
                        w.kind, w.namespace, w.name, w.replicas
                    ),
                );
                let key = (w.namespace.clone(), w.name.clone());
                match self.cluster.workloads.get_mut(&key) {
                    Some(existing) => existing.update_from(w),
                    None => {
                        self.cluster.workloads.insert(key, w);
                    }
                }
            }
            SimAction::ApplyDaemonSet(ds) => {
                self.log("apply", format!("DaemonSet/{}/{}", ds.namespace, ds.name));
                self.cluster
                    .daemonsets
                    .retain(|d| !(d.namespace == ds.namespace && d.name == ds.name));
                self.cluster.daemonsets.push(ds);
            }
            SimAction::ApplyPdb(b) => {
                self.log("apply", format!("PodDisruptionBudget/{}", b.key()));
                self.cluster
                    .pdbs
                    .insert((b.namespace().to_string(), b.name().to_string()), *b);
            }
            SimAction::ApplyStorageClass(sc) => {
                self.log(
                    "apply",
                    format!(
                        "StorageClass/{} ({}, {})",
                        sc.name, sc.provisioner, sc.volume_binding_mode
                    ),
                );
                self.cluster.storage_classes.insert(sc.name.clone(), sc);
            }
            SimAction::Delete(kind, ns, name) => self.delete(&kind, &ns, &name),
            SimAction::Scale {
                namespace,
                name,
                replicas,
            } => match self
                .cluster
                .workloads
                .get_mut(&(namespace.clone(), name.clone()))
            {
                Some(w) => {
                    let from = w.replicas;
                    w.replicas = replicas;
                    self.log(
                        "scale",
                        format!("{namespace}/{name}: {from} -> {replicas} replicas"),
                    );
                }
                None => self.log(
                    "warning",
                    format!("scale: no Deployment or StatefulSet {namespace}/{name}"),
                ),
            },
            SimAction::Interrupt(target) => self.interrupt(target),
            SimAction::Advance => {}
        }
    }

    fn delete(&mut self, kind: &str, ns: &str, name: &str) {
        match kind {
            "NodePool" => {
                self.cluster.nodepools.retain(|p| p.name != name);
                let claims: Vec<String> = self
                    .cluster
                    .claims()
                    .values()
                    .filter(|c| c.is_live() && c.claim.nodepool == name)
                    .map(|c| c.claim.name.clone())
                    .collect();
                for c in claims {
                    self.remove_claim(&c);
                }
            }
            "PodDisruptionBudget" => {
                self.cluster
                    .pdbs
                    .remove(&(ns.to_string(), name.to_string()));
            }
            "StorageClass" => {
                self.cluster.storage_classes.remove(name);
            }
            "DaemonSet" => {
                self.cluster
                    .daemonsets
                    .retain(|d| !(d.namespace == ns && d.name == name));
                let pods: Vec<String> = self
                    .cluster
                    .pods()
                    .values()
                    .filter(|p| {
                        p.is_daemonset_pod() && p.owner.as_ref().is_some_and(|o| o.name == name)
                    })
                    .map(|p| p.key())
                    .collect();
                for p in pods {
                    self.cluster.remove_pod(&p, self.now);
                }
            }
            _ => {
                let removed = self
                    .cluster
                    .workloads
                    .remove(&(ns.to_string(), name.to_string()));
                if removed.is_none() {
                    self.log("warning", format!("delete: no {kind} {ns}/{name}"));
                    return;
                }
                let pods: Vec<String> = self
                    .cluster
                    .pods()
                    .values()
                    .filter(|p| {
                        p.namespace == ns
                            && (p.owner.as_ref().is_some_and(|o| o.name == name)
                                || (p.owner.is_none() && p.name == name))
                    })
                    .map(|p| p.key())
                    .collect();
                for p in pods {
                    self.cluster.remove_pod(&p, self.now);
                }
            }
        }
        self.log(
            "delete",
            format!("{kind}/{ns}{}{name}", if ns.is_empty() { "" } else { "/" }),
        );
    }

    fn interrupt(&mut self, target: InterruptTarget) {
        let mut live: Vec<&SimClaim> = self
            .cluster
            .claims()
            .values()
            .filter(|c| c.is_live() && c.instance.is_some())
            .collect();
        live.sort_by(|a, b| {
            a.claim
                .creation_timestamp
                .cmp(&b.claim.creation_timestamp)
                .then(a.claim.name.cmp(&b.claim.name))
        });
        let chosen: Vec<String> = match &target {
            InterruptTarget::Node(n) => live
                .iter()
                .filter(|c| c.claim.node_name.as_deref() == Some(n) || &c.claim.name == n)
                .map(|c| c.claim.name.clone())
                .collect(),
            InterruptTarget::Matching {
                capacity_type,
                instance_type,
                zone,
                count,
            } => live
                .iter()
                .filter(|c| {
                    let i = c.instance.as_ref().expect("filtered on instance");
                    capacity_type.is_none_or(|t| t == i.capacity_type)
                        && instance_type
                            .as_deref()
                            .is_none_or(|t| t == i.instance_type)
                        && zone.as_deref().is_none_or(|z| z == i.zone)
                })
                .take(*count as usize)
                .map(|c| c.claim.name.clone())
                .collect(),
        };
        if chosen.is_empty() {
            self.log("warning", format!("interrupt: no node matches {target:?}"));
        }
        for c in chosen {
            self.queue.push(self.now, Event::Interrupt(c));
        }
    }

    /// One provisioning pass over the snapshot, after a batch window closed.
    fn provision(&mut self, batch_size: usize) {
        if self.solved.is_some_and(|(changes, at)| {
            changes == self.cluster.changes && !self.ice_expired_between(at, self.now)
        }) {
            // The same pending pods over the same cluster: the solve would say the same.
            self.work.solves_skipped += 1;
            return;
        }
        self.work.solves += 1;
        let plan = self.provisioner.provision(self.cluster.view(self.now));
        self.provision_plan(plan, batch_size);
        self.solved = Some((self.cluster.changes, self.now));
    }

    /// Whether an insufficient-capacity mark ran out in `(from, to]`.
    fn ice_expired_between(&self, from: Timestamp, to: Timestamp) -> bool {
        self.cluster
            .ice
            .values()
            .any(|until| *until > from && *until <= to)
    }

    fn provision_plan(&mut self, plan: crate::provision::ProvisionPlan, batch_size: usize) {
        if plan.new_claims.is_empty() && plan.unplaced.is_empty() {
            return;
        }
        if plan.cost > 0.0 {
            self.stats.last_gap = Some((plan.cost, plan.lower_bound));
        }
        for (i, c) in plan.new_claims.iter().enumerate() {
            let nominated: Vec<String> = plan
                .placements
                .iter()
                .filter(|(_, t)| *t == PlacementTarget::NewClaim(i))
                .map(|(p, _)| p.clone())
                .collect();
            let reason = format!(
                "{} pending pod(s) in a batch of {batch_size} (bound ${:.4}/h, plan ${:.4}/h)",
                c.pods.len().max(nominated.len()),
                plan.lower_bound,
                plan.cost
            );
            self.create_claim(c, reason);
        }
        for (pod, why) in plan.unplaced.iter().take(10) {
            self.log("unschedulable", format!("{pod}: {why}"));
        }
    }

    fn create_claim(&mut self, c: &ClaimRequest, reason: String) -> Option<String> {
        let pool = self.cluster.nodepool(&c.nodepool)?.clone();
        self.cluster.changed();
        let name = self.cluster.next_claim_name(&pool.name);
        let claim = NodeClaim {
            name: name.clone(),
            nodepool: pool.name.clone(),
            labels: pool.template.labels.clone(),
            taints: pool.template.taints.clone(),
            startup_taints: pool.template.startup_taints.clone(),
            requirements: {
                let mut r = pool.template.requirements.clone();
                let names: Vec<&str> = c.options.iter().map(|o| o.instance_type.as_str()).collect();
                r.push(Requirement::new(
                    nodewright_core::labels::INSTANCE_TYPE,
                    nodewright_core::requirements::Operator::In,
                    &names,
                ));
                r
            },
            creation_timestamp: self.now,
            expire_after: pool.template.expire_after,
            termination_grace_period: pool.template.termination_grace_period,
            ..NodeClaim::default()
        };
        let first = c
            .options
            .first()
            .map(|o| {
                format!(
                    "{} {} {} ${:.4}/h",
                    o.instance_type, o.zone, o.capacity_type, o.price
                )
            })
            .unwrap_or_default();
        self.log(
            "launch",
            format!(
                "NodeClaim {name} (NodePool {}): {} option(s), cheapest {first}; for {reason}",
                pool.name,
                c.options.len()
            ),
        );
        self.nominated.insert(name.clone(), c.pods.clone());
        self.cluster.insert_claim(
            &name,
            SimClaim {
                claim,
                instance: None,
                node: None,
                launched_at: None,
                deleted_at: None,
                reason,
            },
        );
        self.pending_launch.insert(name.clone(), c.options.clone());
        self.queue.push(
            self.now.plus(self.input.cloud.launch_delay),
            Event::LaunchResult(name.clone()),
        );
        Some(name)
    }

    fn launch_result(&mut self, name: &str) {
        let Some(options) = self.pending_launch.remove(name) else {
            return;
        };
        if !self
            .cluster
            .claims()
            .get(name)
            .is_some_and(SimClaim::is_live)
        {
            return;
        }
        let now = self.now;
        self.cluster.changed();
        let usable: Vec<LaunchOption> = options
            .into_iter()
            .filter(|o| {
                self.cluster
                    .ice
                    .get(&(o.instance_type.clone(), o.zone.clone(), o.capacity_type))
                    .is_none_or(|until| *until <= now)
            })
            .collect();
        match self.cloud.launch(&usable) {
            Ok(instance) => {
                self.stats.launched += 1;
                let pool_name = &self.cluster.claims()[name].claim.nodepool;
                let pool = self
                    .cluster
                    .nodepools
                    .iter()
                    .find(|p| &p.name == pool_name)
                    .cloned()
                    .unwrap_or_default();
                let it = self
                    .cluster
                    .catalog
                    .get(&pool.name)
                    .and_then(|t| t.iter().find(|t| t.name == instance.instance_type).cloned());
                let Some(it) = it else {
                    return;
                };
                let labels = node_labels(
                    &pool,
                    &it,
                    &instance.zone,
                    instance.capacity_type,
                    &self.input.cloud.region,
                    name,
                );
                let claim = self.cluster.claim_mut(name).expect("live claim");
                let c = &mut claim.claim;
                c.launched = true;
                c.provider_id = Some(format!("aws:///{}/{}", instance.zone, instance.id));
                c.labels = labels;
                c.capacity = it.capacity.clone();
                c.allocatable = it.allocatable();
                c.requirements
                    .retain(|r| r.key != nodewright_core::labels::INSTANCE_TYPE);
                c.requirements.extend([
                    Requirement::single(nodewright_core::labels::INSTANCE_TYPE, &it.name),
                    Requirement::single(nodewright_core::labels::ZONE, &instance.zone),
                    Requirement::single(
                        nodewright_core::labels::CAPACITY_TYPE,
                        instance.capacity_type.as_str(),
                    ),
                ]);
                claim.launched_at = Some(now);
                let spot = instance.capacity_type == CapacityType::Spot;
                let cold: Vec<_> = instance
                    .out_of_capacity
                    .iter()
                    .map(|o| (o.instance_type.clone(), o.zone.clone(), o.capacity_type))
                    .collect();
                let skipped = match instance.out_of_capacity.len() {
                    0 => String::new(),
                    n => format!(
                        "; {n} cheaper offering(s) out of capacity ({})",
                        instance
                            .out_of_capacity
                            .iter()
                            .take(3)
                            .map(|o| format!("{} {} {}", o.instance_type, o.zone, o.capacity_type))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                };
                let msg = format!(
                    "{name} launched as {} in {} ({}) at ${:.4}/h, instance {}{skipped}",
                    instance.instance_type,
                    instance.zone,
                    instance.capacity_type,
                    instance.price,
                    instance.id
                );
                claim.instance = Some(instance);
                for k in cold {
                    self.cluster.ice.insert(k, now.plus(ICE_TTL));
                }
                self.log("launched", msg);
                self.queue.push(
                    now.plus(self.input.cloud.registration_delay),
                    Event::NodeReady(name.to_string()),
                );
                if spot {
                    let horizon = self.end().since(now);
                    if let Some(d) = self.cloud.spot_interruption_after(horizon) {
                        self.queue
                            .push(now.plus(d), Event::Interrupt(name.to_string()));
                    }
                }
            }
            Err(e) => {
                self.stats.launch_failures += 1;
                if let LaunchError::InsufficientCapacity(tried) = &e {
                    for o in tried {
                        self.cluster.ice.insert(
                            (o.instance_type.clone(), o.zone.clone(), o.capacity_type),
                            now.plus(ICE_TTL),
                        );
                    }
                }
                self.log("launch-failed", format!("{name}: {e}"));
                self.remove_claim(name);
                self.fail_commands_waiting_on(name);
            }
        }
    }

    fn node_ready(&mut self, name: &str) {
        let now = self.now;
        let Some(claim) = self.cluster.claim_mut(name) else {
            return;
        };
        if !claim.is_live() {
            return;
        }
        self.cluster.changes += 1;
        let claim = self.cluster.claim_mut(name).expect("live claim");
        let c = &mut claim.claim;
        let node = Node {
            name: name.to_string(),
            provider_id: c.provider_id.clone().unwrap_or_default(),
            labels: c.labels.clone(),
            annotations: c.annotations.clone(),
            taints: c.taints.clone(),
            capacity: c.capacity.clone(),
            allocatable: c.allocatable.clone(),
            ready: true,
            unschedulable: false,
            creation_timestamp: now,
            deletion_timestamp: None,
        };
        c.node_name = Some(name.to_string());
        c.registered = true;
        c.initialized = true;
        c.initialized_at = Some(now);
        c.last_pod_event_time = Some(now);
        claim.node = Some(node.clone());
        let what = self.describe_claim(name);
        self.log("ready", format!("{what} is Ready"));
        // One pod per DaemonSet whose pod tolerates the node.
        let daemons = self.cluster.daemonsets.clone();
        for ds in daemons {
            if nodewright_core::taints::first_untolerated(&ds.pod.tolerations, &node.taints)
                .is_some()
            {
                continue;
            }
            let mut pod = ds.pod.clone();
            pod.namespace = ds.namespace.clone();
            pod.name = format!("{}-{name}", ds.name);
            pod.owner = Some(nodewright_core::model::OwnerRef {
                kind: "DaemonSet".into(),
                name: ds.name.clone(),
                controller: true,
            });
            pod.creation_timestamp = now;
            let key = pod.key();
            // The kube-scheduler places daemon pods too; one that does not fit stays pending.
            let fits = crate::kube_scheduler::unfit(&self.cluster, &pod, &node).is_none();
            self.cluster.insert_pod(pod);
            if fits {
                self.cluster.bind(&key, name, now);
            } else {
                self.log(
                    "warning",
                    format!("daemon pod {key} does not fit on {name}"),
                );
            }
        }
    }

    fn describe_claim(&self, name: &str) -> String {
        match self
            .cluster
            .claims()
            .get(name)
            .and_then(|c| c.instance.as_ref())
        {
            Some(i) => format!(
                "{name} ({} {} {} ${:.4}/h)",
                i.instance_type, i.zone, i.capacity_type, i.price
            ),
            None => name.to_string(),
        }
    }

    /// Deletes a claim and its node; the node's pods go back to their controllers.
    fn remove_claim(&mut self, name: &str) {
        let now = self.now;
        let Some(claim) = self.cluster.claim_mut(name) else {
            return;
        };
        if !claim.is_live() {
            return;
        }
        claim.deleted_at = Some(now);
        claim.claim.deletion_timestamp = Some(now);
        self.cluster.changes += 1;
        self.pending_launch.remove(name);
        let pods: Vec<String> = self.cluster.pods_on(name).map(|p| p.key()).collect();
        for p in pods {
            self.cluster.remove_pod(&p, now);
        }
        self.nominated.remove(name);
    }

    /// Schedules the success of every newly bound Job pod, `run-for` after it started.
    fn schedule_job_runs(&mut self) {
        let runs: BTreeMap<(String, String), Duration> = self
            .cluster
            .workloads
            .iter()
            .filter_map(|(k, w)| w.job.and_then(|j| j.run_for).map(|d| (k.clone(), d)))
            .collect();
        if runs.is_empty() {
            return;
        }
        let mut due = Vec::new();
        for p in self.cluster.pods().values() {
            let (Some(o), Some(start)) = (&p.owner, p.start_time) else {
                continue;
            };
            if o.kind != "Job" || p.node_name.is_none() || self.job_timers.contains(&p.key()) {
                continue;
            }
            if let Some(d) = runs.get(&(p.namespace.clone(), o.name.clone())) {
                due.push((p.key(), start.plus(*d)));
            }
        }
        for (key, at) in due {
            self.job_timers.insert(key.clone());
            self.queue.push(at, Event::PodSucceeded(key));
        }
    }

    /// A Job pod that is still running when its run ends succeeds and leaves its node.
    fn pod_succeeded(&mut self, key: &str) {
        self.job_timers.remove(key);
        let Some(p) = self.cluster.pods().get(key) else {
            return;
        };
        if p.deletion_timestamp.is_some() || p.node_name.is_none() {
            return;
        }
        let job = (
            p.namespace.clone(),
            p.owner.as_ref().map(|o| o.name.clone()).unwrap_or_default(),
        );
        self.cluster.remove_pod(key, self.now);
        let Some(w) = self.cluster.workloads.get_mut(&job) else {
            return;
        };
        let Some(spec) = w.job.as_mut() else {
            return;
        };
        spec.succeeded += 1;
        let (done, of) = (spec.succeeded, spec.completions);
        if done == of {
            self.log(
                "job-complete",
                format!("Job/{}/{}: {done}/{of} completions", job.0, job.1),
            );
        }
    }

    /// Tells the consolidated marker about every change since the last round: cluster events,
    /// and NodeClaims that became consolidatable or expired only because time passed.
    fn observe_changes(&mut self) {
        let (from, now) = (self.last_round, self.now);
        self.last_round = now;
        if self.cluster.changes != self.seen_changes {
            self.seen_changes = self.cluster.changes;
            self.consolidation.changed(now);
            return;
        }
        let crossed = |t: Timestamp| t > from && t <= now;
        let timed = self
            .cluster
            .claims()
            .values()
            .filter(|c| c.is_live())
            .any(|c| {
                let quiet = c
                    .claim
                    .last_pod_event_time
                    .unwrap_or(c.claim.creation_timestamp);
                let consolidatable = self
                    .cluster
                    .nodepool(&c.claim.nodepool)
                    .and_then(|p| p.disruption.consolidate_after)
                    .is_some_and(|after| crossed(quiet.plus(after)));
                let expired = c
                    .claim
                    .expire_after
                    .is_some_and(|after| crossed(c.claim.creation_timestamp.plus(after)));
                consolidatable || expired
            });
        if timed {
            self.consolidation.changed(now);
        }
    }

    fn disruption_round(&mut self) {
        self.observe_changes();
        if self.consolidation.is_consolidated(self.now) {
            self.work.plans_skipped += 1;
            self.cadence.planned(self.now, Planned::Nothing);
            return;
        }
        self.work.plans += 1;
        let sim = EngineSimulator::default();
        let busy: BTreeSet<String> = self
            .running
            .iter()
            .flat_map(|r| r.command.targets.iter().map(|t| t.nodeclaim.clone()))
            .collect();
        let snapshot = self.cluster.view(self.now);
        // The simulator shows commands, not verdicts: simulating candidates that cannot be
        // this round's command would only fill verdicts.
        let settings = Settings {
            only_actionable: true,
            ..Settings::default()
        };
        let mut round = plan(snapshot, &sim, settings);
        // Commands on nodes a running command already disrupts are not new work: the
        // controller's candidates leave out nodes marked for deletion.
        round
            .commands
            .retain(|c| c.targets.iter().all(|t| !busy.contains(&t.nodeclaim)));
        if plan_is_consolidated(&round, &snapshot.nodepools) {
            self.consolidation.mark_consolidated(self.now);
        }
        let (forceful, graceful): (Vec<Command>, Vec<Command>) =
            round.commands.into_iter().partition(|c| c.forceful);
        if !forceful.is_empty() {
            for c in forceful {
                self.start(c);
            }
            self.cadence.planned(self.now, Planned::StartedForceful);
        } else if !graceful.is_empty() {
            for c in &graceful {
                self.log("disruption-planned", format!("{c}; re-checking in 15s"));
            }
            self.awaiting = graceful;
            self.cadence.planned(self.now, Planned::AwaitingValidation);
        } else {
            self.cadence.planned(self.now, Planned::Nothing);
        }
    }

    fn validation(&mut self) {
        let commands = std::mem::take(&mut self.awaiting);
        let sim = EngineSimulator::default();
        let mut started = false;
        for c in commands {
            let fresh = self.cluster.view(self.now);
            match validate(&c, fresh, &sim, Settings::default()) {
                Ok(()) => {
                    self.start(c);
                    started = true;
                }
                Err(why) => {
                    self.stats.rejected += 1;
                    self.log(
                        "disruption-rejected",
                        format!("{} ({}): {why}", c.method.as_str(), why.kind()),
                    );
                }
            }
        }
        self.cadence.validated(
            self.now,
            if started {
                Validated::Started
            } else {
                Validated::Rejected
            },
        );
    }

    /// Starts a command: targets are tainted so nothing new lands on them, replacements launch,
    /// and the targets go once every replacement is Ready.
    fn start(&mut self, command: Command) {
        self.stats.commands += 1;
        self.cluster.changed();
        self.check_consolidate_after(&command);
        for t in &command.targets {
            if let Some(node) = self
                .cluster
                .claim_mut(&t.nodeclaim)
                .and_then(|c| c.node.as_mut())
            {
                node.taints
                    .push(Taint::new(DISRUPTED_TAINT, "", TaintEffect::NoSchedule));
            }
        }
        let mut replacements = Vec::new();
        for r in &command.replacements {
            let options = replacement_options(
                &self.cluster,
                &r.nodepool,
                &r.instance_types,
                &r.requirements,
            );
            let request = ClaimRequest {
                nodepool: r.nodepool.clone(),
                requirements: r.requirements.iter().map(|q| q.to_string()).collect(),
                options,
                pods: Vec::new(),
            };
            let reason = format!(
                "replacement for {} ({})",
                targets(&command),
                command.method.as_str()
            );
            if let Some(name) = self.create_claim(&request, reason) {
                replacements.push(name);
            }
        }
        self.log("disruption-started", command.to_string());
        self.running.push(Running {
            command,
            replacements,
        });
    }

    fn fail_commands_waiting_on(&mut self, claim: &str) {
        let (failed, keep): (Vec<Running>, Vec<Running>) = std::mem::take(&mut self.running)
            .into_iter()
            .partition(|r| r.replacements.iter().any(|c| c == claim));
        self.running = keep;
        if !failed.is_empty() {
            self.cluster.changed();
        }
        for r in failed {
            for t in &r.command.targets {
                if let Some(node) = self
                    .cluster
                    .claim_mut(&t.nodeclaim)
                    .and_then(|c| c.node.as_mut())
                {
                    node.taints.retain(|x| x.key != DISRUPTED_TAINT);
                }
            }
            self.log(
                "disruption-failed",
                format!(
                    "{}: replacement {claim} could not launch; targets untainted",
                    r.command.method.as_str()
                ),
            );
        }
    }

    fn progress_commands(&mut self) {
        let running = std::mem::take(&mut self.running);
        for r in running {
            let ready = r.replacements.iter().all(|c| {
                self.cluster
                    .claims()
                    .get(c)
                    .is_some_and(|c| c.ready_node().is_some())
            });
            if !ready && !r.command.forceful {
                self.running.push(r);
                continue;
            }
            for t in &r.command.targets {
                let why = format!(
                    "{} ({})",
                    r.command.method.as_str(),
                    match r.command.decision {
                        Decision::Delete => "delete",
                        Decision::Replace => "replace",
                    }
                );
                self.drain(&t.nodeclaim, why);
                self.stats.disrupted += 1;
            }
            self.stats.savings_per_hour += r.command.savings_per_hour;
            self.log(
                "saved",
                format!(
                    "${:.4}/h saved by {}",
                    r.command.savings_per_hour,
                    r.command.method.as_str()
                ),
            );
        }
    }

    /// Deletes a claim gracefully: the node is cordoned and its pods are evicted through the
    /// Eviction API, so a PodDisruptionBudget can refuse one (the drain asks again later and
    /// the node waits). Each evicted pod goes after its own grace period; the NodePool's
    /// `terminationGracePeriod`, counted from now, bounds both: a pod whose grace would outlast
    /// it is deleted whatever its budget says. The instance is terminated once no evictable pod
    /// is left.
    fn drain(&mut self, name: &str, why: String) {
        let now = self.now;
        let Some(c) = self.cluster.claim_mut(name) else {
            return;
        };
        if !c.is_live() || c.claim.deletion_timestamp.is_some() {
            return;
        }
        c.claim.deletion_timestamp = Some(now);
        if let Some(node) = c.node.as_mut() {
            node.unschedulable = true;
            if !node.taints.iter().any(|t| t.key == DISRUPTED_TAINT) {
                node.taints
                    .push(Taint::new(DISRUPTED_TAINT, "", TaintEffect::NoSchedule));
            }
        }
        self.cluster.changed();
        let e = self.evict(name);
        let what = self.describe_claim(name);
        let held = match e.refused {
            0 => String::new(),
            n => format!("; {n} held back by PodDisruptionBudgets, retrying"),
        };
        self.log(
            "draining",
            format!(
                "{what} cordoned and drained for {why}: {} pod(s) evicted, the last gone in {}s{held}",
                e.evicted,
                e.longest.as_secs()
            ),
        );
        self.draining.push((name.to_string(), why));
    }

    /// The drain asks again for the pods still running on a claim being deleted.
    fn retry_eviction(&mut self, name: &str) {
        let draining = self
            .cluster
            .claims()
            .get(name)
            .is_some_and(|c| c.is_live() && c.claim.deletion_timestamp.is_some());
        if draining {
            self.evict(name);
        }
    }

    /// One pass of evictions over the pods on `name`; refused ones are retried later.
    fn evict(&mut self, name: &str) -> Evictions {
        let now = self.now;
        let mut out = Evictions::default();
        let Some(c) = self.cluster.claims().get(name) else {
            return out;
        };
        let deadline = c
            .claim
            .termination_grace_period
            .zip(c.claim.deletion_timestamp)
            .map(|(tgp, since)| since.plus(tgp));
        let pods: Vec<(String, Duration)> = self
            .cluster
            .pods_on(name)
            .filter(|p| !p.is_daemonset_pod() && p.deletion_timestamp.is_none())
            .map(|p| {
                let own = p
                    .termination_grace_period_seconds
                    .map_or(DEFAULT_POD_GRACE, |s| Duration::from_secs(s.max(0) as u64));
                (p.key(), own)
            })
            .collect();
        let mut retry_at = now.plus(EVICTION_RETRY);
        let t = crate::report::clock(now.since(EPOCH));
        for (key, own) in pods {
            // Karpenter deletes a pod that would otherwise outlive the node's grace period.
            let forced = deadline.is_some_and(|d| now.plus(own) >= d);
            if !forced && let Some(why) = self.eviction_refused(&key) {
                out.refused += 1;
                if let Some(d) = deadline {
                    retry_at = retry_at.min(Timestamp(d.0 - own.as_millis() as i64));
                }
                if self.refused.insert(key.clone()) {
                    self.log(
                        "eviction-refused",
                        format!("{key} on {name}: {why}; the drain retries"),
                    );
                }
                continue;
            }
            let grace = match deadline {
                Some(d) => own.min(d.since(now)),
                None => own,
            };
            out.longest = out.longest.max(grace);
            out.evicted += 1;
            if let Some(p) = self.cluster.pod_mut(&key) {
                p.deletion_timestamp = Some(now);
            }
            self.cluster.changed();
            self.queue
                .push(now.plus(grace), Event::PodGone(key.clone()));
            if self.refused.remove(&key) {
                let how = if forced {
                    "deleted whatever its PodDisruptionBudget says: the NodePool's terminationGracePeriod is running out"
                } else {
                    "evicted: its PodDisruptionBudget allows it now"
                };
                self.log("evicted", format!("{key} on {name} {how}"));
            }
            if !forced {
                let found = crate::invariants::eviction(&self.cluster, &key, &t);
                self.violations.extend(found);
            }
        }
        if out.refused > 0 {
            self.queue
                .push(retry_at.max(now), Event::RetryEviction(name.to_string()));
        }
        out
    }

    /// Why the Eviction API refuses to evict `key` now, if it does.
    fn eviction_refused(&self, key: &str) -> Option<String> {
        let pod = self.cluster.pods().get(key)?;
        let matching: Vec<&crate::disruption_budget::SimPdb> = self
            .cluster
            .pdbs
            .values()
            .filter(|b| b.selects(pod))
            .collect();
        match matching.as_slice() {
            [] => None,
            [b] => (!b.allows_eviction(&self.cluster, pod)).then(|| {
                let st = b.status(&self.cluster);
                format!(
                    "eviction refused by PodDisruptionBudget {} ({} healthy, {} required)",
                    b.key(),
                    st.healthy,
                    st.desired
                )
            }),
            many => Some(format!(
                "eviction refused: the pod matches {} PodDisruptionBudgets",
                many.len()
            )),
        }
    }

    /// Terminates drained claims whose evicted pods are all gone.
    fn progress_drains(&mut self) {
        let draining = std::mem::take(&mut self.draining);
        for (name, why) in draining {
            let live = self
                .cluster
                .claims()
                .get(&name)
                .is_some_and(SimClaim::is_live);
            if !live {
                continue;
            }
            let left = self.cluster.pods_on(&name).any(|p| !p.is_daemonset_pod());
            if left {
                self.draining.push((name, why));
                continue;
            }
            let what = self.describe_claim(&name);
            self.log("disrupted", format!("{what} drained and removed by {why}"));
            self.remove_claim(&name);
        }
    }

    /// A spot interruption notice: the node is cordoned and drained at once (its pods come
    /// back pending and get new capacity), the offering is marked out of capacity, and EC2
    /// reclaims the instance two minutes later whatever is still on it.
    fn interruption_notice(&mut self, claim: &str) {
        let Some(c) = self.cluster.claims().get(claim).filter(|c| c.is_live()) else {
            return;
        };
        if let Some(i) = &c.instance {
            self.cluster.ice.insert(
                (i.instance_type.clone(), i.zone.clone(), i.capacity_type),
                self.now.plus(ICE_TTL),
            );
        }
        self.stats.interruptions += 1;
        let what = self.describe_claim(claim);
        self.log(
            "interruption-notice",
            format!(
                "spot interruption notice for {what}; reclaimed at {}",
                crate::report::clock(self.now.plus(SPOT_NOTICE).since(EPOCH))
            ),
        );
        self.running
            .retain(|r| r.command.targets.iter().all(|t| t.nodeclaim != claim));
        self.drain(claim, "spot interruption".into());
        self.queue.push(
            self.now.plus(SPOT_NOTICE),
            Event::InstanceGone(claim.to_string()),
        );
    }

    /// A node is consolidated only once it has had no pod bound or removed for its NodePool's
    /// `consolidateAfter`.
    fn check_consolidate_after(&mut self, command: &Command) {
        use nodewright_core::disruption::command::Method;
        if !matches!(
            command.method,
            Method::Emptiness | Method::MultiNodeConsolidation | Method::SingleNodeConsolidation
        ) {
            return;
        }
        let t = crate::report::clock(self.now.since(EPOCH));
        for target in &command.targets {
            let Some(c) = self.cluster.claims().get(&target.nodeclaim) else {
                continue;
            };
            let after = self
                .cluster
                .nodepool(&c.claim.nodepool)
                .and_then(|p| p.disruption.consolidate_after);
            let quiet_since = c
                .claim
                .last_pod_event_time
                .unwrap_or(c.claim.creation_timestamp);
            match after {
                Some(after) if self.now.since(quiet_since) >= after => {}
                _ => self.violations.push(format!(
                    "{t}: {} consolidated before consolidateAfter ({after:?}) elapsed",
                    target.node
                )),
            }
        }
    }

    /// Checks, after every step, what must always hold.
    /// The check reads nothing but the cluster, so over a cluster unchanged since the last
    /// step (no applied object, no pod or claim touched) it finds what it found then.
    fn check_invariants(&mut self) {
        let state = (self.cluster.changes, self.cluster.edits());
        if self.checked.as_ref().is_none_or(|(at, _)| *at != state) {
            let found = crate::invariants::violations(&self.cluster);
            self.checked = Some((state, found));
        }
        if let Some((_, found)) = &self.checked {
            let stamped = crate::invariants::stamped(found, self.now.since(EPOCH));
            self.violations.extend(stamped);
        }
    }

    fn sample(&mut self) {
        let s = Sample {
            at: self.now.since(EPOCH),
            ..self.state().clone()
        };
        self.stats.max_nodes = self.stats.max_nodes.max(s.nodes);
        if self.samples.last().is_some_and(|l| l.at == s.at) {
            self.samples.pop();
        }
        if self.samples.last().is_none_or(|l| !l.same_state(&s)) {
            self.samples.push(s);
        }
    }

    fn finish(mut self) -> RunReport {
        // Always close the series at the end of the run.
        let last = self.samples.last().cloned();
        if let Some(mut l) = last
            && l.at < self.input.until
        {
            l.at = self.input.until;
            self.samples.push(l);
        }
        let summary = Summary::from_run(
            &self.samples,
            self.cost_usd,
            self.stats.launched,
            self.stats.launch_failures,
            self.stats.disrupted,
            self.stats.commands,
            self.stats.rejected,
            self.stats.savings_per_hour,
            self.stats.interruptions,
            self.stats.max_nodes,
            self.final_bound(),
        );
        RunReport {
            name: self.input.name.clone(),
            seed: self.input.seed,
            duration: self.input.until,
            spot_price_note: self.input.spot_price_note.clone(),
            timeline: self.timeline,
            samples: self.samples,
            summary,
            violations: self.violations,
            work: self.work,
        }
    }

    /// What the running pods would cost on fresh capacity, and its lower bound, asked of the
    /// same provisioner over an empty cluster.
    fn final_bound(&self) -> Option<(f64, f64)> {
        let mut s = self.cluster.snapshot(self.now);
        s.nodes.clear();
        s.node_claims.clear();
        s.pods.retain(|p| !p.is_daemonset_pod());
        if s.pods.is_empty() {
            return None;
        }
        for p in &mut s.pods {
            p.node_name = None;
            p.phase = nodewright_core::model::PodPhase::Pending;
        }
        let plan = self.provisioner.provision(&s);
        plan.unplaced
            .is_empty()
            .then_some((plan.cost, plan.lower_bound))
    }
}

/// What a [`Sample`] says of `cluster`, at time zero.
fn count(cluster: &Cluster) -> Sample {
    let live = cluster
        .claims()
        .values()
        .filter(|c| c.is_live() && c.instance.is_some())
        .count();
    let mut requested = 0;
    let mut allocatable = 0;
    let mut ready_nodes = 0;
    for (_, n) in cluster.ready_nodes() {
        ready_nodes += 1;
        allocatable += n.allocatable.get(CPU);
        requested += cluster
            .pods_on(&n.name)
            .map(|p| p.requests.get(CPU))
            .sum::<i64>();
    }
    let (mut pods, mut pending_pods) = (0, 0);
    for p in cluster.pods().values().filter(|p| !p.is_daemonset_pod()) {
        pods += 1;
        pending_pods += usize::from(p.node_name.is_none());
    }
    Sample {
        at: Duration::ZERO,
        nodes: live,
        ready_nodes,
        pods,
        pending_pods,
        price_per_hour: cluster
            .claims()
            .values()
            .filter(|c| c.is_live())
            .map(SimClaim::price)
            .fold(0.0, |a, b| a + b),
        cpu_requested_milli: requested,
        cpu_allocatable_milli: allocatable,
    }
}

fn targets(c: &Command) -> String {
    c.targets
        .iter()
        .map(|t| t.node.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Launch options for a replacement: for each of its instance types, the cheapest available
/// offering whose zone and capacity type satisfy the replacement's and the NodePool's
/// requirements.
fn replacement_options(
    cluster: &Cluster,
    pool: &str,
    types: &[String],
    requirements: &[Requirement],
) -> Vec<LaunchOption> {
    let Some(catalog) = cluster.catalog.get(pool) else {
        return Vec::new();
    };
    let mut reqs: Vec<&Requirement> = requirements.iter().collect();
    if let Some(p) = cluster.nodepool(pool) {
        reqs.extend(p.template.requirements.iter());
    }
    let offering_keys = [
        nodewright_core::labels::ZONE,
        nodewright_core::labels::CAPACITY_TYPE,
    ];
    reqs.retain(|r| offering_keys.contains(&r.key.as_str()));
    let mut out: Vec<LaunchOption> = types
        .iter()
        .filter_map(|name| catalog.iter().find(|it| &it.name == name))
        .filter_map(|it| {
            it.offerings
                .iter()
                .filter(|o| o.available)
                .filter(|o| {
                    let labels = BTreeMap::from([
                        (nodewright_core::labels::ZONE.to_string(), o.zone.clone()),
                        (
                            nodewright_core::labels::CAPACITY_TYPE.to_string(),
                            o.capacity_type.as_str().to_string(),
                        ),
                    ]);
                    reqs.iter().all(|r| label_matches(r, &labels))
                })
                .min_by(|a, b| {
                    a.price
                        .total_cmp(&b.price)
                        .then_with(|| a.zone.cmp(&b.zone))
                        .then_with(|| a.capacity_type.cmp(&b.capacity_type))
                })
                .map(|o| LaunchOption {
                    instance_type: it.name.clone(),
                    zone: o.zone.clone(),
                    capacity_type: o.capacity_type,
                    price: o.price,
                })
        })
        .collect();
    out.sort_by(|a, b| {
        a.price
            .total_cmp(&b.price)
            .then(a.instance_type.cmp(&b.instance_type))
    });
    out
}
