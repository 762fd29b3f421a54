//! The AWS registration hook: a claim launched into a partition placement group without a
//! pinned partition learns the partition EC2 chose from the instance, and carries it as the
//! `placement-group-partition` label on the claim and its Node, so topology spread over
//! partitions sees the node in its domain. Until EC2 reports the partition, registration waits.

use std::collections::BTreeMap;

use nodewright_api::aws::v1::PlacementGroupSelector;
use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_aws_model::placement::Strategy;
use nodewright_cloud::{CloudError, Registration};
use nodewright_core::labels::aws;

use crate::cloud::AwsCloud;
use crate::nodeclass::placement::instance_partition;

/// The group whose partition a claim still has to learn: it names a group and no partition.
pub fn unpinned_group(labels: &BTreeMap<String, String>) -> Option<&str> {
    if labels.contains_key(aws::PLACEMENT_GROUP_PARTITION) {
        return None;
    }
    labels
        .get(aws::PLACEMENT_GROUP_ID)
        .map(String::as_str)
        .filter(|g| !g.is_empty())
}

impl AwsCloud {
    /// Runs the partition hook for `claim` (see the module header).
    pub async fn partition_hook(&self, claim: &NodeClaim) -> Result<Registration, CloudError> {
        let labels = claim.metadata.labels.clone().unwrap_or_default();
        let Some(group_id) = unpinned_group(&labels) else {
            return Ok(Registration::done());
        };
        let selector = PlacementGroupSelector {
            id: Some(group_id.to_string()),
            ..Default::default()
        };
        // A group that no longer exists has no partitions to learn; a failed lookup is
        // retried on the next pass rather than registering the node without its partition.
        let group = self.placement_groups.get(&selector, false).await?;
        if group.is_none_or(|g| g.strategy != Strategy::Partition) {
            return Ok(Registration::done());
        }
        let Some(pid) = claim
            .status
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .filter(|p| !p.is_empty())
        else {
            return Ok(Registration::pending(
                "the instance has no provider id yet; its placement-group partition is unknown",
            ));
        };
        Ok(match instance_partition(&self.clients, pid).await? {
            Some(p) => {
                Registration::done().with_label(aws::PLACEMENT_GROUP_PARTITION, p.to_string())
            }
            None => Registration::pending(format!(
                "EC2 has not reported the partition of {pid} in placement group {group_id}"
            )),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn only_a_group_without_a_partition_needs_the_hook() {
        assert_eq!(
            unpinned_group(&labels(&[(aws::PLACEMENT_GROUP_ID, "pg-1")])),
            Some("pg-1")
        );
        assert_eq!(
            unpinned_group(&labels(&[
                (aws::PLACEMENT_GROUP_ID, "pg-1"),
                (aws::PLACEMENT_GROUP_PARTITION, "2")
            ])),
            None
        );
        assert_eq!(unpinned_group(&labels(&[])), None);
        assert_eq!(
            unpinned_group(&labels(&[(aws::PLACEMENT_GROUP_ID, "")])),
            None
        );
    }
}
