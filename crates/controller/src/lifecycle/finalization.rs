//! Finalization: a deleted claim stamps its termination deadline, deletes its Node and waits
//! for it, terminates the instance until the cloud says it is gone, then releases the
//! finalizer; what the lifecycle deleted is counted by reason.

use super::*;
use crate::failpoint::{self, Failpoint};

impl Lifecycle {
    /// Deleting claim: stamp the termination deadline, delete its Node and wait for it, then
    /// terminate the instance until the cloud says it is gone, then release the finalizer.
    pub(super) async fn finalize(&self, claim: &NodeClaim) -> Result<Outcome, WriteError> {
        let name = claim.metadata.name.clone().unwrap_or_default();
        let now = self.clock.now();
        self.stamp_deadline(claim, &name).await?;
        let status = claim.status.clone().unwrap_or_default();
        if let Some(pid) = &status.provider_id {
            if self.delete_nodes(pid).await? {
                return Ok(Outcome::Updated);
            }
            if let Some(outcome) = self.terminate(claim, &name, pid, &status, now).await? {
                return Ok(outcome);
            }
        }
        self.release(claim, &name, &status, now).await?;
        Ok(Outcome::Finalized)
    }

    /// Stamps `karpenter.sh/nodeclaim-termination-timestamp` once: the deletion time plus the
    /// claim's `terminationGracePeriod`, when it has one.
    async fn stamp_deadline(&self, claim: &NodeClaim, name: &str) -> Result<(), WriteError> {
        let stamped = claim
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(TERMINATION_TIMESTAMP));
        let tgp = claim
            .spec
            .termination_grace_period
            .as_deref()
            .and_then(|d| nodewright_api::v1::shared::parse_duration(d).ok());
        let deleted = claim.metadata.deletion_timestamp.as_ref().map(from_time);
        let (Some(tgp), Some(deleted), false) = (tgp, deleted, stamped) else {
            return Ok(());
        };
        let mut p = MetaPatch::default();
        p.annotations.insert(
            TERMINATION_TIMESTAMP.into(),
            Some(rfc3339(deleted.plus(tgp))),
        );
        self.writer.patch_nodeclaim_meta(name, &p).await
    }

    /// Deletes the claim's Nodes (the termination controller drains them); true while any is
    /// left, deleted or not, so the instance waits for them.
    async fn delete_nodes(&self, pid: &str) -> Result<bool, WriteError> {
        let nodes: Vec<Node> = lock(&self.state)
            .node_by_provider_id(pid)
            .into_iter()
            .cloned()
            .collect();
        for n in nodes
            .iter()
            .filter(|n| n.metadata.deletion_timestamp.is_none())
        {
            let node_name = n.metadata.name.clone().unwrap_or_default();
            match self.writer.delete_node(&node_name).await {
                Ok(()) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(!nodes.is_empty())
    }

    /// Asks the cloud to terminate the instance: `None` once it is gone; otherwise the pass
    /// ends, with `InstanceTerminating` set when the call went through.
    async fn terminate(
        &self,
        claim: &NodeClaim,
        name: &str,
        pid: &str,
        status: &NodeClaimStatus,
        now: Timestamp,
    ) -> Result<Option<Outcome>, WriteError> {
        match self.cloud.delete(pid).await {
            Err(e) if e.is_not_found() => Ok(None),
            Ok(()) => {
                failpoint::reached(Failpoint::AfterTerminate);
                let mut conds = status.conditions.clone().unwrap_or_default();
                if cond::set(
                    &mut conds,
                    cond::INSTANCE_TERMINATING,
                    "True",
                    "InstanceTerminating",
                    "",
                    now,
                ) {
                    let mut s = status.clone();
                    s.conditions = Some(conds.clone());
                    write_status(&*self.writer, &self.state, claim, &s).await?;
                    self.publish_transitions(
                        claim,
                        status.conditions.as_deref().unwrap_or_default(),
                        &conds,
                    );
                }
                Ok(Some(Outcome::Updated))
            }
            Err(e) => {
                warn!(nodeclaim = %name, error = %e, "terminating instance failed");
                Ok(Some(Outcome::Unchanged))
            }
        }
    }

    /// The instance is gone: the finalizer comes off, what the lifecycle kept for the claim
    /// goes, and its termination is counted.
    async fn release(
        &self,
        claim: &NodeClaim,
        name: &str,
        status: &NodeClaimStatus,
        now: Timestamp,
    ) -> Result<(), WriteError> {
        let latest = lock(&self.state)
            .nodeclaims
            .get(name)
            .map(|c| c.metadata.clone())
            .unwrap_or_else(|| claim.metadata.clone());
        self.writer
            .patch_nodeclaim_meta(name, &release_termination(&latest))
            .await?;
        self.forget_launch(claim);
        let uid = claim.metadata.uid.clone().unwrap_or_default();
        self.backoff().remove(&uid);
        let claim_labels = claim.metadata.labels.clone().unwrap_or_default();
        let label = |k: &str| claim_labels.get(k).cloned().unwrap_or_default();
        let pool = label(labels::NODEPOOL);
        self.metrics.lifecycle.nodeclaim_terminated(
            &pool,
            &label(labels::CAPACITY_TYPE),
            &label(labels::ZONE),
        );
        if let Some(deleted) = claim.metadata.deletion_timestamp.as_ref().map(from_time) {
            self.metrics
                .lifecycle
                .nodeclaim_termination_duration(&pool, now.since(deleted).as_secs_f64());
        }
        // The instance is gone by now: how long it took since the terminate call.
        if let Some(terminating) = cond::find(
            status.conditions.as_deref().unwrap_or_default(),
            cond::INSTANCE_TERMINATING,
        )
        .filter(|c| c.status == "True")
        .and_then(|c| c.last_transition_time.as_deref())
        .and_then(parse_rfc3339)
        {
            self.metrics
                .lifecycle
                .nodeclaim_instance_termination_duration(
                    &pool,
                    now.since(terminating).as_secs_f64(),
                );
        }
        info!(nodeclaim = %name, "finalized nodeclaim");
        Ok(())
    }

    /// Counts a claim the lifecycle deleted (`karpenter_nodeclaims_disrupted_total`).
    pub(super) fn count_disrupted(&self, claim: &NodeClaim, reason: &str) {
        let claim_labels = claim.metadata.labels.clone().unwrap_or_default();
        let pool = claim_labels
            .get(labels::NODEPOOL)
            .cloned()
            .unwrap_or_default();
        let policy = consolidation_policy(&lock(&self.state), &pool);
        self.metrics.nodeclaim_disrupted_with_mode(
            reason,
            &pool,
            claim_labels
                .get(labels::CAPACITY_TYPE)
                .map(String::as_str)
                .unwrap_or_default(),
            &policy,
            termination_mode(claim),
        );
    }
}
