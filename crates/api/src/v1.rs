//! `karpenter.sh/v1`: NodePool and NodeClaim, the served and stored generation.

pub mod nodeclaim;
pub mod nodepool;
pub mod nodepool_hash;
pub mod shared;

pub use nodeclaim::{NodeClaim, NodeClaimSpec, NodeClaimStatus, ResourceRequirements};
pub use nodepool::{
    Budget, Disruption, NodeClaimTemplate, NodeClaimTemplateSpec, NodePool, NodePoolSpec,
    NodePoolStatus, TemplateMetadata,
};
pub use shared::{
    Condition, Extra, NillableDuration, NodeClassReference, NodeSelectorRequirementWithMinValues,
    Quantity, ResourceList, Taint,
};

/// `karpenter.sh/v1`.
pub const API_VERSION: &str = "karpenter.sh/v1";
/// The API group of NodePools and NodeClaims.
pub const GROUP: &str = "karpenter.sh";
