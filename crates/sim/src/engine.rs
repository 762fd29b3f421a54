//! The discrete-event loop: a virtual clock drives the controller's own cadence (the pod
//! batcher and the disruption loop from `nodewright_core::cadence`), the provisioner, the
//! disruption planner, the simulated cloud and the approximated kube-scheduler.
//!
//! This file holds the engine's state and the loop; the work each step does lives beside it:
//! the scenario's actions in `actions`, new capacity in `launch`, the disruption loop in `disruption`, drains
//! and interruptions in `drain`, Job completions in `jobs`, and what is recorded (samples,
//! invariant checks, volume lines, the final bound) in `observe`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use nodewright_cloud_sim::Fleet;
use nodewright_core::cadence::{
    BatchWindow, Batcher, ConsolidationState, DisruptionCadence, DisruptionTimings, Due,
    POD_REQUEUE, Planned, Validated, plan_is_consolidated,
};
use nodewright_core::disruption::plan::{NoDeadline, NodeMemo, Settings, plan_kept};
use nodewright_core::disruption::queue::Queue;
use nodewright_core::disruption::validate;
use nodewright_core::disruption::{Command, Decision};
use nodewright_core::model::{CapacityType, DaemonSet, InstanceType, Node, NodeClaim, NodePool};
use nodewright_core::requirements::Requirement;
use nodewright_core::resources::Resources;
use nodewright_core::taints::{Taint, TaintEffect};
use nodewright_core::time::Timestamp;

use crate::cluster::{Cluster, SimClaim, Workload, node_labels};
use crate::events::EventQueue;
use crate::kube_scheduler::bind_pending;
use crate::provision::{ClaimRequest, PlacementTarget, Provisioner};
use crate::report::{RunReport, Sample, Summary, TimelineEvent, Work};
use crate::scenario::InterruptTarget;

/// The instant virtual time starts at: 2026-01-01T00:00:00Z, so cron budgets see a real date.
pub const EPOCH: Timestamp = Timestamp(1_767_225_600_000);

use nodewright_core::taints::DISRUPTED_TAINT;

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
    /// A claim's launch or registration timer may have run out (core's lifecycle rules).
    Liveness(String),
    /// A deleted claim's instance has terminated: the claim and its Node go.
    InstanceTerminated(String),
}

/// How long the eviction queue waits before asking again for a pod whose eviction a
/// PodDisruptionBudget refused (its backoff tops out here).
pub const EVICTION_RETRY: Duration = Duration::from_secs(10);

/// How long EC2 gives between a spot interruption notice and reclaiming the instance.
pub const SPOT_NOTICE: Duration = Duration::from_secs(120);

/// A pod's `terminationGracePeriodSeconds` when it sets none.
pub const DEFAULT_POD_GRACE: Duration = Duration::from_secs(30);

pub struct Engine<'p> {
    input: EngineInput,
    provisioner: &'p dyn Provisioner,
    cluster: Cluster,
    queue: EventQueue<Event>,
    batcher: Batcher,
    cadence: DisruptionCadence,
    /// The "consolidated" marker: rounds over an unchanged cluster skip the plan.
    consolidation: ConsolidationState,
    /// `cluster.changes` when the disruption loop last looked.
    seen_changes: u64,
    /// When the disruption loop last looked, for changes that are only time passing.
    last_round: Timestamp,
    /// Simulation answers over the current view generation (see `remembered`).
    memo: std::cell::RefCell<remembered::Memo>,
    /// What planning rounds work out about nodes that did not change, kept between them.
    kept_nodes: NodeMemo,
    /// `cluster.changes` and the instant after the last provisioning solve.
    solved: Option<(u64, Timestamp)>,
    settled: Settled,
    work: Work,
    now: Timestamp,
    last_trigger: BTreeMap<String, Timestamp>,
    /// Disruption commands from their round to their targets' drain: core's orchestration
    /// queue, as the controller drives it.
    commands: Queue,
    /// Claims being drained, with why.
    draining: Vec<(String, String)>,
    /// Pods whose eviction was refused, already told on the timeline.
    refused: BTreeSet<String>,
    /// Job pods whose success is already scheduled.
    job_timers: BTreeSet<String>,
    /// Claim name → the pods the provisioner meant it for.
    nominated: BTreeMap<String, Vec<String>>,
    /// Claims waiting for the cloud's answer, with what they ask it for: their requirements
    /// (the instance types and capacity types of their options among them) and requests.
    pending_launch: BTreeMap<String, (Vec<Requirement>, Resources)>,
    timeline: Vec<TimelineEvent>,
    samples: Vec<Sample>,
    cost_usd: f64,
    stats: Stats,
    /// Invariant violations seen at any step (should stay empty).
    pub violations: Vec<String>,
    /// The cluster's `(changes, edits)` at the last invariant check, and what it found.
    checked: Option<((u64, u64), Vec<String>)>,
    /// The invariant check, looking again at only what changed since it last ran.
    checker: crate::invariants::Checker,
    /// The cluster's `(changes, edits)` when its sample figures were last counted, and them.
    counted: Option<((u64, u64), Sample)>,
    /// Claims drained for a consolidation: their evictions are watched for churn.
    consolidating: BTreeSet<String>,
    churn: churn::ChurnWatch,
}

/// What one eviction pass did.
#[derive(Clone, Copy, Debug, Default)]
struct Evictions {
    evicted: usize,
    refused: usize,
    /// Left in place by `karpenter.sh/do-not-disrupt`.
    kept: usize,
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
        let mut cluster = Cluster::default();
        cluster.cloud = Fleet::new(input.cloud.fleet.clone(), input.seed);
        Engine {
            batcher: Batcher::new(input.batch),
            cadence: DisruptionCadence::new(input.disruption, EPOCH),
            consolidation: ConsolidationState::new(EPOCH),
            seen_changes: 0,
            last_round: EPOCH,
            memo: Default::default(),
            kept_nodes: NodeMemo::default(),
            solved: None,
            settled: Settled::default(),
            work: Work::default(),
            input,
            provisioner,
            cluster,
            queue,
            now: EPOCH,
            last_trigger: BTreeMap::new(),
            commands: Queue::default(),
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
            checker: Default::default(),
            counted: None,
            consolidating: BTreeSet::new(),
            churn: churn::ChurnWatch::default(),
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
            self.static_capacity();
            self.observe_held();
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

    /// Controllers create replicas, the kube-scheduler binds what fits, and pods that stay
    /// pending trigger the provisioner (again every 10 s while they wait).
    fn settle(&mut self) {
        // Both passes are idempotent: over a cluster unchanged since they last ran (the
        // reconcile) or last bound nothing (the scheduler), they would do nothing again.
        if self.settled.reconciled != Some(self.cluster.changes) {
            let (created, _) = self.cluster.reconcile(self.now);
            for key in created {
                if let Some(workload) = self.cluster.pods().get(&key).and_then(|p| controller_of(p))
                {
                    self.churn.created(&key, &workload, self.now);
                }
            }
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
        let pending = self.cluster.pending_keys();
        let now = self.now;
        self.last_trigger.retain(|k, _| pending.contains(k));
        for key in pending {
            let due = self
                .last_trigger
                .get(key)
                .is_none_or(|t| now >= t.plus(POD_REQUEUE));
            if due {
                self.batcher.trigger(now, key);
                self.last_trigger.insert(key.clone(), now);
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
                    .is_some_and(SimClaim::is_running)
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
            Event::Liveness(claim) => self.liveness(&claim),
            Event::InstanceTerminated(claim) => self.instance_terminated(&claim),
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
        let summary = Summary {
            consolidation_churn: self.churn.launches,
            ..summary
        };
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
}

/// The `(namespace, name)` of the workload controlling `pod`.
fn controller_of(pod: &nodewright_core::model::Pod) -> Option<(String, String)> {
    let o = pod.owner.as_ref().filter(|o| o.controller)?;
    Some((pod.namespace.clone(), o.name.clone()))
}

mod actions;
mod churn;
mod disruption;
mod drain;
mod jobs;
mod launch;
mod observe;
mod remembered;
mod static_capacity;
