//! Voluntary disruption: which nodes may be removed or replaced, and why the others may not.
//!
//! Planning is pure: it reads a [`crate::model::Snapshot`] and returns [`Command`]s
//! with a verdict for every node. Budgets, candidate filtering and cost formulas follow
//! Karpenter's rules; consolidation asks a [`simulate::Simulator`] where pods would go.
//!
//! Offers: a round ([`plan`]), the re-check before a command runs ([`validate`]), the
//! orchestration queue that carries commands out ([`queue`]), the commands themselves
//! ([`Command`] and its parts), the per-node rules a shell shows or acts on ([`candidates`],
//! [`drift`], [`allowed_disruptions`]), the scheduler-backed [`EngineSimulator`] and the
//! [`simulate`] seam for a shell's own, nodes held by running commands ([`InFlight`]), and for
//! benchmarks the generated clusters ([`mod@bench`]) and upstream's search ([`upstream`]).
//!
//! Not offered: the methods' internals (candidate ranking, cost formulas, the consolidation
//! searches, the saving bound, the scheduler replay), which stay private to the crate.

pub mod bench;
pub(crate) mod budgets;
pub mod candidates;
pub(crate) mod command;
pub(crate) mod consolidation;
pub(crate) mod cost;
pub mod drift;
pub(crate) mod duration;
pub(crate) mod engine_simulator;
pub(crate) mod in_flight;
mod node_memo;
pub mod plan;
pub mod queue;
pub(crate) mod replacement_requests;
pub(crate) mod saving_bound;
pub(crate) mod scheduler_replay;
pub mod simulate;
mod type_index;
pub mod upstream;
pub(crate) mod validate;

pub use budgets::{Allowance, allowed_disruptions};
pub use command::{Command, Decision, Method, Replacement, Target};
pub use consolidation::{BALANCED_THRESHOLD, BalancedScore, Features};
pub use engine_simulator::{EngineSimulator, warm};
pub use in_flight::{Applied, InFlight};
pub use replacement_requests::replacement_requests;
pub use validate::{Invalid, validate};
