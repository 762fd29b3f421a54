//! The disruption loop: the consolidated marker, a planning round over the snapshot the
//! cluster keeps, validation of graceful commands after their wait, and commands running
//! until their replacements are Ready. Rounds and re-checks see the snapshot as running
//! commands leave it, as the controller does ([`InFlight::view`]): targets deleting, their
//! pods in place, and the replacements sized for those pods reserved until the command's
//! targets have drained (`Draining`).

use nodewright_core::disruption::InFlight;
use nodewright_core::disruption::queue::{Effect, Failure, Replacement};
use nodewright_core::disruption::{Method, Target};

use super::launch::replacement_options;
use super::remembered::Remembering;
use super::*;

impl Engine<'_> {
    /// Tells the consolidated marker about every change since the last round: cluster events,
    /// and NodeClaims that became consolidatable or expired only because time passed.
    pub(super) fn observe_changes(&mut self) {
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

    pub(super) fn disruption_round(&mut self) {
        self.observe_changes();
        if self.consolidation.is_consolidated(self.now) {
            self.work.plans_skipped += 1;
            self.cadence.planned(self.now, Planned::Nothing);
            return;
        }
        self.work.plans += 1;
        let held = self.in_flight();
        let generation = self.view_warmed(&held, true);
        let snapshot = self.cluster.last_view();
        let sim = Remembering::new(&self.memo, generation, &held, snapshot);
        // The simulator shows commands, not verdicts: simulating candidates that cannot be
        // this round's command would only fill verdicts, and so would the verdicts themselves.
        let settings = Settings {
            only_actionable: true,
            commands_only: true,
            ..Settings::default()
        };
        let mut round = plan_kept(snapshot, &sim, settings, &self.kept_nodes, &NoDeadline);
        // The view has the running commands' targets deleting; this only guards against a
        // node joining two commands.
        round.commands.retain(|c| {
            c.targets
                .iter()
                .all(|t| !held.targets.contains(&t.nodeclaim))
        });
        if plan_is_consolidated(&round, &snapshot.nodepools) {
            self.consolidation.mark_consolidated(self.now);
        }
        // The queue's split, as the controller's: forceful commands and drift start now, the
        // rest wait for their re-check.
        let (immediate, planned) = self.commands.plan(round.commands);
        for c in immediate {
            self.start(c);
        }
        let awaiting: Vec<String> = self
            .commands
            .awaiting()
            .iter()
            .map(|c| c.to_string())
            .collect();
        for c in awaiting {
            self.log("disruption-planned", format!("{c}; re-checking in 15s"));
        }
        self.cadence.planned(self.now, planned);
    }

    pub(super) fn validation(&mut self) {
        let commands = self.commands.take_awaiting();
        let mut started = false;
        for c in commands {
            let held = self.in_flight();
            // Only these methods' re-checks simulate.
            let simulates = matches!(
                c.method,
                Method::Drift | Method::MultiNodeConsolidation | Method::SingleNodeConsolidation
            );
            let generation = if simulates {
                self.view_warmed(&held, false)
            } else {
                self.cluster.view_held(self.now, &held).0
            };
            let fresh = self.cluster.last_view();
            let sim = Remembering::new(&self.memo, generation, &held, fresh);
            let verdict = validate(&c, fresh, &sim);
            match verdict {
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

    /// Brings the view up to date as `held` leaves it ([`Cluster::view_held`]) and starts its
    /// compile on another core: the decision selects candidates and bounds their savings
    /// meanwhile. A decision those settle does not wait for the compile; the compile is kept
    /// for a later decision over the same view, and the next view waits for it to end.
    /// Returns the view's generation; the view is [`Cluster::last_view`].
    ///
    /// A planning round keeps its own core busy meanwhile, so its compile is made `alone`
    /// (on one thread); a re-check soon waits for its compile, which may then use both cores.
    fn view_warmed(&mut self, held: &InFlight, alone: bool) -> u64 {
        let (generation, view) = self.cluster.view_held(self.now, held);
        let warm_up = Remembering::new(&self.memo, generation, held, view).warm_up(alone);
        self.cluster.beside_view(warm_up);
        generation
    }

    /// Tells the cadence how many commands the queue still holds, once those whose targets
    /// have drained are let go: fewer than before frees budget, and an idle loop plans at
    /// once, as the controller's does.
    pub(super) fn observe_held(&mut self) {
        let cluster = &self.cluster;
        self.commands
            .forget_drained(self.now, |t| drained(cluster, &t.nodeclaim));
        self.cadence.observe_held(self.now, self.commands.held());
    }

    /// What the running commands hold, their targets and the replacements they launched,
    /// what finished commands whose targets still drain hold, and the nodes whose instance is
    /// terminating (out of the budgets' counts, as the controller's `InstanceTerminating`
    /// claims are).
    fn in_flight(&mut self) -> InFlight {
        let cluster = &self.cluster;
        self.commands
            .forget_drained(self.now, |t| drained(cluster, &t.nodeclaim));
        let terminating = cluster
            .claims()
            .values()
            .filter(|c| c.is_live() && c.terminating.is_some())
            .filter_map(|c| c.claim.node_name.clone())
            .collect();
        self.commands.in_flight(terminating)
    }

    /// Starts a command: targets are tainted so nothing new lands on them, replacements launch,
    /// and the targets go once every replacement is Ready.
    pub(super) fn start(&mut self, command: Command) {
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
                requirement_list: r.requirements.clone(),
                requests: Default::default(),
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
        let effects = self.commands.started(command, replacements, self.now);
        self.carry_out(effects);
    }

    /// Advances the running commands as core's queue decides, as the controller does.
    pub(super) fn progress_commands(&mut self) {
        let cluster = &self.cluster;
        // Gone as the controller sees it: no claim, or one being deleted.
        let replacement = |name: &str| match cluster.claims().get(name) {
            Some(c) if !c.is_live() || c.claim.deletion_timestamp.is_some() => Replacement::Gone,
            Some(c) if c.ready_node().is_some() => Replacement::Initialized,
            Some(_) => Replacement::Launching,
            None => Replacement::Gone,
        };
        let drained = |t: &Target| drained(cluster, &t.nodeclaim);
        let effects = self.commands.progress(self.now, replacement, drained);
        self.carry_out(effects);
    }

    /// Carries out the queue's effects on the simulated cluster.
    fn carry_out(&mut self, effects: Vec<Effect>) {
        for effect in effects {
            match effect {
                Effect::Terminate(r) => self.terminate_targets(&r.command),
                Effect::RollBack(r, why) => self.roll_back(&r.command, why),
                Effect::Waiting(_) => {}
            }
        }
    }

    fn terminate_targets(&mut self, command: &Command) {
        for t in &command.targets {
            let why = format!(
                "{} ({})",
                command.method.as_str(),
                match command.decision {
                    Decision::Delete => "delete",
                    Decision::Replace => "replace",
                }
            );
            self.drain(&t.nodeclaim, why);
            self.stats.disrupted += 1;
        }
        self.stats.savings_per_hour += command.savings_per_hour;
        self.log(
            "saved",
            format!(
                "${:.4}/h saved by {}",
                command.savings_per_hour,
                command.method.as_str()
            ),
        );
    }

    /// Untaints a failed command's targets.
    fn roll_back(&mut self, command: &Command, why: Failure) {
        self.cluster.changed();
        for t in &command.targets {
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
            format!("{}: {why}; targets untainted", command.method.as_str()),
        );
    }

    /// A node is consolidated only once it has had no pod bound or removed for its NodePool's
    /// `consolidateAfter`.
    pub(super) fn check_consolidate_after(&mut self, command: &Command) {
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
}

/// Whether a finished command's target has drained, as the controller has it: its claim is
/// gone or its instance is terminating.
fn drained(cluster: &Cluster, claim: &str) -> bool {
    !cluster
        .claims()
        .get(claim)
        .is_some_and(SimClaim::is_running)
}

pub(super) fn targets(c: &Command) -> String {
    c.targets
        .iter()
        .map(|t| t.node.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}
