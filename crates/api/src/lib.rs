//! The Kubernetes-facing API of nodewright.
//!
//! - typed Karpenter objects (`karpenter.sh/v1` NodePool and NodeClaim, `karpenter.k8s.aws/v1`
//!   EC2NodeClass, and the older generations for reading);
//! - validation with upstream's rules, reported as [`error::FieldError`]s;
//! - conversion of older generations to v1, and of API objects into `nodewright-core` types;
//! - the CRD schemas, built with [`schema`].
//!
//! Strings such as quantities are parsed here, once, so `core` only sees integers.

pub mod aws;
pub mod cluster;
pub mod conversion;
pub mod convert;
pub mod crd;
pub mod decode;
pub mod document;
pub mod error;
pub mod interchange;
pub mod object;
pub mod quantity;
pub mod schema;
pub mod stable_hash;
pub mod to_core;
pub mod v1;
pub mod v1alpha5;
pub mod v1beta1;
pub mod validation;
pub mod versions;
pub mod workload;
