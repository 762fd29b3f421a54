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

mod consolidated;
pub mod deadline;
pub mod events;
pub mod journal;
pub mod metrics;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nodewright_cloud::CloudProvider;
use nodewright_core::cadence::{
    DisruptionCadence, DisruptionTimings, Due, Planned, Validated, plan_is_consolidated,
};
use nodewright_core::disruption::EngineSimulator;
use nodewright_core::disruption::InFlight;
use nodewright_core::disruption::allowed_disruptions;
use nodewright_core::disruption::candidates::{
    Selection, budget_node_counts, invalid_do_not_disrupt, select_both_counted,
    timed_do_not_disrupt as timed_protection,
};
use nodewright_core::disruption::plan::{self, Move, Settings, Verdict};
pub use nodewright_core::disruption::queue::{COMMAND_TIMEOUT, Running};
use nodewright_core::disruption::queue::{Effect, Failure, Queue, Replacement};
use nodewright_core::disruption::replacement_requests;
use nodewright_core::disruption::validate;
use nodewright_core::disruption::{Command, Method, Target};
use nodewright_core::labels;
use nodewright_core::model::{DisruptionReason, Snapshot};
use nodewright_core::resources::Resources;
use nodewright_core::scheduling::Options;
use nodewright_core::time::Timestamp;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::claims::{self, ClaimRequest};
use crate::clock::{Clock, rfc3339};
use crate::conditions::{self as cond, DISRUPTION_REASON, INITIALIZED};
use crate::context::Context;
use crate::events::{Event, EventSink, ObjectRef};
use crate::lifecycle::{consolidation_policy, termination_mode};
use crate::metered::MeteredCloud;
use crate::metrics::Metrics;
use crate::provisioner::{snapshot, submit_claim};
use crate::state::{SharedState, lock};
use crate::termination::disrupted_taint;
use crate::write::claim_status::write_status;
use crate::write::{KubeWriter, NodePatch, WriteError, retry_transient};
use consolidated::{Marker, next_timed_change};
use deadline::{SearchTimeouts, WallDeadline};
use journal::{Entry, Journal, What};
use metrics::BudgetRow;
use nodewright_core::taints::DISRUPTED_TAINT;

/// Tries per write when a command's targets are marked, unmarked or deleted: a command of ten
/// nodes makes twenty writes, and one throttled write would otherwise drop the whole command.
const MARK_ATTEMPTS: u32 = 3;

/// Verdict codes that mean "something forbids disrupting this node now" (upstream's
/// `DisruptionBlocked`), and those that mean "consolidation found nothing better"
/// (`Unconsolidatable`). Other codes (not managed, not initialized, deleting, disrupted) say
/// nothing a person needs to act on.
const BLOCKED: &[&str] = &[
    "nodepool-not-found",
    "node-do-not-disrupt",
    "pod-do-not-disrupt",
    "pod-has-no-controller",
    "pdb-blocked",
    "multiple-pdbs",
    "budget-exhausted",
];
const UNCONSOLIDATABLE: &[&str] = &[
    "pods-do-not-fit",
    "policy-when-empty",
    "consolidation-disabled",
];

/// The graceful methods every round evaluates, as `(reason, consolidation_type)` labels.
const EVALUATED: [Method; 4] = [
    Method::Emptiness,
    Method::Drift,
    Method::MultiNodeConsolidation,
    Method::SingleNodeConsolidation,
];

/// A planned command with its replacements' resource requests.
#[derive(Clone, Debug)]
struct Queued {
    command: Command,
    requests: Vec<Resources>,
}

/// What one planning pass computes off the runtime.
struct RoundResult {
    commands: Vec<Queued>,
    verdicts: Vec<Verdict>,
    eligible: BTreeMap<&'static str, usize>,
    allowed: Vec<BudgetRow>,
    claims_by_node: BTreeMap<String, String>,
    /// The consolidation moves the round weighed.
    moves: Vec<Move>,
    /// The round found nothing and no scheduled budget held it back.
    consolidated: bool,
    /// When this round's verdicts change with time alone.
    timed: Option<Timestamp>,
    /// Per NodePool: nodes counted for budgets and those already disrupting.
    counts: BTreeMap<String, (u32, u32)>,
    /// Pods on nodes whose `do-not-disrupt` value is ignored as invalid, with the value.
    invalid_do_not_disrupt: Vec<(String, String, String)>,
    /// Pods on nodes whose `do-not-disrupt` is a duration: when it ends, and whether it has.
    timed_do_not_disrupt: Vec<(ObjectRef, Timestamp, bool)>,
    /// The consolidation searches that ran out of time.
    timed_out: Vec<Method>,
}

/// Each NodePool's budget per reason, as upstream's budget mapping sets
/// `karpenter_nodepools_allowed_disruptions` and `_nodes_consuming_budgets`: what the active
/// budgets allow against the pool's node count, before subtracting nodes already disrupting
/// (an unbounded pool reports 2147483647, upstream's MaxInt32), and those disrupting nodes.
pub fn allowed_by_nodepool(snap: &Snapshot) -> Vec<BudgetRow> {
    let counts = budget_node_counts(snap);
    let mut out = Vec::new();
    for np in &snap.nodepools {
        let (nodes, disrupting) = counts.get(&np.name).copied().unwrap_or((0, 0));
        for (reason, label) in [
            (DisruptionReason::Empty, "empty"),
            (DisruptionReason::Drifted, "drifted"),
            (DisruptionReason::Underutilized, "underutilized"),
        ] {
            let a = allowed_disruptions(np, reason, nodes, 0, snap.now);
            out.push(BudgetRow {
                nodepool: np.name.clone(),
                reason: label,
                allowed: a.allowed,
                nodes,
                consuming: disrupting,
            });
        }
    }
    out
}

/// The pods on nodes whose `do-not-disrupt` is a duration, with when it ends and whether it
/// has: upstream tells each such pod it weighs which, every round.
fn timed_do_not_disrupt(snap: &Snapshot) -> Vec<(ObjectRef, Timestamp, bool)> {
    snap.pods
        .iter()
        .filter(|p| p.node_name.is_some() && !p.is_terminal())
        .filter_map(|p| {
            let (until, elapsed) = timed_protection(p, snap.now)?;
            let pod = ObjectRef::pod(&p.namespace, &p.name);
            let pod = if p.uid.is_empty() {
                pod
            } else {
                pod.with_uid(p.uid.clone())
            };
            Some((pod, until, elapsed))
        })
        .collect()
}

/// Candidates per metric reason: every graceful candidate may be consolidated, the empty ones
/// may go by emptiness, the drifted ones by drift.
fn eligible(graceful: &Selection<'_>, eventual: &Selection<'_>) -> BTreeMap<&'static str, usize> {
    BTreeMap::from([
        (
            Method::Emptiness.reason_label(),
            graceful.candidates.iter().filter(|c| c.is_empty()).count(),
        ),
        (
            Method::SingleNodeConsolidation.reason_label(),
            graceful.candidates.len(),
        ),
        (
            Method::Drift.reason_label(),
            eventual
                .candidates
                .iter()
                .filter(|c| c.claim.drifted.is_some())
                .count(),
        ),
    ])
}

/// A command in a few words: method, decision, how many targets and replacements.
fn brief(c: &Command) -> String {
    format!(
        "{} {} of {} node(s) with {} replacement(s), saving ${:.3}/h",
        c.method.as_str(),
        c.decision.as_str(),
        c.targets.len(),
        c.replacements.len(),
        c.savings_per_hour
    )
}

fn started_entry(now: Timestamp, c: &Command) -> Entry {
    Entry::new(now, What::Started, c.to_string()).nodes(c.targets.len())
}

fn finished_entry(now: Timestamp, what: What, r: &Running) -> Entry {
    Entry::new(now, what, brief(&r.command))
        .nodes(r.command.targets.len())
        .took(now.since(r.started))
}

/// The journal's line for a planning round: its commands, its cost and the budgets it saw.
fn round_summary(round: &RoundResult, secs: f64, running: usize) -> String {
    let budgets: Vec<String> = round
        .counts
        .iter()
        .map(|(pool, (nodes, disrupting))| {
            let allowed = round
                .allowed
                .iter()
                .find(|b| &b.nodepool == pool && b.reason == "underutilized")
                .map_or(0, |b| b.allowed);
            format!("{pool}: {disrupting} of {nodes} disrupting, budget {allowed}")
        })
        .collect();
    let commands: Vec<String> = round.commands.iter().map(|q| brief(&q.command)).collect();
    format!(
        "{} command(s) in {:.0} ms with {running} running [{}]; {}",
        commands.len(),
        secs * 1000.0,
        budgets.join(", "),
        commands.join("; ")
    )
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
    metrics: Arc<Metrics>,
    events: Arc<dyn EventSink>,
    pub settings: Settings,
    /// The solve options of every simulation (`PREFERENCE_POLICY`, `MIN_VALUES_POLICY`, as
    /// the provisioner solves).
    options: Options,
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
        let settings = self.settings;
        let busy = self.queue().busy_nodes();
        self.in_flight().apply(&mut snap);
        let started = Instant::now();
        let options = self.options.clone();
        let timeouts = self.timeouts;
        let round = tokio::task::spawn_blocking(move || {
            let sim = EngineSimulator {
                options,
                ..EngineSimulator::default()
            };
            let mut result = plan::plan_until(&snap, &sim, settings, &WallDeadline::new(timeouts));
            // The planner sees the running commands' targets as deleting; this only guards
            // against a node joining two commands.
            result
                .commands
                .retain(|c| c.targets.iter().all(|t| !busy.contains(&t.node)));
            let consolidated = plan_is_consolidated(&result, &snap.nodepools);
            let (graceful, eventual, counts) = select_both_counted(&snap);
            let timed = consolidated
                .then(|| next_timed_change(&snap, &graceful.blocked))
                .flatten();
            let commands = result
                .commands
                .into_iter()
                .map(|command| Queued {
                    requests: replacement_requests(&snap, &command, &sim),
                    command,
                })
                .collect();
            RoundResult {
                commands,
                verdicts: result.verdicts,
                moves: result.moves,
                eligible: eligible(&graceful, &eventual),
                allowed: allowed_by_nodepool(&snap),
                counts,
                claims_by_node: snap
                    .node_claims
                    .iter()
                    .filter_map(|c| Some((c.node_name.clone()?, c.name.clone())))
                    .collect(),
                invalid_do_not_disrupt: snap
                    .pods
                    .iter()
                    .filter(|p| p.node_name.is_some())
                    .filter_map(|p| {
                        let value = invalid_do_not_disrupt(p)?;
                        Some((p.namespace.clone(), p.name.clone(), value.to_string()))
                    })
                    .collect(),
                timed_do_not_disrupt: timed_do_not_disrupt(&snap),
                consolidated,
                timed,
                timed_out: result.timed_out,
            }
        })
        .await
        .map_err(|e| e.to_string())?;
        if round.consolidated {
            self.marker().found_nothing(now, round.timed);
        }
        let elapsed = started.elapsed().as_secs_f64();
        for m in EVALUATED {
            self.metrics
                .disruption
                .evaluation(m.reason_label(), m.consolidation_type(), elapsed);
        }
        for m in &round.timed_out {
            info!(
                method = m.as_str(),
                "consolidation search out of time; kept what it found"
            );
            self.metrics
                .disruption
                .consolidation_timeout(m.consolidation_type());
        }
        for (reason, n) in &round.eligible {
            self.metrics.disruption.eligible_nodes(reason, *n);
        }
        self.metrics.disruption.set_budgets(&round.allowed);
        self.publish_blocked_budgets(&round.allowed);
        self.publish_verdicts(&round.verdicts, &round.claims_by_node);
        for (namespace, name, value) in &round.invalid_do_not_disrupt {
            self.events.publish(events::invalid_do_not_disrupt(
                ObjectRef::pod(namespace, name),
                value,
            ));
        }
        for (pod, until, elapsed) in &round.timed_do_not_disrupt {
            self.events.publish(if *elapsed {
                events::do_not_disrupt_grace_period_elapsed(pod.clone())
            } else {
                events::do_not_disrupt_until(pod.clone(), &rfc3339(*until))
            });
        }
        self.record_moves(&round.moves, &round.claims_by_node);
        for q in &round.commands {
            self.publish_consolidation(&q.command, None);
        }
        self.journal.record(|| {
            let n = round.commands.iter().map(|q| q.command.targets.len()).sum();
            let summary = round_summary(&round, elapsed, self.running().len());
            Entry::new(now, What::Planned, summary)
                .nodes(n)
                .took(Duration::from_secs_f64(elapsed))
        });
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

    /// A NodePool with nodes whose budgets allow no disruption for a reason gets a
    /// `DisruptionBlocked` event naming the reason, as upstream's budget mapping publishes
    /// one; a pool with nodes
    /// that its budgets allow no disruption at all, for any reason, gets the one that names
    /// none as well.
    fn publish_blocked_budgets(&self, rows: &[BudgetRow]) {
        let mut pools: BTreeMap<&str, bool> = BTreeMap::new();
        for row in rows {
            let blocked = pools.entry(&row.nodepool).or_insert(row.nodes > 0);
            *blocked &= row.allowed == 0;
            // Upstream tells only a pool with nodes: an empty one has nothing to disrupt.
            let blocks = row.allowed == 0 && row.nodes > 0;
            let Some(reason) = reason_named(row.reason).filter(|_| blocks) else {
                continue;
            };
            self.events.publish(events::nodepool_blocked_for_reason(
                self.nodepool_ref(&row.nodepool),
                reason,
            ));
        }
        for (pool, _) in pools.into_iter().filter(|(_, blocked)| *blocked) {
            self.events
                .publish(events::nodepool_blocked(self.nodepool_ref(pool)));
        }
    }

    fn nodepool_ref(&self, pool: &str) -> ObjectRef {
        let uid = lock(&self.state)
            .nodepools
            .get(pool)
            .and_then(|p| p.metadata.uid.clone());
        let object = ObjectRef::nodepool(pool);
        match uid {
            Some(uid) => object.with_uid(uid),
            None => object,
        }
    }

    /// Counts the consolidation moves the round weighed, as upstream's Balanced evaluator
    /// does, and tells each node (or, for a multi-node move, the NodePool) that a Balanced
    /// NodePool approved its move.
    fn record_moves(&self, moves: &[Move], claims_by_node: &BTreeMap<String, String>) {
        for m in moves {
            let score = m.balanced.as_ref().map(|b| b.score);
            self.metrics.disruption.consolidation_move(
                m.approved,
                &m.nodepool,
                m.policy.as_str(),
                score,
            );
            let Some(b) = m.balanced.as_ref().filter(|_| m.approved) else {
                continue;
            };
            if m.multi_node {
                self.events.publish(events::consolidation_approved(
                    self.nodepool_ref(&m.nodepool),
                    b,
                ));
                continue;
            }
            for node in &m.nodes {
                self.events
                    .publish(events::consolidation_approved(ObjectRef::node(node), b));
                if let Some(c) = claims_by_node.get(node) {
                    self.events
                        .publish(events::consolidation_approved(ObjectRef::nodeclaim(c), b));
                }
            }
        }
    }

    /// `ConsolidationCandidate` (or, with the re-check's `rejected` reason,
    /// `ConsolidationRejected`) on each target of a consolidation command, Node and NodeClaim.
    fn publish_consolidation(&self, c: &Command, rejected: Option<&str>) {
        if !matches!(
            c.method,
            Method::MultiNodeConsolidation | Method::SingleNodeConsolidation
        ) {
            return;
        }
        for t in &c.targets {
            let what = events::command_for_node(c, &t.node);
            for object in [ObjectRef::node(&t.node), ObjectRef::nodeclaim(&t.nodeclaim)] {
                self.events.publish(match rejected {
                    None => events::consolidation_candidate(object, &what, c.savings_per_hour),
                    Some(why) => {
                        events::consolidation_rejected(object, &what, why, c.savings_per_hour)
                    }
                });
            }
        }
    }

    /// Says, on the Node and its NodeClaim, why a node is not disrupted.
    fn publish_verdicts(&self, verdicts: &[Verdict], claims_by_node: &BTreeMap<String, String>) {
        for v in verdicts {
            if !events::announces_block(&v.code) {
                continue;
            }
            let make: fn(ObjectRef, &str) -> Event = if BLOCKED.contains(&v.code.as_str()) {
                events::disruption_blocked
            } else if UNCONSOLIDATABLE.contains(&v.code.as_str()) {
                events::unconsolidatable
            } else {
                continue;
            };
            self.events
                .publish(make(ObjectRef::node(&v.node), &v.message));
            if let Some(c) = claims_by_node.get(&v.node) {
                self.events
                    .publish(make(ObjectRef::nodeclaim(c), &v.message));
            }
        }
    }

    /// Re-checks the planned commands on a fresh snapshot and starts those still valid.
    pub async fn validate_round(&self) -> Result<(Validated, Vec<String>), String> {
        let queued = self.queue().take_awaiting();
        let now = self.clock.now();
        let mut fresh = snapshot(&self.state, self.cloud.as_ref(), now)
            .await
            .map_err(|e| e.to_string())?;
        self.in_flight().apply(&mut fresh);
        let options = self.options.clone();
        let checked = tokio::task::spawn_blocking(move || {
            let sim = EngineSimulator {
                options,
                ..EngineSimulator::default()
            };
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

    /// Marks the targets (taint, DisruptionReason) and creates the replacements. A command
    /// that cannot be marked whole is unmarked again, as upstream does: a target left tainted
    /// would take no pods while nothing is disrupting it.
    async fn start(&self, q: &Queued) -> Result<(), WriteError> {
        let c = &q.command;
        let now = self.clock.now();
        if let Err(e) = self.mark(c).await {
            self.unmark(c).await;
            return Err(e);
        }
        if let Some(t) = c.targets.first() {
            self.metrics.disruption.decision(
                c.decision.as_str(),
                c.method.reason_label(),
                c.method.consolidation_type(),
                &t.nodepool,
            );
            if !c.method.consolidation_type().is_empty() {
                self.metrics.disruption.consolidation_savings(
                    &t.nodepool,
                    c.method.consolidation_type(),
                    c.savings_per_hour,
                );
            }
        }
        let mut replacements = Vec::new();
        for (i, r) in c.replacements.iter().enumerate() {
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
                requests: q.requests.get(i).cloned().unwrap_or_default(),
                min_values_relaxed: false,
            };
            let name = format!("{}-{}", r.nodepool, claims::random_suffix());
            submit_claim(
                &self.state,
                self.writer.as_ref(),
                &self.metrics,
                &claims::build(&pool, &request, &name),
                c.method.reason_label(),
            )
            .await?;
            self.events.publish(events::disruption_launching(
                ObjectRef::nodeclaim(&name),
                c.method.reason_label(),
            ));
            replacements.push(name);
        }
        // A forceful command (expiration) does not wait for replacements: the queue says
        // to delete its targets now.
        let effects = self.queue().started(c.clone(), replacements, now);
        self.carry_out(effects, now).await?;
        Ok(())
    }

    /// The disrupted taint and the `DisruptionReason` condition on every target.
    async fn mark(&self, c: &Command) -> Result<(), WriteError> {
        for t in &c.targets {
            retry_transient(MARK_ATTEMPTS, || self.set_taint(&t.node, true)).await?;
            retry_transient(MARK_ATTEMPTS, || {
                self.set_reason(&t.nodeclaim, Some(c.method))
            })
            .await?;
        }
        Ok(())
    }

    /// Takes the disrupted taint and `DisruptionReason` off every target, each write tried
    /// again on a transient failure; a target that still fails is logged and left.
    async fn unmark(&self, c: &Command) {
        for t in &c.targets {
            let untainted = retry_transient(MARK_ATTEMPTS, || self.set_taint(&t.node, false)).await;
            let unreasoned =
                retry_transient(MARK_ATTEMPTS, || self.set_reason(&t.nodeclaim, None)).await;
            if let Err(e) = untainted.and(unreasoned) {
                warn!(node = %t.node, error = %e, "unmarking a disruption target failed");
            }
        }
    }

    /// Deletes the command's target claims (the termination controller drains them), with
    /// upstream's `DisruptionTerminating` events and `nodeclaims_disrupted_total`.
    async fn terminate_targets(&self, c: &Command) -> Result<(), WriteError> {
        let reason = c.method.reason_label();
        // Every target is tried, each write again on a transient failure: the queue does not
        // hand the command back, so a target skipped here would keep its node.
        let mut failed = None;
        for t in &c.targets {
            let deleted = retry_transient(MARK_ATTEMPTS, || self.delete_claim(&t.nodeclaim)).await;
            if let Err(e) = deleted {
                warn!(nodeclaim = %t.nodeclaim, error = %e, "deleting a disruption target failed");
                failed.get_or_insert(e);
                continue;
            }
            self.events.publish(events::disruption_terminating(
                ObjectRef::node(&t.node),
                reason,
            ));
            self.events.publish(events::disruption_terminating(
                ObjectRef::nodeclaim(&t.nodeclaim),
                reason,
            ));
            let (policy, mode) = {
                let s = lock(&self.state);
                (
                    consolidation_policy(&s, &t.nodepool),
                    s.nodeclaims
                        .get(&t.nodeclaim)
                        .map(termination_mode)
                        .unwrap_or("graceful"),
                )
            };
            self.metrics.nodeclaim_disrupted_with_mode(
                reason,
                &t.nodepool,
                &t.capacity_type,
                &policy,
                mode,
            );
            let disrupted = metrics::Disrupted {
                reason,
                nodepool: &t.nodepool,
                capacity_type: &t.capacity_type,
                consolidation_policy: &policy,
                termination_mode: mode,
            };
            self.metrics
                .disruption
                .pods_initiated(&disrupted, t.pods.len());
        }
        failed.map_or(Ok(()), Err)
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
        let mut status = c.status.clone().unwrap_or_default();
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
            write_status(&*self.writer, &self.state, &c, &status).await?;
        }
        Ok(())
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

    /// Turns the queue's effects into writes, events, metrics and journal entries; returns
    /// what finished, for tests and logs.
    async fn carry_out(
        &self,
        effects: Vec<Effect>,
        now: Timestamp,
    ) -> Result<Vec<String>, WriteError> {
        let mut finished = Vec::new();
        let mut failed = None;
        for effect in effects {
            match effect {
                Effect::Terminate(r) => {
                    // The other effects still happen; the first failure is reported after.
                    if let Err(e) = self.terminate_targets(&r.command).await {
                        failed.get_or_insert(e);
                    }
                    info!(command = %r.command, "disruption command finished; terminating its targets");
                    self.journal
                        .record(|| finished_entry(now, What::Terminated, &r));
                    finished.push(format!("terminated: {}", r.command));
                }
                Effect::RollBack(r, why) => {
                    let why = match why {
                        Failure::ReplacementGone(name) => format!("replacement {name} is gone"),
                        Failure::TimedOut => "replacements not initialized in time".to_string(),
                    };
                    warn!(command = %r.command, reason = %why, "disruption command failed; rolling back");
                    self.metrics.disruption.queue_failure(
                        r.command.decision.as_str(),
                        r.command.method.reason_label(),
                        r.command.method.consolidation_type(),
                    );
                    self.unmark(&r.command).await;
                    self.journal
                        .record(|| finished_entry(now, What::RolledBack, &r));
                    finished.push(format!("rolled back: {}", r.command));
                }
                Effect::Waiting(names) => {
                    for name in &names {
                        self.events.publish(events::disruption_waiting_readiness(
                            ObjectRef::nodeclaim(name),
                        ));
                    }
                }
            }
        }
        failed.map_or(Ok(finished), Err)
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
            let wait = cadence
                .next_wake()
                .since(self.clock.now())
                .min(Duration::from_secs(1));
            tokio::time::sleep(wait.max(Duration::from_millis(100))).await;
        }
    }
}

/// The budget reason behind an allowed-disruptions label.
fn reason_named(label: &str) -> Option<&'static str> {
    match label {
        "empty" => Some("Empty"),
        "drifted" => Some("Drifted"),
        "underutilized" => Some("Underutilized"),
        _ => None,
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
