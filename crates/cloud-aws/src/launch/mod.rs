//! Launching one instance for a NodeClaim: launch templates per resolved configuration,
//! a CreateFleet `instant` request over the allowed offerings, and fallback past offerings
//! that report insufficient capacity.

use nodewright_api::aws::v1::EC2NodeClass;
use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_cloud::{CloudError, Launched};

use crate::cloud::AwsCloud;

impl AwsCloud {
    /// Launches one instance for the claim (launch templates, CreateFleet, ICE fallback).
    pub async fn launch(
        &self,
        claim: &NodeClaim,
        class: Option<&EC2NodeClass>,
    ) -> Result<Launched, CloudError> {
        let _ = (claim, class);
        Err(CloudError::InvalidRequest("launch not built yet".into()))
    }
}
