//! What the AWS provider does around an instance's life beyond launching, against moto: the
//! tags it adds once the claim has registered (read back through DescribeInstances), the
//! launch batch it reports, and the termination EC2 refuses (an instance with termination
//! protection), reported with its zone and zone id.

#[macro_use]
mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use aws_sdk_ec2::types::{AttributeBooleanValue, InstanceType, ResourceType};
use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_cloud::{CloudError, CloudProvider, RegisteredInstance, TerminationFailure, tags};
use nodewright_cloud_aws::AwsClients;
use nodewright_cloud_aws::launch::ClusterInfo;
use nodewright_cloud_aws::tagging::{CLUSTER_NAME_TAGGED, EKS_CLUSTER_NAME, TAGGED};
use nodewright_testkit::nodeclaim;

use support::DISCOVERY;

async fn instance_tags(c: &AwsClients, id: &str) -> BTreeMap<String, String> {
    let out = c
        .ec2
        .describe_instances()
        .instance_ids(id)
        .send()
        .await
        .expect("DescribeInstances");
    out.reservations()
        .iter()
        .flat_map(|r| r.instances())
        .flat_map(|i| i.tags())
        .map(|t| {
            (
                t.key().unwrap_or_default().to_string(),
                t.value().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn instance_id(provider_id: &str) -> &str {
    provider_id.rsplit('/').next().unwrap()
}

#[tokio::test]
async fn a_registered_claims_instance_is_named_after_its_node() {
    let moto = moto_or_skip!("tagging");
    let cluster = support::unique("tagging");
    let seed = support::seed(&moto.clients, &cluster).await;
    let prefix = format!("/{cluster}");
    support::publish_al2023(&moto.clients, &cluster, &prefix).await;
    let cloud = support::cloud(&moto, &cluster, &prefix, "1.32").with_cluster_info(ClusterInfo {
        endpoint: "https://api.example.internal".into(),
        service_cidr: Some("10.100.0.0/16".into()),
        ..Default::default()
    });
    let recorder = Arc::new(support::Recorder::default());
    cloud.observe_with(recorder.clone());
    let mut class = support::class(&format!(
        "metadata: {{name: tag}}\nspec:\n  subnetSelectorTerms: [{{tags: {{{DISCOVERY}: {cluster}}}}}]\n  securityGroupSelectorTerms: [{{tags: {{{DISCOVERY}: {cluster}}}}}]\n  amiSelectorTerms: [{{alias: 'al2023@latest'}}]\n  role: {role}\n",
        role = seed.role
    ));
    class.metadata.uid = Some(support::unique("uid"));
    let claim: NodeClaim =
        serde_json::from_value(nodeclaim::aws("tag-1", "tag", &["m5.large"], "on-demand")).unwrap();
    let launched = cloud.create(&claim, Some(&class)).await.expect("launch");
    let pid = launched.instance.provider_id.clone();
    let id = instance_id(&pid).to_string();

    // The launch went out as one CreateFleet batch of one.
    let batches = recorder.batches.lock().unwrap().clone();
    assert_eq!(batches.len(), 1, "{batches:?}");
    assert_eq!((batches[0].batcher, batches[0].size), ("create_fleet", 1));

    let before = instance_tags(&moto.clients, &id).await;
    assert!(!before.contains_key(tags::NAME), "{before:?}");

    assert_eq!(
        cloud.tagged_annotations(),
        BTreeMap::from([
            (TAGGED.to_string(), "true".to_string()),
            (CLUSTER_NAME_TAGGED.to_string(), "true".to_string()),
        ])
    );
    // Only claims of an EC2NodeClass are this provider's to tag.
    assert_eq!(
        cloud.tagged_node_classes(),
        &[("karpenter.k8s.aws", "EC2NodeClass")]
    );
    let registered = RegisteredInstance {
        nodeclaim: "tag-1".into(),
        node_name: "ip-10-0-1-23.ec2.internal".into(),
        provider_id: pid.clone(),
    };
    cloud.tag_registered(&registered).await.expect("tag");
    let after = instance_tags(&moto.clients, &id).await;
    assert_eq!(after[tags::NAME], "ip-10-0-1-23.ec2.internal");
    assert_eq!(after[tags::NODECLAIM], "tag-1");
    assert_eq!(after[EKS_CLUSTER_NAME], cluster);
    // The launch tags are still there.
    assert_eq!(after[&tags::cluster(&cluster)], "owned");
    assert_eq!(after[tags::NODEPOOL], "default");

    // A tag already on the instance is left as it is.
    moto.clients
        .ec2
        .create_tags()
        .resources(&id)
        .tags(
            aws_sdk_ec2::types::Tag::builder()
                .key(tags::NAME)
                .value("renamed")
                .build(),
        )
        .send()
        .await
        .unwrap();
    cloud.tag_registered(&registered).await.expect("tag again");
    assert_eq!(
        instance_tags(&moto.clients, &id).await[tags::NAME],
        "renamed"
    );

    // Gone: nothing to tag.
    cloud.delete(&pid).await.expect("delete");
    let gone = cloud.tag_registered(&registered).await;
    assert!(matches!(gone, Err(CloudError::NotFound { .. })), "{gone:?}");
    assert!(recorder.terminations.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_refused_termination_is_reported_with_its_zone() {
    let moto = moto_or_skip!("termination_failures");
    let cluster = support::unique("term-fail");
    let seed = support::seed(&moto.clients, &cluster).await;
    let image = support::copy_image(&moto.clients, &support::unique("img"), &[]).await;
    let cloud = support::cloud(&moto, &cluster, "", "1.32");
    let recorder = Arc::new(support::Recorder::default());
    cloud.observe_with(recorder.clone());
    let (subnet, zone) = seed.subnets[0].clone();
    let out = moto
        .clients
        .ec2
        .run_instances()
        .image_id(&image)
        .instance_type(InstanceType::M5Large)
        .subnet_id(&subnet)
        .min_count(1)
        .max_count(1)
        .tag_specifications(support::tags(
            ResourceType::Instance,
            &support::tag_map(&[
                (tags::NODEPOOL, "default"),
                (&tags::cluster(&cluster), "owned"),
            ]),
        ))
        .send()
        .await
        .expect("RunInstances");
    let id = out.instances()[0].instance_id().unwrap().to_string();
    moto.clients
        .ec2
        .modify_instance_attribute()
        .instance_id(&id)
        .disable_api_termination(AttributeBooleanValue::builder().value(true).build())
        .send()
        .await
        .expect("protect");
    let pid = format!("aws:///{zone}/{id}");

    let refused = cloud.delete(&pid).await;
    assert!(
        matches!(refused, Err(CloudError::Api { .. })),
        "{refused:?}"
    );
    let zone_id = moto
        .clients
        .ec2
        .describe_availability_zones()
        .zone_names(&zone)
        .send()
        .await
        .unwrap()
        .availability_zones()[0]
        .zone_id()
        .unwrap_or_default()
        .to_string();
    assert!(!zone_id.is_empty(), "moto reports zone ids");
    assert_eq!(
        recorder.terminations.lock().unwrap().clone(),
        vec![TerminationFailure {
            zone: zone.clone(),
            zone_id
        }]
    );

    // Unprotected, it terminates, and nothing more is reported; an unknown instance is
    // already gone, not a failure.
    moto.clients
        .ec2
        .modify_instance_attribute()
        .instance_id(&id)
        .disable_api_termination(AttributeBooleanValue::builder().value(false).build())
        .send()
        .await
        .expect("unprotect");
    cloud.delete(&pid).await.expect("delete");
    let unknown = format!("aws:///{zone}/i-0123456789abcdef0");
    assert!(matches!(
        cloud.delete(&unknown).await,
        Err(CloudError::NotFound { .. })
    ));
    assert_eq!(recorder.terminations.lock().unwrap().len(), 1);
}
