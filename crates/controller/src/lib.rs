//! The imperative shell around `nodewright-core`: it watches the cluster into a synchronous
//! index, hands snapshots to the pure engine, and applies the resulting commands through a
//! narrow write interface (a kube-rs implementation for real clusters, an in-memory one for
//! tests). Only the lease holder writes.

pub mod claims;
pub mod clock;
pub mod cloud_metrics;
pub mod conditions;
pub mod consistency;
pub mod context;
pub mod disruption;
pub mod events;
pub mod failpoint;
pub mod faults;
pub mod gc;
pub use nodewright_api::v1::nodepool_hash as hash;
pub mod health;
pub mod interruption;
pub mod leader;
pub mod lifecycle;
pub mod logging;
pub mod memory;
pub mod metered;
pub mod metrics;
pub mod permissions;
pub mod podevents;
pub mod pool_kubelet;
pub mod provisioner;
pub mod repair;
pub mod run;
pub mod settings;
pub mod state;
pub mod static_capacity;
pub mod status;
pub mod supervise;
pub mod tagging;
pub mod termination;
#[cfg(test)]
mod tests;
pub mod throttle;
pub mod watch;
pub mod webhook;
pub mod write;
pub mod zonalshift;
