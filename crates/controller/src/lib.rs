//! The imperative shell around `nodewright-core`: it watches the cluster into a synchronous
//! index, hands snapshots to the pure engine, and applies the resulting commands through a
//! narrow write interface (a kube-rs implementation for real clusters, an in-memory one for
//! tests). Only the lease holder writes.

pub mod events;
pub mod health;
pub mod leader;
pub mod logging;
pub mod metrics;
pub mod settings;

#[cfg(test)]
mod fake_api;
