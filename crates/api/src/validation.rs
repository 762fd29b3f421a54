//! Upstream's validation rules, offline. Two layers, the same as on a real API server:
//! [`structural`] runs the published CRD schema (types, patterns, enums, bounds, defaults) and
//! the typed rules here mirror every CEL rule (same message text) plus Karpenter's runtime
//! checks (qualified names, known label values, duplicate taints, cron syntax).

pub mod cron;
pub mod labels;
pub mod nodeclaim;
pub mod nodepool;
pub mod shared;
pub mod structural;

pub use nodeclaim::{nodeclaim, nodeclaim_update};
pub use nodepool::{nodepool, nodepool_update};
