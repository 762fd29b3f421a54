//! Test data shared by nodewright's crates, as plain `serde_json::Value`s so that any crate (and
//! any test harness, the real-apiserver suite included) can use it without depending on
//! nodewright's types: valid Karpenter objects, one invalid object per validation rule with the
//! exact errors `validate` reports for it, and builders many tests repeat (Kubernetes objects in
//! [`k8s`], NodeClaims in [`nodeclaim`]), and the fuzz targets' generator ([`fuzz`]). Builders of
//! core's own types are `core::testkit`. With the `api-server` feature, `api_server` is a
//! Kubernetes API server stand-in for the tests of kube clients.
//!
//! Used only as a dev-dependency; every function is deterministic but [`port::free_port`] and
//! the API server's.

#[cfg(feature = "api-server")]
pub mod api_server;
pub mod fuzz;
pub mod invalid;
pub mod json;
pub mod k8s;
pub mod nodeclaim;
pub mod port;
pub mod valid;
