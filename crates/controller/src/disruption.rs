//! The disruption executor: every 10 s plan a round off the runtime, wait the 15 s validation
//! delay, re-check each command on a fresh snapshot, then taint the targets, launch the
//! replacements, wait until they are initialized, and only then delete the old claims (the
//! termination controller drains and terminates them). A replacement that disappears or a
//! command that outlives its timeout is rolled back: taint and condition removed.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nodewright_cloud::CloudProvider;
use nodewright_core::cadence::{DisruptionCadence, DisruptionTimings, Due, Planned, Validated};
use nodewright_core::disruption::command::{Command, Method};
use nodewright_core::disruption::engine_simulator::EngineSimulator;
use nodewright_core::disruption::plan::{self, Settings};
use nodewright_core::disruption::validate::validate;
use nodewright_core::labels;
use nodewright_core::resources::Resources;
use nodewright_core::time::Timestamp;
use tracing::{info, warn};

use crate::claims::{self, ClaimRequest};
use crate::clock::Clock;
use crate::conditions::{self as cond, DISRUPTION_REASON, INITIALIZED};
use crate::lifecycle::DISRUPTED_TAINT;
use crate::provisioner::snapshot;
use crate::state::{SharedState, lock};
use crate::termination::disrupted_taint;
use crate::write::{KubeWriter, NodePatch, WriteError};

/// Upstream's command timeout floor (80 ms × queued commands, clamped to 10 min .. 1 h).
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// A command that has started: targets tainted, replacements created.
#[derive(Clone, Debug)]
pub struct Running {
    pub command: Command,
    pub replacements: Vec<String>,
    pub started: Timestamp,
}

/// What a step of the executor did, for tests and logs.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    Idle,
    Planned(usize),
    Started(usize),
    Rejected(Vec<String>),
}

pub struct Disruptor {
    state: SharedState,
    writer: Arc<dyn KubeWriter>,
    cloud: Arc<dyn CloudProvider>,
    clock: Clock,
    pub settings: Settings,
    pending: Mutex<Vec<Command>>,
    running: Mutex<Vec<Running>>,
}

impl Disruptor {
    pub fn new(
        state: SharedState,
        writer: Arc<dyn KubeWriter>,
        cloud: Arc<dyn CloudProvider>,
        clock: Clock,
    ) -> Self {
        Disruptor {
            state,
            writer,
            cloud,
            clock,
            settings: Settings::default(),
            pending: Mutex::new(Vec::new()),
            running: Mutex::new(Vec::new()),
        }
    }

    pub fn running(&self) -> Vec<Running> {
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Nodes already part of a running command: not offered to the planner again.
    fn busy(&self) -> BTreeSet<String> {
        self.running()
            .iter()
            .flat_map(|r| r.command.targets.iter().map(|t| t.node.clone()))
            .collect()
    }

    /// Plans one round. Forceful commands start at once; graceful ones wait for validation.
    pub async fn plan_round(&self) -> Result<Planned, String> {
        if !lock(&self.state).synced() {
            return Ok(Planned::Nothing);
        }
        let snap = snapshot(&self.state, self.cloud.as_ref(), self.clock.now())
            .await
            .map_err(|e| e.to_string())?;
        let settings = self.settings;
        let busy = self.busy();
        let result = tokio::task::spawn_blocking(move || {
            plan::plan(&snap, &EngineSimulator::default(), settings)
        })
        .await
        .map_err(|e| e.to_string())?;
        let commands: Vec<Command> = result
            .commands
            .into_iter()
            .filter(|c| c.targets.iter().all(|t| !busy.contains(&t.node)))
            .collect();
        if commands.is_empty() {
            return Ok(Planned::Nothing);
        }
        // Expiration is forceful and drift has no validation delay upstream: both start now.
        let (immediate, graceful): (Vec<Command>, Vec<Command>) = commands
            .into_iter()
            .partition(|c| c.forceful || c.method == Method::Drift);
        for c in &immediate {
            info!(command = %c, "starting disruption");
            self.start(c).await.map_err(|e| e.to_string())?;
        }
        if graceful.is_empty() {
            return Ok(Planned::StartedForceful);
        }
        for c in &graceful {
            info!(command = %c, "disruption planned; validating after the delay");
        }
        *self.pending.lock().unwrap_or_else(|p| p.into_inner()) = graceful;
        Ok(Planned::AwaitingValidation)
    }

    /// Re-checks the planned commands on a fresh snapshot and starts those still valid.
    pub async fn validate_round(&self) -> Result<(Validated, Vec<String>), String> {
        let commands = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|p| p.into_inner()));
        let fresh = snapshot(&self.state, self.cloud.as_ref(), self.clock.now())
            .await
            .map_err(|e| e.to_string())?;
        let settings = self.settings;
        let checked = tokio::task::spawn_blocking(move || {
            let sim = EngineSimulator::default();
            commands
                .into_iter()
                .map(|c| {
                    let r = validate(&c, &fresh, &sim, settings);
                    (c, r)
                })
                .collect::<Vec<_>>()
        })
        .await
        .map_err(|e| e.to_string())?;
        let mut started = 0;
        let mut rejected = Vec::new();
        for (c, r) in checked {
            match r {
                Ok(()) => {
                    self.start(&c).await.map_err(|e| e.to_string())?;
                    started += 1;
                }
                Err(why) => {
                    info!(command = %c, reason = %why, "disruption command no longer valid");
                    rejected.push(why.to_string());
                }
            }
        }
        Ok((
            if started > 0 {
                Validated::Started
            } else {
                Validated::Rejected
            },
            rejected,
        ))
    }

    /// Marks the targets (taint, DisruptionReason) and creates the replacements.
    async fn start(&self, c: &Command) -> Result<(), WriteError> {
        let now = self.clock.now();
        for t in &c.targets {
            self.set_taint(&t.node, true).await?;
            self.set_reason(&t.nodeclaim, Some(c.method)).await?;
        }
        let mut replacements = Vec::new();
        for r in &c.replacements {
            let pool = lock(&self.state).nodepools.get(&r.nodepool).cloned();
            let Some(pool) = pool else { continue };
            let request = ClaimRequest {
                nodepool: r.nodepool.clone(),
                requirements: r.requirements.clone(),
                instance_types: r.instance_types.clone(),
                capacity_types: r
                    .requirements
                    .iter()
                    .filter(|q| q.key == labels::CAPACITY_TYPE)
                    .flat_map(|q| q.values.clone())
                    .collect(),
                requests: Resources::new(),
                min_values_relaxed: false,
            };
            let name = format!("{}-{}", r.nodepool, claims::random_suffix());
            let created = self
                .writer
                .create_nodeclaim(&claims::build(&pool, &request, &name))
                .await?;
            lock(&self.state).record_created(created);
            replacements.push(name);
        }
        if c.forceful {
            // Expiration: no replacement first, delete now.
            for t in &c.targets {
                self.delete_claim(&t.nodeclaim).await?;
            }
            return Ok(());
        }
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Running {
                command: c.clone(),
                replacements,
                started: now,
            });
        Ok(())
    }

    async fn delete_claim(&self, name: &str) -> Result<(), WriteError> {
        match self.writer.delete_nodeclaim(name).await {
            Err(e) if !e.is_not_found() => Err(e),
            _ => Ok(()),
        }
    }

    async fn set_taint(&self, node: &str, on: bool) -> Result<(), WriteError> {
        let Some(n) = lock(&self.state).nodes.get(node).cloned() else {
            return Ok(());
        };
        let taints = n.spec.and_then(|s| s.taints).unwrap_or_default();
        let has = taints
            .iter()
            .any(|t| t.key == DISRUPTED_TAINT && t.effect == "NoSchedule");
        if has == on {
            return Ok(());
        }
        let mut next: Vec<_> = taints
            .into_iter()
            .filter(|t| t.key != DISRUPTED_TAINT)
            .collect();
        if on {
            next.push(disrupted_taint());
        }
        self.writer
            .patch_node(
                node,
                &NodePatch {
                    taints: Some(next),
                    ..Default::default()
                },
            )
            .await
    }

    async fn set_reason(&self, claim: &str, method: Option<Method>) -> Result<(), WriteError> {
        let Some(c) = lock(&self.state).nodeclaims.get(claim).cloned() else {
            return Ok(());
        };
        let mut status = c.status.unwrap_or_default();
        let mut conds = status.conditions.clone().unwrap_or_default();
        let changed = match method {
            Some(m) => {
                let reason = reason_of(m);
                cond::set(
                    &mut conds,
                    DISRUPTION_REASON,
                    "True",
                    reason,
                    reason,
                    self.clock.now(),
                )
            }
            None => cond::remove(&mut conds, DISRUPTION_REASON),
        };
        if changed {
            status.conditions = Some(conds);
            self.writer.patch_nodeclaim_status(claim, &status).await?;
        }
        Ok(())
    }

    /// Advances running commands: delete targets once every replacement is initialized; roll
    /// back when a replacement is gone or the command timed out.
    pub async fn progress(&self) -> Result<Vec<String>, WriteError> {
        let now = self.clock.now();
        let running = self.running();
        let mut keep = Vec::new();
        let mut finished = Vec::new();
        for r in running {
            let (ready, lost) = {
                let s = lock(&self.state);
                let mut ready = true;
                let mut lost = false;
                for name in &r.replacements {
                    match s
                        .all_claims()
                        .find(|c| c.metadata.name.as_deref() == Some(name))
                    {
                        None => lost = true,
                        Some(c) if c.metadata.deletion_timestamp.is_some() => lost = true,
                        Some(c) => {
                            let conds = c
                                .status
                                .as_ref()
                                .and_then(|s| s.conditions.clone())
                                .unwrap_or_default();
                            ready &= cond::is_true(&conds, INITIALIZED);
                        }
                    }
                }
                (ready, lost)
            };
            if lost || now.since(r.started) >= COMMAND_TIMEOUT {
                warn!(command = %r.command, "disruption command failed; rolling back");
                for t in &r.command.targets {
                    self.set_taint(&t.node, false).await?;
                    self.set_reason(&t.nodeclaim, None).await?;
                }
                finished.push(format!("rolled back: {}", r.command));
                continue;
            }
            if ready {
                for t in &r.command.targets {
                    self.delete_claim(&t.nodeclaim).await?;
                }
                info!(command = %r.command, "disruption replacements ready; terminating targets");
                finished.push(format!("terminated: {}", r.command));
                continue;
            }
            keep.push(r);
        }
        *self.running.lock().unwrap_or_else(|p| p.into_inner()) = keep;
        Ok(finished)
    }

    /// One wake of the loop at `now`, following the disruption cadence.
    pub async fn step(&self, cadence: &mut DisruptionCadence) -> Step {
        let now = self.clock.now();
        if let Err(e) = self.progress().await {
            warn!(error = %e, "advancing disruption commands failed");
        }
        match cadence.due(now) {
            Some(Due::Plan) => match self.plan_round().await {
                Ok(p) => {
                    cadence.planned(now, p);
                    match p {
                        Planned::AwaitingValidation => Step::Planned(
                            self.pending.lock().unwrap_or_else(|p| p.into_inner()).len(),
                        ),
                        Planned::StartedForceful => Step::Started(1),
                        Planned::Nothing => Step::Idle,
                    }
                }
                Err(e) => {
                    warn!(error = %e, "disruption planning failed");
                    cadence.planned(now, Planned::Nothing);
                    Step::Idle
                }
            },
            Some(Due::Validate) => match self.validate_round().await {
                Ok((v, rejected)) => {
                    cadence.validated(now, v);
                    if v == Validated::Started {
                        Step::Started(1)
                    } else {
                        Step::Rejected(rejected)
                    }
                }
                Err(e) => {
                    warn!(error = %e, "disruption validation failed");
                    cadence.validated(now, Validated::Rejected);
                    Step::Idle
                }
            },
            None => Step::Idle,
        }
    }

    pub async fn run(self: Arc<Self>) {
        let mut cadence = DisruptionCadence::new(DisruptionTimings::default(), self.clock.now());
        loop {
            self.step(&mut cadence).await;
            let wait = cadence
                .next_wake()
                .since(self.clock.now())
                .min(Duration::from_secs(1));
            tokio::time::sleep(wait.max(Duration::from_millis(100))).await;
        }
    }
}

/// The DisruptionReason condition's reason: upstream's method reasons.
pub fn reason_of(m: Method) -> &'static str {
    match m {
        Method::Expiration => "Expired",
        Method::Emptiness => "Empty",
        Method::Drift => "Drifted",
        Method::MultiNodeConsolidation | Method::SingleNodeConsolidation => "Underutilized",
    }
}
