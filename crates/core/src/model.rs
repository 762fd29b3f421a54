//! The snapshot a decision is made from, as plain data.
//!
//! These are the input types every shell builds (from the Kubernetes API, from a scenario file
//! or from the interchange format). They carry strings and integers only; the scheduler compiles
//! them into its own interned form.
//!
//! Offers plain data with public fields; no parsing (the `api` crate converts Kubernetes objects)
//! and no scheduling state.

mod instance_type;
mod node;
mod nodepool;
mod pod;
mod snapshot;
mod storage;

pub use instance_type::*;
pub use node::*;
pub use nodepool::*;
pub use pod::*;
pub use snapshot::*;
pub use storage::*;
