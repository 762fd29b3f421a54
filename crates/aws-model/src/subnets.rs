//! Which subnet a launch uses in each zone: the one with the most free addresses, leaving out
//! subnets the unavailable-offerings cache marked full. A zone whose subnets are all marked has
//! no subnet, so its offerings cannot be launched.
//!
//! Free-address counts come from `DescribeSubnets`, which lags behind launches: a burst of
//! launches would all pick the same subnet until the next count. [`InflightAddresses`] keeps
//! a prediction instead. Each launch deducts, from the subnet chosen in each zone, the fewest
//! pods any of its instance types in that zone can run (each pod takes an address); once
//! CreateFleet answers, what was deducted from subnets the fleet did not launch into is given
//! back. A fresh count replaces the prediction, and a count older than
//! [`ADDRESS_COUNT_TTL`] is no longer trusted.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use nodewright_core::model::{CapacityType, InstanceType};
use nodewright_core::resources::PODS;
use nodewright_core::time::Timestamp;

use crate::ice::UnavailableOfferings;

/// How long a subnet's counted free addresses, and the predictions made against the count,
/// are used.
pub const ADDRESS_COUNT_TTL: Duration = Duration::from_secs(5 * 60);

/// A subnet from the NodeClass's status, with its free-address count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubnetInfo {
    pub id: String,
    pub zone: String,
    pub available_ips: u64,
}

/// Zone → chosen subnet id from the counts alone. Ties go to the lower subnet id so the
/// choice is stable.
pub fn zonal_subnets(
    subnets: &[SubnetInfo],
    unavailable: &UnavailableOfferings,
    now: Timestamp,
) -> BTreeMap<String, String> {
    InflightAddresses::new().zonal_subnets(subnets, unavailable, now)
}

/// The addresses one launch in `zone` is expected to take: the smallest `pods` capacity among
/// `types` with an available `capacity_type` offering there (0 when none has one). Using the
/// smallest keeps the prediction from overstating what EC2 may launch.
pub fn predicted_usage(types: &[InstanceType], capacity_type: CapacityType, zone: &str) -> u64 {
    types
        .iter()
        .filter(|it| {
            it.offerings
                .iter()
                .any(|o| o.available && o.capacity_type == capacity_type && o.zone == zone)
        })
        .map(|it| it.capacity.get(PODS).max(0) as u64)
        .min()
        .unwrap_or(0)
}

/// A subnet's last count and what launches since are predicted to have taken from it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Tracked {
    counted_at: Timestamp,
    /// Bumped by every count, so a deduction made against an older count is not given back
    /// to a newer one.
    generation: u64,
    /// The count less outstanding predictions; below zero when launches outran it.
    free: i64,
}

/// What one launch deducted: (subnet id, generation of its count, addresses).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Deduction {
    entries: Vec<(String, u64, u64)>,
}

impl Deduction {
    /// The subnets deducted from, with the addresses taken from each.
    pub fn subnets(&self) -> impl Iterator<Item = (&str, u64)> {
        self.entries.iter().map(|(id, _, n)| (id.as_str(), *n))
    }
}

/// Free addresses per subnet as predicted since the last `DescribeSubnets`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InflightAddresses {
    tracked: BTreeMap<String, Tracked>,
    generations: BTreeMap<String, u64>,
}

impl InflightAddresses {
    pub fn new() -> Self {
        Self::default()
    }

    /// Fresh counts for `subnets`: their predictions start over from these numbers.
    pub fn refresh(&mut self, subnets: &[SubnetInfo], now: Timestamp) {
        for s in subnets {
            let generation = self.generations.entry(s.id.clone()).or_insert(0);
            *generation += 1;
            self.tracked.insert(
                s.id.clone(),
                Tracked {
                    counted_at: now,
                    generation: *generation,
                    free: s.available_ips.min(i64::MAX as u64) as i64,
                },
            );
        }
        self.forget_expired(now);
    }

    fn forget_expired(&mut self, now: Timestamp) {
        self.tracked
            .retain(|_, t| now.since(t.counted_at) < ADDRESS_COUNT_TTL);
    }

    fn current(&self, id: &str, now: Timestamp) -> Option<&Tracked> {
        self.tracked
            .get(id)
            .filter(|t| now.since(t.counted_at) < ADDRESS_COUNT_TTL)
    }

    /// The subnet's predicted free addresses: the tracked prediction while its count is
    /// current, else the count `s` carries.
    pub fn free(&self, s: &SubnetInfo, now: Timestamp) -> i64 {
        self.current(&s.id, now)
            .map_or(s.available_ips.min(i64::MAX as u64) as i64, |t| t.free)
    }

    /// Zone → the subnet with the most predicted free addresses that is not marked full.
    /// Ties go to the lower subnet id.
    pub fn zonal_subnets(
        &self,
        subnets: &[SubnetInfo],
        unavailable: &UnavailableOfferings,
        now: Timestamp,
    ) -> BTreeMap<String, String> {
        let mut best: BTreeMap<&str, (i64, &str)> = BTreeMap::new();
        for s in subnets
            .iter()
            .filter(|s| !unavailable.is_subnet_unavailable(&s.id, now))
        {
            let free = self.free(s, now);
            let better = best
                .get(s.zone.as_str())
                .is_none_or(|&(f, id)| free > f || (free == f && s.id.as_str() < id));
            if better {
                best.insert(&s.zone, (free, &s.id));
            }
        }
        best.into_iter()
            .map(|(zone, (_, id))| (zone.to_string(), id.to_string()))
            .collect()
    }

    /// Deducts `predicted` (zone → addresses) from the subnet `chosen` for each zone, before
    /// CreateFleet, so launches running alongside see it. `subnets` supplies the count of a
    /// subnet not tracked yet.
    pub fn deduct(
        &mut self,
        subnets: &[SubnetInfo],
        chosen: &BTreeMap<String, String>,
        predicted: &BTreeMap<String, u64>,
        now: Timestamp,
    ) -> Deduction {
        self.forget_expired(now);
        let mut out = Deduction::default();
        for (zone, id) in chosen {
            let n = predicted.get(zone).copied().unwrap_or(0);
            if n == 0 {
                continue;
            }
            if !self.tracked.contains_key(id) {
                let Some(s) = subnets.iter().find(|s| &s.id == id) else {
                    continue;
                };
                self.refresh(std::slice::from_ref(s), now);
            }
            let Some(t) = self.tracked.get_mut(id) else {
                continue;
            };
            t.free = t.free.saturating_sub(n.min(i64::MAX as u64) as i64);
            out.entries.push((id.clone(), t.generation, n));
        }
        out
    }

    /// After CreateFleet: gives back what `deduction` took from subnets the fleet launched
    /// nothing into (all of them when the call failed), unless a newer count replaced the one
    /// it was taken from.
    pub fn settle(&mut self, deduction: &Deduction, launched_into: &BTreeSet<String>) {
        for (id, generation, n) in &deduction.entries {
            if launched_into.contains(id) {
                continue;
            }
            if let Some(t) = self
                .tracked
                .get_mut(id)
                .filter(|t| t.generation == *generation)
            {
                t.free = t.free.saturating_add(*n as i64);
            }
        }
    }
}

#[cfg(test)]
mod tests;
