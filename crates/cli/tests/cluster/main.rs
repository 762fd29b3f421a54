//! The end-to-end suite: nodewright against a real control plane (etcd, kube-apiserver,
//! kube-scheduler and kube-controller-manager built from upstream's modules by
//! `scripts/cluster`), one fresh control plane per test. Nodes come from the simulated cloud's
//! node agent or, for AWS, from moto instances turned into Nodes by the same kind of agent.
//! `scripts/test` runs it with `NODEWRIGHT_REQUIRE_CLUSTER=1`; a plain `cargo test` skips it.

// `tests/common`, shared with `observability.rs`, is outside this suite's directory, where
// only a path reaches.
#[path = "../common/mod.rs"]
mod common;
mod kit;

use common::parity;

#[cfg(feature = "aws")]
mod aws;
mod churn;
mod consistency;
mod crds;
mod disruption;
mod explain;
mod faults;
#[cfg(feature = "aws")]
mod gc;
#[cfg(feature = "aws")]
mod ha;
mod helm;
#[cfg(feature = "aws")]
mod install;
mod older_seeds;
mod repair;
mod scale;
mod seed_demo;
mod static_capacity;
mod viewer;
mod volumes;
mod webhook;
