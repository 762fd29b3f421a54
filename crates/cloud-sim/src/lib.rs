//! A cloud that lives in memory: instances launched from the embedded AWS catalog with
//! configurable delays and faults. In a real cluster it also plays the kubelet's part (as kwok
//! does), creating a Ready Node object for each instance and deleting it when the instance
//! terminates, reporting the pods bound to those Nodes Running and confirming their deletion,
//! so the whole controller runs on any API server without a cloud account.

mod cloud;
pub mod fleet;
pub mod hash;
pub mod kwok;
mod marked;
pub mod select;

pub use cloud::{
    SimCloud, SimCloudConfig, SimInstance, claim_requests, claim_requirements, parse_provider_id,
};
pub use fleet::{Fleet, FleetConfig, OfferingPattern};
