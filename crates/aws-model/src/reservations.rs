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

/// A capacity block is "expiring" this long before its end: EC2 reclaims the instances at the
/// end, so nothing new launches into it and its nodes are drained ahead of time.
pub const CAPACITY_BLOCK_EXPIRING_WINDOW_SECS: i64 = 40 * 60;

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
    /// The same end, as seconds since the Unix epoch.
    pub end_unix: Option<i64>,
    /// An interruptible reservation: EC2 may take its instances back.
    pub interruptible: bool,
    pub tags: BTreeMap<String, String>,
}

impl CapacityReservation {
    /// Only active reservations can take instances.
    pub fn is_active(&self) -> bool {
        self.state == "active"
    }

    /// A capacity block within [`CAPACITY_BLOCK_EXPIRING_WINDOW_SECS`] of its end (or past it)
    /// at `now_unix`. Other reservations do not expire this way.
    pub fn is_expiring(&self, now_unix: i64) -> bool {
        self.reservation_type == ReservationType::CapacityBlock
            && self
                .end_unix
                .is_some_and(|end| end - now_unix <= CAPACITY_BLOCK_EXPIRING_WINDOW_SECS)
    }

    /// The status `state`: `expiring` for an expiring capacity block, else `active`.
    pub fn status_state(&self, now_unix: i64) -> &'static str {
        if self.is_expiring(now_unix) {
            "expiring"
        } else {
            "active"
        }
    }

    /// Whether a launch may go into it at `now_unix`: active, not expiring, one free instance.
    pub fn can_launch(&self, now_unix: i64) -> bool {
        self.is_active() && !self.is_expiring(now_unix) && self.available_instance_count > 0
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
/// offering in that zone. A reservation with no free instance, or an expiring capacity block
/// (at `now_unix`), gives an unavailable offering.
pub fn add_reserved_offerings(
    types: &mut [InstanceType],
    reservations: &[CapacityReservation],
    zones: &[String],
    now_unix: i64,
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
                // The type must suit the class too, as its on-demand offering says.
                available: od.available && r.can_launch(now_unix),
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
            Some(r) if !r.values.iter().any(|v| v == reserved) => {
                r.values = r.values.iter().cloned().chain([reserved.into()]).collect()
            }
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
        interruptible: bool,
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
            interruptible: r.interruptible,
        }),
        _ => Some(ReservationTarget::None),
    }
}

/// CreateFleet's `DefaultTargetCapacityType` for a reserved launch: reservations hold
/// on-demand capacity; capacity blocks have their own; interruptible reservations are
/// `reserved-capacity`, named in the fleet's `ReservedCapacityOptions`.
pub fn fleet_target_capacity_type(
    reservation_type: ReservationType,
    interruptible: bool,
) -> &'static str {
    match (reservation_type, interruptible) {
        (ReservationType::CapacityBlock, _) => "capacity-block",
        (ReservationType::Default, true) => "reserved-capacity",
        (ReservationType::Default, false) => "on-demand",
    }
}

/// The kind of a reservation as a launch sees it: each kind needs its own launch settings
/// (market type, fleet target), so one launch uses one kind.
fn kind(r: &CapacityReservation) -> (u8, ReservationType, bool) {
    // Plain reservations first, then interruptible ones, then capacity blocks: a block is
    // time-bound and prepaid per block, so it is used when nothing else holds capacity.
    let rank = match (r.reservation_type, r.interruptible) {
        (ReservationType::Default, false) => 0,
        (ReservationType::Default, true) => 1,
        (ReservationType::CapacityBlock, _) => 2,
    };
    (rank, r.reservation_type, r.interruptible)
}

/// Narrows the reserved offerings of `types` that the launch can use (`can_use`: the claim's
/// requirements, requests and zones) to what one launch may mix, as upstream's launch filters
/// do: a single kind of reservation (see [`kind`]), and for capacity blocks a single block, the
/// cheapest (then lowest id). Other reserved offerings are made unavailable; on-demand and
/// spot offerings are untouched.
pub fn narrow_reserved_for_launch(
    types: &mut [InstanceType],
    reservations: &[CapacityReservation],
    can_use: impl Fn(&InstanceType, &Offering) -> bool,
) {
    let by_id: BTreeMap<&str, &CapacityReservation> =
        reservations.iter().map(|r| (r.id.as_str(), r)).collect();
    let mut usable_ids: std::collections::BTreeSet<String> = Default::default();
    for it in types.iter() {
        for o in &it.offerings {
            if o.capacity_type == CapacityType::Reserved && can_use(it, o) {
                usable_ids.extend(o.reservation_id.clone());
            }
        }
    }
    let usable = |o: &Offering| {
        o.available
            && o.capacity_type == CapacityType::Reserved
            && o.reservation_id
                .as_ref()
                .is_some_and(|id| usable_ids.contains(id))
    };
    let reservation_of = |o: &Offering| {
        o.reservation_id
            .as_deref()
            .and_then(|id| by_id.get(id).copied())
    };
    let Some(chosen) = types
        .iter()
        .flat_map(|it| &it.offerings)
        .filter(|o| usable(o))
        .filter_map(|o| reservation_of(o).map(kind))
        .min()
    else {
        return;
    };
    let block = (chosen.1 == ReservationType::CapacityBlock)
        .then(|| {
            types
                .iter()
                .flat_map(|it| &it.offerings)
                .filter(|o| usable(o) && reservation_of(o).map(kind) == Some(chosen))
                .min_by(|a, b| {
                    a.price
                        .total_cmp(&b.price)
                        .then_with(|| a.reservation_id.cmp(&b.reservation_id))
                })
                .and_then(|o| o.reservation_id.clone())
        })
        .flatten();
    for o in types.iter_mut().flat_map(|it| it.offerings.iter_mut()) {
        if !usable(o) {
            continue;
        }
        let keep = reservation_of(o).map(kind) == Some(chosen)
            && block
                .as_ref()
                .is_none_or(|b| o.reservation_id.as_ref() == Some(b));
        if !keep {
            o.available = false;
        }
    }
}

/// What the provider knows about each reservation between two DescribeCapacityReservations
/// calls: the last reported state, with the free-instance count adjusted by what happened
/// since. Upstream keeps the same books: a launch takes one instance, a termination gives one
/// back, and a launch EC2 refused for lack of reserved capacity empties it, so the scheduler
/// stops planning into a reservation that is used up before EC2 is asked again.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReservationLedger {
    known: BTreeMap<String, CapacityReservation>,
}

impl ReservationLedger {
    pub fn new() -> Self {
        ReservationLedger::default()
    }

    /// Takes EC2's fresh word for these reservations, replacing any adjusted counts.
    pub fn observe(&mut self, reservations: &[CapacityReservation]) {
        for r in reservations {
            self.known.insert(r.id.clone(), r.clone());
        }
    }

    /// The known reservations among `ids`, with their current counts, sorted by id. Ids never
    /// observed are left out: nothing can be said about their capacity yet.
    pub fn current<'a>(&self, ids: impl IntoIterator<Item = &'a str>) -> Vec<CapacityReservation> {
        let mut out: Vec<CapacityReservation> = ids
            .into_iter()
            .filter_map(|id| self.known.get(id).cloned())
            .collect();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        out.dedup_by(|a, b| a.id == b.id);
        out
    }

    /// The free count of `id`, if known.
    pub fn free(&self, id: &str) -> Option<u32> {
        self.known.get(id).map(|r| r.available_instance_count)
    }

    /// One instance launched into `id`.
    pub fn launched(&mut self, id: &str) {
        if let Some(r) = self.known.get_mut(id) {
            r.available_instance_count = r.available_instance_count.saturating_sub(1);
        }
    }

    /// One instance of `id` terminated.
    pub fn released(&mut self, id: &str) {
        if let Some(r) = self.known.get_mut(id) {
            r.available_instance_count = r.available_instance_count.saturating_add(1);
        }
    }

    /// EC2 refused a launch into `id` for want of capacity: none is free until EC2 says so.
    pub fn exhausted(&mut self, id: &str) {
        if let Some(r) = self.known.get_mut(id) {
            r.available_instance_count = 0;
        }
    }

    /// Brings the reserved offerings of `types` up to date: each known reservation's offering
    /// gets the current free count, and becomes unavailable when no launch can go into it at
    /// `now_unix`. Nothing is made available here; other reasons for unavailability stand.
    pub fn restrict(&self, types: &mut [InstanceType], now_unix: i64) {
        for it in types.iter_mut() {
            for o in it
                .offerings
                .iter_mut()
                .filter(|o| o.capacity_type == CapacityType::Reserved)
            {
                let Some(r) = o
                    .reservation_id
                    .as_deref()
                    .and_then(|id| self.known.get(id))
                else {
                    continue;
                };
                o.reservation_capacity = Some(r.available_instance_count);
                if !r.can_launch(now_unix) {
                    o.available = false;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
