//! The seed EC2NodeClasses in `fixtures/seed-manifests`, reconciled against moto seeded with
//! the network and IAM objects their selectors name. Each seed's tag values are its own, so
//! no other test touches them.

mod support;

use std::path::Path;

use nodewright_api::aws::{convert, parse, v1::EC2NodeClass};
use nodewright_api::document::read_documents;
use nodewright_cloud_aws::cloud::now;
use support::{DISCOVERY, condition, tag_map};

fn seed_class(file: &str) -> EC2NodeClass {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/seed-manifests")
        .join(file);
    let docs = read_documents(&path).expect("seed manifest");
    let doc = docs
        .iter()
        .find(|d| d.kind() == "EC2NodeClass")
        .expect("an EC2NodeClass");
    let mut class = match doc.api_version() {
        "karpenter.k8s.aws/v1" => parse::ec2nodeclass(&doc.value).expect("v1 class"),
        "karpenter.k8s.aws/v1beta1" => {
            let old = parse::ec2nodeclass_v1beta1(&doc.value).expect("v1beta1 class");
            convert::from_v1beta1(&old, None).object
        }
        other => panic!("unexpected {other}"),
    };
    class.metadata.uid = Some(support::unique("uid"));
    class
}

#[tokio::test]
async fn bottlerocket_sandbox_class_from_v1beta1_becomes_ready() {
    let Some(moto) = support::moto("bottlerocket_sandbox_class_from_v1beta1_becomes_ready").await
    else {
        return;
    };
    let c = &moto.clients;
    let class = seed_class("02-ec2nodeclass-v1beta1.yaml");
    assert_eq!(
        class.spec.resolved_ami_family().as_deref(),
        Some("Bottlerocket")
    );
    // The seed selects `karpenter.sh/discovery: sandbox` and role karpenter-node-sandbox.
    let vpc = support::create_vpc(c, "sandbox").await;
    let mut subnets = Vec::new();
    for (i, zone) in support::ZONES.iter().enumerate() {
        subnets.push(
            support::create_subnet(
                c,
                &vpc,
                &format!("10.0.{i}.0/24"),
                zone,
                &tag_map(&[(DISCOVERY, "sandbox")]),
            )
            .await,
        );
    }
    let sg = support::create_security_group(
        c,
        &vpc,
        "sandbox-nodes",
        &tag_map(&[(DISCOVERY, "sandbox")]),
    )
    .await;
    support::create_role(c, "karpenter-node-sandbox").await;
    // bottlerocket@latest for 1.31: publish the x86 images under a private prefix.
    let prefix = format!("/{}", support::unique("sandbox"));
    let standard = support::copy_image(c, &support::unique("bottlerocket"), &[]).await;
    let nvidia = support::copy_image(c, &support::unique("bottlerocket-nvidia"), &[]).await;
    support::put_parameter(
        c,
        &prefix,
        "/aws/service/bottlerocket/aws-k8s-1.31/x86_64/latest/image_id",
        &standard,
    )
    .await;
    support::put_parameter(
        c,
        &prefix,
        "/aws/service/bottlerocket/aws-k8s-1.31-nvidia/x86_64/latest/image_id",
        &nvidia,
    )
    .await;
    let cloud = support::cloud(&moto, "sandbox", &prefix, "1.31");

    let r = cloud.resolve_node_class(&class, now()).await.unwrap();
    assert!(r.is_ready(), "{:#?}", r.status);
    let mut got: Vec<String> = r.subnets.iter().map(|s| s.id.clone()).collect();
    got.sort();
    subnets.sort();
    assert_eq!(got, subnets);
    assert_eq!(
        r.security_groups
            .iter()
            .map(|g| g.id.as_str())
            .collect::<Vec<_>>(),
        [sg.as_str()]
    );
    // The standard image serves standard and neuron nodes: two entries, plus nvidia.
    let mut amis: Vec<(&str, usize)> = r
        .amis
        .iter()
        .map(|a| (a.id.as_str(), a.requirements.len()))
        .collect();
    amis.sort();
    let mut want = vec![
        (standard.as_str(), 3),
        (standard.as_str(), 2),
        (nvidia.as_str(), 2),
    ];
    want.sort();
    assert_eq!(amis, want);
    for t in [
        "SubnetsReady",
        "SecurityGroupsReady",
        "AMIsReady",
        "InstanceProfileReady",
        "Ready",
    ] {
        assert_eq!(condition(&r.status, t).0, "True", "{t}");
    }
    assert!(
        r.status
            .instance_profile
            .as_deref()
            .unwrap()
            .starts_with("sandbox_")
    );
    assert!(!r.hash.is_empty());
    // The controller's reconcile also builds a Bottlerocket launch for the seed and dry-runs
    // it: moto answers every dry run with DryRunOperation.
    use nodewright_cloud::CloudProvider;
    let reconciled = cloud.reconcile_node_class(&class).await.unwrap().status;
    assert_eq!(
        condition(&reconciled, "ValidationSucceeded"),
        ("True".into(), "ValidationSucceeded".into()),
        "{reconciled:#?}"
    );
    assert_eq!(condition(&reconciled, "Ready").0, "True");
}

#[tokio::test]
async fn blue_class_with_missing_amis_reports_why_it_is_not_ready() {
    let Some(moto) =
        support::moto("blue_class_with_missing_amis_reports_why_it_is_not_ready").await
    else {
        return;
    };
    let c = &moto.clients;
    let class = seed_class("04-nodepool-ec2nodeclass-v1.yaml");
    // Subnets named by eksctl (selected by a glob on Name), a cluster security group.
    let vpc = support::create_vpc(c, "blue").await;
    let mut subnets = Vec::new();
    for (i, zone) in support::ZONES.iter().enumerate() {
        let name = format!("eksctl-blue-cluster/SubnetPrivate{}", zone.to_uppercase());
        subnets.push(
            support::create_subnet(
                c,
                &vpc,
                &format!("10.0.{i}.0/24"),
                zone,
                &tag_map(&[("Name", &name)]),
            )
            .await,
        );
    }
    let public = support::create_subnet(
        c,
        &vpc,
        "10.0.50.0/24",
        "us-east-1a",
        &tag_map(&[("Name", "eksctl-blue-cluster/SubnetPublicUSEAST1A")]),
    )
    .await;
    let sg = support::create_security_group(
        c,
        &vpc,
        "eks-cluster-sg-blue",
        &tag_map(&[("aws:eks:cluster-name", "blue")]),
    )
    .await;
    support::create_role(c, "KarpenterNodeRole-blue").await;
    let cloud = support::cloud(&moto, "blue", "", "1.30");

    let r = cloud.resolve_node_class(&class, now()).await.unwrap();
    let mut got: Vec<String> = r.subnets.iter().map(|s| s.id.clone()).collect();
    got.sort();
    subnets.sort();
    assert_eq!(got, subnets);
    assert!(!got.contains(&public));
    assert_eq!(
        r.security_groups
            .iter()
            .map(|g| g.id.as_str())
            .collect::<Vec<_>>(),
        [sg.as_str()]
    );
    assert_eq!(condition(&r.status, "InstanceProfileReady").0, "True");
    // The seed pins two AMI ids from a real account; they do not exist here.
    assert_eq!(
        condition(&r.status, "AMIsReady"),
        ("False".into(), "AMINotFound".into())
    );
    let (ready, reason) = condition(&r.status, "Ready");
    assert_eq!(
        (ready.as_str(), reason.as_str()),
        ("False", "UnhealthyDependents")
    );
}
