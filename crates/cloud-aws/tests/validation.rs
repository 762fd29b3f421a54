//! `ValidationSucceeded` from launch checks against moto: the authorization dry runs a
//! reconcile sends (seen through a recording proxy), their cache, `DISABLE_DRY_RUN`, oversized
//! user data, and EC2's refusals (which moto never sends, so the proxy answers with them).

#[macro_use]
mod support;

use std::sync::Arc;
use std::time::Duration;

use nodewright_api::aws::v1::{EC2NodeClass, EC2NodeClassStatus};
use nodewright_cloud::CloudProvider;
use nodewright_cloud_aws::cluster::{ClusterFacts, KnownClusterFacts};
use nodewright_cloud_aws::launch::ClusterInfo;
use nodewright_cloud_aws::{AwsClients, AwsCloud};
use support::proxy::{self, Proxy};
use support::{DISCOVERY, Moto, Seed, condition};

const ACTIONS: [&str; 3] = [
    "Action=CreateFleet",
    "Action=CreateLaunchTemplate",
    "Action=RunInstances",
];

struct Env {
    seed: Seed,
    image: String,
    proxy: Proxy,
    via: Moto,
}

/// A seeded cluster and an image, with a proxy in front of moto that answers with `reply`
/// where it gives an answer and records every request.
async fn env(moto: &Moto, name: &str, reply: proxy::Reply) -> Env {
    let cluster = support::unique(name);
    let seed = support::seed(&moto.clients, &cluster).await;
    let image = support::copy_image(&moto.clients, &support::unique("img"), &[]).await;
    let proxy = proxy::start_replies(&moto.url, reply, proxy::unchanged()).await;
    let via = Moto {
        url: proxy.url.clone(),
        clients: support::clients_via(&proxy.url).await,
    };
    Env {
        seed,
        image,
        proxy,
        via,
    }
}

impl Env {
    fn cloud(&self) -> AwsCloud {
        support::cloud(&self.via, &self.seed.cluster, "", "1.32").with_cluster_info(ClusterInfo {
            endpoint: "https://validation.example.com".into(),
            ca_bundle: Some("Q0EgYnVuZGxl".into()),
            service_cidr: Some("10.100.0.0/16".into()),
            ..Default::default()
        })
    }

    /// The provider with the cluster facts it resolved itself from EKS at start, asking EKS
    /// again at most once per `every` while the service CIDR is unknown.
    async fn cloud_resolving(
        &self,
        eks: &AwsClients,
        eks_cluster: &str,
        every: Duration,
    ) -> AwsCloud {
        let known = KnownClusterFacts {
            name: eks_cluster.to_string(),
            endpoint: Some("https://validation.example.com".into()),
            ca_bundle: Some("Q0EgYnVuZGxl".into()),
            ..Default::default()
        };
        let facts = ClusterFacts::resolve(eks, known, every).await;
        support::cloud(&self.via, &self.seed.cluster, "", "1.32").with_cluster_facts(facts)
    }

    fn class(&self, extra: &str) -> EC2NodeClass {
        let cluster = &self.seed.cluster;
        let mut class = support::class(&format!(
            "metadata: {{name: {cluster}, generation: 1}}\nspec:\n  amiFamily: AL2023\n  subnetSelectorTerms: [{{tags: {{{DISCOVERY}: {cluster}}}}}]\n  securityGroupSelectorTerms: [{{tags: {{{DISCOVERY}: {cluster}}}}}]\n  amiSelectorTerms: [{{id: {}}}]\n  role: {}\n  tags: {{team: web}}\n{extra}",
            self.image, self.seed.role
        ));
        class.metadata.uid = Some(support::unique("uid"));
        class
    }

    /// The dry runs sent so far, per action.
    fn dry_runs(&self) -> Vec<usize> {
        ACTIONS
            .iter()
            .map(|a| {
                self.proxy
                    .sent(a)
                    .iter()
                    .filter(|f| f.contains("DryRun=true"))
                    .count()
            })
            .collect()
    }
}

/// A reply that refuses dry runs of `action` with `code`.
fn refuse(action: &'static str, status: u16, code: &'static str) -> proxy::Reply {
    refuse_with(
        action,
        status,
        code,
        "You are not authorized to perform this operation.",
    )
}

/// A reply that refuses dry runs of `action` with `code` and `message`.
fn refuse_with(
    action: &'static str,
    status: u16,
    code: &'static str,
    message: &'static str,
) -> proxy::Reply {
    Arc::new(move |form: &str| {
        (form.contains(&format!("Action={action}&")) && form.contains("DryRun=true"))
            .then(|| (status, proxy::error_xml(code, message)))
    })
}

fn no_replies() -> proxy::Reply {
    Arc::new(|_| None)
}

#[tokio::test]
async fn a_class_validates_with_one_dry_run_of_each_launch_call_then_uses_the_verdict() {
    let moto = moto_or_skip!("validation_dry_runs");
    let env = env(&moto, "dryrun", no_replies()).await;
    let cloud = env.cloud();
    let class = env.class("");

    let status = validated(&cloud, &class).await;
    assert_eq!(
        condition(&status, "ValidationSucceeded"),
        ("True".into(), "ValidationSucceeded".into()),
        "{status:#?}"
    );
    assert_eq!(condition(&status, "Ready").0, "True");
    assert_eq!(env.dry_runs(), [1, 1, 1]);
    // What was checked is what a launch sends: the class's image, profile, groups and tags.
    let run = &env.proxy.sent("Action=RunInstances")[0];
    assert!(run.contains(&format!("ImageId={}", env.image)), "{run}");
    assert!(run.contains("InstanceType=m5.large"), "{run}");
    assert!(run.contains("IamInstanceProfile.Name="), "{run}");
    assert!(run.contains(&env.seed.security_groups[0].0), "{run}");
    assert!(run.contains("UserData="), "{run}");
    let fleet = &env.proxy.sent("Action=CreateFleet")[0];
    assert!(
        fleet.contains("LaunchTemplateName=karpenter.k8s.aws%2F"),
        "{fleet}"
    );
    assert!(fleet.contains("Value=web"), "the class's tags: {fleet}");
    // Dry runs create nothing.
    let templates = support::cluster_templates(&moto.clients, &env.seed.cluster).await;
    assert!(templates.is_empty());

    // The verdict is reused: no more dry runs for the same class.
    let mut stored = class.clone();
    stored.status = Some(status);
    let again = validated(&cloud, &stored).await;
    assert_eq!(condition(&again, "ValidationSucceeded").0, "True");
    assert_eq!(env.dry_runs(), [1, 1, 1]);

    // A change to what a launch would send is checked again.
    let mut changed = env.class("  metadataOptions: {httpPutResponseHopLimit: 2}\n");
    changed.metadata.name = class.metadata.name.clone();
    changed.metadata.uid = class.metadata.uid.clone();
    cloud
        .reconcile_node_class(&changed)
        .await
        .expect("reconcile");
    assert_eq!(env.dry_runs(), [2, 2, 2]);
}

#[tokio::test]
async fn disable_dry_run_sends_none() {
    let moto = moto_or_skip!("validation_disable_dry_run");
    let env = env(&moto, "nodryrun", no_replies()).await;
    let mut cloud = env.cloud();
    cloud.settings.disable_dry_run = true;
    let status = validated(&cloud, &env.class("")).await;
    assert_eq!(condition(&status, "ValidationSucceeded").0, "True");
    assert_eq!(condition(&status, "Ready").0, "True");
    assert_eq!(env.dry_runs(), [0, 0, 0]);
}

#[tokio::test]
async fn oversized_user_data_fails_validation_before_any_dry_run() {
    let moto = moto_or_skip!("validation_user_data_size");
    let env = env(&moto, "bigdata", no_replies()).await;
    let cloud = env.cloud();
    let big = "x".repeat(17_000);
    let class = env.class(&format!("  userData: |\n    #!/bin/bash\n    echo {big}\n"));
    let mut custom = class.clone();
    custom.spec.ami_family = Some("Custom".into());
    for c in [class, custom] {
        let status = validated(&cloud, &c).await;
        assert_eq!(
            condition(&status, "ValidationSucceeded"),
            ("False".into(), "UserDataSizeLimitExceeded".into()),
            "{:?}",
            c.spec.ami_family
        );
        assert_eq!(condition(&status, "Ready").0, "False");
    }
    assert_eq!(env.dry_runs(), [0, 0, 0]);
}

#[tokio::test]
async fn refused_dry_runs_name_the_call_the_controller_may_not_make() {
    let moto = moto_or_skip!("validation_refusals");
    for (action, reason) in [
        ("CreateFleet", "CreateFleetAuthCheckFailed"),
        (
            "CreateLaunchTemplate",
            "CreateLaunchTemplateAuthCheckFailed",
        ),
        ("RunInstances", "RunInstancesAuthCheckFailed"),
    ] {
        let env = env(
            &moto,
            "refused",
            refuse(action, 403, "UnauthorizedOperation"),
        )
        .await;
        let status = validated(&env.cloud(), &env.class("")).await;
        assert_eq!(
            condition(&status, "ValidationSucceeded"),
            ("False".into(), reason.into())
        );
        assert_eq!(condition(&status, "Ready").0, "False");
    }
}

#[tokio::test]
async fn a_throttled_dry_run_keeps_the_stored_verdict_and_is_tried_again() {
    let moto = moto_or_skip!("validation_throttled");
    let env = env(
        &moto,
        "throttled",
        refuse("CreateLaunchTemplate", 503, "RequestLimitExceeded"),
    )
    .await;
    let cloud = env.cloud();
    let class = env.class("");
    // Never checked: not known to be launchable.
    let first = validated(&cloud, &class).await;
    assert_eq!(
        condition(&first, "ValidationSucceeded"),
        ("False".into(), "AuthCheckIncomplete".into())
    );
    // Checked before: the verdict stands while EC2 throttles, and each reconcile tries again.
    let mut stored = class.clone();
    let mut ok = first.clone();
    for c in ok.conditions.iter_mut().flatten() {
        if c.type_ == "ValidationSucceeded" {
            c.status = "True".into();
            c.reason = Some("ValidationSucceeded".into());
        }
    }
    stored.status = Some(ok);
    let second = validated(&cloud, &stored).await;
    assert_eq!(condition(&second, "ValidationSucceeded").0, "True");
    assert_eq!(condition(&second, "Ready").0, "True");
    let tried = env.dry_runs()[1];
    assert_eq!(tried, 2, "one attempt per reconcile, no retries");
}

#[tokio::test]
async fn ec2_refusing_the_user_data_is_oversized_user_data_by_its_code() {
    let moto = moto_or_skip!("validation_user_data_refused");
    // The message is not one the controller knows: the code alone decides.
    for action in ["CreateLaunchTemplate", "RunInstances"] {
        let env = env(
            &moto,
            "udrefused",
            refuse_with(
                action,
                400,
                "InvalidUserData.Malformed",
                "The request was refused.",
            ),
        )
        .await;
        let status = validated(&env.cloud(), &env.class("")).await;
        assert_eq!(
            condition(&status, "ValidationSucceeded"),
            ("False".into(), "UserDataSizeLimitExceeded".into()),
            "{action}"
        );
        assert_eq!(condition(&status, "Ready").0, "False");
    }
}

#[tokio::test]
async fn an_al2023_class_is_not_ready_while_eks_has_not_given_the_service_cidr() {
    let moto = moto_or_skip!("validation_cluster_cidr");
    let env = env(&moto, "nocidr", no_replies()).await;
    // No EKS cluster of that name: DescribeCluster fails at start, and the window for asking
    // again does not pass during the test.
    let hour = Duration::from_secs(3600);
    let mut cloud = env
        .cloud_resolving(&moto.clients, &env.seed.cluster, hour)
        .await;
    let class = env.class("");
    // Not even a stored pass or DISABLE_DRY_RUN lets it through.
    let mut stored = class.clone();
    stored.status = Some(validated(&env.cloud(), &class).await);
    assert_eq!(
        condition(stored.status.as_ref().unwrap(), "Ready").0,
        "True"
    );
    let sent = env.dry_runs();
    for disable in [false, true] {
        cloud.settings.disable_dry_run = disable;
        let reconciled = cloud
            .reconcile_node_class(&stored)
            .await
            .expect("reconcile");
        assert_eq!(
            condition(&reconciled.status, "ValidationSucceeded"),
            ("False".into(), "ClusterCIDRResolutionFailed".into()),
            "disable_dry_run={disable}"
        );
        assert_eq!(condition(&reconciled.status, "Ready").0, "False");
        let c = reconciled
            .status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "ValidationSucceeded")
            .unwrap();
        let message = c.message.clone().unwrap_or_default();
        assert!(
            message.contains(&format!("CLUSTER_NAME={}", env.seed.cluster)),
            "{message}"
        );
        assert!(message.contains("ResourceNotFoundException"), "{message}");
    }
    assert_eq!(env.dry_runs(), sent, "nothing is dry-run without the CIDR");

    // AL2 nodes do not need it.
    let mut al2 = env.class("");
    al2.spec.ami_family = Some("AL2".into());
    cloud.settings.disable_dry_run = false;
    let status = validated(&cloud, &al2).await;
    assert_eq!(condition(&status, "Ready").0, "True", "{status:#?}");

    // Once EKS knows the cluster, a provider started afterwards validates the class.
    let subnets: Vec<String> = env.seed.subnets.iter().map(|(id, _)| id.clone()).collect();
    support::create_eks_cluster(&moto, &env.seed.cluster, &subnets, "10.123.0.0/16").await;
    let status = validated(&cloud, &class).await;
    assert_eq!(
        condition(&status, "ValidationSucceeded"),
        ("False".into(), "ClusterCIDRResolutionFailed".into()),
        "within the window EKS is not asked again"
    );
    let cloud = env
        .cloud_resolving(&moto.clients, &env.seed.cluster, hour)
        .await;
    let status = validated(&cloud, &class).await;
    assert_eq!(
        condition(&status, "ValidationSucceeded"),
        ("True".into(), "ValidationSucceeded".into())
    );
    assert_eq!(condition(&status, "Ready").0, "True");
}

#[tokio::test]
async fn eks_is_asked_again_for_the_service_cidr_and_its_answer_is_kept() {
    let moto = moto_or_skip!("validation_cluster_cidr_later");
    let env = env(&moto, "latercidr", no_replies()).await;
    // The window has always passed: each reconcile that needs the CIDR may ask.
    let cloud = env
        .cloud_resolving(&moto.clients, &env.seed.cluster, Duration::ZERO)
        .await;
    let class = env.class("");
    let status = validated(&cloud, &class).await;
    assert_eq!(
        condition(&status, "ValidationSucceeded"),
        ("False".into(), "ClusterCIDRResolutionFailed".into())
    );
    assert_eq!(env.dry_runs(), [0, 0, 0]);

    // EKS learns of the cluster: the next reconcile of the same provider asks and validates.
    let subnets: Vec<String> = env.seed.subnets.iter().map(|(id, _)| id.clone()).collect();
    support::create_eks_cluster(&moto, &env.seed.cluster, &subnets, "10.124.0.0/16").await;
    let status = validated(&cloud, &class).await;
    assert_eq!(
        condition(&status, "ValidationSucceeded"),
        ("True".into(), "ValidationSucceeded".into()),
        "{status:#?}"
    );
    assert_eq!(condition(&status, "Ready").0, "True");
    assert_eq!(env.dry_runs(), [1, 1, 1]);
    let run = &env.proxy.sent("Action=RunInstances")[0];
    let user_data = user_data_of(run);
    assert!(user_data.contains("10.124.0.0/16"), "{user_data}");

    // The CIDR is kept: EKS forgetting the cluster changes nothing.
    moto.clients
        .eks
        .delete_cluster()
        .name(&env.seed.cluster)
        .send()
        .await
        .expect("DeleteCluster");
    assert_eq!(
        cloud.launch.cluster().service_cidr.as_deref(),
        Some("10.124.0.0/16")
    );
    let status = validated(&cloud, &class).await;
    assert_eq!(condition(&status, "Ready").0, "True");
}

/// The decoded user data of a recorded RunInstances request.
fn user_data_of(form: &str) -> String {
    let b64 = proxy::form_value(form, "UserData").expect("UserData in the request");
    let bytes = nodewright_aws_model::userdata::base64::decode(&b64).expect("base64 user data");
    String::from_utf8(bytes).expect("UTF-8 user data")
}

fn nodepool(name: &str, class: &str, requirements: &str) -> nodewright_api::v1::nodepool::NodePool {
    serde_yaml::from_str(&format!(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {{name: {name}}}\nspec:\n  template:\n    spec:\n      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: {class}}}\n      requirements: {requirements}\n"
    ))
    .expect("NodePool yaml")
}

/// The instance types the RunInstances dry runs named, in order.
fn run_types(env: &Env) -> Vec<String> {
    env.proxy
        .sent("Action=RunInstances")
        .iter()
        .filter(|f| f.contains("DryRun=true"))
        .filter_map(|f| {
            f.split('&')
                .find_map(|p| p.strip_prefix("InstanceType="))
                .map(str::to_string)
        })
        .collect()
}

#[tokio::test]
async fn the_dry_run_launches_what_a_nodepool_using_the_class_could() {
    let moto = moto_or_skip!("validation_nodepool_types");
    let env = env(&moto, "pools", no_replies()).await;
    let cloud = env.cloud();
    let class = env.class("");
    let name = class.metadata.name.clone().unwrap();
    let compute = nodepool(
        "compute",
        &name,
        "[{key: node.kubernetes.io/instance-type, operator: In, values: [c5.large]}]",
    );
    // A pool of another class does not count.
    let other = nodepool(
        "other",
        "someone-else",
        "[{key: node.kubernetes.io/instance-type, operator: In, values: [r5.large]}]",
    );
    let status = cloud
        .reconcile_node_class_for(&class, &[compute.clone(), other.clone()])
        .await
        .expect("reconcile")
        .status;
    assert_eq!(condition(&status, "Ready").0, "True", "{status:#?}");
    assert_eq!(run_types(&env), ["c5.large"]);
    let fleet = &env.proxy.sent("Action=CreateFleet")[0];
    assert!(fleet.contains("InstanceType=c5.large"), "{fleet}");
    assert!(fleet.contains("Value=compute"), "the pool's tag: {fleet}");

    // Same pool, same launch: the verdict is reused.
    cloud
        .reconcile_node_class_for(&class, &[compute, other])
        .await
        .expect("reconcile");
    assert_eq!(env.dry_runs(), [1, 1, 1]);

    // The pool now wants spot m5.xlarge: a different launch, checked again as spot.
    let spot = nodepool(
        "compute",
        &name,
        "[{key: node.kubernetes.io/instance-type, operator: In, values: [m5.xlarge]}, {key: karpenter.sh/capacity-type, operator: In, values: [spot]}]",
    );
    cloud
        .reconcile_node_class_for(&class, &[spot])
        .await
        .expect("reconcile");
    assert_eq!(env.dry_runs(), [2, 2, 2]);
    assert_eq!(run_types(&env), ["c5.large", "m5.xlarge"]);
    let fleet = &env.proxy.sent("Action=CreateFleet")[1];
    assert!(fleet.contains("DefaultTargetCapacityType=spot"), "{fleet}");
    let runs = env.proxy.sent("Action=RunInstances");
    assert!(
        !runs[0].contains("InstanceMarketOptions"),
        "on-demand: {}",
        runs[0]
    );
    assert!(
        runs[1].contains("InstanceMarketOptions.MarketType=spot"),
        "{}",
        runs[1]
    );

    // No pool uses the class any more: upstream's default type.
    cloud.reconcile_node_class(&class).await.expect("reconcile");
    assert_eq!(run_types(&env), ["c5.large", "m5.xlarge", "m5.large"]);
}

/// A NodePool of `class` whose template carries `labels` and `taints` (YAML flow maps and
/// lists).
fn labelled_nodepool(
    name: &str,
    class: &str,
    labels: &str,
    taints: &str,
) -> nodewright_api::v1::nodepool::NodePool {
    serde_yaml::from_str(&format!(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {{name: {name}}}\nspec:\n  template:\n    metadata:\n      labels: {labels}\n    spec:\n      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: {class}}}\n      taints: {taints}\n      requirements: []\n"
    ))
    .expect("NodePool yaml")
}

#[tokio::test]
async fn the_validation_user_data_carries_the_pools_labels_and_taints() {
    let moto = moto_or_skip!("validation_pool_user_data");
    let env = env(&moto, "pooldata", no_replies()).await;
    let cloud = env.cloud();
    // User data that fits EC2's limit on its own, with room for a few labels but not many.
    let filler = "x".repeat(14_000);
    let class = env.class(&format!(
        "  userData: |\n    #!/bin/bash\n    echo {filler}\n"
    ));
    let name = class.metadata.name.clone().unwrap();
    let status = validated(&cloud, &class).await;
    assert_eq!(
        condition(&status, "ValidationSucceeded"),
        ("True".into(), "ValidationSucceeded".into())
    );

    // A pool whose nodes register with many labels: the launch it would make is too large.
    let many: Vec<String> = (0..40)
        .map(|i| format!("example.com/label-{i:02}: {}", "v".repeat(60)))
        .collect();
    let crowded = labelled_nodepool("crowded", &name, &format!("{{{}}}", many.join(", ")), "[]");
    let status = cloud
        .reconcile_node_class_for(&class, &[crowded])
        .await
        .expect("reconcile")
        .status;
    assert_eq!(
        condition(&status, "ValidationSucceeded"),
        ("False".into(), "UserDataSizeLimitExceeded".into())
    );
    assert_eq!(env.dry_runs(), [1, 1, 1], "no dry run for the crowded pool");

    // A pool with one label and a taint: both are in the user data EC2 is asked about.
    let payments = labelled_nodepool(
        "payments",
        &name,
        "{team: payments}",
        "[{key: dedicated, value: payments, effect: NoSchedule}]",
    );
    let status = cloud
        .reconcile_node_class_for(&class, std::slice::from_ref(&payments))
        .await
        .expect("reconcile")
        .status;
    assert_eq!(condition(&status, "Ready").0, "True", "{status:#?}");
    assert_eq!(env.dry_runs(), [2, 2, 2]);
    let runs = env.proxy.sent("Action=RunInstances");
    let user_data = user_data_of(runs.last().unwrap());
    assert!(user_data.contains("team=payments"), "{user_data}");
    assert!(
        user_data.contains("karpenter.sh/nodepool=payments"),
        "{user_data}"
    );
    assert!(
        user_data.contains("key: \"dedicated\"") && user_data.contains("value: \"payments\""),
        "{user_data}"
    );

    // The same pool with another label is another launch: checked again.
    let relabelled = labelled_nodepool(
        "payments",
        &name,
        "{team: billing}",
        "[{key: dedicated, value: payments, effect: NoSchedule}]",
    );
    cloud
        .reconcile_node_class_for(&class, &[payments])
        .await
        .expect("reconcile");
    assert_eq!(
        env.dry_runs(),
        [2, 2, 2],
        "unchanged pool: the verdict is reused"
    );
    cloud
        .reconcile_node_class_for(&class, &[relabelled])
        .await
        .expect("reconcile");
    assert_eq!(env.dry_runs(), [3, 3, 3]);
    let runs = env.proxy.sent("Action=RunInstances");
    assert!(user_data_of(runs.last().unwrap()).contains("team=billing"));
}

/// The class's status after one reconcile by `cloud`.
async fn validated(cloud: &AwsCloud, class: &EC2NodeClass) -> EC2NodeClassStatus {
    cloud
        .reconcile_node_class(class)
        .await
        .expect("reconcile")
        .status
}
