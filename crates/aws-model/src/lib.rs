//! EC2 instance-type facts → [`nodewright_core::model::InstanceType`], the way Karpenter's AWS
//! provider computes them: well-known labels, capacity, kubelet overhead, offerings and prices.
//!
//! This crate is pure data to model. The same [`InstanceTypeInfo`] is filled either from the
//! embedded catalog ([`catalog::embedded`], built from `data/aws/`) or, by the AWS provider, from
//! `DescribeInstanceTypes`; [`build_instance_type`] then applies the formulas. No AWS SDK, no I/O.
//!
//! The launch path's pure half lives here too: [`userdata`] writes each AMI family's user data,
//! [`ice`] remembers offerings EC2 could not fill, [`subnets`] picks a subnet per zone and
//! [`launch`] turns a NodeClaim's options into a CreateFleet request as plain data.

pub mod catalog;
pub mod class_input;
mod csv;
pub mod error;
pub mod ice;
pub mod info;
pub mod interruption;
pub mod launch;
pub mod nodeclass;
pub mod placement;
pub mod pricing;
pub mod repair;
pub mod requirements;
pub mod reservations;
pub mod resources;
pub mod settings;
pub mod subnets;
pub mod userdata;

mod build;

pub use build::{Zone, build_instance_type, build_offerings, capacity_types, nodeclass_compatible};
pub use catalog::Catalog;
pub use error::{BuildError, DataError};
pub use info::{Accelerator, Ebs, Gpu, InstanceTypeInfo, NeuronDevice};
pub use nodeclass::{AmiFamily, BlockDevice, EvictionSignal, NetworkInterface, NodeClassInput};
pub use pricing::{OnDemandPrices, PriceBook, SpotPrices, SpotSource};
pub use settings::Settings;
