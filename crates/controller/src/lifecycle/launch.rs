//! Launch: the cloud creates the instance once per claim (a retry finds the one it made),
//! and the claim's status takes its provider id, image, capacity and the `Launched` condition.

use super::*;
use crate::failpoint::{self, Failpoint};

impl Lifecycle {
    /// The launch phase of a claim not yet launched: deleted once it has tried for longer
    /// than upstream's launch timeout, or when the cloud has no capacity or its node class is
    /// not ready; otherwise launched, or backed off after a failure. `Some` when the pass ends
    /// here.
    pub(super) async fn advance_launch(
        &self,
        claim: &NodeClaim,
        status: &mut NodeClaimStatus,
        conds: &mut Vec<Condition>,
        now: Timestamp,
    ) -> Result<Option<Outcome>, WriteError> {
        let name = claim.metadata.name.clone().unwrap_or_default();
        let created = claim
            .metadata
            .creation_timestamp
            .as_ref()
            .map(from_time)
            .unwrap_or(now);
        if let Some(why) = (Phase::Launching { created }).timed_out(now) {
            info!(nodeclaim = %name, "launch timed out; deleting");
            self.writer.delete_nodeclaim(&name).await?;
            // The last launch error's reason, as upstream reports the failure.
            let reason = cond::find(conds, LAUNCHED)
                .and_then(|c| c.reason.clone())
                .filter(|r| !r.is_empty())
                .unwrap_or_else(|| "LaunchFailed".into());
            lock(&self.state).record_registration(claim, Err(reason));
            self.count_disrupted(claim, why.reason());
            return Ok(Some(Outcome::Deleted(why.reason())));
        }
        let uid = claim.metadata.uid.clone().unwrap_or_default();
        if self.backing_off(&uid, now) {
            return Ok(Some(Outcome::Unchanged));
        }
        match self.launch(claim).await {
            Ok(launched) => {
                self.backoff().remove(&uid);
                self.apply_launch(claim, &launched, status, conds, now)
                    .await?;
            }
            Err(e @ CloudError::InsufficientCapacity { .. }) => {
                info!(nodeclaim = %name, reason = %e, "insufficient capacity; deleting");
                self.events.publish(events::insufficient_capacity(
                    claim_ref(claim),
                    &e.to_string(),
                ));
                self.writer.delete_nodeclaim(&name).await?;
                self.count_disrupted(claim, "insufficient_capacity");
                return Ok(Some(Outcome::Deleted("insufficient_capacity")));
            }
            Err(e @ CloudError::NodeClassNotReady { .. }) => {
                self.events.publish(events::nodeclass_not_ready(
                    claim_ref(claim),
                    &e.to_string(),
                ));
                self.writer.delete_nodeclaim(&name).await?;
                self.count_disrupted(claim, "nodeclass_not_ready");
                return Ok(Some(Outcome::Deleted("nodeclass_not_ready")));
            }
            Err(e) => {
                let mut backoff = self.backoff();
                let failures = backoff.get(&uid).map_or(0, |b| b.0) + 1;
                let retry = now.plus(nodewright_core::lifecycle::launch_retry_after(failures));
                backoff.insert(uid, (failures, retry));
                drop(backoff);
                cond::set(
                    conds,
                    LAUNCHED,
                    "Unknown",
                    "LaunchFailed",
                    &e.to_string(),
                    now,
                );
            }
        }
        Ok(None)
    }

    pub(super) async fn launch(&self, claim: &NodeClaim) -> Result<Launched, CloudError> {
        let uid = claim.metadata.uid.clone().unwrap_or_default();
        if let Some(l) = self
            .launched
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&uid)
        {
            return Ok(l.clone());
        }
        let class = pool_class(&lock(&self.state), claim);
        let l = self.cloud.create(claim, class.as_ref()).await?;
        failpoint::reached(Failpoint::AfterLaunch);
        self.launched
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(uid, l.clone());
        Ok(l)
    }

    pub(super) async fn apply_launch(
        &self,
        claim: &NodeClaim,
        l: &Launched,
        status: &mut NodeClaimStatus,
        conds: &mut Vec<Condition>,
        now: Timestamp,
    ) -> Result<(), WriteError> {
        let name = claim.metadata.name.clone().unwrap_or_default();
        // Provider labels fill in; labels the claim already has win.
        let existing = claim.metadata.labels.clone().unwrap_or_default();
        let mut patch = MetaPatch::default();
        for (k, v) in &l.labels {
            if !existing.contains_key(k) {
                patch.labels.insert(k.clone(), Some(v.clone()));
            }
        }
        for (k, v) in [
            (labels::INSTANCE_TYPE, l.instance.instance_type.as_str()),
            (labels::ZONE, l.instance.zone.as_str()),
            (labels::CAPACITY_TYPE, l.instance.capacity_type.as_str()),
        ] {
            if !existing.contains_key(k) {
                patch.labels.insert(k.into(), Some(v.into()));
            }
        }
        // Provider annotations override the claim's (upstream assigns them last).
        let existing = claim.metadata.annotations.clone().unwrap_or_default();
        for (k, v) in &l.annotations {
            if existing.get(k) != Some(v) {
                patch.annotations.insert(k.clone(), Some(v.clone()));
            }
        }
        if !patch.is_empty() {
            self.writer.patch_nodeclaim_meta(&name, &patch).await?;
        }
        status.provider_id = Some(l.instance.provider_id.clone());
        status.image_id = l.instance.image_id.clone();
        status.capacity = Some(resource_list(&l.capacity));
        status.allocatable = Some(resource_list(&l.allocatable));
        cond::set(conds, LAUNCHED, "True", LAUNCHED, "", now);
        info!(nodeclaim = %name, provider_id = %l.instance.provider_id, instance_type = %l.instance.instance_type, "launched nodeclaim");
        Ok(())
    }
}
