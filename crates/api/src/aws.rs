//! `karpenter.k8s.aws`: the EC2NodeClass (v1) and the generations it replaced (v1beta1
//! EC2NodeClass, v1alpha1 AWSNodeTemplate), their validation, conversion to v1 and CRD schema.

pub mod common;
pub mod convert;
pub mod crd;
pub mod parse;
pub mod rules;
pub mod v1;
pub mod v1alpha1;
pub mod v1beta1;
pub mod validate;

/// The API group of every type in this module.
pub const GROUP: &str = "karpenter.k8s.aws";
