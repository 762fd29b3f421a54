//! The snapshot a decision is made from, as plain data.
//!
//! These are the input types every shell builds (from the Kubernetes API, from a scenario file
//! or from the interchange format). They carry strings and integers only; the scheduler compiles
//! them into its own interned form. What many objects hold alike (a pod's template, a
//! requirement's values) is behind an `Arc`, so a shell that keeps them can share one copy
//! ([`Shared`]).
//!
//! Offers plain data with public fields; no parsing (the `api` crate converts Kubernetes objects)
//! and no scheduling state.

mod instance_type;
mod node;
mod nodepool;
mod pod;
mod shared;
mod snapshot;
mod storage;

pub use instance_type::*;
pub use node::*;
pub use nodepool::*;
pub use pod::*;
pub use shared::*;
pub use snapshot::*;
pub use storage::*;
