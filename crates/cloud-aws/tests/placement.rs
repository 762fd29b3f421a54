//! Placement groups and dedicated tenancy against moto: `placementGroupSelector` resolution and
//! its condition, the instance types of a class in a group, launches whose templates carry the
//! placement, and `PlacementGroupDrift`.
//!
//! moto 5.2.5 implements neither CreatePlacementGroup nor DescribePlacementGroups (both answer
//! HTTP 500), so the groups come from an in-memory [`PlacementGroupSource`]; the real lookup is
//! exercised only for how it reports that failure. moto keeps a launch template's `Placement`
//! as written, which is where the launch is checked; it does not apply it to the instance
//! (DescribeInstances always shows an empty group name and `default` tenancy, no partition).

#[macro_use]
mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use aws_sdk_ec2::types::{InstanceType as Ec2Type, ResourceType, Tenancy};
use nodewright_api::aws::v1::EC2NodeClass;
use nodewright_api::v1::nodeclaim::{NodeClaim, NodeClaimStatus};
use nodewright_aws_model::placement::{PlacementGroup, Strategy};
use nodewright_cloud::{CloudProvider, tags};
use nodewright_cloud_aws::AwsCloud;
use nodewright_cloud_aws::error::AwsError;
use nodewright_cloud_aws::launch::{
    ClusterInfo, FleetApi, FleetCall, FleetFailure, FleetOutcome, SdkFleet,
};
use nodewright_cloud_aws::nodeclass::placement::{PlacementGroupSource, Query, instance_partition};
use nodewright_core::labels::aws;
use nodewright_core::model::InstanceType;
use nodewright_core::requirements::Operator;
use support::proxy;
use support::{DISCOVERY, Moto, Seed};

/// Placement groups kept in memory, changeable during a test.
#[derive(Default)]
struct Groups(Mutex<Vec<PlacementGroup>>);

#[async_trait]
impl PlacementGroupSource for Groups {
    async fn describe(&self, query: &Query) -> Result<Option<PlacementGroup>, AwsError> {
        Ok(self
            .0
            .lock()
            .unwrap()
            .iter()
            .find(|g| match query {
                Query::Id(id) => &g.id == id,
                Query::Name(name) => &g.name == name,
            })
            .cloned())
    }
}

fn group(id: &str, name: &str, strategy: Strategy, partitions: u32) -> PlacementGroup {
    PlacementGroup {
        id: id.into(),
        name: name.into(),
        strategy,
        partition_count: partitions,
        spread_level: None,
    }
}

struct Env {
    moto: Moto,
    seed: Seed,
    prefix: String,
    groups: Arc<Groups>,
}

/// A seeded VPC, an AL2023 image under a private parameter prefix, and two groups: a cluster
/// group `<cluster>-hpc` and a three-partition group `<cluster>-kafka`.
async fn env(moto: Moto, name: &str) -> Env {
    let cluster = support::unique(name);
    let seed = support::seed(&moto.clients, &cluster).await;
    let prefix = format!("/{cluster}");
    support::publish_al2023(&moto.clients, &cluster, &prefix).await;
    let groups = Arc::new(Groups::default());
    groups.0.lock().unwrap().extend([
        group("pg-0c1", &format!("{cluster}-hpc"), Strategy::Cluster, 0),
        group(
            "pg-0p1",
            &format!("{cluster}-kafka"),
            Strategy::Partition,
            3,
        ),
        group("pg-0s1", &format!("{cluster}-db"), Strategy::Spread, 0),
    ]);
    Env {
        moto,
        seed,
        prefix,
        groups,
    }
}

impl Env {
    fn cloud(&self) -> AwsCloud {
        self.cloud_on(&self.moto)
    }

    /// The provider talking to `moto` (moto itself, or a proxy in front of it).
    fn cloud_on(&self, moto: &Moto) -> AwsCloud {
        support::cloud(moto, &self.seed.cluster, &self.prefix, "1.32")
            .with_cluster_info(ClusterInfo {
                endpoint: "https://ABCDEF.gr7.us-east-1.eks.amazonaws.com".into(),
                ca_bundle: Some("Q0EgYnVuZGxl".into()),
                service_cidr: Some("10.100.0.0/16".into()),
                ..Default::default()
            })
            .with_placement_group_source(self.groups.clone())
    }

    fn class(&self, name: &str, selector: &str) -> EC2NodeClass {
        let cluster = &self.seed.cluster;
        let selector = if selector.is_empty() {
            String::new()
        } else {
            format!("  placementGroupSelector: {selector}\n")
        };
        let mut class = support::class(&format!(
            "metadata: {{name: {name}}}\nspec:\n  subnetSelectorTerms: [{{tags: {{{DISCOVERY}: {cluster}}}}}]\n  securityGroupSelectorTerms: [{{tags: {{{DISCOVERY}: {cluster}}}}}]\n  amiSelectorTerms: [{{alias: al2023@latest}}]\n  role: {role}\n{selector}",
            role = self.seed.role
        ));
        class.metadata.uid = Some(support::unique("uid"));
        class
    }
}

fn has_condition(class: &EC2NodeClass, type_: &str) -> bool {
    class
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == type_))
}

async fn reconciled(cloud: &AwsCloud, mut class: EC2NodeClass) -> EC2NodeClass {
    let r = cloud.reconcile_node_class(&class).await.expect("reconcile");
    class.status = Some(r.status);
    class.metadata.annotations = Some(r.annotations.into_iter().collect());
    class
}

impl Env {
    /// Class `name` as `cloud` reconciles it, in this cluster's group `<cluster>-<group>`
    /// (`hpc`, `kafka` or `db`), or in none when `group` is empty.
    async fn ready(&self, cloud: &AwsCloud, name: &str, group: &str) -> EC2NodeClass {
        let selector = if group.is_empty() {
            String::new()
        } else {
            format!("{{name: {}-{group}}}", self.seed.cluster)
        };
        reconciled(cloud, self.class(name, &selector)).await
    }
}

#[tokio::test]
async fn the_selector_resolves_by_name_and_by_id_and_reports_a_missing_group() {
    let moto = moto_or_skip!("the_selector_resolves_by_name_and_by_id_and_reports_a_missing_group");
    let env = env(moto, "pgsel").await;
    let cloud = env.cloud();
    let cluster = env.seed.cluster.clone();

    let none = env.ready(&cloud, "plain", "").await;
    let status = none.status.as_ref().unwrap();
    assert_eq!(support::condition(status, "Ready").0, "True");
    assert!(
        !has_condition(&none, "PlacementGroupReady"),
        "no selector, no condition"
    );

    for selector in [format!("{{name: {cluster}-kafka}}"), "{id: pg-0p1}".into()] {
        let class = reconciled(&cloud, env.class("kafka", &selector)).await;
        let status = class.status.as_ref().unwrap();
        assert_eq!(
            support::condition(status, "PlacementGroupReady"),
            ("True".into(), "PlacementGroupReady".into()),
            "{selector}"
        );
        assert_eq!(support::condition(status, "Ready").0, "True", "{selector}");
        let resolved = cloud
            .resolve_node_class(&class, nodewright_cloud_aws::cloud::now())
            .await
            .unwrap();
        assert_eq!(
            resolved.placement_group.map(|g| (g.id, g.partition_count)),
            Some(("pg-0p1".to_string(), 3)),
            "{selector}"
        );
    }

    for selector in [format!("{{name: {cluster}-gone}}"), "{id: pg-0ffff}".into()] {
        let class = reconciled(&cloud, env.class("gone", &selector)).await;
        let status = class.status.as_ref().unwrap();
        assert_eq!(
            support::condition(status, "PlacementGroupReady"),
            ("False".into(), "PlacementGroupNotFound".into()),
            "{selector}"
        );
        let ready = status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "Ready")
            .unwrap();
        assert_eq!(ready.status, "False");
        assert!(
            ready
                .message
                .as_deref()
                .unwrap_or_default()
                .contains("PlacementGroupReady"),
            "{ready:?}"
        );
    }

    // The real lookup, against a peer without DescribePlacementGroups: the failure is a
    // condition with its own reason, not a missing group.
    let sdk = support::cloud(&env.moto, &cluster, &env.prefix, "1.32");
    let class = reconciled(&sdk, env.class("sdk", "{id: pg-0p1}")).await;
    assert_eq!(
        support::condition(class.status.as_ref().unwrap(), "PlacementGroupReady"),
        ("False".into(), "PlacementGroupResolutionFailed".into())
    );
}

fn requirement<'a>(
    it: &'a InstanceType,
    key: &str,
) -> Option<&'a nodewright_core::requirements::Requirement> {
    it.requirements.iter().find(|r| r.key == key)
}

#[tokio::test]
async fn instance_types_of_a_class_in_a_group_carry_the_group() {
    let moto = moto_or_skip!("instance_types_of_a_class_in_a_group_carry_the_group");
    let env = env(moto, "pgtypes").await;
    let cloud = env.cloud();

    let kafka = env.ready(&cloud, "kafka", "kafka").await;
    let types = cloud.instance_types(Some(&kafka)).await.expect("types");
    let m5 = types
        .iter()
        .find(|t| t.name == "m5.large")
        .expect("m5.large");
    let id = requirement(m5, aws::PLACEMENT_GROUP_ID).unwrap();
    assert_eq!(
        (id.operator, id.values.to_vec()),
        (Operator::In, vec!["pg-0p1".to_string()])
    );
    let partitions = requirement(m5, aws::PLACEMENT_GROUP_PARTITION).unwrap();
    assert_eq!(*partitions.values, ["1", "2", "3"]);
    let tenancy = requirement(m5, aws::INSTANCE_TENANCY).unwrap();
    assert_eq!(*tenancy.values, ["default", "dedicated"]);

    let hpc = env.ready(&cloud, "hpc", "hpc").await;
    let types = cloud.instance_types(Some(&hpc)).await.expect("types");
    let m5 = types.iter().find(|t| t.name == "m5.large").unwrap();
    assert!(requirement(m5, aws::PLACEMENT_GROUP_PARTITION).is_none());
    assert!(m5.offerings.iter().any(|o| o.available));
    // A cluster group holds no burstable types: listed, but nothing to launch.
    let t3 = types.iter().find(|t| t.name == "t3.large").unwrap();
    assert!(!t3.offerings.is_empty());
    assert!(t3.offerings.iter().all(|o| !o.available));

    let plain = env.ready(&cloud, "plain", "").await;
    let types = cloud.instance_types(Some(&plain)).await.expect("types");
    let m5 = types.iter().find(|t| t.name == "m5.large").unwrap();
    assert!(requirement(m5, aws::PLACEMENT_GROUP_ID).is_none());
    let t3 = types.iter().find(|t| t.name == "t3.large").unwrap();
    assert!(t3.offerings.iter().any(|o| o.available));
}

fn claim(name: &str, class: &str, extra: &str) -> NodeClaim {
    serde_yaml::from_str(&format!(
        "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata:\n  name: {name}\n  labels: {{karpenter.sh/nodepool: default}}\nspec:\n  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: {class}}}\n  requirements:\n    - {{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}}\n    - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}\n{extra}  resources: {{requests: {{cpu: 500m, memory: 1Gi}}}}\n"
    ))
    .expect("NodeClaim yaml")
}

async fn template_placement(
    moto: &Moto,
    name: &str,
) -> Option<aws_sdk_ec2::types::LaunchTemplatePlacement> {
    let out = moto
        .clients
        .ec2
        .describe_launch_template_versions()
        .launch_template_name(name)
        .versions("$Latest")
        .send()
        .await
        .expect("DescribeLaunchTemplateVersions");
    out.launch_template_versions()[0]
        .launch_template_data()
        .and_then(|d| d.placement())
        .cloned()
}

#[tokio::test]
async fn launches_carry_tenancy_group_and_partition_in_the_template() {
    let moto = moto_or_skip!("launches_carry_tenancy_group_and_partition_in_the_template");
    let env = env(moto, "pglaunch").await;
    let cloud = env.cloud();
    let cluster = env.seed.cluster.clone();

    // A partition group, the claim pinned to partition 2 on dedicated hardware.
    let kafka = env.ready(&cloud, "kafka", "kafka").await;
    let pinned = claim(
        "kafka-a",
        "kafka",
        "    - {key: karpenter.k8s.aws/placement-group-partition, operator: In, values: ['2']}\n    - {key: karpenter.k8s.aws/instance-tenancy, operator: In, values: [dedicated]}\n",
    );
    let launched = cloud.create(&pinned, Some(&kafka)).await.expect("launch");
    assert_eq!(launched.labels[aws::PLACEMENT_GROUP_ID], "pg-0p1");
    assert_eq!(launched.labels[aws::PLACEMENT_GROUP_PARTITION], "2");
    assert_eq!(launched.labels[aws::INSTANCE_TENANCY], "dedicated");
    let names = support::cluster_template_names(&env.moto.clients, &cluster).await;
    let mut found = Vec::new();
    for n in &names {
        if let Some(p) = template_placement(&env.moto, n).await {
            found.push((
                p.group_id().map(str::to_string),
                p.partition_number(),
                p.tenancy().cloned(),
            ));
        }
    }
    assert_eq!(
        found,
        vec![(Some("pg-0p1".into()), Some(2), Some(Tenancy::Dedicated))]
    );

    // Unpinned: EC2 picks the partition, so neither the template nor the labels name one.
    let free = cloud
        .create(&claim("kafka-b", "kafka", ""), Some(&kafka))
        .await
        .expect("launch");
    assert_eq!(free.labels[aws::PLACEMENT_GROUP_ID], "pg-0p1");
    assert!(!free.labels.contains_key(aws::PLACEMENT_GROUP_PARTITION));
    assert_eq!(free.labels[aws::INSTANCE_TENANCY], "default");
    // The node learns its partition from the instance; moto records none, so the lookup
    // reports that EC2 has not said yet.
    assert_eq!(
        instance_partition(&env.moto.clients, &free.instance.provider_id).await,
        Ok(None)
    );

    // A cluster group with shared tenancy, and a class without a group.
    let hpc = env.ready(&cloud, "hpc", "hpc").await;
    cloud
        .create(&claim("hpc-a", "hpc", ""), Some(&hpc))
        .await
        .expect("launch");
    let plain = env.ready(&cloud, "plain", "").await;
    let p = cloud
        .create(&claim("plain-a", "plain", ""), Some(&plain))
        .await
        .expect("launch");
    assert!(!p.labels.contains_key(aws::PLACEMENT_GROUP_ID));
    assert_eq!(p.labels[aws::INSTANCE_TENANCY], "default");

    let mut placements = Vec::new();
    for n in support::cluster_template_names(&env.moto.clients, &cluster).await {
        placements.push(template_placement(&env.moto, &n).await.map(|p| {
            (
                p.group_id().map(str::to_string),
                p.partition_number(),
                p.tenancy().map(|t| t.as_str().to_string()),
            )
        }));
    }
    placements.sort();
    assert_eq!(
        placements,
        vec![
            // The class without a group: no Placement block at all.
            None,
            Some((Some("pg-0c1".into()), None, Some("default".into()))),
            Some((Some("pg-0p1".into()), None, Some("default".into()))),
            Some((Some("pg-0p1".into()), Some(2), Some("dedicated".into()))),
        ]
    );
}

#[tokio::test]
async fn a_node_outside_the_class_placement_group_has_drifted() {
    let moto = moto_or_skip!("a_node_outside_the_class_placement_group_has_drifted");
    let env = env(moto, "pgdrift").await;
    let cloud = env.cloud();
    let cluster = env.seed.cluster.clone();
    let class = env.ready(&cloud, "hpc", "hpc").await;
    let image = class.status.as_ref().unwrap().amis.as_ref().unwrap()[0]
        .id
        .clone();

    // An instance as a launch leaves it (moto applies no template groups, so RunInstances
    // sets them directly, and the group lives only in the claim's label).
    let (subnet, zone) = &env.seed.subnets[0];
    let mut req = env
        .moto
        .clients
        .ec2
        .run_instances()
        .image_id(&image)
        .instance_type(Ec2Type::M5Large)
        .subnet_id(subnet)
        .min_count(1)
        .max_count(1)
        .tag_specifications(support::tags(
            ResourceType::Instance,
            &support::tag_map(&[(tags::NODEPOOL, "default")]),
        ));
    for (g, _) in &env.seed.security_groups {
        req = req.security_group_ids(g);
    }
    let out = req.send().await.expect("RunInstances");
    let id = out.instances()[0].instance_id().unwrap().to_string();

    let annotations = class.metadata.annotations.clone();
    let claim = |group: Option<&str>| {
        let mut c = NodeClaim::default();
        let mut labels = BTreeMap::from([(
            "node.kubernetes.io/instance-type".to_string(),
            "m5.large".to_string(),
        )]);
        if let Some(g) = group {
            labels.insert(aws::PLACEMENT_GROUP_ID.to_string(), g.to_string());
        }
        c.metadata.labels = Some(labels);
        c.metadata.annotations = annotations.clone();
        c.status = Some(NodeClaimStatus {
            provider_id: Some(format!("aws:///{zone}/{id}")),
            ..Default::default()
        });
        c
    };
    let inside = claim(Some("pg-0c1"));
    assert_eq!(cloud.is_drifted(&inside, Some(&class)).await, Ok(None));
    // Launched before the class named a group.
    assert_eq!(
        cloud.is_drifted(&claim(None), Some(&class)).await,
        Ok(Some("PlacementGroupDrift".into()))
    );

    // The group was deleted and created again under the same name: a new id.
    {
        let mut groups = env.groups.0.lock().unwrap();
        groups.retain(|g| g.id != "pg-0c1");
        groups.push(group(
            "pg-0c2",
            &format!("{cluster}-hpc"),
            Strategy::Cluster,
            0,
        ));
    }
    let class = reconciled(&cloud, class).await;
    assert_eq!(
        support::condition(class.status.as_ref().unwrap(), "PlacementGroupReady").0,
        "True"
    );
    assert_eq!(
        cloud.is_drifted(&inside, Some(&class)).await,
        Ok(Some("PlacementGroupDrift".into()))
    );
    assert_eq!(
        cloud.is_drifted(&claim(Some("pg-0c2")), Some(&class)).await,
        Ok(None)
    );
}

// The real lookup through the SDK. A small proxy on 127.0.0.1 answers DescribePlacementGroups
// with EC2's XML (a group, or EC2's error for a name or id it does not know) and forwards every
// other call to moto, so the SDK parses what EC2 sends and the rest of the path is moto's.

const KAFKA_XML: &str = "<item><groupName>NAME</groupName><state>available</state>\
<strategy>partition</strategy><partitionCount>3</partitionCount><groupId>pg-0p9</groupId>\
<groupArn>arn:aws:ec2:us-east-1:123456789012:placement-group/NAME</groupArn></item>";

/// EC2's answer to one DescribePlacementGroups form: the group named `name` (id `pg-0p9`),
/// or `InvalidPlacementGroup.Unknown`.
fn placement_answer(form: &str, name: &str) -> (u16, String) {
    let known = form.contains(&format!("GroupName.1={name}")) || form.contains("GroupId.1=pg-0p9");
    if known {
        (
            200,
            format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<DescribePlacementGroupsResponse \
xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>7c5b4a4e-0000-4000-8000-0000000000aa\
</requestId><placementGroupSet>{}</placementGroupSet></DescribePlacementGroupsResponse>",
                KAFKA_XML.replace("NAME", name)
            ),
        )
    } else {
        (
            400,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error>\
<Code>InvalidPlacementGroup.Unknown</Code><Message>The Placement Group is unknown.</Message>\
</Error></Errors><RequestID>7c5b4a4e-0000-4000-8000-0000000000ab</RequestID></Response>"
                .to_string(),
        )
    }
}

/// A proxy that answers DescribePlacementGroups for the group `name` and forwards the rest.
async fn proxy(moto_url: &str, name: String) -> proxy::Proxy {
    let answer: proxy::Reply = Arc::new(move |form: &str| {
        form.contains("Action=DescribePlacementGroups")
            .then(|| placement_answer(form, &name))
    });
    proxy::start_replies(moto_url, answer, proxy::unchanged()).await
}

#[tokio::test]
async fn the_sdk_lookup_reads_ec2_answers() {
    let moto = moto_or_skip!("the_sdk_lookup_reads_ec2_answers");
    let env = env(moto, "pgsdk").await;
    let cluster = env.seed.cluster.clone();
    let name = format!("{cluster}-kafka");
    let answering = proxy(&env.moto.url, name.clone()).await;
    let url = answering.url.clone();
    let via = Moto {
        url: url.clone(),
        clients: nodewright_cloud_aws::AwsClients::new(&nodewright_cloud_aws::ClientOptions {
            region: support::REGION.into(),
            endpoint_url: Some(url),
            credentials: Some(nodewright_cloud_aws::StaticCredentials {
                access_key_id: "testing".into(),
                secret_access_key: "testing".into(),
            }),
        })
        .await,
    };
    // The provider's own lookup (no injected source).
    let cloud = support::cloud(&via, &cluster, &env.prefix, "1.32");

    for selector in [format!("{{name: {name}}}"), "{id: pg-0p9}".to_string()] {
        let class = reconciled(&cloud, env.class("kafka", &selector)).await;
        let status = class.status.as_ref().unwrap();
        assert_eq!(
            support::condition(status, "PlacementGroupReady").0,
            "True",
            "{selector}"
        );
        assert_eq!(support::condition(status, "Ready").0, "True", "{selector}");
        let types = cloud.instance_types(Some(&class)).await.expect("types");
        let m5 = types.iter().find(|t| t.name == "m5.large").unwrap();
        assert_eq!(
            requirement(m5, aws::PLACEMENT_GROUP_PARTITION).map(|r| r.values.to_vec()),
            Some(vec!["1".to_string(), "2".into(), "3".into()])
        );
    }
    let class = reconciled(&cloud, env.class("gone", "{name: nope}")).await;
    assert_eq!(
        support::condition(class.status.as_ref().unwrap(), "PlacementGroupReady"),
        ("False".into(), "PlacementGroupNotFound".into())
    );

    let forms = answering.sent("Action=DescribePlacementGroups");
    assert!(
        forms
            .iter()
            .any(|f| f.contains(&format!("GroupName.1={name}")))
    );
    assert!(forms.iter().any(|f| f.contains("GroupId.1=pg-0p9")));
    assert!(
        forms
            .iter()
            .all(|f| f.contains("Filter.1.Name=state") && f.contains("Filter.1.Value.1=available")),
        "{forms:?}"
    );
}

// Registration: the partition EC2 chose reaches the claim through the provider's hook. moto
// records no partition, so a proxy adds `partitionNumber` to DescribeInstances answers once the
// test says EC2 has placed the instance.

/// The claim as the controller holds it after the launch: the provider's labels and the
/// instance's provider id.
fn launched_claim(base: &NodeClaim, launched: &nodewright_cloud::Launched) -> NodeClaim {
    let mut c = base.clone();
    c.metadata.labels = Some(
        c.metadata
            .labels
            .clone()
            .unwrap_or_default()
            .into_iter()
            .chain(launched.labels.clone())
            .collect(),
    );
    c.status = Some(NodeClaimStatus {
        provider_id: Some(launched.instance.provider_id.clone()),
        ..Default::default()
    });
    c
}

#[tokio::test]
async fn an_unpinned_partition_launch_learns_its_partition_at_registration() {
    let moto = moto_or_skip!("an_unpinned_partition_launch_learns_its_partition_at_registration");
    let env = env(moto, "pgreg").await;
    let placed: Arc<Mutex<Option<u32>>> = Arc::new(Mutex::new(None));
    let partition = placed.clone();
    let rewrite: proxy::Rewrite =
        Arc::new(
            move |form: &str, body: String| match *partition.lock().unwrap() {
                Some(p) if form.contains("Action=DescribeInstances&") => body.replace(
                    "<placement>",
                    &format!("<placement><partitionNumber>{p}</partitionNumber>"),
                ),
                _ => body,
            },
        );
    let proxied = proxy::start(&env.moto.url, proxy::no_answers(), rewrite).await;
    let via = Moto {
        url: proxied.url.clone(),
        clients: nodewright_cloud_aws::AwsClients::new(&nodewright_cloud_aws::ClientOptions {
            region: support::REGION.into(),
            endpoint_url: Some(proxied.url.clone()),
            credentials: Some(nodewright_cloud_aws::StaticCredentials {
                access_key_id: "testing".into(),
                secret_access_key: "testing".into(),
            }),
        })
        .await,
    };
    let cloud = env.cloud_on(&via);
    let kafka = env.ready(&cloud, "kafka", "kafka").await;

    let free = claim("kafka-free", "kafka", "");
    let launched = cloud.create(&free, Some(&kafka)).await.expect("launch");
    assert!(!launched.labels.contains_key(aws::PLACEMENT_GROUP_PARTITION));
    let free = launched_claim(&free, &launched);
    let instance_id = launched
        .instance
        .provider_id
        .rsplit('/')
        .next()
        .unwrap()
        .to_string();

    // EC2 has not said where the instance went: registration waits.
    let pending = cloud
        .registration_hooks(&free, Some(&kafka))
        .await
        .expect("hook");
    assert!(pending.labels.is_empty());
    let why = pending.pending.expect("pending");
    assert!(
        why.contains(&instance_id) && why.contains("pg-0p1"),
        "{why}"
    );

    // It has: the claim and node gain the partition.
    *placed.lock().unwrap() = Some(2);
    let done = cloud
        .registration_hooks(&free, Some(&kafka))
        .await
        .expect("hook");
    assert_eq!(done.pending, None);
    assert_eq!(
        done.labels,
        BTreeMap::from([(aws::PLACEMENT_GROUP_PARTITION.to_string(), "2".to_string())])
    );
    let asked = proxied.sent("Action=DescribeInstances&");
    assert!(
        asked
            .iter()
            .any(|f| f.contains(&format!("InstanceId.1={instance_id}"))),
        "{asked:?}"
    );

    // A pinned claim already knows its partition, and a cluster group or no group has none:
    // nothing to do and nothing asked of EC2.
    let pinned = claim(
        "kafka-pinned",
        "kafka",
        "    - {key: karpenter.k8s.aws/placement-group-partition, operator: In, values: ['3']}\n",
    );
    let l = cloud.create(&pinned, Some(&kafka)).await.expect("launch");
    let pinned = launched_claim(&pinned, &l);
    let hpc = env.ready(&cloud, "hpc", "hpc").await;
    let base = claim("hpc-a", "hpc", "");
    let l = cloud.create(&base, Some(&hpc)).await.expect("launch");
    let in_cluster_group = launched_claim(&base, &l);
    let plain = env.ready(&cloud, "plain", "").await;
    let base = claim("plain-a", "plain", "");
    let l = cloud.create(&base, Some(&plain)).await.expect("launch");
    let ungrouped = launched_claim(&base, &l);
    let before = proxied.sent("Action=DescribeInstances&").len();
    for (c, class) in [
        (&pinned, &kafka),
        (&in_cluster_group, &hpc),
        (&ungrouped, &plain),
    ] {
        assert_eq!(
            cloud.registration_hooks(c, Some(class)).await,
            Ok(nodewright_cloud::Registration::done()),
            "{:?}",
            c.metadata.name
        );
    }
    assert_eq!(proxied.sent("Action=DescribeInstances&").len(), before);

    // A partition group that is gone has nothing to learn.
    env.groups.0.lock().unwrap().retain(|g| g.id != "pg-0p1");
    let fresh = env.cloud_on(&via);
    assert_eq!(
        fresh.registration_hooks(&free, Some(&kafka)).await,
        Ok(nodewright_cloud::Registration::done())
    );
}

// A spread group holds at most seven running instances per zone. When EC2 says the group is
// full in a zone, no type can go there for the group, so the zone is closed for the group as a
// whole (and only for it). moto has no placement groups, so the refusal is injected in front of
// its CreateFleet.

/// CreateFleet through moto, except that every override in `full` is refused with the spread
/// group's limit; every call's overrides are recorded.
struct SpreadFull {
    inner: SdkFleet,
    full: String,
    calls: Mutex<Vec<Vec<(String, String)>>>,
}

#[async_trait]
impl FleetApi for SpreadFull {
    async fn create_fleet(&self, call: &FleetCall) -> Result<FleetOutcome, AwsError> {
        self.calls.lock().unwrap().push(
            call.overrides()
                .map(|o| (o.instance_type.clone(), o.zone.clone()))
                .collect(),
        );
        let errors: Vec<FleetFailure> = call
            .overrides()
            .filter(|o| o.zone == self.full)
            .map(|o| FleetFailure {
                code: "InsufficientInstanceCapacity".into(),
                message: format!(
                    "The maximum number of running instances for the spread placement group pg-0s1 in {} has been reached.",
                    o.zone
                ),
                instance_type: Some(o.instance_type.clone()),
                subnet_id: Some(o.subnet_id.clone()),
                zone: Some(o.zone.clone()),
            })
            .collect();
        if errors.is_empty() {
            return self.inner.create_fleet(call).await;
        }
        Ok(FleetOutcome {
            instances: Vec::new(),
            errors,
        })
    }
}

fn available_zones(types: &[InstanceType], name: &str) -> Vec<String> {
    let mut zones: Vec<String> = types
        .iter()
        .find(|t| t.name == name)
        .unwrap()
        .offerings
        .iter()
        .filter(|o| o.available)
        .map(|o| o.zone.clone())
        .collect();
    zones.sort();
    zones.dedup();
    zones
}

#[tokio::test]
async fn a_full_spread_group_zone_is_closed_for_every_type_of_that_group() {
    let moto = moto_or_skip!("a_full_spread_group_zone_is_closed_for_every_type_of_that_group");
    let env = env(moto, "pgspread").await;
    let full = env.seed.subnets[0].1.clone();
    let fleet = Arc::new(SpreadFull {
        inner: SdkFleet::new(env.moto.clients.clone()),
        full: full.clone(),
        calls: Mutex::new(Vec::new()),
    });
    let cloud = env.cloud().with_fleet_api(fleet.clone());
    let db = env.ready(&cloud, "db", "db").await;
    let plain = env.ready(&cloud, "plain", "").await;
    let before = cloud.instance_types(Some(&db)).await.expect("types");
    assert!(available_zones(&before, "c5.large").contains(&full));

    let claim: NodeClaim = serde_yaml::from_str(
        "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata:\n  name: db-1\n  labels: {karpenter.sh/nodepool: default}\nspec:\n  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: db}\n  requirements:\n    - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, c5.large]}\n    - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}\n  resources: {requests: {cpu: 500m, memory: 1Gi}}\n",
    )
    .unwrap();
    let launched = cloud.create(&claim, Some(&db)).await.expect("launch");
    assert_ne!(launched.instance.zone, full);
    assert_eq!(launched.labels[aws::PLACEMENT_GROUP_ID], "pg-0s1");
    let calls = fleet.calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert!(calls[0].iter().any(|(_, z)| z == &full));
    assert!(
        calls[1].iter().all(|(_, z)| z != &full),
        "the retry leaves the full zone out for every type: {calls:?}"
    );

    // Every type of the group, spot included, is out of that zone; other zones, and classes
    // outside the group, are untouched.
    let after = cloud.instance_types(Some(&db)).await.expect("types");
    for name in ["m5.large", "c5.large", "r5.xlarge"] {
        assert!(!available_zones(&after, name).contains(&full), "{name}");
        assert!(!available_zones(&after, name).is_empty(), "{name}");
    }
    assert!(
        after
            .iter()
            .flat_map(|t| &t.offerings)
            .filter(|o| o.zone == full)
            .all(|o| !o.available)
    );
    let outside = cloud.instance_types(Some(&plain)).await.expect("types");
    assert!(available_zones(&outside, "c5.large").contains(&full));
}

fn tenancy_claim(name: &str, class: &str, capacity_type: &str) -> NodeClaim {
    serde_yaml::from_str(&format!(
        "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata:\n  name: {name}\n  labels: {{karpenter.sh/nodepool: default}}\nspec:\n  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: {class}}}\n  requirements:\n    - {{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}}\n    - {{key: karpenter.sh/capacity-type, operator: In, values: [{capacity_type}]}}\n    - {{key: karpenter.k8s.aws/instance-tenancy, operator: In, values: [dedicated]}}\n  resources: {{requests: {{cpu: 500m, memory: 1Gi}}}}\n"
    ))
    .unwrap()
}

/// EC2 runs Spot Instances on dedicated hardware (only `host` tenancy is refused for spot),
/// so a spot claim that needs dedicated tenancy launches as such; a spread group takes no
/// Dedicated Instances, so there the same claim finds no type to launch.
#[tokio::test]
async fn dedicated_tenancy_goes_with_spot_but_not_into_a_spread_group() {
    let moto = moto_or_skip!("dedicated_tenancy_goes_with_spot_but_not_into_a_spread_group");
    let env = env(moto, "pgtenancy").await;
    let cloud = env.cloud();
    let cluster = env.seed.cluster.clone();
    let plain = env.ready(&cloud, "plain", "").await;
    let spot = cloud
        .create(
            &tenancy_claim("spot-dedicated", "plain", "spot"),
            Some(&plain),
        )
        .await
        .expect("launch");
    assert_eq!(spot.labels[aws::INSTANCE_TENANCY], "dedicated");
    assert_eq!(
        spot.instance.capacity_type,
        nodewright_core::model::CapacityType::Spot
    );
    let mut tenancies = Vec::new();
    for n in support::cluster_template_names(&env.moto.clients, &cluster).await {
        if let Some(p) = template_placement(&env.moto, &n).await {
            tenancies.push(p.tenancy().cloned());
        }
    }
    assert_eq!(tenancies, vec![Some(Tenancy::Dedicated)]);

    let db = env.ready(&cloud, "db", "db").await;
    let types = cloud.instance_types(Some(&db)).await.expect("types");
    let m5 = types.iter().find(|t| t.name == "m5.large").unwrap();
    assert_eq!(
        requirement(m5, aws::INSTANCE_TENANCY).map(|r| r.values.to_vec()),
        Some(vec!["default".to_string()])
    );
    for capacity_type in ["spot", "on-demand"] {
        let refused = cloud
            .create(
                &tenancy_claim("db-dedicated", "db", capacity_type),
                Some(&db),
            )
            .await;
        assert!(
            matches!(
                refused,
                Err(nodewright_cloud::CloudError::InsufficientCapacity { .. })
            ),
            "{capacity_type}: {refused:?}"
        );
    }
}
