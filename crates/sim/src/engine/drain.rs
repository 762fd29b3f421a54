//! Taking nodes away: cordon and drain with evictions a PodDisruptionBudget may refuse, pods
//! `do-not-disrupt` keeps (waited for, never evicted), the grace periods, and spot
//! interruptions with their two-minute notice.

use nodewright_core::disruption::candidates::do_not_disrupt_until;

use super::*;

impl Engine<'_> {
    /// Deletes a claim gracefully: the node is cordoned and its pods are evicted through the
    /// Eviction API, so a PodDisruptionBudget can refuse one (the drain asks again later and
    /// the node waits), and a pod with an active `karpenter.sh/do-not-disrupt` is not evicted at
    /// all but waited for. Each evicted pod goes after its own grace period; the NodePool's
    /// `terminationGracePeriod`, counted from now, bounds them all: a pod whose grace would outlast
    /// it is deleted whatever its budget says. The instance is terminated once no evictable pod
    /// is left.
    pub(super) fn drain(&mut self, name: &str, why: String) {
        let now = self.now;
        let Some(c) = self.cluster.claim_mut(name) else {
            return;
        };
        if !c.is_live() || c.claim.deletion_timestamp.is_some() {
            return;
        }
        c.claim.deletion_timestamp = Some(now);
        if let Some(node) = c.node.as_mut() {
            // The controller's finalization deletes the Node as soon as its claim is deleted,
            // before the drain: the planner sees it deleting from here on, not only once the
            // instance is told to terminate.
            node.deletion_timestamp = Some(now);
            node.unschedulable = true;
            if !node.taints.iter().any(|t| t.key == DISRUPTED_TAINT) {
                node.taints
                    .push(Taint::new(DISRUPTED_TAINT, "", TaintEffect::NoSchedule));
            }
        }
        self.cluster.changed();
        if why.contains("consolidation") {
            self.consolidating.insert(name.to_string());
        }
        let e = self.evict(name);
        let what = self.describe_claim(name);
        let mut held = match e.refused {
            0 => String::new(),
            n => format!("; {n} held back by PodDisruptionBudgets, retrying"),
        };
        if e.kept > 0 {
            held.push_str(&format!("; {} kept by do-not-disrupt, waited for", e.kept));
        }
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
    pub(super) fn retry_eviction(&mut self, name: &str) {
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
    pub(super) fn evict(&mut self, name: &str) -> Evictions {
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
        let pods = self.to_drain(name);
        let mut retry_at = now.plus(EVICTION_RETRY);
        // Pods kept by `do-not-disrupt` change their answer only when the protection lapses or
        // the deadline forces them: the drain looks again then, not every retry.
        let mut kept_until: Option<Timestamp> = None;
        let t = crate::report::clock(now.since(EPOCH));
        for (key, own, kept) in pods {
            // Karpenter deletes a pod that would otherwise outlive the node's grace period.
            let forced = deadline.is_some_and(|d| now.plus(own) >= d);
            if !forced && let Some(until) = kept {
                // Upstream's drain never evicts it; the node waits.
                out.kept += 1;
                let again = [
                    until,
                    deadline.map(|d| Timestamp(d.0 - own.as_millis() as i64)),
                ];
                if let Some(at) = again.into_iter().flatten().min() {
                    kept_until = Some(kept_until.map_or(at, |k| k.min(at)));
                }
                if self.refused.insert(key.clone()) {
                    self.log(
                        "eviction-withheld",
                        format!(
                            "{key} on {name}: karpenter.sh/do-not-disrupt; the drain waits for it"
                        ),
                    );
                }
                continue;
            }
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
            if self.consolidating.contains(name)
                && let Some(workload) = self
                    .cluster
                    .pods()
                    .get(&key)
                    .and_then(|p| super::controller_of(p))
            {
                self.churn.evicted(workload, now);
            }
            if let Some(p) = self.cluster.pod_mut(&key) {
                p.deletion_timestamp = Some(now);
            }
            self.cluster.changed();
            self.queue
                .push(now.plus(grace), Event::PodGone(key.clone()));
            if self.refused.remove(&key) {
                let how = eviction_after_refusal(forced, kept.is_some());
                self.log("evicted", format!("{key} on {name} {how}"));
            }
            if !forced {
                let found = crate::invariants::eviction(&self.cluster, &key, &t);
                self.violations.extend(found);
            }
        }
        let retry = match (out.refused > 0, kept_until) {
            (true, kept) => Some(kept.map_or(retry_at, |k| k.min(retry_at))),
            (false, kept) => kept,
        };
        if let Some(at) = retry {
            self.queue
                .push(at.max(now), Event::RetryEviction(name.to_string()));
        }
        out
    }

    /// The pods a drain of `name` still has to remove (DaemonSet pods stay, pods already
    /// going are left to go): each with its own grace period and, when `do-not-disrupt`
    /// protects it, until when.
    fn to_drain(&self, name: &str) -> Vec<(String, Duration, Option<Option<Timestamp>>)> {
        self.cluster
            .pods_on(name)
            .filter(|p| !p.is_daemonset_pod() && p.deletion_timestamp.is_none())
            .map(|p| {
                let own = p
                    .termination_grace_period_seconds
                    .map_or(DEFAULT_POD_GRACE, |s| Duration::from_secs(s.max(0) as u64));
                (p.key(), own, do_not_disrupt_until(p, self.now))
            })
            .collect()
    }

    /// Why the Eviction API refuses to evict `key` now, if it does.
    pub(super) fn eviction_refused(&self, key: &str) -> Option<String> {
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

    /// Terminates the instances of drained claims whose evicted pods are all gone.
    pub(super) fn progress_drains(&mut self) {
        let draining = std::mem::take(&mut self.draining);
        for (name, why) in draining {
            let running = self
                .cluster
                .claims()
                .get(&name)
                .is_some_and(SimClaim::is_running);
            if !running {
                continue;
            }
            let left = self.cluster.pods_on(&name).any(|p| !p.is_daemonset_pod());
            if left {
                self.draining.push((name, why));
                continue;
            }
            let what = self.describe_claim(&name);
            self.log(
                "disrupted",
                format!("{what} drained for {why}; its instance is terminating"),
            );
            self.remove_claim(&name);
        }
    }

    pub(super) fn interrupt(&mut self, target: InterruptTarget) {
        let mut live: Vec<&SimClaim> = self
            .cluster
            .claims()
            .values()
            .filter(|c| c.is_running() && c.instance.is_some())
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

    /// A spot interruption notice: the node is cordoned and drained at once (its pods come
    /// back pending and get new capacity), the offering is marked out of capacity, and EC2
    /// reclaims the instance two minutes later whatever is still on it.
    pub(super) fn interruption_notice(&mut self, claim: &str) {
        let Some(c) = self.cluster.claims().get(claim).filter(|c| c.is_running()) else {
            return;
        };
        if let Some(i) = &c.instance {
            let (it, zone, ct) = (i.instance_type.clone(), i.zone.clone(), i.capacity_type);
            self.cluster
                .cloud
                .mark_unavailable(&it, &zone, ct, self.now);
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
        // Its node is going anyway: a command waiting to replace it is dropped.
        self.commands.drop_targeting(claim);
        self.drain(claim, "spot interruption".into());
        self.queue.push(
            self.now.plus(SPOT_NOTICE),
            Event::InstanceGone(claim.to_string()),
        );
    }
}

/// What the log says of a pod the drain had refused before and now removes: deleted because
/// the NodePool's `terminationGracePeriod` is running out (`forced`), over its
/// `do-not-disrupt` (`kept`) or its PodDisruptionBudget, or evicted once the budget allows.
fn eviction_after_refusal(forced: bool, kept: bool) -> &'static str {
    match (forced, kept) {
        (true, true) => {
            "deleted whatever its do-not-disrupt says: the NodePool's terminationGracePeriod is running out"
        }
        (true, false) => {
            "deleted whatever its PodDisruptionBudget says: the NodePool's terminationGracePeriod is running out"
        }
        (false, _) => "evicted: its PodDisruptionBudget allows it now",
    }
}
