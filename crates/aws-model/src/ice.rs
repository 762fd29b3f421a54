//! The unavailable-offerings cache: after CreateFleet reports insufficient capacity (ICE) for
//! an instance type in a zone, that offering is skipped for three minutes so the next launch
//! tries elsewhere. Time is passed in; nothing here reads a clock.

use std::collections::BTreeMap;
use std::time::Duration;

use nodewright_core::model::{CapacityType, InstanceType};
use nodewright_core::time::Timestamp;

/// How long a marked offering, capacity type or subnet stays unavailable.
pub const UNAVAILABLE_TTL: Duration = Duration::from_secs(3 * 60);

/// CreateFleet error codes that mean "this (capacity type, type, zone) cannot be had now".
pub const UNFULFILLABLE_CODES: &[&str] = &[
    "InsufficientInstanceCapacity",
    "MaxSpotInstanceCountExceeded",
    "VcpuLimitExceeded",
    "UnfulfillableCapacity",
    "Unsupported",
    "InsufficientFreeAddressesInSubnet",
    "MaxFleetCountExceeded",
    "ReservationCapacityExceeded",
];

/// Spot cannot be used at all until the spot service-linked role exists.
pub const SPOT_ROLE_MISSING_CODE: &str = "AuthFailure.ServiceLinkedRoleCreationNotPermitted";

const SUBNET_FULL_CODE: &str = "InsufficientFreeAddressesInSubnet";

/// Whether a CreateFleet error for a launch into a rack-spread placement group says the group
/// already holds its limit of instances (seven running per zone) in the override's zone.
/// EC2 reports this as a launch failure of the override; what sets it apart from an ordinary
/// capacity error is that its message names the placement group together with its limit.
pub fn is_spread_limit(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("placement group") && ["limit", "maximum", "seven"].iter().any(|w| m.contains(w))
}

/// `<capacityType>:<instanceType>:<zone>`.
pub fn offering_key(capacity_type: CapacityType, instance_type: &str, zone: &str) -> String {
    format!("{}:{instance_type}:{zone}", capacity_type.as_str())
}

/// [`offering_key`] inside a placement group: `...:<zone>:<group id>[:<partition>]` (the
/// scope from `LaunchPlacement::ice_scope`). Outside a group, the plain key.
pub fn scoped_offering_key(
    capacity_type: CapacityType,
    instance_type: &str,
    zone: &str,
    scope: Option<&str>,
) -> String {
    match scope {
        Some(s) => format!("{}:{s}", offering_key(capacity_type, instance_type, zone)),
        None => offering_key(capacity_type, instance_type, zone),
    }
}

/// One error CreateFleet returned for one override.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetError {
    pub code: String,
    pub capacity_type: CapacityType,
    pub instance_type: String,
    pub zone: String,
    pub subnet_id: Option<String>,
}

/// What an error marked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Marked {
    /// The offering (and, for a full subnet, the subnet too).
    Offering { key: String, subnet: Option<String> },
    /// Every offering of the capacity type.
    CapacityType(CapacityType),
    /// Not a capacity error: nothing is cached and the caller reports it.
    Nothing,
}

/// Marked entries with their expiry instants.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnavailableOfferings {
    offerings: BTreeMap<String, Timestamp>,
    capacity_types: BTreeMap<CapacityType, Timestamp>,
    subnets: BTreeMap<String, Timestamp>,
    /// `<group id>:<zone>` of spread groups that are full in a zone: every type and capacity
    /// type in that zone is out for launches into the group.
    group_zones: BTreeMap<String, Timestamp>,
    /// Bumped whenever an instance type's availability may have changed, so a cache of built
    /// offerings knows to rebuild.
    sequence: BTreeMap<String, u64>,
    /// Bumped by marks that touch every type (a whole capacity type).
    global_sequence: u64,
}

fn live(map_expiry: Option<&Timestamp>, now: Timestamp) -> bool {
    map_expiry.is_some_and(|&e| now < e)
}

impl UnavailableOfferings {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn mark_offering(
        &mut self,
        capacity_type: CapacityType,
        instance_type: &str,
        zone: &str,
        now: Timestamp,
    ) {
        self.mark_offering_in(capacity_type, instance_type, zone, None, now);
    }

    /// [`Self::mark_offering`] within a placement-group scope: the offering stays usable
    /// outside the group (and in the group's other partitions).
    pub fn mark_offering_in(
        &mut self,
        capacity_type: CapacityType,
        instance_type: &str,
        zone: &str,
        scope: Option<&str>,
        now: Timestamp,
    ) {
        self.offerings.insert(
            scoped_offering_key(capacity_type, instance_type, zone, scope),
            now.plus(UNAVAILABLE_TTL),
        );
        *self.sequence.entry(instance_type.to_string()).or_default() += 1;
    }

    /// Changes whenever `instance_type`'s offerings may have changed availability: compare
    /// with the value seen when the offerings were last built.
    pub fn sequence(&self, instance_type: &str) -> (u64, u64) {
        (
            self.global_sequence,
            self.sequence.get(instance_type).copied().unwrap_or(0),
        )
    }

    pub fn mark_capacity_type(&mut self, capacity_type: CapacityType, now: Timestamp) {
        self.capacity_types
            .insert(capacity_type, now.plus(UNAVAILABLE_TTL));
        self.global_sequence += 1;
    }

    /// Marks `zone` full for launches into the spread group `group_id` (any partition scope
    /// of the group is covered too), for every instance and capacity type.
    pub fn mark_group_zone(&mut self, group_id: &str, zone: &str, now: Timestamp) {
        self.group_zones
            .insert(format!("{group_id}:{zone}"), now.plus(UNAVAILABLE_TTL));
        self.global_sequence += 1;
    }

    /// Whether `zone` is marked full for launches in `scope` (a group id, or
    /// `<group id>:<partition>`).
    pub fn is_group_zone_full(&self, scope: Option<&str>, zone: &str, now: Timestamp) -> bool {
        let Some(group) = scope.and_then(|s| s.split(':').next()) else {
            return false;
        };
        live(self.group_zones.get(&format!("{group}:{zone}")), now)
    }

    pub fn mark_subnet(&mut self, subnet_id: &str, now: Timestamp) {
        self.subnets
            .insert(subnet_id.to_string(), now.plus(UNAVAILABLE_TTL));
    }

    /// Caches what a CreateFleet error says about capacity.
    pub fn record(&mut self, error: &FleetError, now: Timestamp) -> Marked {
        self.record_in(error, None, now)
    }

    /// [`Self::record`] for a launch into a placement group (`scope`): the offering is
    /// marked for that group only; a full subnet and a missing spot role still count for all.
    pub fn record_in(&mut self, error: &FleetError, scope: Option<&str>, now: Timestamp) -> Marked {
        if error.code == SPOT_ROLE_MISSING_CODE {
            self.mark_capacity_type(CapacityType::Spot, now);
            return Marked::CapacityType(CapacityType::Spot);
        }
        if !UNFULFILLABLE_CODES.contains(&error.code.as_str()) {
            return Marked::Nothing;
        }
        self.mark_offering_in(
            error.capacity_type,
            &error.instance_type,
            &error.zone,
            scope,
            now,
        );
        let subnet = error
            .subnet_id
            .clone()
            .filter(|_| error.code == SUBNET_FULL_CODE);
        if let Some(s) = &subnet {
            self.mark_subnet(s, now);
        }
        Marked::Offering {
            key: scoped_offering_key(
                error.capacity_type,
                &error.instance_type,
                &error.zone,
                scope,
            ),
            subnet,
        }
    }

    pub fn is_unavailable(
        &self,
        capacity_type: CapacityType,
        instance_type: &str,
        zone: &str,
        now: Timestamp,
    ) -> bool {
        self.is_unavailable_in(capacity_type, instance_type, zone, None, now)
    }

    /// Whether the offering is marked for launches in `scope` (see [`scoped_offering_key`]).
    pub fn is_unavailable_in(
        &self,
        capacity_type: CapacityType,
        instance_type: &str,
        zone: &str,
        scope: Option<&str>,
        now: Timestamp,
    ) -> bool {
        live(self.capacity_types.get(&capacity_type), now)
            || self.is_group_zone_full(scope, zone, now)
            || live(
                self.offerings.get(&scoped_offering_key(
                    capacity_type,
                    instance_type,
                    zone,
                    scope,
                )),
                now,
            )
    }

    pub fn is_subnet_unavailable(&self, subnet_id: &str, now: Timestamp) -> bool {
        live(self.subnets.get(subnet_id), now)
    }

    /// Drops expired entries (the periodic cleanup); lookups ignore them regardless.
    pub fn evict_expired(&mut self, now: Timestamp) {
        let mut expired_types = Vec::new();
        self.offerings.retain(|key, e| {
            let live = now < *e;
            if !live && let Some(ty) = key.split(':').nth(1) {
                expired_types.push(ty.to_string());
            }
            live
        });
        for ty in expired_types {
            *self.sequence.entry(ty).or_default() += 1;
        }
        let before = self.capacity_types.len();
        self.capacity_types.retain(|_, e| now < *e);
        if self.capacity_types.len() != before {
            self.global_sequence += 1;
        }
        self.subnets.retain(|_, e| now < *e);
        let before = self.group_zones.len();
        self.group_zones.retain(|_, e| now < *e);
        if self.group_zones.len() != before {
            self.global_sequence += 1;
        }
    }

    /// Live offering keys, sorted.
    pub fn offering_keys(&self, now: Timestamp) -> Vec<&str> {
        self.offerings
            .iter()
            .filter(|(_, e)| now < **e)
            .map(|(k, _)| k.as_str())
            .collect()
    }

    /// Sets `available = false` on every offering the cache holds.
    pub fn apply(&self, instance_types: &mut [InstanceType], now: Timestamp) {
        self.apply_in(instance_types, None, now);
    }

    /// [`Self::apply`] for a class launching into a placement group (`scope`).
    pub fn apply_in(
        &self,
        instance_types: &mut [InstanceType],
        scope: Option<&str>,
        now: Timestamp,
    ) {
        for it in instance_types {
            for o in &mut it.offerings {
                if self.is_unavailable_in(o.capacity_type, &it.name, &o.zone, scope, now) {
                    o.available = false;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
