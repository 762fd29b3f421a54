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
mod tests {
    use super::*;
    use nodewright_core::model::Offering;
    use nodewright_core::testkit::{instance_type, offering};

    fn it(name: &str, offerings: Vec<Offering>) -> InstanceType {
        instance_type(name, Default::default(), offerings)
    }

    fn err(code: &str, ct: CapacityType, ty: &str, zone: &str) -> FleetError {
        FleetError {
            code: code.into(),
            capacity_type: ct,
            instance_type: ty.into(),
            zone: zone.into(),
            subnet_id: Some("subnet-1".into()),
        }
    }

    const T0: Timestamp = Timestamp(1_000_000);

    #[test]
    fn capacity_errors_in_a_placement_group_stay_in_that_group() {
        let mut c = UnavailableOfferings::new();
        let e = err(
            "InsufficientInstanceCapacity",
            CapacityType::OnDemand,
            "p5.48xlarge",
            "us-east-1a",
        );
        let m = c.record_in(&e, Some("pg-1:2"), T0);
        assert_eq!(
            m,
            Marked::Offering {
                key: "on-demand:p5.48xlarge:us-east-1a:pg-1:2".into(),
                subnet: None
            }
        );
        let od = CapacityType::OnDemand;
        assert!(c.is_unavailable_in(od, "p5.48xlarge", "us-east-1a", Some("pg-1:2"), T0));
        assert!(!c.is_unavailable_in(od, "p5.48xlarge", "us-east-1a", Some("pg-1:3"), T0));
        assert!(!c.is_unavailable_in(od, "p5.48xlarge", "us-east-1a", Some("pg-2"), T0));
        assert!(!c.is_unavailable(od, "p5.48xlarge", "us-east-1a", T0));
        let mut types = vec![it("p5.48xlarge", vec![offering("us-east-1a", od, 98.0)])];
        c.apply_in(&mut types, Some("pg-1"), T0);
        assert!(
            types[0].offerings[0].available,
            "other partitions stay usable"
        );
        c.apply_in(&mut types, Some("pg-1:2"), T0);
        assert!(!types[0].offerings[0].available);
        // Expiry still bumps the type's sequence (the key's second field is the type).
        let before = c.sequence("p5.48xlarge");
        c.evict_expired(T0.plus(UNAVAILABLE_TTL));
        assert_ne!(c.sequence("p5.48xlarge"), before);
    }

    #[test]
    fn a_full_spread_group_zone_hides_every_type_there_for_that_group_only() {
        let mut c = UnavailableOfferings::new();
        let before = c.sequence("m5.large");
        c.mark_group_zone("pg-s", "us-east-1a", T0);
        assert_ne!(c.sequence("m5.large"), before, "every type must rebuild");
        let (od, spot) = (CapacityType::OnDemand, CapacityType::Spot);
        for (ct, ty) in [(od, "m5.large"), (spot, "c5.xlarge"), (od, "r6i.2xlarge")] {
            assert!(c.is_unavailable_in(ct, ty, "us-east-1a", Some("pg-s"), T0));
            assert!(!c.is_unavailable_in(ct, ty, "us-east-1b", Some("pg-s"), T0));
            assert!(!c.is_unavailable_in(ct, ty, "us-east-1a", Some("pg-other"), T0));
            assert!(!c.is_unavailable(ct, ty, "us-east-1a", T0));
        }
        let mut types = vec![it(
            "m5.large",
            vec![
                offering("us-east-1a", od, 0.1),
                offering("us-east-1b", od, 0.1),
            ],
        )];
        c.apply_in(&mut types, Some("pg-s"), T0);
        assert_eq!(
            types[0]
                .offerings
                .iter()
                .map(|o| o.available)
                .collect::<Vec<_>>(),
            vec![false, true]
        );
        let later = T0.plus(UNAVAILABLE_TTL);
        assert!(!c.is_unavailable_in(od, "m5.large", "us-east-1a", Some("pg-s"), later));
        let seen = c.sequence("m5.large");
        c.evict_expired(later);
        assert_ne!(c.sequence("m5.large"), seen, "expiry is a change too");
    }

    #[test]
    fn the_spread_limit_is_told_apart_from_plain_capacity_errors() {
        assert!(is_spread_limit(
            "You have reached the limit of instances in the spread placement group pg-1 in us-east-1a"
        ));
        assert!(is_spread_limit(
            "The maximum number of running instances for placement group 'db' has been reached."
        ));
        assert!(!is_spread_limit(
            "We currently do not have sufficient m5.large capacity in the Availability Zone you requested (us-east-1a)."
        ));
        assert!(!is_spread_limit(
            "You have requested more vCPU capacity than your current vCPU limit"
        ));
    }

    #[test]
    fn ice_marks_one_offering_for_three_minutes() {
        let mut c = UnavailableOfferings::new();
        let m = c.record(
            &err(
                "InsufficientInstanceCapacity",
                CapacityType::Spot,
                "m5.large",
                "us-east-1a",
            ),
            T0,
        );
        assert_eq!(
            m,
            Marked::Offering {
                key: "spot:m5.large:us-east-1a".into(),
                subnet: None
            }
        );
        assert!(c.is_unavailable(CapacityType::Spot, "m5.large", "us-east-1a", T0));
        assert!(!c.is_unavailable(CapacityType::OnDemand, "m5.large", "us-east-1a", T0));
        assert!(!c.is_unavailable(CapacityType::Spot, "m5.large", "us-east-1b", T0));
        assert!(!c.is_unavailable(CapacityType::Spot, "m5.xlarge", "us-east-1a", T0));
        let almost = T0.plus(UNAVAILABLE_TTL - Duration::from_millis(1));
        assert!(c.is_unavailable(CapacityType::Spot, "m5.large", "us-east-1a", almost));
        let expired = T0.plus(UNAVAILABLE_TTL);
        assert!(!c.is_unavailable(CapacityType::Spot, "m5.large", "us-east-1a", expired));
        assert_eq!(c.offering_keys(almost), vec!["spot:m5.large:us-east-1a"]);
        let seen = c.sequence("m5.large");
        assert_ne!(seen, UnavailableOfferings::new().sequence("m5.large"));
        assert_eq!(c.sequence("c5.large"), (0, 0));
        c.evict_expired(almost);
        assert_eq!(c.sequence("m5.large"), seen, "nothing expired yet");
        c.evict_expired(expired);
        assert!(c.offering_keys(almost).is_empty());
        assert_ne!(
            c.sequence("m5.large"),
            seen,
            "expiry changes availability too"
        );
    }

    #[test]
    fn every_unfulfillable_code_marks_and_others_do_not() {
        for code in UNFULFILLABLE_CODES {
            let mut c = UnavailableOfferings::new();
            assert!(matches!(
                c.record(&err(code, CapacityType::OnDemand, "c5.large", "z"), T0),
                Marked::Offering { .. }
            ));
            assert!(
                c.is_unavailable(CapacityType::OnDemand, "c5.large", "z", T0),
                "{code}"
            );
        }
        let mut c = UnavailableOfferings::new();
        for code in [
            "InvalidParameterValue",
            "RequestLimitExceeded",
            "UnauthorizedOperation",
        ] {
            assert_eq!(
                c.record(&err(code, CapacityType::OnDemand, "c5.large", "z"), T0),
                Marked::Nothing
            );
        }
        assert_eq!(c, UnavailableOfferings::new());
    }

    #[test]
    fn full_subnet_marks_subnet_too() {
        let mut c = UnavailableOfferings::new();
        let m = c.record(
            &err(SUBNET_FULL_CODE, CapacityType::OnDemand, "c5.large", "z"),
            T0,
        );
        assert_eq!(
            m,
            Marked::Offering {
                key: "on-demand:c5.large:z".into(),
                subnet: Some("subnet-1".into())
            }
        );
        assert!(c.is_subnet_unavailable("subnet-1", T0));
        assert!(!c.is_subnet_unavailable("subnet-1", T0.plus(UNAVAILABLE_TTL)));
    }

    #[test]
    fn missing_spot_role_marks_all_spot() {
        let mut c = UnavailableOfferings::new();
        let m = c.record(
            &err(SPOT_ROLE_MISSING_CODE, CapacityType::Spot, "m5.large", "a"),
            T0,
        );
        assert_eq!(m, Marked::CapacityType(CapacityType::Spot));
        assert_eq!(c.sequence("anything").0, 1);
        assert!(c.is_unavailable(CapacityType::Spot, "anything", "any-zone", T0));
        assert!(!c.is_unavailable(CapacityType::OnDemand, "anything", "any-zone", T0));
    }

    #[test]
    fn apply_turns_off_marked_offerings_and_cheapest_moves_on() {
        let mut types = vec![it(
            "m5.large",
            vec![
                offering("a", CapacityType::Spot, 0.03),
                offering("b", CapacityType::Spot, 0.04),
                offering("a", CapacityType::OnDemand, 0.096),
            ],
        )];
        let mut c = UnavailableOfferings::new();
        c.mark_offering(CapacityType::Spot, "m5.large", "a", T0);
        c.apply(&mut types, T0);
        let avail: Vec<bool> = types[0].offerings.iter().map(|o| o.available).collect();
        assert_eq!(avail, vec![false, true, true]);
        let next = types[0].cheapest_available().unwrap();
        assert_eq!((next.zone.as_str(), next.price), ("b", 0.04));
    }
}
