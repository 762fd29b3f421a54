//! ARC zonal shift (`ENABLE_ZONAL_SHIFT`): the zones Amazon Application Recovery Controller
//! currently shifts the cluster's traffic away from, as upstream's `zonalshift` controller
//! reads them. While a zone is shifted its offerings are unavailable for launches and its
//! instances are not terminated (their pods would be moved into the zones already taking the
//! shifted traffic, and the shift is meant to be temporary).
//!
//! The controller's leader asks for the shifts every 30 s through
//! [`AwsCloud::refresh_zonal_shifts`]. A failed call keeps the last known shifts, so a missing
//! permission or throttling neither blocks launches nor lifts a shift early. Without the
//! setting no ARC call is made and no zone is ever shifted.

pub mod arc;
pub mod shifts;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard};

use crate::cloud::{AwsCloud, now};
use crate::error::AwsError;

/// What the provider knows about zonal shifts between polls.
#[derive(Debug, Default)]
pub struct ZonalShifts {
    inner: Mutex<Known>,
}

#[derive(Debug, Default)]
struct Known {
    /// The cluster's ARN once EKS gave it; it never changes for a cluster.
    resource: Option<String>,
    names_by_id: BTreeMap<String, String>,
    /// Zone names, from the last answer ARC gave.
    shifted: BTreeSet<String>,
    /// Whether "not registered with ARC" was already logged at info.
    told_not_registered: bool,
}

impl ZonalShifts {
    fn known(&self) -> MutexGuard<'_, Known> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The zones shifted as of the last successful poll, by name.
    pub fn current(&self) -> BTreeSet<String> {
        self.known().shifted.clone()
    }
}

impl AwsCloud {
    /// Asks ARC which zones the cluster is shifted away from now and keeps the answer for
    /// launches and terminations. Returns the shifted zones by name. With zonal shift off it
    /// calls nothing and returns none. On an error the last known shifts stay in force.
    pub async fn refresh_zonal_shifts(&self) -> Result<BTreeSet<String>, AwsError> {
        if !self.settings.enable_zonal_shift {
            return Ok(BTreeSet::new());
        }
        let resource = self.zonal_shifts.known().resource.clone();
        let resource = match resource {
            Some(r) => r,
            None => {
                let r = arc::cluster_arn(&self.clients, &self.settings.cluster_name).await?;
                self.zonal_shifts.known().resource = Some(r.clone());
                r
            }
        };
        let ids = match arc::managed_resource(&self.clients, &resource).await {
            Ok(out) => shifts::shifted_zone_ids(&out, now().unix_seconds()),
            Err(e) if e.code.as_deref() == Some(arc::NOT_REGISTERED) => {
                let mut known = self.zonal_shifts.known();
                if !std::mem::replace(&mut known.told_not_registered, true) {
                    tracing::info!(resource = %resource, error = %e, "the cluster is not registered with ARC zonal shift; no zone is shifted");
                }
                known.shifted.clear();
                return Ok(BTreeSet::new());
            }
            Err(e) => return Err(e),
        };
        let mut names_by_id = self.zonal_shifts.known().names_by_id.clone();
        // Zones are asked for only when ARC names one not seen yet, so a quiet region costs
        // one ARC call per poll and nothing more.
        if ids.iter().any(|id| !names_by_id.contains_key(id)) {
            names_by_id = arc::zone_names_by_id(&self.clients).await?;
            self.zonal_shifts.known().names_by_id = names_by_id.clone();
        }
        let (names, unknown) = shifts::zone_names(&ids, &names_by_id);
        if !unknown.is_empty() {
            tracing::warn!(zone_ids = ?unknown, "ARC shifts traffic away from zones EC2 does not list for this account; ignoring them");
        }
        self.zonal_shifts.known().shifted = names.clone();
        Ok(names)
    }

    /// The zones shifted as of the last poll.
    pub fn shifted_zones(&self) -> BTreeSet<String> {
        self.zonal_shifts.current()
    }
}
