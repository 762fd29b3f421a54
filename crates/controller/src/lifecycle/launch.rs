//! Launch: the cloud creates the instance once per claim (a retry finds the one it made),
//! and the claim's status takes its provider id, image, capacity and the `Launched` condition.

use super::*;
use crate::failpoint::{self, Failpoint};

impl Lifecycle {
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
