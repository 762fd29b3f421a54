//! Liveness: a claim that has not registered within the timeout of its launch is deleted
//! (upstream's liveness controller), so its pods go to a node that works. The rule is core's
//! [`Phase::timed_out`], which the simulator runs too.

use super::*;

impl Lifecycle {
    /// Deletes the claim once it has stayed unregistered for [`nodewright_core::lifecycle::REGISTRATION_TIMEOUT`] since
    /// its launch.
    pub(super) async fn registration_timed_out(
        &self,
        claim: &NodeClaim,
        conds: &[Condition],
        now: Timestamp,
    ) -> Result<Option<Outcome>, WriteError> {
        let launched_at = cond::find(conds, LAUNCHED)
            .and_then(|c| c.last_transition_time.as_deref())
            .and_then(parse_rfc3339)
            .unwrap_or(now);
        let phase = Phase::Registering {
            launched: launched_at,
        };
        let Some(why) = phase.timed_out(now) else {
            return Ok(None);
        };
        let name = claim.metadata.name.clone().unwrap_or_default();
        info!(nodeclaim = %name, "registration timed out; deleting");
        self.writer.delete_nodeclaim(&name).await?;
        lock(&self.state).record_registration(claim, Err("RegistrationFailed".into()));
        self.count_disrupted(claim, why.reason());
        Ok(Some(Outcome::Deleted(why.reason())))
    }
}
