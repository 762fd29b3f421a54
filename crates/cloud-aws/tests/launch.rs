//! Launches against moto through the real SDK: launch templates (checked on the template,
//! since moto does not apply a template's groups, profile, metadata or devices to the
//! instance), CreateFleet overrides and tags, user data per family, template reuse, and
//! fallback past offerings without capacity (injected: moto never reports it).

#[macro_use]
mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use aws_sdk_ec2::types::InstanceAttributeName;
use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_aws_model::launch::AllocationStrategy;
use nodewright_aws_model::userdata::base64;
use nodewright_cloud::CloudError;
use nodewright_cloud_aws::AwsCloud;
use nodewright_cloud_aws::cloud::now;
use nodewright_cloud_aws::error::AwsError;
use nodewright_cloud_aws::launch::{
    BatchingFleet, ClusterInfo, FleetApi, FleetCall, FleetFailure, FleetOutcome, SdkFleet,
};
use nodewright_core::model::CapacityType;
use support::{DISCOVERY, Moto, Seed};

const ENDPOINT: &str = "https://ABCDEF.gr7.us-east-1.eks.amazonaws.com";

/// Sends CreateFleet to moto, records every call, and answers
/// `InsufficientInstanceCapacity` for the chosen (type, zone) offerings instead, as EC2 does
/// when it tried those pools and found them empty.
struct Recording {
    inner: SdkFleet,
    no_capacity: Vec<(String, String)>,
    calls: Mutex<Vec<FleetCall>>,
}

impl Recording {
    fn new(moto: &Moto, no_capacity: &[(&str, &str)]) -> Arc<Self> {
        Arc::new(Recording {
            inner: SdkFleet::new(moto.clients.clone()),
            no_capacity: no_capacity
                .iter()
                .map(|(t, z)| (t.to_string(), z.to_string()))
                .collect(),
            calls: Mutex::new(Vec::new()),
        })
    }

    fn calls(&self) -> Vec<FleetCall> {
        self.calls.lock().unwrap().clone()
    }
}

#[async_trait]
impl FleetApi for Recording {
    async fn create_fleet(&self, call: &FleetCall) -> Result<FleetOutcome, AwsError> {
        self.calls.lock().unwrap().push(call.clone());
        let errors: Vec<FleetFailure> = call
            .overrides()
            .filter(|o| {
                self.no_capacity
                    .iter()
                    .any(|(t, z)| *t == o.instance_type && *z == o.zone)
            })
            .map(|o| FleetFailure {
                code: "InsufficientInstanceCapacity".into(),
                message: "We currently do not have sufficient capacity in the Availability Zone you requested.".into(),
                instance_type: Some(o.instance_type.clone()),
                subnet_id: Some(o.subnet_id.clone()),
                zone: Some(o.zone.clone()),
            })
            .collect();
        if !errors.is_empty() {
            return Ok(FleetOutcome {
                instances: Vec::new(),
                errors,
            });
        }
        self.inner.create_fleet(call).await
    }
}

struct Env {
    moto: Moto,
    seed: Seed,
    prefix: String,
}

/// A seeded VPC plus AL2023 and Bottlerocket images published under a private parameter
/// prefix for Kubernetes 1.32.
async fn env(moto: Moto, name: &str) -> Env {
    let cluster = support::unique(name);
    let seed = support::seed(&moto.clients, &cluster).await;
    let prefix = format!("/{cluster}");
    let c = &moto.clients;
    for (path, image) in [
        (
            "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/standard/recommended/image_id",
            "al2023",
        ),
        (
            "/aws/service/bottlerocket/aws-k8s-1.32/x86_64/latest/image_id",
            "bottlerocket",
        ),
    ] {
        let id = support::copy_image(c, &format!("{cluster}-{image}"), &[]).await;
        support::put_parameter(c, &prefix, path, &id).await;
    }
    Env { moto, seed, prefix }
}

impl Env {
    fn cloud(&self, fleet: Arc<Recording>) -> AwsCloud {
        self.cloud_with(fleet)
    }

    fn cloud_with(&self, fleet: Arc<dyn FleetApi>) -> AwsCloud {
        support::cloud(&self.moto, &self.seed.cluster, &self.prefix, "1.32")
            .with_cluster_info(ClusterInfo {
                endpoint: ENDPOINT.into(),
                ca_bundle: Some("Q0EgYnVuZGxl".into()),
                service_cidr: Some("10.100.0.0/16".into()),
                ..Default::default()
            })
            .with_fleet_api(fleet)
    }

    fn class(&self, name: &str, alias: &str, extra: &str) -> nodewright_api::aws::v1::EC2NodeClass {
        let cluster = &self.seed.cluster;
        let mut class = support::class(&format!(
            "metadata: {{name: {name}}}\nspec:\n  subnetSelectorTerms: [{{tags: {{{DISCOVERY}: {cluster}}}}}]\n  securityGroupSelectorTerms: [{{tags: {{{DISCOVERY}: {cluster}}}}}]\n  amiSelectorTerms: [{{alias: '{alias}'}}]\n  role: {role}\n  tags: {{team: web, cost-center: '42'}}\n{extra}",
            role = self.seed.role
        ));
        class.metadata.uid = Some(support::unique("uid"));
        class
    }
}

fn claim(name: &str, class: &str, types: &[&str], capacity: &str, zone: Option<&str>) -> NodeClaim {
    let zone = zone
        .map(|z| {
            format!("    - {{key: topology.kubernetes.io/zone, operator: In, values: [{z}]}}\n")
        })
        .unwrap_or_default();
    serde_yaml::from_str(&format!(
        "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata:\n  name: {name}\n  labels: {{karpenter.sh/nodepool: default, team: web}}\nspec:\n  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: {class}}}\n  taints: [{{key: dedicated, value: web, effect: NoSchedule}}]\n  startupTaints: [{{key: example.com/agent-not-ready, effect: NoExecute}}]\n  requirements:\n    - {{key: node.kubernetes.io/instance-type, operator: In, values: [{}]}}\n    - {{key: karpenter.sh/capacity-type, operator: In, values: [{capacity}]}}\n{zone}  resources: {{requests: {{cpu: 500m, memory: 1Gi}}}}\n",
        types.join(", ")
    ))
    .expect("NodeClaim yaml")
}

fn instance_id(provider_id: &str) -> &str {
    provider_id.rsplit('/').next().unwrap()
}

async fn instance(moto: &Moto, id: &str) -> aws_sdk_ec2::types::Instance {
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

fn tags_of(tags: &[aws_sdk_ec2::types::Tag]) -> BTreeMap<String, String> {
    tags.iter()
        .map(|t| {
            (
                t.key().unwrap_or_default().to_string(),
                t.value().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

async fn template_data(moto: &Moto, name: &str) -> aws_sdk_ec2::types::ResponseLaunchTemplateData {
    let out = moto
        .clients
        .ec2
        .describe_launch_template_versions()
        .launch_template_name(name)
        .versions("$Latest")
        .send()
        .await
        .unwrap();
    out.launch_template_versions()[0]
        .launch_template_data()
        .unwrap()
        .clone()
}

/// Device name, size (GiB), volume type, encrypted.
type Device = (String, Option<i32>, Option<String>, Option<bool>);

fn decode(b64: &str) -> String {
    String::from_utf8(base64::decode(b64).expect("base64")).expect("utf-8")
}

fn template_of(call: &FleetCall, instance_type: &str) -> String {
    call.configs
        .iter()
        .find(|c| c.overrides.iter().any(|o| o.instance_type == instance_type))
        .map(|c| c.template_name.clone())
        .expect("a template for the type")
}

#[tokio::test]
async fn al2023_launch_builds_template_fleet_and_tags_and_reuses_the_template() {
    let moto = moto_or_skip!("al2023_launch");
    let env = env(moto, "launch-al2023").await;
    let fleet = Recording::new(&env.moto, &[]);
    let cloud = env.cloud(fleet.clone());
    let class = env.class("web", "al2023@latest", "");
    let nc = claim(
        "web-abc12",
        "web",
        &["m5.large", "m5.xlarge"],
        "on-demand",
        None,
    );

    let got = cloud.launch(&nc, Some(&class)).await.expect("launch");
    let resolved = cloud.resolve_node_class(&class, now()).await.unwrap();
    let (subnet_a, zone_a) = env.seed.subnets[0].clone();
    assert_eq!(got.instance.instance_type, "m5.large", "cheapest first");
    assert_eq!(got.instance.zone, zone_a);
    assert_eq!(got.instance.capacity_type, CapacityType::OnDemand);
    assert!(
        got.instance
            .provider_id
            .starts_with(&format!("aws:///{zone_a}/i-"))
    );
    assert_eq!(got.labels["node.kubernetes.io/instance-type"], "m5.large");
    assert_eq!(got.labels["topology.kubernetes.io/zone"], zone_a);
    assert_eq!(got.labels["karpenter.sh/capacity-type"], "on-demand");
    assert_eq!(got.labels["kubernetes.io/arch"], "amd64");
    assert_eq!(got.capacity.get("cpu"), 2000);
    assert!(got.allocatable.get("cpu") < 2000 && got.allocatable.get("memory") > 0);

    // The fleet request: instant, lowest-price, every allowed (type, zone) with its subnet.
    let calls = fleet.calls();
    assert_eq!(calls.len(), 1);
    let call = &calls[0];
    assert_eq!(call.allocation_strategy, AllocationStrategy::LowestPrice);
    assert_eq!(call.default_target_capacity_type, "on-demand");
    let overrides: Vec<(String, String, String)> = call
        .overrides()
        .map(|o| (o.instance_type.clone(), o.zone.clone(), o.subnet_id.clone()))
        .collect();
    assert_eq!(
        overrides.len(),
        6,
        "two types in three zones: {overrides:?}"
    );
    assert_eq!(
        overrides[0],
        ("m5.large".into(), zone_a.clone(), subnet_a.clone())
    );
    for (_, zone, subnet) in &overrides {
        let want = &env.seed.subnets.iter().find(|(_, z)| z == zone).unwrap().0;
        assert_eq!(subnet, want);
    }
    // Different pod counts and kube-reserved: one template per type.
    assert_eq!(call.configs.len(), 2);

    // The instance in EC2.
    let id = instance_id(&got.instance.provider_id).to_string();
    let ec2 = instance(&env.moto, &id).await;
    assert_eq!(ec2.instance_type().map(|t| t.as_str()), Some("m5.large"));
    assert_eq!(ec2.subnet_id(), Some(subnet_a.as_str()));
    assert_eq!(ec2.image_id(), Some(resolved.amis[0].id.as_str()));
    let tags = tags_of(ec2.tags());
    let cluster = &env.seed.cluster;
    for (k, v) in [
        ("karpenter.sh/nodepool", "default"),
        ("karpenter.sh/nodeclaim", "web-abc12"),
        ("karpenter.k8s.aws/ec2nodeclass", "web"),
        (format!("kubernetes.io/cluster/{cluster}").as_str(), "owned"),
        ("eks:eks-cluster-name", cluster.as_str()),
        ("team", "web"),
        ("cost-center", "42"),
    ] {
        assert_eq!(
            tags.get(k).map(String::as_str),
            Some(v),
            "tag {k} in {tags:?}"
        );
    }
    assert_eq!(got.instance.tags, call.tags);

    // The template: groups, profile, metadata, devices, user data, tags.
    let name = template_of(call, "m5.large");
    assert!(name.starts_with("karpenter.k8s.aws/"));
    let data = template_data(&env.moto, &name).await;
    let mut groups: Vec<String> = data.security_group_ids().to_vec();
    groups.sort();
    let mut want: Vec<String> = env
        .seed
        .security_groups
        .iter()
        .map(|(id, _)| id.clone())
        .collect();
    want.sort();
    assert_eq!(groups, want);
    assert_eq!(
        data.iam_instance_profile().and_then(|p| p.name()),
        resolved.instance_profile.as_deref()
    );
    assert!(resolved.instance_profile.is_some());
    let md = data.metadata_options().expect("metadata options");
    assert_eq!(md.http_tokens().map(|t| t.as_str()), Some("required"));
    assert_eq!(md.http_put_response_hop_limit(), Some(1));
    assert_eq!(md.http_endpoint().map(|t| t.as_str()), Some("enabled"));
    let devices: Vec<Device> = data
        .block_device_mappings()
        .iter()
        .map(|b| {
            let e = b.ebs().unwrap();
            (
                b.device_name().unwrap_or_default().to_string(),
                e.volume_size(),
                e.volume_type().map(|t| t.as_str().to_string()),
                e.encrypted(),
            )
        })
        .collect();
    assert_eq!(
        devices,
        [(
            "/dev/xvda".to_string(),
            Some(20),
            Some("gp3".to_string()),
            Some(true)
        )]
    );
    assert_eq!(data.image_id(), Some(resolved.amis[0].id.as_str()));
    let user_data = decode(data.user_data().expect("user data"));
    for needle in [
        "apiVersion: node.eks.aws/v1alpha1",
        "kind: NodeConfig",
        &format!("name: \"{cluster}\""),
        &format!("apiServerEndpoint: \"{ENDPOINT}\""),
        "cidr: \"10.100.0.0/16\"",
        "karpenter.sh/nodepool=default",
        "team=web",
        "karpenter.sh/capacity-type=on-demand",
        "karpenter.sh/unregistered",
        "example.com/agent-not-ready",
        "dedicated",
        "maxPods: 29",
    ] {
        assert!(
            user_data.contains(needle),
            "{needle:?} missing from\n{user_data}"
        );
    }
    let lt_tags = support::cluster_template_names(&env.moto.clients, cluster).await;
    assert_eq!(lt_tags.len(), 2, "{lt_tags:?}");
    assert!(lt_tags.contains(&name));

    // A second claim with the same configuration reuses the templates.
    let nc2 = claim(
        "web-def34",
        "web",
        &["m5.large", "m5.xlarge"],
        "on-demand",
        None,
    );
    let second = cloud
        .launch(&nc2, Some(&class))
        .await
        .expect("second launch");
    assert_ne!(second.instance.provider_id, got.instance.provider_id);
    let calls = fleet.calls();
    assert_eq!(template_of(&calls[1], "m5.large"), name);
    assert_eq!(
        support::cluster_template_names(&env.moto.clients, cluster).await,
        lt_tags
    );
    // A fresh provider (a restart) finds them by name instead of creating new ones.
    let fleet2 = Recording::new(&env.moto, &[]);
    let restarted = env.cloud(fleet2.clone());
    restarted
        .launch(
            &claim(
                "web-ghi56",
                "web",
                &["m5.large", "m5.xlarge"],
                "on-demand",
                None,
            ),
            Some(&class),
        )
        .await
        .expect("launch after restart");
    assert_eq!(template_of(&fleet2.calls()[0], "m5.large"), name);
    assert_eq!(
        support::cluster_template_names(&env.moto.clients, cluster).await,
        lt_tags
    );
    let ec2 = instance(&env.moto, instance_id(&second.instance.provider_id)).await;
    assert_eq!(
        tags_of(ec2.tags())
            .get("karpenter.sh/nodeclaim")
            .map(String::as_str),
        Some("web-def34")
    );
}

#[tokio::test]
async fn bottlerocket_template_merges_user_settings_and_takes_class_metadata() {
    let moto = moto_or_skip!("bottlerocket_launch");
    let env = env(moto, "launch-br").await;
    let fleet = Recording::new(&env.moto, &[]);
    let cloud = env.cloud(fleet.clone());
    let class = env.class(
        "br",
        "bottlerocket@latest",
        "  metadataOptions: {httpTokens: optional, httpPutResponseHopLimit: 2}\n  userData: |\n    [settings.kubernetes]\n    allowed-unsafe-sysctls = [\"net.core.somaxconn\"]\n    [settings.host-containers.admin]\n    enabled = true\n",
    );
    let nc = claim("br-1", "br", &["m5.large"], "on-demand", None);
    let got = cloud.launch(&nc, Some(&class)).await.expect("launch");
    assert_eq!(got.instance.instance_type, "m5.large");
    let call = &fleet.calls()[0];
    assert_eq!(call.configs.len(), 1);
    let data = template_data(&env.moto, &call.configs[0].template_name).await;
    let md = data.metadata_options().unwrap();
    assert_eq!(md.http_tokens().map(|t| t.as_str()), Some("optional"));
    assert_eq!(md.http_put_response_hop_limit(), Some(2));
    let devices: Vec<(String, Option<i32>)> = data
        .block_device_mappings()
        .iter()
        .map(|b| {
            (
                b.device_name().unwrap_or_default().to_string(),
                b.ebs().unwrap().volume_size(),
            )
        })
        .collect();
    assert_eq!(
        devices,
        [
            ("/dev/xvda".to_string(), Some(4)),
            ("/dev/xvdb".to_string(), Some(20))
        ]
    );
    let toml = decode(data.user_data().unwrap());
    for needle in [
        &format!("cluster-name = \"{}\"", env.seed.cluster),
        &format!("api-server = \"{ENDPOINT}\""),
        "cluster-certificate = \"Q0EgYnVuZGxl\"",
        "max-pods = 29",
        "allowed-unsafe-sysctls = [\"net.core.somaxconn\"]",
        "[settings.host-containers.admin]",
        "\"karpenter.sh/nodepool\" = \"default\"",
        "karpenter.sh/unregistered",
    ] {
        assert!(toml.contains(needle), "{needle:?} missing from\n{toml}");
    }
}

#[tokio::test]
async fn capacity_errors_fall_back_to_the_next_offering_and_are_remembered() {
    let moto = moto_or_skip!("ice_fallback");
    let env = env(moto, "launch-ice").await;
    let (_, zone_a) = env.seed.subnets[0].clone();
    let (subnet_b, zone_b) = env.seed.subnets[1].clone();
    let fleet = Recording::new(&env.moto, &[("m5.large", &zone_a)]);
    let cloud = env.cloud(fleet.clone());
    let class = env.class("ice", "al2023@latest", "");
    let nc = claim(
        "ice-1",
        "ice",
        &["m5.large", "m5.xlarge"],
        "on-demand",
        None,
    );

    let got = cloud.launch(&nc, Some(&class)).await.expect("launch");
    assert_eq!(
        (
            got.instance.instance_type.as_str(),
            got.instance.zone.as_str()
        ),
        ("m5.large", zone_b.as_str()),
        "the same type in the next zone"
    );
    let ec2 = instance(&env.moto, instance_id(&got.instance.provider_id)).await;
    assert_eq!(ec2.subnet_id(), Some(subnet_b.as_str()));
    let calls = fleet.calls();
    assert_eq!(calls.len(), 2);
    let first = calls[0].overrides().next().unwrap();
    assert_eq!(
        (first.instance_type.as_str(), first.zone.as_str()),
        ("m5.large", zone_a.as_str())
    );
    assert!(
        !calls[1]
            .overrides()
            .any(|o| o.instance_type == "m5.large" && o.zone == zone_a),
        "the failed offering is not asked for again"
    );
    assert_eq!(
        calls[1].overrides().count(),
        calls[0].overrides().count() - 1
    );
    let t = now();
    let cache = cloud.launch.unavailable();
    assert!(cache.is_unavailable(CapacityType::OnDemand, "m5.large", &zone_a, t));
    assert!(!cache.is_unavailable(CapacityType::OnDemand, "m5.large", &zone_b, t));
    assert!(!cache.is_unavailable(CapacityType::Spot, "m5.large", &zone_a, t));
    assert!(
        !cache.is_unavailable(
            CapacityType::OnDemand,
            "m5.large",
            &zone_a,
            t.plus(std::time::Duration::from_secs(181))
        ),
        "marks last three minutes"
    );
}

#[tokio::test]
async fn no_capacity_anywhere_is_insufficient_capacity_listing_the_offerings() {
    let moto = moto_or_skip!("ice_everywhere");
    let env = env(moto, "launch-ice-all").await;
    let (_, zone_a) = env.seed.subnets[0].clone();
    let fleet = Recording::new(&env.moto, &[("m5.large", &zone_a), ("m5.xlarge", &zone_a)]);
    let cloud = env.cloud(fleet.clone());
    let class = env.class("none", "al2023@latest", "");
    let nc = claim(
        "none-1",
        "none",
        &["m5.large", "m5.xlarge"],
        "on-demand",
        Some(&zone_a),
    );

    let err = cloud.launch(&nc, Some(&class)).await.unwrap_err();
    match &err {
        CloudError::InsufficientCapacity { offerings, .. } => {
            let mut got = offerings.clone();
            got.sort();
            assert_eq!(
                got,
                [
                    (
                        "m5.large".to_string(),
                        zone_a.clone(),
                        "on-demand".to_string()
                    ),
                    (
                        "m5.xlarge".to_string(),
                        zone_a.clone(),
                        "on-demand".to_string()
                    ),
                ]
            );
        }
        other => panic!("want insufficient capacity, got {other:?}"),
    }
    assert!(err.is_retryable());
    assert_eq!(
        fleet.calls().len(),
        1,
        "both failed in one call; nothing left to try"
    );
    // Until the marks expire, the next launch fails without calling CreateFleet.
    let again = cloud
        .launch(
            &claim("none-2", "none", &["m5.large"], "on-demand", Some(&zone_a)),
            Some(&class),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(again, CloudError::InsufficientCapacity { .. }),
        "{again:?}"
    );
    assert_eq!(fleet.calls().len(), 1);
}

#[tokio::test]
async fn spot_uses_price_capacity_optimized() {
    let moto = moto_or_skip!("spot_launch");
    let env = env(moto, "launch-spot").await;
    let fleet = Recording::new(&env.moto, &[]);
    let cloud = env.cloud(fleet.clone());
    let class = env.class(
        "spot",
        "al2023@latest",
        "  associatePublicIPAddress: true\n",
    );
    let nc = claim("spot-1", "spot", &["m5.large"], "spot", None);
    let got = cloud.launch(&nc, Some(&class)).await.expect("launch");
    assert_eq!(got.instance.capacity_type, CapacityType::Spot);
    assert_eq!(got.labels["karpenter.sh/capacity-type"], "spot");
    let call = &fleet.calls()[0];
    assert_eq!(
        call.allocation_strategy,
        AllocationStrategy::PriceCapacityOptimized
    );
    assert_eq!(call.default_target_capacity_type, "spot");
    let data = template_data(&env.moto, &call.configs[0].template_name).await;
    assert!(decode(data.user_data().unwrap()).contains("karpenter.sh/capacity-type=spot"));
    // With associatePublicIPAddress the template defines the primary interface, groups inside.
    let nics = data.network_interfaces();
    assert_eq!(nics.len(), 1, "{nics:?}");
    assert_eq!(nics[0].device_index(), Some(0));
    assert_eq!(nics[0].associate_public_ip_address(), Some(true));
    let mut groups = nics[0].groups().to_vec();
    groups.sort();
    let mut want: Vec<String> = env
        .seed
        .security_groups
        .iter()
        .map(|(id, _)| id.clone())
        .collect();
    want.sort();
    assert_eq!(groups, want);
    assert!(data.security_group_ids().is_empty());
}

#[tokio::test]
async fn missing_class_is_not_ready_and_custom_user_data_is_verbatim() {
    let moto = moto_or_skip!("custom_launch");
    let env = env(moto, "launch-custom").await;
    let fleet = Recording::new(&env.moto, &[]);
    let cloud = env.cloud(fleet.clone());
    let nc = claim("c-1", "custom", &["m5.large"], "on-demand", None);
    let err = cloud.launch(&nc, None).await.unwrap_err();
    assert!(
        matches!(err, CloudError::NodeClassNotReady { ref name, .. } if name == "custom"),
        "{err:?}"
    );

    let class = env.class(
        "custom",
        "al2023@latest",
        "  amiFamily: Custom\n  userData: |\n    #!/bin/bash\n    /opt/join --cluster mine\n",
    );
    let got = cloud.launch(&nc, Some(&class)).await.expect("launch");
    let data = template_data(&env.moto, &fleet.calls()[0].configs[0].template_name).await;
    assert_eq!(
        decode(data.user_data().unwrap()),
        "#!/bin/bash\n/opt/join --cluster mine\n"
    );
    assert!(
        data.block_device_mappings().is_empty(),
        "Custom keeps the image's devices"
    );
    // moto applies the template's user data to the instance it launches from it.
    let attr = env
        .moto
        .clients
        .ec2
        .describe_instance_attribute()
        .instance_id(instance_id(&got.instance.provider_id))
        .attribute(InstanceAttributeName::UserData)
        .send()
        .await
        .unwrap();
    let ud = attr.user_data().and_then(|u| u.value()).map(decode);
    assert_eq!(
        ud.as_deref(),
        Some("#!/bin/bash\n/opt/join --cluster mine\n")
    );
}

#[tokio::test]
async fn identical_launches_share_one_fleet_call_and_keep_their_own_claim_tags() {
    let moto = moto_or_skip!("batched_launch");
    let env = env(moto, "launch-batch").await;
    let recording = Recording::new(&env.moto, &[]);
    let batching = Arc::new(BatchingFleet::with_window(
        recording.clone(),
        env.moto.clients.clone(),
        // Far wider than the launches' spread once everything they look up is cached.
        std::time::Duration::from_secs(3),
        std::time::Duration::from_secs(20),
    ));
    let cloud = env.cloud_with(batching);
    let class = env.class("batch", "al2023@latest", "");
    // One launch first resolves the class, lists the types and creates the template, so the
    // three below reach the batcher at once however slowly moto answers: otherwise their
    // spread can outlast the idle window on a loaded machine.
    cloud
        .launch(
            &claim("batch-0", "batch", &["m5.large"], "on-demand", None),
            Some(&class),
        )
        .await
        .expect("warm-up launch");
    let before = recording.calls().len();
    let claims: Vec<NodeClaim> = (1..=3)
        .map(|i| {
            claim(
                &format!("batch-{i}"),
                "batch",
                &["m5.large"],
                "on-demand",
                None,
            )
        })
        .collect();
    let (a, b, c) = tokio::join!(
        cloud.launch(&claims[0], Some(&class)),
        cloud.launch(&claims[1], Some(&class)),
        cloud.launch(&claims[2], Some(&class)),
    );
    let launched = [a.expect("a"), b.expect("b"), c.expect("c")];
    let calls = recording.calls().split_off(before);
    assert_eq!(
        calls.len(),
        1,
        "one CreateFleet for three identical launches"
    );
    assert_eq!(calls[0].total_target_capacity, 3);
    assert!(!calls[0].tags.contains_key("karpenter.sh/nodeclaim"));
    let mut ids: Vec<&str> = launched
        .iter()
        .map(|l| instance_id(&l.instance.provider_id))
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 3, "each claim has its own instance");
    for (l, nc) in launched.iter().zip(&claims) {
        let ec2 = instance(&env.moto, instance_id(&l.instance.provider_id)).await;
        let tags = tags_of(ec2.tags());
        assert_eq!(
            tags.get("karpenter.sh/nodeclaim"),
            nc.metadata.name.as_ref(),
            "{tags:?}"
        );
        assert_eq!(
            tags.get("karpenter.sh/nodepool").map(String::as_str),
            Some("default")
        );
    }
    assert_eq!(
        support::cluster_template_names(&env.moto.clients, &env.seed.cluster)
            .await
            .len(),
        1
    );
}

#[tokio::test]
async fn unused_templates_are_deleted_and_made_again_when_needed() {
    let moto = moto_or_skip!("template_cleanup");
    let env = env(moto, "launch-gc").await;
    let fleet = Recording::new(&env.moto, &[]);
    let cloud = env.cloud(fleet.clone());
    let class = env.class("gc", "al2023@latest", "");
    let nc = claim("gc-1", "gc", &["m5.large"], "on-demand", None);
    cloud.launch(&nc, Some(&class)).await.expect("launch");
    let cluster = &env.seed.cluster;
    let before = support::cluster_template_names(&env.moto.clients, cluster).await;
    assert_eq!(before.len(), 1);

    // A restarted provider learns of the template and keeps it while it is recent.
    let restarted = env.cloud(Recording::new(&env.moto, &[]));
    let hour = std::time::Duration::from_secs(3600);
    assert!(
        restarted
            .delete_unused_launch_templates(hour)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        support::cluster_template_names(&env.moto.clients, cluster).await,
        before
    );
    let deleted = restarted
        .delete_unused_launch_templates(std::time::Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(deleted, before);
    assert!(
        support::cluster_template_names(&env.moto.clients, cluster)
            .await
            .is_empty()
    );

    // The first provider still believes in it: the launch finds it gone and makes it again.
    let again = claim("gc-2", "gc", &["m5.large"], "on-demand", None);
    cloud
        .launch(&again, Some(&class))
        .await
        .expect("launch after deletion");
    assert_eq!(
        support::cluster_template_names(&env.moto.clients, cluster).await,
        before
    );
}

#[tokio::test]
async fn a_finalized_class_loses_its_templates_and_profile_and_no_other() {
    use nodewright_cloud::CloudProvider;
    let moto = moto_or_skip!("class_finalization");
    let env = env(moto, "launch-final").await;
    let cloud = env.cloud(Recording::new(&env.moto, &[]));
    let gone = env.class("gone", "al2023@latest", "");
    let kept = env.class("kept", "al2023@latest", "");
    for (claim_name, class) in [("gone-1", &gone), ("kept-1", &kept)] {
        let name = class.metadata.name.as_deref().unwrap();
        let nc = claim(claim_name, name, &["m5.large"], "on-demand", None);
        cloud.launch(&nc, Some(class)).await.expect("launch");
    }
    let cluster = &env.seed.cluster;
    let before = support::cluster_template_names(&env.moto.clients, cluster).await;
    assert_eq!(before.len(), 2, "{before:?}");
    let profile_of = |c: &nodewright_api::aws::v1::EC2NodeClass| {
        let uid = c.metadata.uid.as_deref().unwrap();
        nodewright_cloud_aws::nodeclass::profile::profile_name(
            cluster,
            "us-east-1",
            c.metadata.name.as_deref().unwrap(),
            uid,
        )
    };
    let profile_exists = |name: String| {
        let iam = env.moto.clients.iam.clone();
        async move {
            iam.get_instance_profile()
                .instance_profile_name(name)
                .send()
                .await
                .is_ok()
        }
    };
    assert!(profile_exists(profile_of(&gone)).await);

    let removed = cloud.finalize_node_class(&gone).await.unwrap();
    assert_eq!(removed.len(), 2, "a template and a profile: {removed:?}");
    assert!(removed.contains(&profile_of(&gone)));
    let after = support::cluster_template_names(&env.moto.clients, cluster).await;
    assert_eq!(after.len(), 1);
    assert!(!removed.contains(&after[0]));
    assert!(!profile_exists(profile_of(&gone)).await);
    assert!(profile_exists(profile_of(&kept)).await);
    // Already clean: nothing more to remove, and no error.
    assert!(cloud.finalize_node_class(&gone).await.unwrap().is_empty());
}

#[tokio::test]
async fn efa_requests_get_one_efa_interface_per_card_and_the_efa_resource() {
    let moto = moto_or_skip!("efa_launch");
    let env = env(moto, "launch-efa").await;
    let fleet = Recording::new(&env.moto, &[]);
    let cloud = env.cloud(fleet.clone());
    let class = env.class(
        "hpc",
        "al2023@latest",
        "  associatePublicIPAddress: false\n  connectionTracking: {tcpEstablishedTimeout: 120}\n",
    );
    let with_efa = |name: &str, efa: bool| -> NodeClaim {
        let request = if efa {
            ", vpc.amazonaws.com/efa: '1'"
        } else {
            ""
        };
        serde_yaml::from_str(&format!(
            "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata:\n  name: {name}\n  labels: {{karpenter.sh/nodepool: default}}\nspec:\n  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: hpc}}\n  requirements:\n    - {{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, c6in.32xlarge]}}\n    - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}\n  resources: {{requests: {{cpu: '1'{request}}}}}\n"
        ))
        .expect("NodeClaim yaml")
    };

    // EFA requested: only the EFA type fits, and its template has both EFA interfaces.
    let got = cloud
        .launch(&with_efa("hpc-1", true), Some(&class))
        .await
        .expect("launch");
    assert_eq!(got.instance.instance_type, "c6in.32xlarge");
    assert_eq!(got.capacity.get("vpc.amazonaws.com/efa"), 2);
    assert_eq!(got.allocatable.get("vpc.amazonaws.com/efa"), 2);
    let call = &fleet.calls()[0];
    assert!(call.overrides().all(|o| o.instance_type == "c6in.32xlarge"));
    let data = template_data(&env.moto, &template_of(call, "c6in.32xlarge")).await;
    let mut groups: Vec<String> = env
        .seed
        .security_groups
        .iter()
        .map(|(id, _)| id.clone())
        .collect();
    groups.sort();
    let nics: Vec<_> = data
        .network_interfaces()
        .iter()
        .map(|n| {
            let mut g = n.groups().to_vec();
            g.sort();
            (
                n.network_card_index(),
                n.device_index(),
                n.interface_type().map(str::to_string),
                n.associate_public_ip_address(),
                g,
            )
        })
        .collect();
    assert_eq!(
        nics,
        [
            (
                Some(0),
                Some(0),
                Some("efa".to_string()),
                Some(false),
                groups.clone()
            ),
            (
                Some(1),
                Some(1),
                Some("efa".to_string()),
                Some(false),
                groups.clone()
            ),
        ]
    );
    assert!(data.security_group_ids().is_empty());

    // Without the request the same type gets an ordinary interface and no EFA resource.
    let fleet2 = Recording::new(&env.moto, &[]);
    let plain = env.cloud(fleet2.clone());
    let mut nc = with_efa("hpc-2", false);
    nc.spec.requirements[0].values = Some(Arc::from(["c6in.32xlarge".to_string()]));
    let got = plain.launch(&nc, Some(&class)).await.expect("launch");
    assert_eq!(got.instance.instance_type, "c6in.32xlarge");
    assert!(!got.capacity.contains("vpc.amazonaws.com/efa"));
    let data = template_data(&env.moto, &template_of(&fleet2.calls()[0], "c6in.32xlarge")).await;
    let nics = data.network_interfaces();
    assert_eq!(nics.len(), 1);
    assert_eq!(nics[0].interface_type(), None);
    assert_eq!(nics[0].device_index(), Some(0));
    // Connection tracking rides on every interface the template defines.
    assert_eq!(
        nics[0]
            .connection_tracking_specification()
            .and_then(|c| c.tcp_established_timeout()),
        Some(120)
    );
}

/// A claim whose instance was launched by a process that died before writing it down is
/// launched at most once: the next process takes the tagged instance over. A claim created
/// after the process started is launched without the lookup.
#[tokio::test]
async fn a_claim_launched_by_an_earlier_process_takes_its_instance_over() {
    let moto = moto_or_skip!("launch_take_over");
    let env = env(moto, "launch-take-over").await;
    let class = env.class("default", "al2023@latest", "");
    let mut nc = claim("t-1", "default", &["m5.large"], "on-demand", None);
    nc.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::from_second(now().unix_seconds() - 60).unwrap(),
    ));
    let first = env
        .cloud(Recording::new(&env.moto, &[]))
        .launch(&nc, Some(&class))
        .await
        .expect("first launch");

    // The next process: its own caches, nothing of the first launch but EC2's instance.
    let fleet = Recording::new(&env.moto, &[]);
    let second = env
        .cloud(fleet.clone())
        .launch(&nc, Some(&class))
        .await
        .expect("second launch");
    assert_eq!(second.instance.provider_id, first.instance.provider_id);
    assert_eq!(second.instance.instance_type, "m5.large");
    assert_eq!(second.capacity, first.capacity);
    assert_eq!(
        second.labels.get("node.kubernetes.io/instance-type"),
        Some(&"m5.large".to_string())
    );
    assert!(fleet.calls().is_empty(), "no second CreateFleet");
    let tagged = env
        .moto
        .clients
        .ec2
        .describe_instances()
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("tag:karpenter.sh/nodeclaim")
                .values("t-1")
                .build(),
        )
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name(format!("tag:kubernetes.io/cluster/{}", env.seed.cluster))
                .values("owned")
                .build(),
        )
        .send()
        .await
        .unwrap();
    let count: usize = tagged
        .reservations()
        .iter()
        .map(|r| r.instances().len())
        .sum();
    assert_eq!(count, 1, "one instance for the claim");

    // A claim made after this process started was never launched elsewhere.
    let mut fresh = claim("t-2", "default", &["m5.large"], "on-demand", None);
    fresh.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::from_second(now().unix_seconds() + 5).unwrap(),
    ));
    let cloud = env.cloud(fleet.clone());
    cloud
        .launch(&fresh, Some(&class))
        .await
        .expect("fresh launch");
    assert_eq!(fleet.calls().len(), 1);
}
