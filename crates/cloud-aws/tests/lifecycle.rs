//! Instances of the cluster against moto through the provider contract: found by provider id
//! and by tags, checked for drift against their node class, terminated.

#[macro_use]
mod support;

use aws_sdk_ec2::types::{InstanceType, ResourceType};
use nodewright_api::aws::v1::{EC2NodeClass, EC2NodeClassStatus};
use nodewright_api::v1::nodeclaim::{NodeClaim, NodeClaimStatus};
use nodewright_cloud::{CloudError, CloudProvider, InstanceState, tags};
use nodewright_cloud_aws::AwsClients;
use nodewright_cloud_aws::nodeclass::hash::{HASH_ANNOTATION, HASH_VERSION_ANNOTATION};
use nodewright_core::model::CapacityType;
use support::DISCOVERY;

/// Starts one instance the way a launch leaves it: in `subnet` with `groups`, tagged.
async fn run_instance(
    c: &AwsClients,
    image: &str,
    subnet: &str,
    groups: &[&str],
    tag_pairs: &[(&str, &str)],
) -> (String, String) {
    let mut req = c
        .ec2
        .run_instances()
        .image_id(image)
        .instance_type(InstanceType::M5Large)
        .subnet_id(subnet)
        .min_count(1)
        .max_count(1)
        .tag_specifications(support::tags(
            ResourceType::Instance,
            &support::tag_map(tag_pairs),
        ));
    for g in groups {
        req = req.security_group_ids(*g);
    }
    let out = req.send().await.expect("RunInstances");
    let i = &out.instances()[0];
    (
        i.instance_id().unwrap().to_string(),
        i.placement()
            .and_then(|p| p.availability_zone())
            .unwrap()
            .to_string(),
    )
}

fn claim(name: &str, provider_id: &str) -> NodeClaim {
    let mut c = NodeClaim::default();
    c.metadata.name = Some(name.into());
    c.metadata.labels = Some(
        [(
            "node.kubernetes.io/instance-type".to_string(),
            "m5.large".to_string(),
        )]
        .into_iter()
        .collect(),
    );
    c.status = Some(NodeClaimStatus {
        provider_id: Some(provider_id.into()),
        ..Default::default()
    });
    c
}

#[tokio::test]
async fn get_list_drift_and_terminate() {
    let moto = moto_or_skip!("get_list_drift_and_terminate");
    let cluster = support::unique("life");
    let seed = support::seed(&moto.clients, &cluster).await;
    let image = support::copy_image(&moto.clients, &support::unique("img"), &[]).await;
    let cloud = support::cloud(&moto, &cluster, "", "1.32");
    let cluster_tag = tags::cluster(&cluster);
    let (subnet, _) = &seed.subnets[0];
    let groups: Vec<&str> = seed
        .security_groups
        .iter()
        .map(|(id, _)| id.as_str())
        .collect();

    let (ours, zone) = run_instance(
        &moto.clients,
        &image,
        subnet,
        &groups,
        &[
            (tags::NODEPOOL, "default"),
            (tags::NODECLAIM, "default-abc"),
            (&cluster_tag, "owned"),
        ],
    )
    .await;
    // Not ours: no NodePool tag; another cluster's.
    run_instance(
        &moto.clients,
        &image,
        subnet,
        &groups,
        &[(&cluster_tag, "owned")],
    )
    .await;
    let other = tags::cluster(&format!("{cluster}-other"));
    run_instance(
        &moto.clients,
        &image,
        subnet,
        &groups,
        &[(tags::NODEPOOL, "default"), (&other, "owned")],
    )
    .await;

    let pid = format!("aws:///{zone}/{ours}");
    let got = cloud.get(&pid).await.expect("get");
    assert_eq!(got.provider_id, pid);
    assert_eq!(got.instance_type, "m5.large");
    assert_eq!(got.image_id.as_deref(), Some(image.as_str()));
    assert_eq!(got.state, InstanceState::Running);
    assert_eq!(got.nodeclaim(), Some("default-abc"));
    assert!(got.launched_at.is_some());

    let listed = cloud.list().await.expect("list");
    let pids: Vec<&str> = listed.iter().map(|i| i.provider_id.as_str()).collect();
    assert_eq!(
        pids,
        vec![pid.as_str()],
        "only this cluster's NodePool instances"
    );

    // Drift, against the class as reconciliation resolves it.
    let mut class = support::class(&format!(
        "metadata: {{name: {cluster}}}\nspec:\n  subnetSelectorTerms: [{{tags: {{{DISCOVERY}: {cluster}}}}}]\n  securityGroupSelectorTerms: [{{tags: {{{DISCOVERY}: {cluster}}}}}]\n  amiSelectorTerms: [{{id: {image}}}]\n  instanceProfile: p\n"
    ));
    class.status = Some(
        cloud
            .reconcile_node_class(&class)
            .await
            .expect("reconcile")
            .status,
    );
    let c = claim("default-abc", &pid);
    assert_eq!(cloud.is_drifted(&c, Some(&class)).await, Ok(None));
    assert_eq!(cloud.is_drifted(&c, None).await, Ok(None));

    let drifted = |f: &dyn Fn(&mut EC2NodeClass)| {
        let mut changed = class.clone();
        f(&mut changed);
        let cloud = &cloud;
        let c = c.clone();
        async move { cloud.is_drifted(&c, Some(&changed)).await }
    };
    fn status(cl: &mut EC2NodeClass) -> &mut EC2NodeClassStatus {
        cl.status.as_mut().unwrap()
    }
    assert_eq!(
        drifted(&|cl| status(cl).amis.as_mut().unwrap()[0].id = "ami-0newer".into()).await,
        Ok(Some("AMIDrift".into()))
    );
    assert_eq!(
        drifted(&|cl| {
            status(cl).security_groups.as_mut().unwrap().pop();
        })
        .await,
        Ok(Some("SecurityGroupDrift".into()))
    );
    assert_eq!(
        drifted(&|cl| status(cl)
            .subnets
            .as_mut()
            .unwrap()
            .retain(|s| s.id != *subnet))
        .await,
        Ok(Some("SubnetDrift".into()))
    );
    assert!(matches!(
        drifted(&|cl| status(cl).subnets = None).await,
        Err(CloudError::NodeClassNotReady { .. })
    ));

    // The class changed since the claim was launched: its hash no longer matches.
    let mut old = c.clone();
    old.metadata.annotations = Some(
        [
            (HASH_ANNOTATION.to_string(), "1".to_string()),
            (HASH_VERSION_ANNOTATION.to_string(), "nw1".to_string()),
        ]
        .into_iter()
        .collect(),
    );
    assert_eq!(
        cloud.is_drifted(&old, Some(&class)).await,
        Ok(Some("NodeClassDrift".into()))
    );

    // Terminate: gone afterwards, and a second delete says so.
    cloud.delete(&pid).await.expect("delete");
    assert!(matches!(
        cloud.get(&pid).await,
        Err(CloudError::NotFound { .. })
    ));
    assert!(matches!(
        cloud.delete(&pid).await,
        Err(CloudError::NotFound { .. })
    ));
    assert!(cloud.list().await.expect("list").is_empty());
}

#[tokio::test]
async fn unknown_and_malformed_provider_ids() {
    let moto = moto_or_skip!("unknown_and_malformed_provider_ids");
    let cluster = support::unique("ids");
    let cloud = support::cloud(&moto, &cluster, "", "1.32");
    let unknown = "aws:///us-east-1a/i-0123456789abcdef0";
    assert_eq!(
        cloud.get(unknown).await,
        Err(CloudError::NotFound {
            provider_id: unknown.into()
        })
    );
    assert!(matches!(
        cloud.delete(unknown).await,
        Err(CloudError::NotFound { .. })
    ));
    assert!(matches!(
        cloud.get("kwok://x").await,
        Err(CloudError::InvalidRequest(_))
    ));
    assert_eq!(cloud.name(), "aws");
    assert!(cloud.list().await.expect("list").is_empty());
}

#[tokio::test]
async fn instance_types_follow_the_class_subnet_zones() {
    let moto = moto_or_skip!("instance_types_follow_the_class_subnet_zones");
    let cluster = support::unique("types");
    let seed = support::seed(&moto.clients, &cluster).await;
    let cloud = support::cloud(&moto, &cluster, "", "1.32");
    let (subnet, zone) = &seed.subnets[1];
    let class = support::class(&format!(
        "metadata: {{name: {cluster}}}\nspec:\n  subnetSelectorTerms: [{{id: {subnet}}}]\n  securityGroupSelectorTerms: [{{tags: {{{DISCOVERY}: {cluster}}}}}]\n  amiSelectorTerms: [{{id: ami-ekslinux}}]\n  instanceProfile: p\n"
    ));
    assert!(cloud.instance_types(None).await.unwrap().is_empty());
    // Not yet reconciled: resolved on the spot.
    let types = cloud.instance_types(Some(&class)).await.expect("types");
    let m5 = types
        .iter()
        .find(|t| t.name == "m5.large")
        .expect("m5.large");
    let zones: Vec<&str> = m5.offerings.iter().map(|o| o.zone.as_str()).collect();
    assert!(!zones.is_empty());
    assert!(zones.iter().all(|z| z == zone), "{zones:?}");
    let on_demand = |types: &[nodewright_core::model::InstanceType]| {
        types
            .iter()
            .find(|t| t.name == "m5.large")
            .and_then(|t| {
                t.offerings
                    .iter()
                    .find(|o| o.capacity_type == CapacityType::OnDemand)
            })
            .map(|o| o.available)
    };
    assert_eq!(on_demand(&types), Some(true));

    // An offering that just ran out of capacity is offered as unavailable.
    cloud.launch.unavailable().mark_offering(
        CapacityType::OnDemand,
        "m5.large",
        zone,
        nodewright_cloud_aws::cloud::now(),
    );
    let types = cloud.instance_types(Some(&class)).await.expect("types");
    assert_eq!(on_demand(&types), Some(false));
}
