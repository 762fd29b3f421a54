//! What an ARC zonal shift means for the provider, as plain functions: which zones a
//! `GetManagedResource` answer shifts traffic away from, which offerings that closes, and
//! which terminations must wait.
//!
//! ARC names zones by id (`use1-az1`), the same physical zone in every account, while offerings
//! and provider ids name them by account-specific name (`us-east-1a`), so every answer goes
//! through the account's id → name mapping before it is used.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_arczonalshift::operation::get_managed_resource::GetManagedResourceOutput;
use aws_sdk_arczonalshift::types::{AppliedStatus, AutoshiftAppliedStatus};
use nodewright_core::model::InstanceType;

/// The zone ids traffic is shifted away from in `out` at `now_secs` (Unix seconds): zonal
/// shifts and autoshifts ARC reports as `APPLIED`. A shift ARC lists but does not apply (a
/// practice run or an autoshift outranked by another shift) moves no traffic, and a zonal
/// shift past its expiry is over even if the answer still lists it.
pub fn shifted_zone_ids(out: &GetManagedResourceOutput, now_secs: i64) -> BTreeSet<String> {
    let manual = out
        .zonal_shifts()
        .iter()
        .filter(|s| *s.applied_status() == AppliedStatus::Applied)
        .filter(|s| {
            // The SDK fills a missing expiry with the epoch; only a real one ends a shift.
            let expiry = s.expiry_time().secs();
            expiry <= 0 || expiry > now_secs
        })
        .map(|s| s.away_from());
    let auto = out
        .autoshifts()
        .iter()
        .filter(|s| *s.applied_status() == AutoshiftAppliedStatus::Applied)
        .map(|s| s.away_from());
    manual
        .chain(auto)
        .filter(|z| !z.is_empty())
        .map(str::to_string)
        .collect()
}

/// The zone names of `ids` under `names_by_id`, and the ids the mapping does not know (a zone
/// the account cannot see, or a mapping read before the zone existed).
pub fn zone_names(
    ids: &BTreeSet<String>,
    names_by_id: &BTreeMap<String, String>,
) -> (BTreeSet<String>, Vec<String>) {
    let mut names = BTreeSet::new();
    let mut unknown = Vec::new();
    for id in ids {
        match names_by_id.get(id) {
            Some(name) => {
                names.insert(name.clone());
            }
            None => unknown.push(id.clone()),
        }
    }
    (names, unknown)
}

/// Marks every offering in a `shifted` zone unavailable, reserved ones included: capacity
/// there may be fine, but traffic has been moved away and new nodes would only add to what
/// must move back.
pub fn close_shifted_offerings(types: &mut [InstanceType], shifted: &BTreeSet<String>) {
    if shifted.is_empty() {
        return;
    }
    for it in types {
        for o in &mut it.offerings {
            if shifted.contains(&o.zone) {
                o.available = false;
            }
        }
    }
}

/// The shifted zone an instance runs in, when its termination must wait: the zone is read
/// from the provider id (`aws:///<zone>/<instance id>`), so no EC2 call is needed to refuse.
/// A provider id of another shape is not refused here; the termination path reports it.
pub fn refused_termination<'a>(
    provider_id: &str,
    shifted: &'a BTreeSet<String>,
) -> Option<&'a str> {
    let zone = provider_id.strip_prefix("aws:///")?.split_once('/')?.0;
    shifted.get(zone).map(String::as_str)
}

#[cfg(test)]
mod tests;
