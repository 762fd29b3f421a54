//! The pure domain of nodewright.
//!
//! Everything here is a function of its inputs: the same snapshot and settings give the same
//! answer, byte for byte. There is no I/O, no clock (time is a field of the snapshot), no async
//! runtime and no serialisation framework. The shells (`api`, `controller`, `sim`, `cli`) turn
//! the outside world into these types and act on what comes back.
//!
//! The API is what each public module's root exports, and nothing deeper: [`model`] (the
//! input), [`scheduling`] (`solve`, `explain`), [`disruption`] (a round, `validate`, the
//! orchestration `queue`), [`cadence`] and [`lifecycle`] (when the shells act), [`repair`],
//! [`static_capacity`] and [`registration_health`] (decisions of their own loops), the matching
//! rules ([`labels`], [`requirements`], [`taints`], [`selector`], [`resources`]), [`time`],
//! [`rng`], [`interruption`], and [`mod@bench`] for the benchmarks. The scheduler's pipeline, the
//! disruption methods' internals and the calendar behind budget schedules are private.

#![warn(missing_docs)]

pub mod bench;
pub mod cadence;
pub(crate) mod calendar;
pub(crate) mod cron;
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
