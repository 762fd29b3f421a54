//! The disruption executor: every 10 s plan a round off the runtime (and at once when a running
//! command's targets have drained or it rolled back, freeing budget: core's cadence says when,
//! [`DisruptionCadence::observe_held`]), wait the 15 s validation
//! delay, re-check each command on a fresh snapshot, then taint the targets, launch the
//! replacements, wait until they are initialized, and only then delete the old claims (the
//! termination controller drains and terminates them). A replacement that disappears or a
//! command that outlives its timeout is rolled back: taint and condition removed. What
//! happens to a command, and when, is core's orchestration queue ([`Queue`]), which the
//! simulator drives too; this file carries out its effects on the API. Each round
//! says for every node why it was not disrupted (`DisruptionBlocked`, `Unconsolidatable`) and
//! records upstream's voluntary-disruption metrics.
//!
//! Rounds plan and re-check on the snapshot as running commands leave it
//! ([`InFlight::view`]): as upstream marks a started command's candidates for deletion, the
//! claims of running commands' targets are planned as deleting (no longer candidates, counted
//! against the budgets), so the next command can be planned while earlier ones wait for their
//! replacements. Their pods stay where they are in later simulations (the tainted node takes
//! no new pods), and the replacements sized for them are reserved until the targets have
//! drained: no other candidate's pods land on them, and they are no candidates. Nodes whose
//! instance is already being terminated leave the budgets, as upstream's
//! `InstanceTerminating` claims do. A round that found nothing lets the next rounds skip
//! until the index changes (see [`consolidated`]). The consolidation searches stop at
//! upstream's time limits and keep what they found ([`deadline`]). The re-check is core's
//! ([`validate`]): a replace whose pods now fit without a new node, or need one its planned
//! instance types cannot all be, is rejected there.
//!
//! This file holds the loop; [`round`] plans a round off the runtime, [`announce`] publishes
//! what it found, [`effects`] writes what the commands do.

mod announce;
mod consolidated;
pub mod deadline;
mod effects;
pub mod events;
pub mod journal;
pub mod metrics;
mod round;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nodewright_cloud::CloudProvider;
use nodewright_core::cadence::{DisruptionCadence, DisruptionTimings, Due, Planned, Validated};
use nodewright_core::disruption::plan::{NodeMemo, Settings};
use nodewright_core::disruption::queue::{Queue, Replacement};
use nodewright_core::disruption::{EngineSimulator, InFlight, Target};
use nodewright_core::disruption::{replacement_requests, validate};
use nodewright_core::resources::Resources;
use nodewright_core::scheduling::{NodeCache, Options};
use tokio::sync::watch;
use tracing::{info, warn};

use crate::clock::Clock;
use crate::conditions::{self as cond, INITIALIZED};
use crate::context::Context;
use crate::events::EventSink;
use crate::metered::MeteredCloud;
use crate::metrics::Metrics;
use crate::provisioner::snapshot;
use crate::state::{SharedState, lock};
use crate::write::{KubeWriter, WriteError};
use consolidated::Marker;
use deadline::SearchTimeouts;
pub use effects::reason_of;
use journal::{Entry, Journal, What, brief, started_entry};
pub use nodewright_core::disruption::queue::{COMMAND_TIMEOUT, Running};
use round::Queued;
pub use round::allowed_by_nodepool;

/// What a step of the executor did, for tests and logs.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    Idle,
    Planned(usize),
    Started(usize),
    Rejected(Vec<String>),
}

/// The longest the loop sleeps: the index may have changed meanwhile.
const LOOK_EVERY: Duration = Duration::from_secs(1);

pub struct Disruptor {
    state: SharedState,
    writer: Arc<dyn KubeWriter>,
    cloud: Arc<dyn CloudProvider>,
    clock: Clock,
    metrics: Arc<Metrics>,
    events: Arc<dyn EventSink>,
    pub settings: Settings,
    /// The solve options of every simulation (`PREFERENCE_POLICY`, `MIN_VALUES_POLICY`, as
    /// the provisioner solves).
    options: Options,
    /// What earlier simulations compiled, kept for the next (shared with the provisioner).
    compiles: Arc<Mutex<NodeCache>>,
    /// What rounds read from unchanged nodes' labels, kept for the next round.
    kept: Arc<NodeMemo>,
    timeouts: SearchTimeouts,
    /// The commands between their round and their targets' drain (core's orchestration).
    queue: Mutex<Queue>,
    marker: Mutex<Marker>,
    leader: Option<watch::Receiver<bool>>,
    pub journal: Journal,
}

impl Disruptor {
    pub fn new(ctx: &Context) -> Self {
        let Context {
            state,
            writer,
            cloud,
            clock,
            metrics,
            events,
        } = ctx.clone();
        Disruptor {
            state,
            writer,
            cloud: MeteredCloud::wrap(cloud, metrics.clone(), "disruption"),
            metrics,
            events,
            // Upstream stops at the first command it finds: candidates that cannot be this
            // round's command are not simulated only to fill in their verdicts.
            settings: Settings {
                only_actionable: true,
                ..Settings::default()
            },
            options: Options::default(),
            compiles: Arc::default(),
            kept: Arc::default(),
            timeouts: SearchTimeouts::default(),
            queue: Mutex::new(Queue::default()),
            marker: Mutex::new(Marker::new(clock.now())),
            leader: None,
            journal: Journal::default(),
            clock,
        }
    }

    /// Consolidates with `features` (`FEATURE_GATES`) and simulates under `options`.
    pub fn with_policies(
        mut self,
        features: nodewright_core::disruption::Features,
        options: Options,
    ) -> Self {
        self.settings.features = features;
        self.options = options;
        self
    }

    /// Gives the consolidation searches these time limits instead of upstream's.
    #[cfg(test)]
    pub(crate) fn with_timeouts(mut self, timeouts: SearchTimeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// Keeps compiles in `compiles`, shared with the loops that solve the same cluster.
    pub fn with_compiles(mut self, compiles: Arc<Mutex<NodeCache>>) -> Self {
        self.compiles = compiles;
        self
    }

    /// Plans only while `leader` says this replica holds the lease.
    pub fn with_leader(mut self, leader: watch::Receiver<bool>) -> Self {
        self.leader = Some(leader);
        self
    }

    fn leading(&self) -> bool {
        self.leader.as_ref().is_none_or(|l| *l.borrow())
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn running(&self) -> Vec<Running> {
        self.queue().running().to_vec()
    }

    /// What the running commands hold, and the nodes already terminating. A finished
    /// command's replacements stay reserved while its targets drain.
    pub(crate) fn in_flight(&self) -> InFlight {
        let terminating = self.terminating();
        self.queue().in_flight(terminating)
    }

    /// Nodes whose claim says `InstanceTerminating`: drained, their instance going away.
    fn terminating(&self) -> BTreeSet<String> {
        lock(&self.state)
            .nodeclaims
            .values()
            .filter(|c| {
                c.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_deref())
                    .is_some_and(|cs| cond::is_true(cs, cond::INSTANCE_TERMINATING))
            })
            .filter_map(|c| c.status.as_ref()?.node_name.clone())
            .collect()
    }

    /// `(answered from memory, worked out)` node facts of the rounds so far.
    #[cfg(test)]
    pub(crate) fn kept_facts(&self) -> (u64, u64) {
        self.kept.facts_counts()
    }

    /// The simulator of rounds and re-checks: this loop's solve options, the shared compiles.
    fn simulator(&self) -> EngineSimulator {
        EngineSimulator {
            options: self.options.clone(),
            nodes: Some(self.compiles.clone()),
        }
    }

    fn marker(&self) -> std::sync::MutexGuard<'_, Marker> {
        self.marker.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Plans one round. Forceful commands start at once; graceful ones wait for validation.
    pub async fn plan_round(&self) -> Result<Planned, String> {
        let (synced, changes) = {
            let s = lock(&self.state);
            (s.synced(), s.changes())
        };
        if !synced {
            return Ok(Planned::Nothing);
        }
        let now = self.clock.now();
        if self.marker().skip(changes, now) {
            self.journal
                .record(|| Entry::new(now, What::Skipped, "consolidated, nothing changed".into()));
            return Ok(Planned::Nothing);
        }
        let mut snap = snapshot(&self.state, self.cloud.as_ref(), now)
            .await
            .map_err(|e| e.to_string())?;
        let busy = self.queue().busy_nodes();
        self.in_flight().apply(&mut snap);
        let started = Instant::now();
        let (sim, kept) = (self.simulator(), self.kept.clone());
        let (settings, timeouts) = (self.settings, self.timeouts);
        let round = tokio::task::spawn_blocking(move || {
            round::plan_round(&snap, &sim, &kept, settings, timeouts, &busy)
        })
        .await
        .map_err(|e| e.to_string())?;
        if round.consolidated {
            self.marker().found_nothing(now, round.timed);
        }
        self.announce_round(&round, now, started.elapsed().as_secs_f64());
        // The queue starts what starts at once (as `starts_at_once` splits them) and keeps
        // the rest for their re-check; the immediate ones' requests are taken in that order.
        let requests: Vec<Vec<Resources>> = round
            .commands
            .iter()
            .filter(|q| q.command.starts_at_once())
            .map(|q| q.requests.clone())
            .collect();
        let commands = round.commands.into_iter().map(|q| q.command).collect();
        let (immediate, planned) = self.queue().plan(commands);
        for (command, requests) in immediate.into_iter().zip(requests) {
            self.journal.record(|| started_entry(now, &command));
            info!(command = %command, "starting disruption");
            self.start(&Queued { command, requests })
                .await
                .map_err(|e| e.to_string())?;
        }
        let awaiting: Vec<String> = self
            .queue()
            .awaiting()
            .iter()
            .map(|c| c.to_string())
            .collect();
        for c in &awaiting {
            info!(command = %c, "disruption planned; validating after the delay");
        }
        Ok(planned)
    }

    /// Re-checks the planned commands on a fresh snapshot and starts those still valid.
    pub async fn validate_round(&self) -> Result<(Validated, Vec<String>), String> {
        let queued = self.queue().take_awaiting();
        let now = self.clock.now();
        let mut fresh = snapshot(&self.state, self.cloud.as_ref(), now)
            .await
            .map_err(|e| e.to_string())?;
        self.in_flight().apply(&mut fresh);
        let sim = self.simulator();
        let checked = tokio::task::spawn_blocking(move || {
            queued
                .into_iter()
                .map(|command| {
                    let r = validate(&command, &fresh, &sim).map_err(|e| (e.kind(), e.to_string()));
                    // The fresh snapshot gives the replacements their current requests: the
                    // re-check's simulation found every planned instance type to hold them.
                    let requests = match &r {
                        Ok(()) => replacement_requests(&fresh, &command, &sim),
                        Err(_) => Vec::new(),
                    };
                    (Queued { command, requests }, r)
                })
                .collect::<Vec<_>>()
        })
        .await
        .map_err(|e| e.to_string())?;
        let mut started = 0;
        let mut rejected = Vec::new();
        for (q, r) in checked {
            match r {
                Ok(()) => {
                    self.journal.record(|| started_entry(now, &q.command));
                    self.start(&q).await.map_err(|e| e.to_string())?;
                    started += 1;
                }
                Err((kind, why)) => {
                    self.publish_consolidation(&q.command, Some(kind));
                    self.journal.record(|| {
                        let detail = format!("{}: {why}", brief(&q.command));
                        Entry::new(now, What::Rejected, detail).nodes(q.command.targets.len())
                    });
                    info!(command = %q.command, reason = %why, "disruption command no longer valid");
                    self.metrics
                        .disruption
                        .failed_validation(q.command.method.consolidation_type());
                    rejected.push(why);
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

    /// Advances running commands as the core queue decides: delete targets once every
    /// replacement is initialized; roll back when a replacement is gone or the command timed
    /// out.
    pub async fn progress(&self) -> Result<Vec<String>, WriteError> {
        let now = self.clock.now();
        let effects = {
            let s = lock(&self.state);
            let replacement = |name: &str| {
                let Some(c) = s
                    .all_claims()
                    .find(|c| c.metadata.name.as_deref() == Some(name))
                else {
                    return Replacement::Gone;
                };
                if c.metadata.deletion_timestamp.is_some() {
                    return Replacement::Gone;
                }
                let conds = c.status.as_ref().and_then(|s| s.conditions.as_deref());
                if conds.is_some_and(|cs| cond::is_true(cs, INITIALIZED)) {
                    Replacement::Initialized
                } else {
                    Replacement::Launching
                }
            };
            // A finished command's target has drained once its claim is gone or its
            // instance is terminating.
            let drained = |t: &Target| {
                s.nodeclaims.get(&t.nodeclaim).is_none_or(|c| {
                    c.status
                        .as_ref()
                        .and_then(|st| st.conditions.as_deref())
                        .is_some_and(|cs| cond::is_true(cs, cond::INSTANCE_TERMINATING))
                })
            };
            self.queue().progress(now, replacement, drained)
        };
        self.carry_out(effects, now).await
    }

    /// One wake of the loop at `now`, following the disruption cadence.
    pub async fn step(&self, cadence: &mut DisruptionCadence) -> Step {
        let now = self.clock.now();
        if let Err(e) = self.progress().await {
            warn!(error = %e, "advancing disruption commands failed");
        }
        // A command whose targets have drained, or that rolled back, frees budget: plan now.
        cadence.observe_held(now, self.queue().held());
        match cadence.due(now) {
            Some(Due::Plan) => match self.plan_round().await {
                Ok(p) => {
                    cadence.planned(now, p);
                    match p {
                        Planned::AwaitingValidation => Step::Planned(self.queue().awaiting().len()),
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

    pub async fn run(self: Arc<Self>, r: crate::metrics::Reconciler) {
        let mut cadence = DisruptionCadence::new(DisruptionTimings::default(), self.clock.now());
        loop {
            if !self.leading() {
                // A standby plans nothing: its commands could not be written.
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            r.now(async {
                self.step(&mut cadence).await;
            })
            .await;
            let wait = cadence.next_wake().since(self.clock.now());
            let wait = wait.max(Duration::from_millis(100));
            self.clock.sleep_at_most(wait, LOOK_EVERY).await;
        }
    }
}
