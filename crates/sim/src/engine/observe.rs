//! What the engine records: the cluster's figures for the report's samples (counted once
//! per cluster change), the invariant checks after every step, the volume lines of the
//! timeline and the final lower bound.

use super::*;

impl Engine<'_> {
    pub(super) fn price_per_hour(&mut self) -> f64 {
        self.state().price_per_hour
    }

    /// The cluster's figures for a [`Sample`] (its `at` left at zero). They read nothing but
    /// the cluster, so they are counted again only after it changed (see `check_invariants`).
    pub(super) fn state(&mut self) -> &Sample {
        let key = (self.cluster.changes, self.cluster.edits());
        if self.counted.as_ref().is_none_or(|(at, _)| *at != key) {
            self.cluster.sync_ledger();
            self.cluster.sync_free();
            let s = count(&self.cluster);
            self.counted = Some((key, s));
        }
        &self.counted.as_ref().expect("just counted").1
    }

    /// Volumes provisioned by these binds, and pods that went back to a volume they already
    /// had.
    pub(super) fn log_volume_placements(&mut self, bound: &[(String, String)]) {
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

    /// Checks, after every step, what must always hold.
    /// The check reads nothing but the cluster, so over a cluster unchanged since the last
    /// step (no applied object, no pod or claim touched) it finds what it found then.
    pub(super) fn check_invariants(&mut self) {
        let state = (self.cluster.changes, self.cluster.edits());
        if self.checked.as_ref().is_none_or(|(at, _)| *at != state) {
            let mut found = self.checker.violations(&mut self.cluster);
            // Debug builds (the tests) hold the incremental check to the full one.
            if cfg!(debug_assertions) && found != crate::invariants::violations(&self.cluster) {
                found.push("the incremental invariant check disagrees with the full one".into());
            }
            self.checked = Some((state, found));
        }
        if let Some((_, found)) = &self.checked {
            let stamped = crate::invariants::stamped(found, self.now.since(EPOCH));
            self.violations.extend(stamped);
        }
    }

    pub(super) fn sample(&mut self) {
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

    /// What the running pods would cost on fresh capacity, and its lower bound, asked of the
    /// same provisioner over an empty cluster.
    pub(super) fn final_bound(&self) -> Option<(f64, f64)> {
        let mut s = self.cluster.snapshot(self.now);
        s.nodes.clear();
        s.node_claims.clear();
        s.pods.retain(|p| !p.is_daemonset_pod());
        if s.pods.is_empty() {
            return None;
        }
        for p in s.pods.iter_mut().map(Arc::make_mut) {
            p.node_name = None;
            p.phase = nodewright_core::model::PodPhase::Pending;
        }
        let plan = self.provisioner.provision(&s);
        plan.unplaced
            .is_empty()
            .then_some((plan.cost, plan.lower_bound))
    }
}

/// What a [`Sample`] says of `cluster`, at time zero, with its ledger and its table of free
/// room synced ([`Cluster::sync_ledger`], [`Cluster::sync_free`]).
pub(super) fn count(cluster: &Cluster) -> Sample {
    // One pass over the claims: there are as many as nodes, and each pass reads them all.
    let (mut live, mut price_per_hour) = (0, 0.0);
    // A terminating claim's Node is still there, but EC2 bills no `shutting-down` instance.
    for c in cluster.claims().values().filter(|c| c.is_live()) {
        live += usize::from(c.instance.is_some());
        if c.is_running() {
            price_per_hour += c.price();
        }
    }
    // Every Ready node counts the requests of the pods bound to its name, even when two
    // share a name.
    let ready = cluster.ready_cpu();
    Sample {
        at: Duration::ZERO,
        nodes: live,
        ready_nodes: ready.nodes,
        pods: cluster.workload_pods(),
        pending_pods: cluster.pending_count(),
        price_per_hour,
        cpu_requested_milli: ready.requested,
        cpu_allocatable_milli: ready.allocatable,
    }
}
