//! Voluntary disruption: which nodes may be removed or replaced, and why the others may not.
//!
//! Planning is pure: it reads a [`crate::model::Snapshot`] and returns [`command::Command`]s
//! with a verdict for every node. Budgets, candidate filtering and cost formulas follow
//! Karpenter's rules; consolidation asks a [`simulate::Simulator`] where pods would go.

pub mod bench;
pub mod budgets;
pub mod candidates;
pub mod command;
pub mod consolidation;
pub mod cost;
pub mod drift;
pub mod duration;
pub mod engine_simulator;
pub mod in_flight;
mod node_memo;
pub mod plan;
pub mod queue;
pub mod replacement_requests;
pub(crate) mod saving_bound;
pub(crate) mod scheduler_replay;
pub mod simulate;
mod type_index;
pub mod upstream;
pub mod validate;
