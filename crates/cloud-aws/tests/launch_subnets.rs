//! Launches against moto that check where instances land: launches in a row spread over a
//! zone's subnets by the addresses predicted in flight (the count EC2 last reported has not
//! moved), and each CreateFleet override names the image of its type's architecture.

#[macro_use]
mod support;

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_aws_model::subnets::SubnetInfo;
use nodewright_cloud::CloudProvider;
use nodewright_cloud_aws::AwsCloud;
use nodewright_cloud_aws::cloud::now;
use nodewright_cloud_aws::error::AwsError;
use nodewright_cloud_aws::launch::{ClusterInfo, FleetApi, FleetCall, FleetOutcome, SdkFleet};
use nodewright_testkit::nodeclaim;
use support::{DISCOVERY, Moto, Seed, ZONES};

/// An arm64 image moto ships.
const ARM_SOURCE: &str = "ami-0e9271c829888680e";

/// CreateFleet through moto, with every call kept.
struct Recording {
    inner: SdkFleet,
    calls: Mutex<Vec<FleetCall>>,
}

#[async_trait]
impl FleetApi for Recording {
    async fn create_fleet(&self, call: &FleetCall) -> Result<FleetOutcome, AwsError> {
        self.calls.lock().unwrap().push(call.clone());
        self.inner.create_fleet(call).await
    }
}

struct Env {
    moto: Moto,
    seed: Seed,
    fleet: Arc<Recording>,
    cloud: AwsCloud,
    amd_image: String,
    arm_image: String,
}

async fn copy(moto: &Moto, source: &str, name: &str) -> String {
    moto.clients
        .ec2
        .copy_image()
        .source_image_id(source)
        .source_region(support::REGION)
        .name(name)
        .send()
        .await
        .expect("CopyImage")
        .image_id
        .expect("image id")
}

/// A seeded VPC with AL2023 images for amd64 and arm64 published for Kubernetes 1.32.
async fn env(moto: Moto, name: &str) -> Env {
    let cluster = support::unique(name);
    let seed = support::seed(&moto.clients, &cluster).await;
    let prefix = format!("/{cluster}");
    let amd_image = copy(&moto, "ami-ekslinux", &format!("{cluster}-amd")).await;
    let arm_image = copy(&moto, ARM_SOURCE, &format!("{cluster}-arm")).await;
    for (arch, image) in [("x86_64", &amd_image), ("arm64", &arm_image)] {
        let path = format!(
            "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/{arch}/standard/recommended/image_id"
        );
        support::put_parameter(&moto.clients, &prefix, &path, image).await;
    }
    let fleet = Arc::new(Recording {
        inner: SdkFleet::new(moto.clients.clone()),
        calls: Mutex::new(Vec::new()),
    });
    let cloud = support::cloud(&moto, &cluster, &prefix, "1.32")
        .with_cluster_info(ClusterInfo {
            endpoint: "https://ABCDEF.gr7.us-east-1.eks.amazonaws.com".into(),
            ca_bundle: Some("Q0EgYnVuZGxl".into()),
            service_cidr: Some("10.100.0.0/16".into()),
            ..Default::default()
        })
        .with_fleet_api(fleet.clone());
    Env {
        moto,
        seed,
        fleet,
        cloud,
        amd_image,
        arm_image,
    }
}

impl Env {
    fn class(&self, name: &str) -> nodewright_api::aws::v1::EC2NodeClass {
        let cluster = &self.seed.cluster;
        let mut class = support::class(&format!(
            "metadata: {{name: {name}}}\nspec:\n  subnetSelectorTerms: [{{tags: {{{DISCOVERY}: {cluster}}}}}]\n  securityGroupSelectorTerms: [{{tags: {{{DISCOVERY}: {cluster}}}}}]\n  amiSelectorTerms: [{{alias: 'al2023@latest'}}]\n  role: {role}\n",
            role = self.seed.role
        ));
        class.metadata.uid = Some(support::unique("uid"));
        class
    }

    fn calls(&self) -> Vec<FleetCall> {
        self.fleet.calls.lock().unwrap().clone()
    }
}

fn claim(name: &str, class: &str, types: &[&str], zone: &str) -> NodeClaim {
    let claim = nodeclaim::aws(name, class, types, "on-demand");
    let claim = nodeclaim::require(claim, "topology.kubernetes.io/zone", &[zone]);
    serde_json::from_value(nodeclaim::requests(
        claim,
        serde_json::json!({"cpu": "500m"}),
    ))
    .expect("NodeClaim")
}

async fn instance(moto: &Moto, provider_id: &str) -> aws_sdk_ec2::types::Instance {
    let id = provider_id.rsplit('/').next().unwrap();
    moto.clients
        .ec2
        .describe_instances()
        .instance_ids(id)
        .send()
        .await
        .unwrap()
        .reservations()[0]
        .instances()[0]
        .clone()
}

#[tokio::test]
async fn launches_in_a_row_spread_over_a_zones_subnets_by_predicted_addresses() {
    let moto = moto_or_skip!("launch_subnets_spread");
    let env = env(moto, "launch-subnets").await;
    let zone = ZONES[0];
    // A second discovery-tagged /24 in the first zone: as many free addresses as the first.
    let second = support::create_subnet(
        &env.moto.clients,
        &env.seed.vpc_id,
        "10.0.3.0/24",
        zone,
        &support::tag_map(&[(DISCOVERY, &env.seed.cluster)]),
    )
    .await;
    let first = env.seed.subnets[0].0.clone();
    let class = env.class("spread");

    let mut launched = Vec::new();
    for name in ["spread-a", "spread-b"] {
        let got = env
            .cloud
            .launch(&claim(name, "spread", &["m5.large"], zone), Some(&class))
            .await
            .expect("launch");
        let ec2 = instance(&env.moto, &got.instance.provider_id).await;
        launched.push(ec2.subnet_id().map(str::to_string).expect("subnet"));
    }
    let (subnet_a, subnet_b) = (launched[0].clone(), launched[1].clone());
    let mut got = vec![subnet_a.clone(), subnet_b.clone()];
    got.sort();
    let mut want = vec![first, second];
    want.sort();
    assert_eq!(
        got, want,
        "the second launch goes to the other subnet of {zone}"
    );

    // Each call named one subnet for the zone, and the second call's is the one the first
    // launch's prediction left with more addresses.
    let calls = env.calls();
    assert_eq!(calls.len(), 2);
    for (call, subnet) in calls.iter().zip([&subnet_a, &subnet_b]) {
        assert!(call.overrides().all(|o| &o.subnet_id == subnet), "{call:?}");
    }
}

/// EC2's free-address count of `subnet` now.
async fn counted(moto: &Moto, subnet: &str) -> u64 {
    moto.clients
        .ec2
        .describe_subnets()
        .subnet_ids(subnet)
        .send()
        .await
        .expect("DescribeSubnets")
        .subnets()[0]
        .available_ip_address_count()
        .expect("count") as u64
}

#[tokio::test]
async fn a_class_reconcile_replaces_the_predicted_addresses_with_ec2s_count() {
    let moto = moto_or_skip!("launch_subnets_reconcile_refresh");
    let env = env(moto, "launch-refresh").await;
    let zone = ZONES[0];
    let subnet = env.seed.subnets[0].0.clone();
    let class = env.class("refresh");
    let info = SubnetInfo {
        id: subnet.clone(),
        zone: zone.to_string(),
        available_ips: 0,
    };
    let before = counted(&env.moto, &subnet).await;
    env.cloud
        .launch(
            &claim("refresh-a", "refresh", &["m5.large"], zone),
            Some(&class),
        )
        .await
        .expect("launch");
    // The launch predicted the instance's pods (29 for m5.large) taken from the subnet.
    let predicted = env.cloud.launch.addresses().free(&info, now());
    assert_eq!(predicted, before as i64 - 29);
    let after = counted(&env.moto, &subnet).await;
    assert_ne!(
        predicted, after as i64,
        "EC2 counts the instance, not its pods"
    );

    // The class's periodic reconcile reads the subnets again; its count replaces the
    // prediction without waiting for the next launch to resolve the class.
    env.cloud
        .reconcile_node_class(&class)
        .await
        .expect("reconcile");
    assert_eq!(
        env.cloud.launch.addresses().free(&info, now()),
        after as i64
    );
}

#[tokio::test]
async fn overrides_carry_the_image_of_their_types_architecture() {
    let moto = moto_or_skip!("launch_override_images");
    let env = env(moto, "launch-images").await;
    let class = env.class("mixed");
    let zone = ZONES[0];

    let got = env
        .cloud
        .launch(
            &claim("mixed-a", "mixed", &["m5.large", "m6g.large"], zone),
            Some(&class),
        )
        .await
        .expect("launch");
    let calls = env.calls();
    assert_eq!(calls.len(), 1);
    let images: Vec<(String, Option<String>)> = calls[0]
        .overrides()
        .map(|o| (o.instance_type.clone(), o.image_id.clone()))
        .collect();
    assert_eq!(images.len(), 2, "{images:?}");
    for (ty, image) in &images {
        let want = if ty == "m6g.large" {
            &env.arm_image
        } else {
            &env.amd_image
        };
        assert_eq!(image.as_ref(), Some(want), "{ty}");
    }
    let launched = instance(&env.moto, &got.instance.provider_id).await;
    let want = if got.instance.instance_type == "m6g.large" {
        &env.arm_image
    } else {
        &env.amd_image
    };
    assert_eq!(launched.image_id(), Some(want.as_str()));
    assert_eq!(got.instance.image_id.as_ref(), Some(want));

    // An arm64-only claim launches the arm64 image.
    let arm = env
        .cloud
        .launch(
            &claim("mixed-b", "mixed", &["m6g.large"], zone),
            Some(&class),
        )
        .await
        .expect("arm launch");
    assert_eq!(arm.labels["kubernetes.io/arch"], "arm64");
    let launched = instance(&env.moto, &arm.instance.provider_id).await;
    assert_eq!(launched.image_id(), Some(env.arm_image.as_str()));
    let last = env.calls().pop().unwrap();
    assert!(
        last.overrides()
            .all(|o| o.image_id.as_deref() == Some(env.arm_image.as_str()))
    );
}
