//! The AWS calls behind zonal shifts: EKS `DescribeCluster` for the cluster's ARN (the
//! resource ARC knows the cluster by), ARC `GetManagedResource` for the shifts on it, and EC2
//! `DescribeAvailabilityZones` for the account's zone id → name mapping.

use std::collections::BTreeMap;

use aws_sdk_arczonalshift::operation::get_managed_resource::GetManagedResourceOutput;

use crate::AwsClients;
use crate::error::AwsError;

/// The error code ARC answers for a resource that is not registered with zonal shift (an EKS
/// cluster without zonal shift turned on): it cannot be shifted, so nothing is.
pub const NOT_REGISTERED: &str = "ResourceNotFoundException";

/// The ARN EKS reports for cluster `name`.
pub async fn cluster_arn(clients: &AwsClients, name: &str) -> Result<String, AwsError> {
    crate::cluster::describe_cluster(clients, name)
        .await?
        .arn
        .ok_or_else(|| {
            AwsError::new(
                "DescribeCluster",
                format!("EKS reported no ARN for cluster {name}"),
            )
        })
}

/// ARC's view of `resource`: the zonal shifts and autoshifts on it.
pub async fn managed_resource(
    clients: &AwsClients,
    resource: &str,
) -> Result<GetManagedResourceOutput, AwsError> {
    clients
        .arc
        .get_managed_resource()
        .resource_identifier(resource)
        .send()
        .await
        .map_err(|e| AwsError::from_sdk("GetManagedResource", e))
}

/// Every zone of the region the account sees, by id.
pub async fn zone_names_by_id(clients: &AwsClients) -> Result<BTreeMap<String, String>, AwsError> {
    let out = clients
        .ec2
        .describe_availability_zones()
        .send()
        .await
        .map_err(|e| AwsError::from_sdk("DescribeAvailabilityZones", e))?;
    Ok(out
        .availability_zones()
        .iter()
        .filter_map(|z| Some((z.zone_id()?.to_string(), z.zone_name()?.to_string())))
        .collect())
}
