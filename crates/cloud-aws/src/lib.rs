//! nodewright's AWS provider: resolves EC2NodeClasses (subnets, security groups, AMIs,
//! instance profiles), lists instance types with offerings and prices, and launches through
//! EC2, all through aws-sdk-rust.
//!
//! The formulas (capacity, overhead, labels, offerings, user data, fleet planning) live in the
//! pure `nodewright-aws-model` crate; this crate is the thin layer that fetches the facts and
//! feeds them in. Calls moto can serve go through the real SDK clients ([`AwsClients`]), so
//! tests exercise the same code as production; only what moto cannot serve (AWS's public SSM
//! parameters, real prices) sits behind narrow traits ([`Parameters`], [`PriceSource`]).

pub mod batcher;
pub mod clients;
pub mod cloud;
pub mod cluster;
pub mod drift;
pub mod error;
pub mod install;
pub mod instance_batch;
pub mod instance_types;
pub mod instances;
pub mod interruption;
pub mod launch;
pub mod nodeclass;
pub mod observe;
pub mod parameters;
pub mod pricing;
pub mod provider;
pub mod refresh;
pub mod registration;
pub mod tagging;
pub mod zonal_shift;

pub use clients::{AwsClients, ClientOptions, StaticCredentials, pricing_region, sdk_config};
pub use cloud::{AwsCloud, AwsCloudError, AwsSettings};
pub use error::AwsError;
pub use nodeclass::ResolvedNodeClass;
pub use parameters::{Parameters, SsmParameters};
pub use pricing::{OnDemandSource, PriceSource, Prices, PricingProvider};
