//! Test data shared by nodewright's crates, as plain `serde_json::Value`s so that any crate (and
//! any test harness, the real-apiserver suite included) can use it without depending on
//! nodewright's types: valid Karpenter objects, one invalid object per validation rule with the
//! exact errors `validate` reports for it, and builders many tests repeat (Kubernetes objects in
//! [`k8s`], NodeClaims in [`nodeclaim`]), and the fuzz targets' generator ([`fuzz`]). Builders of
//! core's own types are `core::testkit`.
//!
//! Used only as a dev-dependency; every function is deterministic but [`port::free_port`].

pub mod fuzz;
pub mod invalid;
pub mod json;
pub mod k8s;
pub mod nodeclaim;
pub mod port;
pub mod valid;
