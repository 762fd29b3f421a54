//! Test support for moto-backed tests: connects to the moto server `scripts/moto` started,
//! names things uniquely so tests can share one server concurrently, and seeds the network and
//! IAM objects a cluster's node classes select.
#![allow(dead_code, unused_macros)]

pub mod proxy;

/// The moto connection for a test, or a visible skip when no server runs (see [`moto`]).
macro_rules! moto_or_skip {
    ($name:expr) => {
        match support::moto($name).await {
            Some(m) => m,
            None => return,
        }
    };
}

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use aws_sdk_ec2::types::{Filter, LaunchTemplate, ResourceType, Tag, TagSpecification};
use std::sync::Mutex;

use nodewright_cloud::{BatchFlushed, LaunchFailure, ProviderObserver, TerminationFailure};
use nodewright_cloud_aws::{AwsClients, ClientOptions, StaticCredentials};

pub const REGION: &str = "us-east-1";
pub const ZONES: &[&str] = &["us-east-1a", "us-east-1b", "us-east-1c"];
pub const DISCOVERY: &str = "karpenter.sh/discovery";

/// A connection to the test moto server.
pub struct Moto {
    pub url: String,
    pub clients: AwsClients,
}

/// The moto server from `NODEWRIGHT_MOTO_URL`. Without it the test is skipped with a message,
/// unless `NODEWRIGHT_REQUIRE_MOTO=1` (set by `scripts/test`), where it fails.
pub async fn moto(test: &str) -> Option<Moto> {
    let url = match std::env::var("NODEWRIGHT_MOTO_URL") {
        Ok(u) if !u.is_empty() => u,
        _ => {
            if std::env::var("NODEWRIGHT_REQUIRE_MOTO").as_deref() == Ok("1") {
                panic!(
                    "{test}: NODEWRIGHT_MOTO_URL is not set but NODEWRIGHT_REQUIRE_MOTO=1; \
                     run the tests through scripts/test or scripts/moto"
                );
            }
            // Written past the test harness's capture, so a skip is visible in a passing run.
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "skipping {test}: no moto server (run `scripts/moto cargo test -p nodewright-cloud-aws`)"
            );
            return None;
        }
    };
    let clients = clients_via(&url).await;
    Some(Moto { url, clients })
}

/// A name no other test (or earlier run against the same server) uses.
pub fn unique(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{prefix}-{}-{n}-{nanos:x}", std::process::id())
}

pub fn tags(resource: ResourceType, tags: &BTreeMap<String, String>) -> TagSpecification {
    let mut spec = TagSpecification::builder().resource_type(resource);
    for (k, v) in tags {
        spec = spec.tags(Tag::builder().key(k).value(v).build());
    }
    spec.build()
}

pub fn tag_map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// What [`seed`] created.
#[derive(Clone, Debug)]
pub struct Seed {
    pub cluster: String,
    pub vpc_id: String,
    /// (subnet id, zone), one per zone of [`ZONES`], tagged `karpenter.sh/discovery: <cluster>`.
    pub subnets: Vec<(String, String)>,
    /// A subnet in the same VPC without the discovery tag, which selectors must not pick.
    pub untagged_subnet: String,
    /// (group id, group name), tagged `karpenter.sh/discovery: <cluster>`.
    pub security_groups: Vec<(String, String)>,
    /// The node role, trusted by EC2.
    pub role: String,
}

pub async fn create_vpc(c: &AwsClients, cluster: &str) -> String {
    let out = c
        .ec2
        .create_vpc()
        .cidr_block("10.0.0.0/16")
        .tag_specifications(tags(
            ResourceType::Vpc,
            &tag_map(&[(DISCOVERY, cluster), ("Name", cluster)]),
        ))
        .send()
        .await
        .expect("CreateVpc");
    out.vpc.and_then(|v| v.vpc_id).expect("vpc id")
}

pub async fn create_subnet(
    c: &AwsClients,
    vpc: &str,
    cidr: &str,
    zone: &str,
    tag: &BTreeMap<String, String>,
) -> String {
    let mut req = c
        .ec2
        .create_subnet()
        .vpc_id(vpc)
        .cidr_block(cidr)
        .availability_zone(zone);
    if !tag.is_empty() {
        req = req.tag_specifications(tags(ResourceType::Subnet, tag));
    }
    let out = req.send().await.expect("CreateSubnet");
    out.subnet.and_then(|s| s.subnet_id).expect("subnet id")
}

pub async fn create_security_group(
    c: &AwsClients,
    vpc: &str,
    name: &str,
    tag: &BTreeMap<String, String>,
) -> String {
    let mut req = c
        .ec2
        .create_security_group()
        .vpc_id(vpc)
        .group_name(name)
        .description("test");
    if !tag.is_empty() {
        req = req.tag_specifications(tags(ResourceType::SecurityGroup, tag));
    }
    req.send()
        .await
        .expect("CreateSecurityGroup")
        .group_id
        .expect("group id")
}

pub async fn create_role(c: &AwsClients, name: &str) {
    let trust = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;
    c.iam
        .create_role()
        .role_name(name)
        .assume_role_policy_document(trust)
        .send()
        .await
        .expect("CreateRole");
}

/// A VPC with one discovery-tagged subnet per zone (cidr 10.0.<i>.0/24), one untagged subnet,
/// two tagged security groups (`<cluster>-nodes`, `<cluster>-extra`) and a node role
/// `<cluster>-node`.
pub async fn seed(c: &AwsClients, cluster: &str) -> Seed {
    let vpc_id = create_vpc(c, cluster).await;
    let mut subnets = Vec::new();
    for (i, zone) in ZONES.iter().enumerate() {
        let name = format!("{cluster}/SubnetPrivate{}", zone.to_uppercase());
        let id = create_subnet(
            c,
            &vpc_id,
            &format!("10.0.{i}.0/24"),
            zone,
            &tag_map(&[(DISCOVERY, cluster), ("Name", &name)]),
        )
        .await;
        subnets.push((id, zone.to_string()));
    }
    let untagged_subnet =
        create_subnet(c, &vpc_id, "10.0.100.0/24", ZONES[0], &BTreeMap::new()).await;
    let mut security_groups = Vec::new();
    for suffix in ["nodes", "extra"] {
        let name = format!("{cluster}-{suffix}");
        let id = create_security_group(c, &vpc_id, &name, &tag_map(&[(DISCOVERY, cluster)])).await;
        security_groups.push((id, name));
    }
    let role = format!("{cluster}-node");
    create_role(c, &role).await;
    Seed {
        cluster: cluster.to_string(),
        vpc_id,
        subnets,
        untagged_subnet,
        security_groups,
        role,
    }
}

/// A copy of moto's bundled `ami-ekslinux` (x86_64) owned by this account, named `name` and
/// tagged `tags`. Returns the new image id.
pub async fn copy_image(c: &AwsClients, name: &str, tags: &[(&str, &str)]) -> String {
    let out = c
        .ec2
        .copy_image()
        .source_image_id("ami-ekslinux")
        .source_region(REGION)
        .name(name)
        .send()
        .await
        .expect("CopyImage");
    let id = out.image_id.expect("image id");
    if !tags.is_empty() {
        let mut req = c.ec2.create_tags().resources(&id);
        for (k, v) in tags {
            req = req.tags(Tag::builder().key(*k).value(*v).build());
        }
        req.send().await.expect("CreateTags");
    }
    id
}

/// Stores `value` in SSM under `prefix + name`, as the public parameter `name` would be.
pub async fn put_parameter(c: &AwsClients, prefix: &str, name: &str, value: &str) {
    c.ssm
        .put_parameter()
        .name(format!("{prefix}{name}"))
        .value(value)
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .overwrite(true)
        .send()
        .await
        .expect("PutParameter");
}

/// The public SSM parameter naming the recommended AL2023 (x86_64) image for Kubernetes 1.32.
pub const AL2023_132: &str =
    "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/standard/recommended/image_id";

/// A copy of moto's EKS image named `{name}-al2023`, published under `prefix` as the
/// recommended AL2023 image for 1.32 (what `al2023@latest` resolves to). Returns its id.
pub async fn publish_al2023(c: &AwsClients, name: &str, prefix: &str) -> String {
    let image = copy_image(c, &format!("{name}-al2023"), &[]).await;
    put_parameter(c, prefix, AL2023_132, &image).await;
    image
}

/// A test-wide `AwsCloud` whose SSM lookups read under `prefix`, with the given cluster.
/// Nodes would reach the cluster at a made-up endpoint (with a CA and a service CIDR), so
/// every family's user data can be built; tests about that set their own.
pub fn cloud(
    moto: &Moto,
    cluster: &str,
    prefix: &str,
    kubernetes: &str,
) -> nodewright_cloud_aws::AwsCloud {
    cloud_with(moto, cluster, prefix, kubernetes, |_| {})
}

/// [`cloud`] with its settings changed by `tweak` first.
pub fn cloud_with(
    moto: &Moto,
    cluster: &str,
    prefix: &str,
    kubernetes: &str,
    tweak: impl FnOnce(&mut nodewright_cloud_aws::AwsSettings),
) -> nodewright_cloud_aws::AwsCloud {
    use std::sync::Arc;
    let parameters = Arc::new(nodewright_cloud_aws::SsmParameters::with_prefix(
        moto.clients.ssm.clone(),
        prefix,
    ));
    let prices = Arc::new(nodewright_cloud_aws::pricing::AwsPriceSource::new(
        moto.clients.clone(),
    ));
    let mut settings = nodewright_cloud_aws::AwsSettings {
        cluster_name: cluster.to_string(),
        kubernetes_version: kubernetes.to_string(),
        model: Default::default(),
        isolated_vpc: false,
        disable_dry_run: false,
        enable_zonal_shift: false,
        reserved_capacity: true,
        resolve_every: nodewright_cloud_aws::launch::resolved::TTL,
    };
    tweak(&mut settings);
    nodewright_cloud_aws::AwsCloud::with_parts(moto.clients.clone(), settings, parameters, prices)
        .with_cluster_info(nodewright_cloud_aws::launch::ClusterInfo {
            endpoint: "https://cluster.test.internal".into(),
            ca_bundle: Some("Q0EgYnVuZGxl".into()),
            service_cidr: Some("10.100.0.0/16".into()),
            ..Default::default()
        })
}

/// A v1 EC2NodeClass from YAML.
pub fn class(yaml: &str) -> nodewright_api::aws::v1::EC2NodeClass {
    serde_yaml::from_str(yaml).expect("EC2NodeClass yaml")
}

/// The status of condition `type_` (`True`/`False`) and its reason.
pub fn condition(
    status: &nodewright_api::aws::v1::EC2NodeClassStatus,
    type_: &str,
) -> (String, String) {
    let c = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no {type_} condition in {status:?}"));
    (c.status.clone(), c.reason.clone().unwrap_or_default())
}

/// Clients for the test credentials and region that talk to `url` (moto, or a proxy in front
/// of it).
pub async fn clients_via(url: &str) -> AwsClients {
    AwsClients::new(&ClientOptions {
        region: REGION.into(),
        endpoint_url: Some(url.to_string()),
        credentials: Some(StaticCredentials {
            access_key_id: "testing".into(),
            secret_access_key: "testing".into(),
        }),
    })
    .await
}

/// What the provider reported about terminations and flushed batches.
#[derive(Default)]
pub struct Recorder {
    pub terminations: Mutex<Vec<TerminationFailure>>,
    pub batches: Mutex<Vec<BatchFlushed>>,
}

impl ProviderObserver for Recorder {
    fn launch_failed(&self, _: &LaunchFailure) {}

    fn termination_failed(&self, f: &TerminationFailure) {
        self.terminations.lock().unwrap().push(f.clone());
    }

    fn batch_flushed(&self, b: &BatchFlushed) {
        self.batches.lock().unwrap().push(b.clone());
    }
}

/// The Kubernetes version of the EKS clusters [`create_eks_cluster`] makes.
pub const EKS_VERSION: &str = "1.29";

/// An EKS cluster in moto with `cidr` as its service CIDR, so DescribeCluster can answer.
pub async fn create_eks_cluster(moto: &Moto, name: &str, subnets: &[String], cidr: &str) {
    use aws_sdk_eks::types::{KubernetesNetworkConfigRequest, VpcConfigRequest};
    moto.clients
        .eks
        .create_cluster()
        .name(name)
        .version(EKS_VERSION)
        .role_arn("arn:aws:iam::123456789012:role/eks-cluster")
        .resources_vpc_config(
            VpcConfigRequest::builder()
                .set_subnet_ids(Some(subnets.to_vec()))
                .build(),
        )
        .kubernetes_network_config(
            KubernetesNetworkConfigRequest::builder()
                .service_ipv4_cidr(cidr)
                .build(),
        )
        .send()
        .await
        .expect("CreateCluster");
}

/// The launch templates in moto tagged for `cluster`. Filtered by tag: moto answers an
/// unfiltered call with its first 15 templates and no next token, and earlier tests leave
/// more than that behind.
pub async fn cluster_templates(c: &AwsClients, cluster: &str) -> Vec<LaunchTemplate> {
    c.ec2
        .describe_launch_templates()
        .filters(
            Filter::builder()
                .name("tag:karpenter.k8s.aws/cluster")
                .values(cluster)
                .build(),
        )
        .send()
        .await
        .expect("DescribeLaunchTemplates")
        .launch_templates()
        .to_vec()
}

/// The names of the launch templates in moto tagged for `cluster`, sorted.
pub async fn cluster_template_names(c: &AwsClients, cluster: &str) -> Vec<String> {
    let mut names: Vec<String> = cluster_templates(c, cluster)
        .await
        .iter()
        .filter_map(|t| t.launch_template_name().map(str::to_string))
        .collect();
    names.sort();
    names
}
