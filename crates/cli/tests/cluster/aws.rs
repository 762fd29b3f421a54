//! `nodewright controller --cloud-provider aws` on the real control plane with EC2 played by
//! moto: the EC2NodeClass resolves, `inflate` gets instances in the class's subnets with
//! Karpenter's tags, its pods are bound, a spot interruption warning on the queue has the
//! node drained and replaced, and scaling to zero terminates every instance; the class,
//! deleted while claims name it, waits for them, then goes with its instance profile and
//! launch templates; an instance terminated in EC2 and a Node deleted by hand are cleaned
//! up, and nothing leaks.
//! `nodewright node-agent` turns moto's instances into Ready Nodes, in a process of its own.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value;

use crate::kit::controller::{Controller, Launch};
use crate::kit::moto::{Moto, World, assert_policy_allows, policy_actions};
use crate::kit::read::{self, condition, name, running};
use crate::kit::{ControlPlane, assert_clean_log, eventually, inflate};

pub const CLUSTER: &str = "e2e";

/// The API server's address, as nodes (and so the provider's user data) reach it.
pub fn api_server(cp: &ControlPlane) -> String {
    let kubeconfig = std::fs::read_to_string(&cp.kubeconfig).expect("kubeconfig");
    kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: "))
        .expect("a server in the kubeconfig")
        .to_string()
}

/// `nodewright ARGS` with the AWS settings that point it at `moto`.
pub fn aws_launch(cp: &ControlPlane, moto: &Moto, name: &str, args: &[&str]) -> Launch {
    let mut launch = Launch::sim(cp, name);
    launch.args = args.iter().map(|s| s.to_string()).collect();
    launch
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ENDPOINT_URL", &moto.url)
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("CLUSTER_NAME", CLUSTER)
        .env("CLUSTER_ENDPOINT", &api_server(cp))
        .env("LEADER_ELECTION_NAMESPACE", "default")
}

pub fn controller(cp: &ControlPlane, moto: &Moto, world: &World, name: &str) -> Launch {
    aws_launch(cp, moto, name, &["controller", "--cloud-provider", "aws"])
        .env("INTERRUPTION_QUEUE", &world.get("queue"))
}

pub fn agent(cp: &ControlPlane, moto: &Moto) -> Controller {
    aws_launch(
        cp,
        moto,
        "node-agent",
        &["node-agent", "--cloud-provider", "aws"],
    )
    .start()
}

/// A NodePool and an AL2023 EC2NodeClass selecting the world's subnets, group and image.
pub fn manifests(world: &World, capacity_types: &str, limit_cpu: u32) -> String {
    format!(
        r#"apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: default}}
spec:
  amiFamily: AL2023
  role: {role}
  amiSelectorTerms: [{{id: {image}}}]
  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: {CLUSTER}}}}}]
  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: {CLUSTER}}}}}]
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: default}}
spec:
  template:
    spec:
      requirements:
        - {{key: kubernetes.io/arch, operator: In, values: [amd64]}}
        - {{key: karpenter.sh/capacity-type, operator: In, values: [{capacity_types}]}}
        - {{key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m]}}
        - {{key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["4"]}}
        - {{key: karpenter.k8s.aws/instance-size, operator: In, values: [large, xlarge, 2xlarge]}}
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
  limits: {{cpu: {limit_cpu}}}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 10s
"#,
        role = world.get("role"),
        image = world.get("image"),
    )
}

pub async fn wait_running(client: &kube::Client, n: usize, within: Duration, log: &str) {
    eventually(within, &format!("{n} inflate pods Running"), || {
        let client = client.clone();
        async move {
            let pods = read::pods(&client, "default").await;
            let pending = pods.iter().filter(|p| read::node_of(p).is_none()).count();
            (running(&pods).len() == n && pending == 0).then_some(())
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{log}"));
}

/// Waits until the claim `gone` no longer exists and `n` pods run in `default`.
async fn claim_gone_and_running(
    client: &kube::Client,
    gone: &str,
    n: usize,
    within: Duration,
    what: &str,
    log: &dyn Fn() -> String,
) {
    eventually(within, what, || async {
        let claims = read::nodeclaims(client).await;
        let pods = read::pods(client, "default").await;
        (!claims.iter().any(|c| name(c) == gone) && running(&pods).len() == n).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", log()));
}

fn running_instances(moto: &Moto) -> Vec<Value> {
    moto.instances(CLUSTER)
        .into_iter()
        .filter(|i| i["state"] == "running" || i["state"] == "pending")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_follow_inflate_and_a_spot_interruption_replaces_its_node() {
    let Some(cp) = ControlPlane::start("aws-moto") else {
        return;
    };
    cp.install_crds();
    let moto = Moto::start(cp.dir.join("moto.log")).await;
    let world = moto.world(CLUSTER);
    moto.record();
    let _agent = agent(&cp, &moto);
    let mut ctl = controller(&cp, &moto, &world, "nodewright").start();
    ctl.wait_ready().await;
    cp.apply(&manifests(&world, "spot", 100))
        .unwrap_or_else(|e| panic!("{e}"));
    let client = cp.client().await;

    // The class resolves against EC2, IAM and EKS.
    let class = eventually(Duration::from_secs(90), "EC2NodeClass Ready", || {
        let client = client.clone();
        async move {
            let classes = read::ec2nodeclasses(&client).await;
            classes
                .into_iter()
                .find(|c| condition(c, "Ready") == Some("True"))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
    let subnets: BTreeSet<String> = world.get("subnets").split(',').map(String::from).collect();
    let resolved: BTreeSet<String> = class["status"]["subnets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(resolved, subnets);
    assert_eq!(
        class["status"]["securityGroups"][0]["id"],
        world.get("securityGroup")
    );
    assert_eq!(class["status"]["amis"][0]["id"], world.get("image"));
    assert!(class["status"]["instanceProfile"].is_string(), "{class}");

    cp.apply(&inflate(6)).unwrap();
    wait_running(&client, 6, Duration::from_secs(180), &ctl.log_text()).await;

    // Every claim's instance is in one of the class's subnets, tagged as Karpenter tags it.
    let claims = read::nodeclaims(&client).await;
    let instances = eventually(
        Duration::from_secs(60),
        "instances tagged with their node name",
        || {
            let moto = &moto;
            let n = claims.len();
            async move {
                let all = running_instances(moto);
                (all.len() == n && all.iter().all(|i| i["tags"]["Name"].is_string())).then_some(all)
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{:#?}", running_instances(&moto)));
    for i in &instances {
        assert!(
            subnets.contains(i["subnet"].as_str().unwrap_or_default()),
            "{i}"
        );
        let tags = &i["tags"];
        assert_eq!(tags["karpenter.sh/nodepool"], "default", "{i}");
        assert_eq!(
            tags[&format!("kubernetes.io/cluster/{CLUSTER}")],
            "owned",
            "{i}"
        );
        assert_eq!(tags["karpenter.k8s.aws/ec2nodeclass"], "default", "{i}");
        assert_eq!(tags["eks:eks-cluster-name"], CLUSTER, "{i}");
        let claim = tags["karpenter.sh/nodeclaim"].as_str().unwrap();
        assert!(claims.iter().any(|c| name(c) == claim), "{i}");
    }

    // A spot interruption warning for one instance: its claim is deleted, its node drained,
    // and its pods land on a replacement.
    let victim = &instances[0];
    let victim_id = victim["id"].as_str().unwrap().to_string();
    let victim_claim = victim["tags"]["karpenter.sh/nodeclaim"]
        .as_str()
        .unwrap()
        .to_string();
    let body = serde_json::json!({
        "version": "0",
        "id": "e2e-spot-1",
        "detail-type": "EC2 Spot Instance Interruption Warning",
        "source": "aws.ec2",
        "account": "123456789012",
        "time": "2026-12-01T00:00:00Z",
        "region": "us-east-1",
        "resources": [format!("arn:aws:ec2:us-east-1:instance/{victim_id}")],
        "detail": {"instance-id": victim_id, "instance-action": "terminate"}
    });
    moto.boto(&format!(
        "sqs.send_message(QueueUrl={url:?}, MessageBody={body:?})\nprint('null')",
        url = world.get("queueUrl"),
        body = body.to_string()
    ));
    claim_gone_and_running(
        &client,
        &victim_claim,
        6,
        Duration::from_secs(180),
        "the interrupted claim gone and its pods running elsewhere",
        &|| ctl.log_text(),
    )
    .await;
    let events = read::events(&client).await;
    assert!(
        events
            .iter()
            .any(|e| e.reason.as_deref() == Some("SpotInterrupted")),
        "a SpotInterrupted event"
    );
    let gone = moto
        .instances(CLUSTER)
        .into_iter()
        .find(|i| i["id"] == victim_id.as_str())
        .expect("moto still lists the instance");
    assert!(
        gone["state"] == "terminated" || gone["state"] == "shutting-down",
        "{gone}"
    );

    // The class carries its finalizer; deleted while claims name it, it stays.
    let profile = class["status"]["instanceProfile"]
        .as_str()
        .unwrap()
        .to_string();
    let class_finalizers = |c: &Value| c["metadata"]["finalizers"].to_string();
    let with_finalizer = read::ec2nodeclasses(&client).await;
    assert!(
        class_finalizers(&with_finalizer[0]).contains("karpenter.k8s.aws/termination"),
        "{}",
        with_finalizer[0]
    );
    assert_eq!(profiles(&moto), vec![profile.clone()]);
    assert!(!templates(&moto).is_empty());
    cp.kubectl(&["delete", "ec2nodeclass", "default", "--wait=false"]);
    tokio::time::sleep(Duration::from_secs(10)).await;
    let deleting = read::ec2nodeclasses(&client).await;
    assert!(
        deleting.len() == 1 && deleting[0]["metadata"]["deletionTimestamp"].is_string(),
        "the class waits for its claims: {deleting:?}"
    );
    assert_eq!(profiles(&moto), vec![profile]);
    let waiting = read::events(&client).await.into_iter().find(|e| {
        e.reason.as_deref() == Some("WaitingOnNodeClaimTermination")
            && e.involved_object.kind.as_deref() == Some("EC2NodeClass")
    });
    let message = waiting.and_then(|e| e.message).unwrap_or_default();
    assert!(
        message.starts_with("Waiting on NodeClaim termination for "),
        "{message:?}"
    );

    // Zero replicas: every instance terminated, every claim gone; then the class goes, with
    // its instance profile and launch templates.
    cp.kubectl(&["scale", "deployment/inflate", "--replicas=0"]);
    eventually(
        Duration::from_secs(180),
        "no claims, no running instances and no EC2NodeClass",
        || {
            let client = client.clone();
            let moto = &moto;
            async move {
                (read::nodeclaims(&client).await.is_empty()
                    && running_instances(moto).is_empty()
                    && read::ec2nodeclasses(&client).await.is_empty())
                .then_some(())
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
    assert!(profiles(&moto).is_empty(), "{:?}", profiles(&moto));
    assert!(templates(&moto).is_empty(), "{:?}", templates(&moto));
    assert_clean_log(&ctl.log_text());
    // Every call made (launches, interruption, the class's cleanup) is one the shipped IAM
    // policy allows.
    let actions = moto.sdk_actions();
    println!("AWS actions used: {actions:?}");
    for a in [
        "ec2:CreateFleet",
        "sqs:ReceiveMessage",
        "iam:DeleteInstanceProfile",
    ] {
        assert!(actions.contains(a), "{a} not recorded: {actions:?}");
    }
    assert_policy_allows(&actions);
    let unused: Vec<String> = policy_actions().difference(&actions).cloned().collect();
    println!("policy actions this run did not use: {unused:?}");
}

/// Names of the instance profiles in moto.
fn profiles(moto: &Moto) -> Vec<String> {
    let v = moto.boto(
        "iam = boto3.client('iam', **kw)\nprint(json.dumps([p['InstanceProfileName'] for p in iam.list_instance_profiles()['InstanceProfiles']]))",
    );
    serde_json::from_value(v).unwrap_or_default()
}

/// Names of the launch templates in moto (which answers 15 by default, with no next token).
fn templates(moto: &Moto) -> Vec<String> {
    let v = moto.boto(
        "print(json.dumps([t['LaunchTemplateName'] for t in ec2.describe_launch_templates(MaxResults=200)['LaunchTemplates']]))",
    );
    serde_json::from_value(v).unwrap_or_default()
}

/// The claim whose `status.providerID` names `instance`, if any.
fn claim_of(claims: &[Value], instance: &str) -> Option<String> {
    claims
        .iter()
        .find(|c| {
            c["status"]["providerID"]
                .as_str()
                .is_some_and(|p| p.ends_with(instance))
        })
        .map(|c| name(c).to_string())
}

/// Behind the controller's back: an instance terminated in EC2 and a Node deleted by hand.
/// Garbage collection deletes the claim of the vanished instance; the Node's finalizer drains
/// it and terminates its instance; the pods land on new nodes either way, and in the end every
/// running instance belongs to a live claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_terminated_and_a_node_deleted_behind_its_back_are_cleaned_up() {
    let Some(cp) = ControlPlane::start("aws-gc") else {
        return;
    };
    cp.install_crds();
    let moto = Moto::start(cp.dir.join("moto.log")).await;
    let world = moto.world(CLUSTER);
    moto.record();
    let _agent = agent(&cp, &moto);
    let mut ctl = controller(&cp, &moto, &world, "nodewright").start();
    ctl.wait_ready().await;
    cp.apply(&manifests(&world, "on-demand", 100))
        .unwrap_or_else(|e| panic!("{e}"));
    let client = cp.client().await;
    cp.apply(&inflate(3)).unwrap();
    wait_running(&client, 3, Duration::from_secs(180), &ctl.log_text()).await;
    let claims = read::nodeclaims(&client).await;
    let instances = running_instances(&moto);
    assert!(!instances.is_empty(), "{instances:#?}");

    // An instance terminated in EC2: its claim goes, its pods run again elsewhere.
    let lost = instances[0]["id"].as_str().unwrap().to_string();
    let lost_claim = claim_of(&claims, &lost).expect("a claim names the instance");
    moto.boto(&format!(
        "ec2.terminate_instances(InstanceIds=[{lost:?}])\nprint('null')"
    ));
    claim_gone_and_running(
        &client,
        &lost_claim,
        3,
        Duration::from_secs(300),
        "the vanished instance's claim deleted and 3 pods running",
        &|| ctl.log_text(),
    )
    .await;

    // A Node deleted by hand: drained, its instance terminated, its claim gone.
    let claims = read::nodeclaims(&client).await;
    let (victim_claim, victim_node) = claims
        .iter()
        .find_map(|c| {
            let node = c["status"]["nodeName"].as_str()?;
            Some((name(c).to_string(), node.to_string()))
        })
        .expect("a registered claim");
    let victim_instance = claims
        .iter()
        .find(|c| name(c) == victim_claim)
        .and_then(|c| c["status"]["providerID"].as_str())
        .and_then(|p| p.rsplit('/').next())
        .unwrap()
        .to_string();
    cp.kubectl(&["delete", "node", &victim_node, "--wait=false"]);
    eventually(
        Duration::from_secs(300),
        "the deleted node's claim and instance gone and 3 pods running",
        || {
            let client = client.clone();
            let (victim_claim, victim_instance) = (victim_claim.clone(), victim_instance.clone());
            let moto = &moto;
            async move {
                let claims = read::nodeclaims(&client).await;
                let pods = read::pods(&client, "default").await;
                let alive = running_instances(moto)
                    .iter()
                    .any(|i| i["id"] == victim_instance.as_str());
                (!claims.iter().any(|c| name(c) == victim_claim)
                    && !alive
                    && running(&pods).len() == 3)
                    .then_some(())
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));

    // Nothing leaked: every running instance is a live claim's.
    eventually(
        Duration::from_secs(120),
        "every running instance belongs to a live claim",
        || {
            let client = client.clone();
            let moto = &moto;
            async move {
                let claims = read::nodeclaims(&client).await;
                running_instances(moto)
                    .iter()
                    .all(|i| claim_of(&claims, i["id"].as_str().unwrap_or_default()).is_some())
                    .then_some(())
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{:#?}", running_instances(&moto)));
    assert_clean_log(&ctl.log_text());
    let actions = moto.sdk_actions();
    assert!(actions.contains("ec2:TerminateInstances"), "{actions:?}");
    assert_policy_allows(&actions);
}
