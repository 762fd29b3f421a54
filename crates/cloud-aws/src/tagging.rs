//! Tags an instance once its claim has registered, as upstream's `nodeclaim.tagging`: `Name`
//! becomes the Node's name (known only now), and `karpenter.sh/nodeclaim` and
//! `eks:eks-cluster-name` are put back if they are missing (an instance launched before they
//! were set, or a batched launch whose own tags failed). Tags the instance already carries are
//! left alone, so a `Name` from the class's `spec.tags` survives. CreateTags shares EC2's
//! mutating-call budget with CreateFleet, so these calls go out at most once a second.
//!
//! The claim is then marked with [`TAGGED`] and [`CLUSTER_NAME_TAGGED`] (both `"true"`), which
//! upstream reads too, so a claim is tagged once whichever controller runs.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use aws_sdk_ec2::types::Tag;
use nodewright_cloud::{CloudError, RegisteredInstance, tags};
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::cloud::AwsCloud;
use crate::error::AwsError;
use crate::instances;

/// Set on a claim once its instance carries the registration tags.
pub const TAGGED: &str = "karpenter.k8s.aws/tagged";
/// Set with [`TAGGED`]; older releases tagged the cluster name separately and look for it.
pub const CLUSTER_NAME_TAGGED: &str = "compatibility.karpenter.k8s.aws/cluster-name-tagged";
/// The tag naming the EKS cluster.
pub const EKS_CLUSTER_NAME: &str = "eks:eks-cluster-name";

/// The claims whose instances are tagged: those of an EC2NodeClass.
pub const TAGGED_NODE_CLASSES: &[(&str, &str)] =
    &[(NODE_CLASS_GROUP, nodewright_api::aws::v1::KIND)];
/// The API group of EC2NodeClass.
pub const NODE_CLASS_GROUP: &str = "karpenter.k8s.aws";

/// The least time between two CreateTags calls of this kind.
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// The marker annotations of a tagged claim.
pub fn tagged_annotations() -> BTreeMap<String, String> {
    [TAGGED, CLUSTER_NAME_TAGGED]
        .into_iter()
        .map(|k| (k.to_string(), "true".to_string()))
        .collect()
}

/// The tags a registered claim's instance should carry.
pub fn registration_tags(instance: &RegisteredInstance, cluster: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (tags::NAME.to_string(), instance.node_name.clone()),
        (tags::NODECLAIM.to_string(), instance.nodeclaim.clone()),
        (EKS_CLUSTER_NAME.to_string(), cluster.to_string()),
    ])
}

/// `wanted` without the keys `present` already has, whatever their values.
pub fn missing_tags(
    wanted: BTreeMap<String, String>,
    present: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    wanted
        .into_iter()
        .filter(|(k, _)| !present.contains_key(k))
        .collect()
}

/// Lets one call through at a time, each at least [`MIN_INTERVAL`] after the previous one
/// finished.
#[derive(Default)]
pub struct Pacer {
    last: Mutex<Option<Instant>>,
}

impl Pacer {
    pub async fn run<T>(&self, call: impl Future<Output = T>) -> T {
        let mut last = self.last.lock().await;
        if let Some(t) = *last {
            tokio::time::sleep_until(t + MIN_INTERVAL).await;
        }
        let out = call.await;
        *last = Some(Instant::now());
        out
    }
}

impl AwsCloud {
    /// Tags the instance behind a registered claim (see the module header).
    pub async fn tag_registered_instance(
        &self,
        registered: &RegisteredInstance,
    ) -> Result<(), CloudError> {
        let current = instances::get(&self.instance_batchers, &registered.provider_id).await?;
        let tags = missing_tags(
            registration_tags(registered, &self.settings.cluster_name),
            &current.instance.tags,
        );
        if tags.is_empty() {
            return Ok(());
        }
        let id = instances::instance_id(&registered.provider_id)?;
        let mut req = self.clients.ec2.create_tags().resources(id);
        for (k, v) in &tags {
            req = req.tags(Tag::builder().key(k).value(v).build());
        }
        match self
            .tag_pacer
            .run(req.send())
            .await
            .map_err(|e| AwsError::from_sdk("CreateTags", e))
        {
            Ok(_) => {
                tracing::debug!(nodeclaim = %registered.nodeclaim, provider_id = %registered.provider_id, tags = ?tags.keys().collect::<Vec<_>>(), "tagged the instance after registration");
                Ok(())
            }
            Err(e) if e.is_not_found() => Err(CloudError::NotFound {
                provider_id: registered.provider_id.clone(),
            }),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registered() -> RegisteredInstance {
        RegisteredInstance {
            nodeclaim: "default-abc".into(),
            node_name: "ip-10-0-1-5.ec2.internal".into(),
            provider_id: "aws:///us-east-1a/i-1".into(),
        }
    }

    #[test]
    fn the_node_claim_and_cluster_names_are_wanted() {
        let t = registration_tags(&registered(), "prod");
        assert_eq!(
            t,
            BTreeMap::from([
                ("Name".to_string(), "ip-10-0-1-5.ec2.internal".to_string()),
                (
                    "karpenter.sh/nodeclaim".to_string(),
                    "default-abc".to_string()
                ),
                ("eks:eks-cluster-name".to_string(), "prod".to_string()),
            ])
        );
    }

    #[test]
    fn tags_already_on_the_instance_are_left_alone() {
        let present = BTreeMap::from([
            ("Name".to_string(), "chosen-by-the-user".to_string()),
            (
                "karpenter.sh/nodeclaim".to_string(),
                "default-abc".to_string(),
            ),
        ]);
        let missing = missing_tags(registration_tags(&registered(), "prod"), &present);
        assert_eq!(
            missing,
            BTreeMap::from([("eks:eks-cluster-name".to_string(), "prod".to_string())])
        );
        let all = registration_tags(&registered(), "prod");
        assert!(missing_tags(all.clone(), &all).is_empty());
    }

    #[test]
    fn a_tagged_claim_carries_both_markers() {
        let a = tagged_annotations();
        assert_eq!(a.len(), 2);
        assert_eq!(a[TAGGED], "true");
        assert_eq!(a[CLUSTER_NAME_TAGGED], "true");
    }

    #[tokio::test(start_paused = true)]
    async fn calls_are_spaced_a_second_apart() {
        let pacer = Pacer::default();
        let start = Instant::now();
        let mut at = Vec::new();
        for _ in 0..3 {
            at.push(pacer.run(async { Instant::now() - start }).await);
        }
        assert_eq!(
            at,
            vec![Duration::ZERO, MIN_INTERVAL, MIN_INTERVAL * 2],
            "the first call goes at once, the next wait their turn"
        );
    }
}
