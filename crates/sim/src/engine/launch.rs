//! New capacity: the provisioning solve over the cluster's snapshot, NodeClaims from its plan
//! or a disruption command's replacements, the simulated cloud's launch answer, nodes turning
//! Ready with their daemon pods, claims deleted by liveness when they do not launch or
//! register in time, and claims going away once their instance has terminated.

use nodewright_cloud_sim::fleet::Launch;
use nodewright_cloud_sim::select::Choice;
use nodewright_core::disruption::drift;
use nodewright_core::labels::{CAPACITY_TYPE, INSTANCE_TYPE};
use nodewright_core::lifecycle::Phase;
use nodewright_core::requirements::Operator;

use super::*;

impl Engine<'_> {
    /// One provisioning pass over the snapshot, after a batch window closed.
    pub(super) fn provision(&mut self, batch_size: usize) {
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
    pub(super) fn ice_expired_between(&self, from: Timestamp, to: Timestamp) -> bool {
        self.cluster.cloud.unavailable_ended_between(from, to)
    }

    pub(super) fn provision_plan(
        &mut self,
        plan: crate::provision::ProvisionPlan,
        batch_size: usize,
    ) {
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
            let mut pods = c.pods.clone();
            pods.extend(nominated);
            let churn = self.churn.launched_for(&pods, self.now);
            if let Some(name) = self.create_claim(c, reason)
                && churn
            {
                self.log(
                    "consolidation-churn",
                    format!(
                        "{name} is launched for pods a consolidation moved in the last {}s",
                        churn::WINDOW.as_secs()
                    ),
                );
            }
        }
        for (pod, why) in plan.unplaced.iter().take(10) {
            self.log("unschedulable", format!("{pod}: {why}"));
        }
    }

    pub(super) fn create_claim(&mut self, c: &ClaimRequest, reason: String) -> Option<String> {
        let pool = self.cluster.nodepool(&c.nodepool)?.clone();
        self.cluster.changed();
        let name = self.cluster.next_claim_name(&pool.name);
        let claim = NodeClaim {
            name: name.clone(),
            nodepool: pool.name.clone(),
            labels: pool.template.labels.clone().into(),
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
            // Stamped with the template's hash, as the controller stamps its claims, so a
            // later edit of the template drifts the claim.
            annotations: drift::stamp(&pool).into(),
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
        let claim_requirements = claim.requirements.clone();
        self.cluster.insert_claim(
            &name,
            SimClaim {
                claim,
                instance: None,
                node: None,
                launched_at: None,
                terminating: None,
                deleted_at: None,
                reason,
            },
        );
        let requirements = launch_requirements(&claim_requirements, c);
        self.pending_launch
            .insert(name.clone(), (requirements, c.requests.clone()));
        let launched = self.now.plus(self.input.cloud.launch_delay);
        self.time_liveness(&name, Phase::Launching { created: self.now }, launched);
        self.queue.push(launched, Event::LaunchResult(name.clone()));
        Some(name)
    }

    pub(super) fn launch_result(&mut self, name: &str) {
        let Some((requirements, requests)) = self.pending_launch.remove(name) else {
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
        let pool = &self.cluster.claims()[name].claim.nodepool;
        let types = self.cluster.catalog.get(pool).cloned().unwrap_or_default();
        match (self.cluster.cloud).launch(&types, &requirements, &requests, now) {
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
                let Some(it) = types.iter().find(|t| t.name == instance.instance_type) else {
                    return;
                };
                let labels = node_labels(
                    &pool,
                    it,
                    &instance.zone,
                    instance.capacity_type,
                    &self.input.cloud.region,
                    name,
                );
                let claim = self.cluster.claim_mut(name).expect("live claim");
                let c = &mut claim.claim;
                c.launched = true;
                c.provider_id = Some(instance.provider_id());
                c.labels = labels.into();
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
                let msg = launched_line(name, &instance);
                claim.instance = Some(instance);
                self.log("launched", msg);
                let registered = now.plus(self.input.cloud.registration_delay);
                self.time_liveness(name, Phase::Registering { launched: now }, registered);
                self.queue
                    .push(registered, Event::NodeReady(name.to_string()));
                if spot {
                    let horizon = self.end().since(now);
                    if let Some(d) = self.cluster.cloud.spot_interruption_after(horizon) {
                        self.queue
                            .push(now.plus(d), Event::Interrupt(name.to_string()));
                    }
                }
            }
            Err(e) => {
                self.stats.launch_failures += 1;
                self.log("launch-failed", format!("{name}: {e}"));
                self.remove_claim(name);
                // A command waiting for this replacement is rolled back now.
                self.progress_commands();
            }
        }
    }

    pub(super) fn node_ready(&mut self, name: &str) {
        let now = self.now;
        let Some(claim) = self.cluster.claim_mut(name) else {
            return;
        };
        if !claim.is_running() {
            return;
        }
        self.cluster.changes += 1;
        let claim = self.cluster.claim_mut(name).expect("running claim");
        let c = &mut claim.claim;
        let node = Node {
            name: name.to_string(),
            resource_version: String::new(),
            provider_id: c.provider_id.clone().unwrap_or_default(),
            labels: (*c.labels).clone(),
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

    pub(super) fn describe_claim(&self, name: &str) -> String {
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

    /// Schedules the liveness check of claim `name` in `phase` if its timer would run out no
    /// later than `next`, when the phase ends: a claim that moves on in time costs no event.
    fn time_liveness(&mut self, name: &str, phase: Phase, next: Timestamp) {
        if let Some((deadline, _)) = phase.deadline()
            && deadline <= next
        {
            self.queue.push(deadline, Event::Liveness(name.to_string()));
        }
    }

    /// Liveness, as the controller's (core's [`Phase::timed_out`]): a claim not launched or
    /// not registered in time is deleted, and its pods go back to pending.
    pub(super) fn liveness(&mut self, name: &str) {
        let Some(c) = self.cluster.claims().get(name).filter(|c| c.is_running()) else {
            return;
        };
        let phase = match (&c.node, c.launched_at) {
            (Some(_), _) => Phase::Registered,
            (None, Some(launched)) => Phase::Registering { launched },
            (None, None) => Phase::Launching {
                created: c.claim.creation_timestamp,
            },
        };
        let Some(why) = phase.timed_out(self.now) else {
            return;
        };
        self.log("liveness", format!("{name} deleted: {}", why.reason()));
        self.remove_claim(name);
        // A command waiting for this replacement is rolled back now.
        self.progress_commands();
    }

    /// Deletes a claim: its pods go back to their controllers and its instance is told to
    /// terminate. The claim and its Node stay, deleting and cordoned, until the cloud reports
    /// the instance terminated ([`Engine::instance_terminated`]), as the controller's
    /// termination releases their finalizers only then; a claim with no instance goes at once.
    pub(super) fn remove_claim(&mut self, name: &str) {
        let now = self.now;
        let Some(claim) = self.ending(name, SimClaim::is_running) else {
            return;
        };
        let deleted = *claim.claim.deletion_timestamp.get_or_insert(now);
        let pid = claim.claim.provider_id.clone();
        if let Some(node) = claim.node.as_mut() {
            node.unschedulable = true;
            node.deletion_timestamp.get_or_insert(deleted);
            if !node.taints.iter().any(|t| t.key == DISRUPTED_TAINT) {
                node.taints
                    .push(Taint::new(DISRUPTED_TAINT, "", TaintEffect::NoSchedule));
            }
        }
        let terminating = pid.is_some_and(|pid| self.cluster.cloud.terminate(&pid, now));
        let claim = self.cluster.claim_mut(name).expect("running claim");
        if terminating {
            claim.terminating = Some(now);
            let gone = now.plus(self.cluster.cloud.config().termination_delay);
            self.queue
                .push(gone, Event::InstanceTerminated(name.to_string()));
        } else {
            claim.deleted_at = Some(now);
        }
        self.pending_launch.remove(name);
        let pods: Vec<String> = self.cluster.pods_on(name).map(|p| p.key()).collect();
        for p in pods {
            self.cluster.remove_pod(&p, now);
        }
        self.nominated.remove(name);
    }

    /// The cloud reports a deleted claim's instance terminated: the claim and its Node go.
    pub(super) fn instance_terminated(&mut self, name: &str) {
        let now = self.now;
        let Some(claim) = self.ending(name, SimClaim::is_live) else {
            return;
        };
        claim.deleted_at = Some(now);
        let what = self.describe_claim(name);
        self.log(
            "terminated",
            format!("{what}: instance terminated; its NodeClaim and Node are gone"),
        );
    }

    /// Claim `name` to take a step of its deletion on, if it is still `at` the step before;
    /// the change is counted.
    fn ending(&mut self, name: &str, at: fn(&SimClaim) -> bool) -> Option<&mut SimClaim> {
        if !self.cluster.claims().get(name).is_some_and(at) {
            return None;
        }
        self.cluster.changes += 1;
        self.cluster.claim_mut(name)
    }
}

/// What the cloud launches a claim for, as the controller writes its NodeClaim: the claim's
/// own requirements (its NodePool's and the options' instance types), those the plan worked
/// out for its pods (zones, capacity types...), and, when none names a capacity type, the
/// options' capacity types.
fn launch_requirements(claim: &[Requirement], c: &ClaimRequest) -> Vec<Requirement> {
    let mut out = claim.to_vec();
    let planned = c.requirement_list.iter().filter(|r| r.key != INSTANCE_TYPE);
    out.extend(planned.cloned());
    if !out.iter().any(|r| r.key == CAPACITY_TYPE) && !c.options.is_empty() {
        let types: BTreeSet<&str> = c.options.iter().map(|o| o.capacity_type.as_str()).collect();
        let types: Vec<&str> = types.into_iter().collect();
        out.push(Requirement::new(CAPACITY_TYPE, Operator::In, &types));
    }
    out
}

/// Launch options for a replacement: for each of its instance types, the cheapest available
/// offering whose zone and capacity type satisfy the replacement's and the NodePool's
/// requirements.
pub(super) fn replacement_options(
    cluster: &Cluster,
    pool: &str,
    types: &[String],
    requirements: &[Requirement],
) -> Vec<Choice> {
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
    let mut out: Vec<Choice> = types
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
                    reqs.iter().all(|r| r.admits_labels(&labels))
                })
                .min_by(|a, b| {
                    a.price
                        .total_cmp(&b.price)
                        .then_with(|| a.zone.cmp(&b.zone))
                        .then_with(|| a.capacity_type.cmp(&b.capacity_type))
                })
                .map(|o| Choice {
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

/// The log line of a launch: what, where, at what price, and the cheaper offerings that were
/// out of capacity (the first three).
fn launched_line(name: &str, instance: &Launch) -> String {
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
    format!(
        "{name} launched as {} in {} ({}) at ${:.4}/h, instance {}{skipped}",
        instance.instance_type, instance.zone, instance.capacity_type, instance.price, instance.id
    )
}
