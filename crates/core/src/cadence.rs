//! When the controller's loops act, as pure state machines driven by an explicit `now`.
//!
//! The controller feeds them wall-clock instants and the simulator feeds them virtual ones, so
//! both run the same provisioning and disruption cadence: the pod batcher (idle 1 s / max 10 s)
//! and the disruption loop (poll every 10 s, re-check a command 15 s after planning it, and loop
//! again at once after a command starts), and the "consolidated" marker that lets a round
//! skip the consolidation search while nothing changed.
//!
//! Offers the state machines only; the shells own the clock, the timers and what a round does.

pub(crate) mod batcher;
pub(crate) mod consolidated;
pub(crate) mod disruption;

pub use batcher::{Batch, BatchWindow, Batcher, POD_REQUEUE};
pub use consolidated::{ConsolidationState, plan_is_consolidated};
pub use disruption::{DisruptionCadence, DisruptionTimings, Due, Planned, Validated};
