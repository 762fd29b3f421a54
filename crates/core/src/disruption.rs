//! Voluntary disruption: which nodes may be removed or replaced, and why the others may not.
//!
//! Planning is pure: it reads a [`crate::model::Snapshot`] and returns decisions with
//! reasons. Budgets, candidate filtering and cost formulas follow Karpenter's rules.

pub mod budgets;
pub mod candidates;
pub mod cost;
pub mod duration;
