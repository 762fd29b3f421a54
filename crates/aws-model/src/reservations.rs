//! Capacity reservations an EC2NodeClass selects (`capacityReservationSelectorTerms`): which
//! ones count, the status entries they become, the `reserved` offerings they add to their
//! instance type, and how a launch targets one.
//!
//! A reserved offering is priced at the on-demand price divided by 10,000,000, as upstream does,
//! so it sorts before every on-demand and spot offering while keeping the types' relative order.

use std::collections::BTreeMap;

use nodewright_core::labels;
use nodewright_core::model::{CapacityType, InstanceType, Offering};
use nodewright_core::requirements::{Operator, Requirement};

/// Reserved offerings cost the on-demand price divided by this.
pub const RESERVED_PRICE_DIVISOR: f64 = 10_000_000.0;

/// `reservationType` of a reservation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum ReservationType {
    /// An On-Demand Capacity Reservation.
    #[default]
    Default,
    /// A Capacity Block for ML: launched with market type `capacity-block`.
    CapacityBlock,
}

impl ReservationType {
    pub fn as_str(self) -> &'static str {
        match self {
            ReservationType::Default => "default",
            ReservationType::CapacityBlock => "capacity-block",
        }
    }

    /// From EC2's `ReservationType` (`default`, `capacity-block`); anything else is default.
    pub fn parse(s: &str) -> Self {
        if s == "capacity-block" {
            ReservationType::CapacityBlock
        } else {
            ReservationType::Default
        }
    }
}

/// One capacity reservation as DescribeCapacityReservations reports it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CapacityReservation {
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    pub owner_id: String,
    /// `open` or `targeted`.
    pub instance_match_criteria: String,
    pub reservation_type: ReservationType,
    pub available_instance_count: u32,
    /// EC2's state (`active`, `expired`, `cancelled`, `pending`, `failed`, `scheduled` ...).
    pub state: String,
    /// RFC 3339, when the reservation ends on its own.
    pub end_time: Option<String>,
    pub tags: BTreeMap<String, String>,
}

impl CapacityReservation {
    /// Only active reservations can take instances.
    pub fn is_active(&self) -> bool {
        self.state == "active"
    }
}

/// One `capacityReservationSelectorTerms` entry: by id, or by tags (all must match) with an
/// optional owner and match criteria.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReservationTerm {
    pub id: Option<String>,
    pub owner_id: Option<String>,
    pub instance_match_criteria: Option<String>,
    pub tags: BTreeMap<String, String>,
}

impl ReservationTerm {
    /// Whether `r` matches this term. A tag value `*` only requires the key.
    pub fn matches(&self, r: &CapacityReservation) -> bool {
        if self.id.as_deref().is_some_and(|id| id != r.id) {
            return false;
        }
        if self.owner_id.as_deref().is_some_and(|o| o != r.owner_id) {
            return false;
        }
        if self
            .instance_match_criteria
            .as_deref()
            .is_some_and(|c| c != r.instance_match_criteria)
        {
            return false;
        }
        self.tags.iter().all(|(k, v)| match r.tags.get(k) {
            Some(have) => v == "*" || have == v,
            None => false,
        })
    }
}

/// The active reservations any term matches, each once, sorted by id.
pub fn select(
    terms: &[ReservationTerm],
    found: &[CapacityReservation],
) -> Vec<CapacityReservation> {
    let mut out: BTreeMap<String, CapacityReservation> = BTreeMap::new();
    for r in found {
        if r.is_active() && terms.iter().any(|t| t.matches(r)) {
            out.entry(r.id.clone()).or_insert_with(|| r.clone());
        }
    }
    out.into_values().collect()
}

/// Adds one `reserved` offering per reservation of each type, in the reservation's zone when
/// that zone is one the class can launch into (`zones`), priced from the type's on-demand
/// offering in that zone. A reservation with no free instance gives an unavailable offering.
pub fn add_reserved_offerings(
    types: &mut [InstanceType],
    reservations: &[CapacityReservation],
    zones: &[String],
) {
    for it in types.iter_mut() {
        let mut added = Vec::new();
        for r in reservations.iter().filter(|r| r.instance_type == it.name) {
            if !zones.contains(&r.zone) {
                continue;
            }
            let Some(od) = it
                .offerings
                .iter()
                .find(|o| o.capacity_type == CapacityType::OnDemand && o.zone == r.zone)
            else {
                continue;
            };
            added.push(Offering {
                zone: r.zone.clone(),
                capacity_type: CapacityType::Reserved,
                price: od.price / RESERVED_PRICE_DIVISOR,
                available: r.is_active() && r.available_instance_count > 0,
                reservation_id: Some(r.id.clone()),
                reservation_capacity: Some(r.available_instance_count),
            });
        }
        if added.is_empty() {
            continue;
        }
        it.offerings.extend(added);
        // The type's capacity-type label values gain `reserved`, so claims asking for it match.
        let reserved = CapacityType::Reserved.as_str();
        match it
            .requirements
            .iter_mut()
            .find(|r| r.key == labels::CAPACITY_TYPE && r.operator == Operator::In)
        {
            Some(r) if !r.values.iter().any(|v| v == reserved) => r.values.push(reserved.into()),
            Some(_) => {}
            None => it.requirements.push(Requirement::new(
                labels::CAPACITY_TYPE,
                Operator::In,
                &[reserved],
            )),
        }
    }
}

/// How a launch template asks for capacity when the class selects reservations (upstream's
/// targeted mode): reserved launches only into their reservation; others never into any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReservationTarget {
    /// `capacity-reservations-only`, targeting this reservation.
    Only {
        id: String,
        reservation_type: ReservationType,
    },
    /// `none`: on-demand and spot stay out of open reservations the class did not pick.
    None,
}

/// The template's reservation setting: nothing when the class selects no reservations (then
/// EC2's default, open matching, applies), else per capacity type.
pub fn target(
    class_selects_reservations: bool,
    capacity_type: CapacityType,
    reservation: Option<&CapacityReservation>,
) -> Option<ReservationTarget> {
    if !class_selects_reservations {
        return None;
    }
    match (capacity_type, reservation) {
        (CapacityType::Reserved, Some(r)) => Some(ReservationTarget::Only {
            id: r.id.clone(),
            reservation_type: r.reservation_type,
        }),
        _ => Some(ReservationTarget::None),
    }
}

/// CreateFleet's `DefaultTargetCapacityType` for a reserved launch: reservations hold
/// on-demand capacity; capacity blocks have their own.
pub fn fleet_target_capacity_type(reservation_type: ReservationType) -> &'static str {
    match reservation_type {
        ReservationType::Default => "on-demand",
        ReservationType::CapacityBlock => "capacity-block",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cr(id: &str, ty: &str, zone: &str, free: u32) -> CapacityReservation {
        CapacityReservation {
            id: id.into(),
            instance_type: ty.into(),
            zone: zone.into(),
            owner_id: "123456789012".into(),
            instance_match_criteria: "targeted".into(),
            available_instance_count: free,
            state: "active".into(),
            tags: [("team".to_string(), "ml".to_string())].into(),
            ..Default::default()
        }
    }

    fn it(name: &str, zones: &[&str], price: f64) -> InstanceType {
        InstanceType {
            name: name.into(),
            requirements: if name == "m5.large" {
                vec![Requirement::new(
                    labels::CAPACITY_TYPE,
                    Operator::In,
                    &["on-demand"],
                )]
            } else {
                Vec::new()
            },
            capacity: Default::default(),
            overhead: Default::default(),
            offerings: zones
                .iter()
                .map(|z| Offering {
                    zone: z.to_string(),
                    capacity_type: CapacityType::OnDemand,
                    price,
                    available: true,
                    reservation_id: None,
                    reservation_capacity: None,
                })
                .collect(),
        }
    }

    #[test]
    fn terms_select_by_id_tags_owner_and_criteria_active_only_once() {
        let mut expired = cr("cr-3", "m5.large", "a", 1);
        expired.state = "expired".into();
        let mut other_owner = cr("cr-2", "m5.large", "a", 1);
        other_owner.owner_id = "999999999999".into();
        let found = vec![cr("cr-1", "m5.large", "a", 2), other_owner, expired];
        let by_id = ReservationTerm {
            id: Some("cr-1".into()),
            ..Default::default()
        };
        let by_tags_and_owner = ReservationTerm {
            owner_id: Some("123456789012".into()),
            tags: [("team".to_string(), "*".to_string())].into(),
            ..Default::default()
        };
        let got = select(&[by_id.clone(), by_tags_and_owner], &found);
        let ids: Vec<&str> = got.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(
            ids,
            ["cr-1"],
            "owner filters cr-2, state filters cr-3, cr-1 once"
        );
        let open_only = ReservationTerm {
            instance_match_criteria: Some("open".into()),
            ..by_id
        };
        assert!(select(&[open_only], &found).is_empty());
        let wrong_tag = ReservationTerm {
            tags: [("team".to_string(), "web".to_string())].into(),
            ..Default::default()
        };
        assert!(select(&[wrong_tag], &found).is_empty());
    }

    #[test]
    fn reserved_offerings_in_class_zones_priced_below_everything() {
        let mut types = vec![
            it("m5.large", &["a", "b"], 0.096),
            it("c5.large", &["a"], 0.085),
        ];
        let rs = vec![
            cr("cr-a", "m5.large", "a", 3),
            cr("cr-full", "m5.large", "b", 0),
            cr("cr-z", "m5.large", "z", 5),
        ];
        add_reserved_offerings(&mut types, &rs, &["a".into(), "b".into()]);
        let reserved: Vec<&Offering> = types[0]
            .offerings
            .iter()
            .filter(|o| o.capacity_type == CapacityType::Reserved)
            .collect();
        assert_eq!(reserved.len(), 2, "zone z is not the class's");
        assert_eq!(reserved[0].reservation_id.as_deref(), Some("cr-a"));
        assert_eq!(reserved[0].reservation_capacity, Some(3));
        assert!(reserved[0].available);
        assert!((reserved[0].price - 0.096 / 1e7).abs() < 1e-15);
        assert!(!reserved[1].available, "no free instance");
        let ct = types[0]
            .requirements
            .iter()
            .find(|r| r.key == labels::CAPACITY_TYPE)
            .unwrap();
        assert_eq!(ct.values, ["on-demand", "reserved"]);
        assert!(
            types[1].requirements.is_empty(),
            "no reservation, no change"
        );
        assert!(
            types[1]
                .offerings
                .iter()
                .all(|o| o.capacity_type == CapacityType::OnDemand)
        );
    }

    #[test]
    fn targets_follow_the_mode_and_capacity_type() {
        let r = cr("cr-1", "m5.large", "a", 1);
        assert_eq!(target(false, CapacityType::Reserved, Some(&r)), None);
        assert_eq!(
            target(true, CapacityType::Reserved, Some(&r)),
            Some(ReservationTarget::Only {
                id: "cr-1".into(),
                reservation_type: ReservationType::Default
            })
        );
        assert_eq!(
            target(true, CapacityType::OnDemand, None),
            Some(ReservationTarget::None)
        );
        assert_eq!(
            fleet_target_capacity_type(ReservationType::Default),
            "on-demand"
        );
        assert_eq!(
            fleet_target_capacity_type(ReservationType::parse("capacity-block")),
            "capacity-block"
        );
    }
}
