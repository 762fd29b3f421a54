//! Cluster facts from EKS against moto through the real SDK: an EKS cluster created with a
//! chosen service CIDR is described at start, its endpoint and CA fill in what the settings
//! leave empty, and an AL2023 node launched afterwards carries that CIDR in its NodeConfig;
//! a cluster EKS learns of only later is asked for again by the next AL2023 launch.

#[macro_use]
mod support;

use std::time::Duration;

use nodewright_api::aws::v1::EC2NodeClass;
use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_aws_model::userdata::{base64, mime};
use nodewright_cloud::{CloudError, Launched};
use nodewright_cloud_aws::AwsCloud;
use nodewright_cloud_aws::cluster::{self, ClusterFacts, KnownClusterFacts};
use nodewright_cloud_aws::launch::ClusterInfo;
use support::{DISCOVERY, Moto};

const AL2023_PARAMETER: &str =
    "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/standard/recommended/image_id";

fn known(name: &str) -> KnownClusterFacts {
    KnownClusterFacts {
        name: name.to_string(),
        api_server: "https://10.0.0.1:443/".into(),
        ..Default::default()
    }
}

/// The `spec.cluster` map of the NodeConfig part of AL2023 user data (base64 MIME).
fn node_config_cluster(user_data_b64: &str) -> serde_yaml::Mapping {
    let text = String::from_utf8(base64::decode(user_data_b64).expect("base64")).unwrap();
    let parts = mime::parse(&text).expect("MIME user data");
    let part = parts
        .iter()
        .rev()
        .find(|p| p.content_type == "application/node.eks.aws")
        .expect("a NodeConfig part");
    let doc: serde_yaml::Value = serde_yaml::from_str(&part.content).expect("NodeConfig YAML");
    doc["spec"]["cluster"]
        .as_mapping()
        .expect("spec.cluster")
        .clone()
}

/// Launches one on-demand m5.large from an AL2023 class over `name`'s seeded subnets and
/// security groups, with `info` as the cluster facts the provider was started with.
async fn launch_al2023(
    moto: &Moto,
    name: &str,
    role: &str,
    info: ClusterInfo,
) -> Result<Launched, CloudError> {
    let (cloud, class, claim) = al2023_launch(moto, name, role, ClusterFacts::fixed(info)).await;
    cloud.launch(&claim, Some(&class)).await
}

/// A provider with cluster facts `facts`, an AL2023 class over `name`'s seeded subnets and
/// security groups, and a claim for one on-demand m5.large of it.
async fn al2023_launch(
    moto: &Moto,
    name: &str,
    role: &str,
    facts: ClusterFacts,
) -> (AwsCloud, EC2NodeClass, NodeClaim) {
    let prefix = format!("/{name}");
    let image = support::copy_image(&moto.clients, &format!("{name}-al2023"), &[]).await;
    support::put_parameter(&moto.clients, &prefix, AL2023_PARAMETER, &image).await;
    let cloud = support::cloud(moto, name, &prefix, "1.32").with_cluster_facts(facts);
    let mut class = support::class(&format!(
        "metadata: {{name: web}}\nspec:\n  subnetSelectorTerms: [{{tags: {{{DISCOVERY}: {name}}}}}]\n  securityGroupSelectorTerms: [{{tags: {{{DISCOVERY}: {name}}}}}]\n  amiSelectorTerms: [{{alias: 'al2023@latest'}}]\n  role: {role}\n",
    ));
    class.metadata.uid = Some(support::unique("uid"));
    let claim: NodeClaim = serde_yaml::from_str(
        "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata:\n  name: web-1\n  labels: {karpenter.sh/nodepool: default}\nspec:\n  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: web}\n  requirements:\n    - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}\n    - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}\n",
    )
    .unwrap();
    (cloud, class, claim)
}

/// The `spec.cluster` map of the NodeConfig of `launched`'s instance.
async fn launched_node_config_cluster(moto: &Moto, launched: &Launched) -> serde_yaml::Mapping {
    let id = launched.instance.provider_id.rsplit('/').next().unwrap();
    let attr = moto
        .clients
        .ec2
        .describe_instance_attribute()
        .instance_id(id)
        .attribute(aws_sdk_ec2::types::InstanceAttributeName::UserData)
        .send()
        .await
        .expect("DescribeInstanceAttribute");
    let user_data = attr.user_data().and_then(|u| u.value()).expect("user data");
    node_config_cluster(user_data)
}

#[tokio::test]
async fn eks_supplies_the_service_cidr_endpoint_and_ca_and_al2023_nodes_carry_the_cidr() {
    let moto = moto_or_skip!("eks_cluster_facts");
    let name = support::unique("eks");
    let seed = support::seed(&moto.clients, &name).await;
    let subnets: Vec<String> = seed.subnets.iter().map(|(id, _)| id.clone()).collect();
    support::create_eks_cluster(&moto, &name, &subnets, "10.123.0.0/16").await;

    let described = cluster::describe_cluster(&moto.clients, &name)
        .await
        .expect("DescribeCluster");
    assert_eq!(described.service_cidr.as_deref(), Some("10.123.0.0/16"));
    // What EKS_CONTROL_PLANE reads instead of the API server's version.
    assert_eq!(described.version.as_deref(), Some(support::EKS_VERSION));
    let eks_endpoint = described.endpoint.clone().expect("an endpoint from EKS");
    let eks_ca = described.ca_bundle.clone().expect("a CA from EKS");

    // Nothing set: endpoint and CA come from EKS.
    let info = cluster::resolve(&moto.clients, &known(&name)).await;
    assert_eq!(info.service_cidr.as_deref(), Some("10.123.0.0/16"));
    assert_eq!(info.endpoint, eks_endpoint);
    assert_eq!(info.ca_bundle.as_deref(), Some(eks_ca.as_str()));
    assert_eq!(info.service_cidr_unknown, None);

    // CLUSTER_ENDPOINT and the client's own CA win; the CIDR still comes from EKS.
    let mut set = known(&name);
    set.endpoint = Some("https://api.example.internal".into());
    set.client_ca_bundle = cluster::pem_bundle(&[vec![0x30, 0x03, 0x02, 0x01, 0x01]]);
    let info = cluster::resolve(&moto.clients, &set).await;
    assert_eq!(info.endpoint, "https://api.example.internal");
    assert_eq!(info.ca_bundle, set.client_ca_bundle);
    assert_eq!(info.service_cidr.as_deref(), Some("10.123.0.0/16"));

    // An AL2023 launch with these facts: the NodeConfig names the cluster's CIDR.
    let launched = launch_al2023(&moto, &name, &seed.role, info)
        .await
        .expect("launch");
    let c = launched_node_config_cluster(&moto, &launched).await;
    assert_eq!(c["cidr"].as_str(), Some("10.123.0.0/16"));
    assert_eq!(c["name"].as_str(), Some(name.as_str()));
    assert_eq!(
        c["apiServerEndpoint"].as_str(),
        Some("https://api.example.internal")
    );
    assert_eq!(
        c["certificateAuthority"].as_str(),
        set.client_ca_bundle.as_deref()
    );
}

#[tokio::test]
async fn an_unknown_cluster_leaves_al2023_launches_failing_with_the_reason() {
    let moto = moto_or_skip!("eks_cluster_missing");
    let name = support::unique("no-eks");
    let seed = support::seed(&moto.clients, &name).await;
    let info = cluster::resolve(&moto.clients, &known(&name)).await;
    assert_eq!(info.service_cidr, None);
    assert_eq!(
        info.endpoint, "https://10.0.0.1:443",
        "falls back to the client's"
    );
    let why = info.service_cidr_unknown.clone().expect("a reason");
    assert!(why.contains(&format!("CLUSTER_NAME={name}")), "{why}");
    assert!(why.contains("ResourceNotFoundException"), "{why}");

    let e = launch_al2023(&moto, &name, &seed.role, info)
        .await
        .unwrap_err();
    assert!(matches!(e, CloudError::InvalidRequest(_)), "{e:?}");
    let msg = e.to_string();
    assert!(msg.contains("service CIDR"), "{msg}");
    assert!(msg.contains(&format!("CLUSTER_NAME={name}")), "{msg}");
}

#[tokio::test]
async fn an_al2023_launch_asks_eks_again_and_launches_once_it_knows_the_cluster() {
    let moto = moto_or_skip!("eks_cluster_later");
    let name = support::unique("later-eks");
    let seed = support::seed(&moto.clients, &name).await;
    // EKS does not know the cluster at start; the window for asking again has always passed.
    let facts = ClusterFacts::resolve(&moto.clients, known(&name), Duration::ZERO).await;
    let (cloud, class, claim) = al2023_launch(&moto, &name, &seed.role, facts).await;
    let e = cloud.launch(&claim, Some(&class)).await.unwrap_err();
    assert!(e.to_string().contains("service CIDR"), "{e}");

    let subnets: Vec<String> = seed.subnets.iter().map(|(id, _)| id.clone()).collect();
    support::create_eks_cluster(&moto, &name, &subnets, "10.125.0.0/16").await;
    let launched = cloud
        .launch(&claim, Some(&class))
        .await
        .expect("launch once EKS answers");
    let c = launched_node_config_cluster(&moto, &launched).await;
    assert_eq!(c["cidr"].as_str(), Some("10.125.0.0/16"));
}
