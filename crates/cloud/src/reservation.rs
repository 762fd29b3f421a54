//! What a provider reports about one capacity reservation looked up by id, for the upkeep
//! that deletes claims in capacity blocks about to end.

use nodewright_core::time::Timestamp;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReservationEnd {
    pub id: String,
    /// A capacity block: its instances are reclaimed at `end`.
    pub capacity_block: bool,
    /// When the reservation ends; `None` for one without an end.
    pub end: Option<Timestamp>,
}
