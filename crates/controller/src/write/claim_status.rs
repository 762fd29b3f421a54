//! NodeClaim status writes that cannot undo each other.
//!
//! Several loops write a NodeClaim's status: the lifecycle (Launched, Registered,
//! Initialized, Ready, the instance's fields), drift (Drifted), disruption (DisruptionReason),
//! termination (InstanceTerminating). Each computes the new status from the copy of the claim
//! it read, and a merge patch replaces `conditions` whole, so a write computed from an older
//! copy would put back the conditions as that copy had them, dropping another loop's change.
//!
//! So every status write carries the `resourceVersion` of the copy it was computed from, and
//! the API server refuses it (409 Conflict) if the claim changed since, as upstream's
//! optimistic lock does. On a conflict the writer's own change (the fields and the conditions
//! that differ between its copy and its new status) is applied again to the claim as the
//! index now has it, and written against that version. The index may not have seen the
//! change yet: then the write waits a little for the watch. After [`ATTEMPTS`] conflicts the
//! error goes back to the loop, which tries again on its next pass.

use std::time::Duration;

use nodewright_api::v1::nodeclaim::{NodeClaim, NodeClaimStatus};
use nodewright_api::v1::shared::Condition;

use super::{KubeWriter, WriteError};
use crate::state::{SharedState, lock};

/// Writes tried before a conflict goes back to the caller.
pub const ATTEMPTS: usize = 5;
/// The wait for the watch to deliver the version that conflicted, doubled each time.
const WATCH_WAIT: Duration = Duration::from_millis(50);

/// Writes `status`, computed from `copy`, as the claim's status without undoing changes other
/// writers made since `copy` was read.
pub async fn write_status(
    writer: &dyn KubeWriter,
    state: &SharedState,
    copy: &NodeClaim,
    status: &NodeClaimStatus,
) -> Result<(), WriteError> {
    let name = copy.metadata.name.clone().unwrap_or_default();
    let before = copy.status.clone().unwrap_or_default();
    let mut version = copy.metadata.resource_version.clone();
    let mut next = status.clone();
    let mut attempt = 1;
    loop {
        let err = match writer
            .patch_nodeclaim_status(&name, &next, version.as_deref())
            .await
        {
            Err(e) if e.is_conflict() && attempt < ATTEMPTS => e,
            other => return other,
        };
        let Some(fresh) = newer(state, &name, version.as_deref()).await else {
            return Err(err);
        };
        next = rebase(&before, status, &fresh.status.clone().unwrap_or_default());
        version = fresh.metadata.resource_version;
        attempt += 1;
    }
}

/// The indexed claim `name` once its version is other than `version`, waiting for the watch
/// up to about three seconds; `None` if it is gone or the watch did not deliver in time.
async fn newer(state: &SharedState, name: &str, version: Option<&str>) -> Option<NodeClaim> {
    let mut wait = WATCH_WAIT;
    for _ in 0..6 {
        let current = NodeClaim::clone(lock(state).nodeclaims.get(name)?);
        if current.metadata.resource_version.as_deref() != version {
            return Some(current);
        }
        tokio::time::sleep(wait).await;
        wait *= 2;
    }
    None
}

/// `fresh` with the change a writer made from `before` to `after`: each field `after` sets
/// to something other than `before` had (a field `after` leaves out is left alone, as in a
/// merge patch), and each condition it set, changed or removed.
pub fn rebase(
    before: &NodeClaimStatus,
    after: &NodeClaimStatus,
    fresh: &NodeClaimStatus,
) -> NodeClaimStatus {
    fn field<T: Clone + PartialEq>(out: &mut Option<T>, before: &Option<T>, after: &Option<T>) {
        if after.is_some() && after != before {
            out.clone_from(after);
        }
    }
    let mut out = fresh.clone();
    field(&mut out.node_name, &before.node_name, &after.node_name);
    field(
        &mut out.provider_id,
        &before.provider_id,
        &after.provider_id,
    );
    field(&mut out.image_id, &before.image_id, &after.image_id);
    field(&mut out.capacity, &before.capacity, &after.capacity);
    field(
        &mut out.allocatable,
        &before.allocatable,
        &after.allocatable,
    );
    if let Some(mine) = &after.conditions {
        let had = before.conditions.as_deref().unwrap_or_default();
        let mut conds = fresh.conditions.clone().unwrap_or_default();
        for c in mine {
            if had.iter().any(|h| h == c) {
                continue;
            }
            match conds.iter_mut().find(|f| f.type_ == c.type_) {
                Some(f) => *f = c.clone(),
                None => conds.push(c.clone()),
            }
        }
        let removed = |f: &Condition| {
            had.iter().any(|h| h.type_ == f.type_) && !mine.iter().any(|m| m.type_ == f.type_)
        };
        conds.retain(|f| !removed(f));
        out.conditions = Some(conds);
    }
    out
}
