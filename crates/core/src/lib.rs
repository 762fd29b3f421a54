//! The pure domain of nodewright.
//!
//! Everything here is a function of its inputs: the same snapshot and settings give the same
//! answer, byte for byte. There is no I/O, no clock (time is a field of the snapshot), no async
//! runtime and no serialisation framework. The shells (`api`, `controller`, `sim`, `cli`) turn
//! the outside world into these types and act on what comes back.

pub mod bench;
pub mod cadence;
pub(crate) mod calendar;
pub mod cron;
pub mod disruption;
pub mod interruption;
pub mod labels;
pub mod lifecycle;
pub mod model;
pub mod registration_health;
pub mod repair;
pub mod requirements;
pub mod resources;
pub mod rng;
pub mod scheduling;
pub mod selector;
pub mod static_capacity;
pub mod taints;
#[cfg(any(test, feature = "testkit"))]
pub mod testkit;
pub mod time;
