//! `nodewright install aws` / `uninstall aws` through the real SDK against moto: a dry run
//! writes nothing; an install makes every resource, a second changes nothing, a drifted
//! resource is put back, an uninstall removes what the install made and nothing else; a
//! resource of the same name it did not make is refused. Then deploy/cloudformation.yaml,
//! deployed into moto's CloudFormation, makes the same resources as the command.
//!
//! moto 5.2.5 serves IAM (roles, inline and attached policies, instance profiles, OIDC
//! providers, service-linked roles), SQS, EventBridge and EKS clusters, but not EKS access
//! entries or pod identity associations (see `moto_lacks_access_entries`), so these runs use
//! `NodeAccess::None` and IRSA. Its CloudFormation skips `AWS::SQS::QueuePolicy` and the EKS
//! resource types and a role's `ManagedPolicyArns`, so the comparison leaves the queue policy
//! and the node role's managed policies out; and it gives every cluster the same OIDC issuer.

#[macro_use]
mod support;

use std::collections::BTreeMap;

use aws_sdk_cloudformation::types::{Capability, Parameter};
use nodewright_cloud_aws::install::{
    self, Action, Clients, Identity, NodeAccess, Outcome, Request, desired,
};
use nodewright_cloud_aws::{ClientOptions, StaticCredentials, sdk_config};
use serde_json::{Value, json};

async fn config(url: &str) -> aws_config::SdkConfig {
    sdk_config(&ClientOptions {
        region: support::REGION.into(),
        endpoint_url: Some(url.to_string()),
        credentials: Some(StaticCredentials {
            access_key_id: "testing".into(),
            secret_access_key: "testing".into(),
        }),
    })
    .await
}

/// An EKS cluster in moto; its ARN gives the account and partition, its OIDC issuer the IRSA
/// trust.
async fn cluster(clients: &Clients, name: &str) {
    clients
        .eks
        .create_cluster()
        .name(name)
        .role_arn("arn:aws:iam::123456789012:role/eks-cluster")
        .resources_vpc_config(
            aws_sdk_eks::types::VpcConfigRequest::builder()
                .subnet_ids("subnet-1")
                .build(),
        )
        .send()
        .await
        .unwrap();
}

fn request(cluster: &str, dry_run: bool) -> Request {
    Request {
        cluster: cluster.into(),
        region: support::REGION.into(),
        identity: Identity::Irsa,
        node_access: NodeAccess::None,
        namespace: "karpenter".into(),
        service_account: "karpenter".into(),
        dry_run,
    }
}

async fn run(clients: &Clients, cluster: &str, dry_run: bool, remove: bool) -> Outcome {
    let out = install::apply(clients, &request(cluster, dry_run), remove)
        .await
        .unwrap();
    if let Some(e) = &out.error {
        panic!("{e}\nafter: {:#?}", out.steps);
    }
    out
}

/// The steps for this cluster's own resources: the spot service-linked role is the
/// account's, and moto gives every cluster the same OIDC issuer, so other tests on the same
/// server may have made either.
fn actions(out: &Outcome) -> Vec<(String, Action)> {
    out.steps
        .iter()
        .filter(|s| s.name != "AWSServiceRoleForEC2Spot" && s.kind != "iam oidc provider")
        .map(|s| (format!("{} {}", s.kind, s.name), s.action.clone()))
        .collect()
}

/// A policy document as moto returns it: URL-encoded, and from CloudFormation a JSON string
/// holding the JSON (moto encodes the template's text once more).
fn doc(text: &str) -> Value {
    match install::document(text) {
        Value::String(inner) => serde_json::from_str(&inner).unwrap(),
        v => v,
    }
}

/// Everything the resources of one cluster say, keyed by what they are, with the cluster's
/// name replaced by `CLUSTER` so two clusters compare.
async fn snapshot(c: &Clients, cluster: &str) -> BTreeMap<String, Value> {
    let names = desired::names(cluster).unwrap();
    let mut out = BTreeMap::new();
    for role in [&names.node_role, &names.controller_role] {
        let r = c.iam.get_role().role_name(role).send().await.unwrap();
        let trust = doc(r.role().unwrap().assume_role_policy_document().unwrap());
        let attached = c
            .iam
            .list_attached_role_policies()
            .role_name(role)
            .send()
            .await
            .unwrap();
        let mut policies: Vec<String> = attached
            .attached_policies()
            .iter()
            .map(|p| p.policy_name().unwrap().to_string())
            .collect();
        policies.sort();
        out.insert(
            format!("role {role}"),
            json!({"trust": trust, "policies": policies}),
        );
    }
    let p = c
        .iam
        .get_instance_profile()
        .instance_profile_name(&names.instance_profile)
        .send()
        .await
        .unwrap();
    let roles: Vec<&str> = p
        .instance_profile()
        .unwrap()
        .roles()
        .iter()
        .map(|r| r.role_name())
        .collect();
    out.insert(format!("profile {}", names.instance_profile), json!(roles));
    let inline = c
        .iam
        .list_role_policies()
        .role_name(&names.controller_role)
        .send()
        .await
        .unwrap();
    for name in inline.policy_names() {
        let p = c
            .iam
            .get_role_policy()
            .role_name(&names.controller_role)
            .policy_name(name)
            .send()
            .await
            .unwrap();
        out.insert(format!("policy {name}"), doc(p.policy_document()));
    }
    let url = c
        .sqs
        .get_queue_url()
        .queue_name(&names.queue)
        .send()
        .await
        .unwrap()
        .queue_url()
        .unwrap()
        .to_string();
    let attrs = c
        .sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::All)
        .send()
        .await
        .unwrap();
    let attrs = attrs.attributes().unwrap();
    let attr = |k: &str| {
        attrs
            .get(&aws_sdk_sqs::types::QueueAttributeName::from(k))
            .cloned()
    };
    out.insert(
        format!("queue {}", names.queue),
        json!({"MessageRetentionPeriod": attr("MessageRetentionPeriod"), "SqsManagedSseEnabled": attr("SqsManagedSseEnabled")}),
    );
    for (rule, _, _) in &names.rules {
        let r = c.events.describe_rule().name(rule).send().await.unwrap();
        let targets = c
            .events
            .list_targets_by_rule()
            .rule(rule)
            .send()
            .await
            .unwrap();
        let targets: Vec<(&str, &str)> = targets
            .targets()
            .iter()
            .map(|t| (t.id(), t.arn()))
            .collect();
        out.insert(
            format!("rule {rule}"),
            json!({"pattern": doc(r.event_pattern().unwrap()), "state": r.state().map(|s| s.as_str()), "targets": targets}),
        );
    }
    let text = serde_json::to_string(&out)
        .unwrap()
        .replace(cluster, "CLUSTER");
    serde_json::from_str(&text).unwrap()
}

/// The OIDC issuer moto made for the cluster (its id differs per cluster).
async fn issuer(c: &Clients, cluster: &str) -> String {
    let out = c.eks.describe_cluster().name(cluster).send().await.unwrap();
    out.cluster()
        .unwrap()
        .identity()
        .unwrap()
        .oidc()
        .unwrap()
        .issuer()
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn a_dry_run_plans_everything_and_writes_nothing() {
    let m = moto_or_skip!("a_dry_run_plans_everything_and_writes_nothing");
    let c = Clients::new(&config(&m.url).await);
    let name = support::unique("dry");
    cluster(&c, &name).await;
    let out = run(&c, &name, true, false).await;
    let acts = actions(&out);
    // Two roles, a profile, six policies, the queue, five rules.
    assert_eq!(acts.len(), 15, "{acts:#?}");
    assert!(acts.iter().all(|(_, a)| *a == Action::Create), "{acts:#?}");
    let names = desired::names(&name).unwrap();
    let role = c.iam.get_role().role_name(&names.node_role).send().await;
    assert!(role.is_err(), "a dry run made {}", names.node_role);
    let queue = c.sqs.get_queue_url().queue_name(&names.queue).send().await;
    assert!(queue.is_err(), "a dry run made the queue");
}

#[tokio::test]
async fn install_is_idempotent_repairs_drift_and_uninstall_removes_it() {
    let m = moto_or_skip!("install_is_idempotent_repairs_drift_and_uninstall_removes_it");
    let c = Clients::new(&config(&m.url).await);
    let name = support::unique("inst");
    cluster(&c, &name).await;
    let names = desired::names(&name).unwrap();

    let first = run(&c, &name, false, false).await;
    assert!(
        actions(&first).iter().all(|(_, a)| *a == Action::Create),
        "{:#?}",
        first.steps
    );
    let snap = snapshot(&c, &name).await;
    let node_role = &snap["role KarpenterNodeRole-CLUSTER"];
    assert_eq!(
        node_role["trust"]["Statement"][0]["Principal"]["Service"],
        "ec2.amazonaws.com"
    );
    assert_eq!(
        node_role["policies"].as_array().unwrap().len(),
        desired::NODE_POLICIES.len()
    );
    let controller = &snap["role KarpenterControllerRole-CLUSTER"];
    assert_eq!(
        snap.keys().filter(|k| k.starts_with("policy ")).count(),
        names.policies.len()
    );
    assert!(
        snap["policy KarpenterControllerInterruptionPolicy"]
            .to_string()
            .contains("arn:aws:sqs:us-east-1:123456789012:CLUSTER")
    );
    let issuer = issuer(&c, &name).await;
    let host = issuer.trim_start_matches("https://");
    assert_eq!(
        controller["trust"]["Statement"][0]["Condition"]["StringEquals"][format!("{host}:sub")],
        "system:serviceaccount:karpenter:karpenter"
    );
    assert_eq!(
        snap["queue CLUSTER"]["MessageRetentionPeriod"],
        json!("300")
    );
    let spot = &snap["rule CLUSTER-SpotInterruption"];
    assert_eq!(
        spot["pattern"]["detail-type"][0],
        "EC2 Spot Instance Interruption Warning"
    );
    assert_eq!(
        spot["targets"][0][1],
        json!("arn:aws:sqs:us-east-1:123456789012:CLUSTER")
    );
    // The queue's policy lets EventBridge send to it.
    let url = c
        .sqs
        .get_queue_url()
        .queue_name(&names.queue)
        .send()
        .await
        .unwrap()
        .queue_url()
        .unwrap()
        .to_string();
    let attrs = c
        .sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::Policy)
        .send()
        .await
        .unwrap();
    let policy = doc(attrs
        .attributes()
        .unwrap()
        .get(&aws_sdk_sqs::types::QueueAttributeName::Policy)
        .unwrap());
    assert_eq!(
        policy["Statement"][0]["Principal"]["Service"][0],
        "events.amazonaws.com"
    );
    let provider = c
        .iam
        .get_open_id_connect_provider()
        .open_id_connect_provider_arn(format!("arn:aws:iam::123456789012:oidc-provider/{host}"))
        .send()
        .await
        .unwrap();
    assert_eq!(provider.client_id_list(), ["sts.amazonaws.com"]);

    let second = run(&c, &name, false, false).await;
    assert!(
        actions(&second)
            .iter()
            .all(|(_, a)| *a == Action::Unchanged),
        "{:#?}",
        second.steps
    );
    assert_eq!(snapshot(&c, &name).await, snap);

    // Drift: a policy deleted, the queue's retention changed. A dry run sees it, the next
    // install puts it back.
    c.iam
        .delete_role_policy()
        .role_name(&names.controller_role)
        .policy_name(&names.policies[0].1)
        .send()
        .await
        .unwrap();
    // The policy goes along: moto drops a queue's policy that a SetQueueAttributes leaves out.
    let current_policy = attrs
        .attributes()
        .unwrap()
        .get(&aws_sdk_sqs::types::QueueAttributeName::Policy)
        .unwrap()
        .clone();
    c.sqs
        .set_queue_attributes()
        .queue_url(&url)
        .attributes(
            aws_sdk_sqs::types::QueueAttributeName::MessageRetentionPeriod,
            "600",
        )
        .attributes(
            aws_sdk_sqs::types::QueueAttributeName::Policy,
            current_policy,
        )
        .send()
        .await
        .unwrap();
    let plan = run(&c, &name, true, false).await;
    let changed: Vec<_> = actions(&plan)
        .into_iter()
        .filter(|(_, a)| *a != Action::Unchanged)
        .collect();
    assert_eq!(
        changed,
        vec![
            (
                format!(
                    "iam role policy {}/{}",
                    names.controller_role, names.policies[0].1
                ),
                Action::Create
            ),
            (
                format!("sqs queue {name}"),
                Action::Update("MessageRetentionPeriod".into())
            ),
        ]
    );
    run(&c, &name, false, false).await;
    assert_eq!(snapshot(&c, &name).await, snap);

    let removed = run(&c, &name, false, true).await;
    assert!(
        actions(&removed).iter().all(|(_, a)| *a == Action::Delete),
        "{:#?}",
        removed.steps
    );
    assert!(
        c.iam
            .get_role()
            .role_name(&names.node_role)
            .send()
            .await
            .is_err()
    );
    assert!(
        c.sqs
            .get_queue_url()
            .queue_name(&names.queue)
            .send()
            .await
            .is_err()
    );
    assert!(
        c.events
            .describe_rule()
            .name(&names.rules[0].0)
            .send()
            .await
            .is_err()
    );
    let again = run(&c, &name, false, true).await;
    assert!(
        actions(&again)
            .iter()
            .all(|(_, a)| *a == Action::Skip("absent".into())),
        "{:#?}",
        again.steps
    );
}

#[tokio::test]
async fn a_role_it_did_not_make_is_refused_and_left_alone() {
    let m = moto_or_skip!("a_role_it_did_not_make_is_refused_and_left_alone");
    let c = Clients::new(&config(&m.url).await);
    let name = support::unique("theirs");
    cluster(&c, &name).await;
    let names = desired::names(&name).unwrap();
    c.iam
        .create_role()
        .role_name(&names.node_role)
        .assume_role_policy_document(desired::node_role_trust().to_string())
        .send()
        .await
        .unwrap();
    let out = install::apply(&c, &request(&name, false), false)
        .await
        .unwrap();
    let e = out.error.expect("refused").to_string();
    assert!(
        e.contains(&names.node_role) && e.contains(&format!("{}={name}", desired::OWNER_TAG)),
        "{e}"
    );
    let removed = install::apply(&c, &request(&name, false), true)
        .await
        .unwrap();
    assert!(removed.error.is_none());
    assert!(
        c.iam
            .get_role()
            .role_name(&names.node_role)
            .send()
            .await
            .is_ok(),
        "uninstall deleted a role it did not make"
    );
}

#[tokio::test]
async fn moto_lacks_access_entries() {
    // If moto learns access entries, the runs above should use them: this says when.
    let m = moto_or_skip!("moto_lacks_access_entries");
    let c = Clients::new(&config(&m.url).await);
    let name = support::unique("entry");
    cluster(&c, &name).await;
    let r = c
        .eks
        .describe_access_entry()
        .cluster_name(&name)
        .principal_arn("arn:aws:iam::123456789012:role/x")
        .send()
        .await;
    let e = r.expect_err("moto answered DescribeAccessEntry");
    assert!(
        !e.as_service_error()
            .is_some_and(|s| s.is_resource_not_found_exception()),
        "moto now serves access entries: {e:?}"
    );
}

#[tokio::test]
async fn the_cloudformation_template_makes_what_the_command_makes() {
    let m = moto_or_skip!("the_cloudformation_template_makes_what_the_command_makes");
    let sdk = config(&m.url).await;
    let c = Clients::new(&sdk);
    let by_command = support::unique("cmd");
    let by_stack = support::unique("cfn");
    cluster(&c, &by_command).await;
    cluster(&c, &by_stack).await;
    run(&c, &by_command, false, false).await;

    let template = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/cloudformation.yaml"),
    )
    .unwrap();
    let issuer = issuer(&c, &by_stack).await;
    let cfn = aws_sdk_cloudformation::Client::new(&sdk);
    let param = |k: &str, v: &str| {
        Parameter::builder()
            .parameter_key(k)
            .parameter_value(v)
            .build()
    };
    cfn.create_stack()
        .stack_name(&by_stack)
        .template_body(template)
        .capabilities(Capability::CapabilityNamedIam)
        .parameters(param("ClusterName", &by_stack))
        .parameters(param("OidcProvider", issuer.trim_start_matches("https://")))
        .parameters(param("NodeAccess", "none"))
        .send()
        .await
        .unwrap();
    let stacks = cfn
        .describe_stacks()
        .stack_name(&by_stack)
        .send()
        .await
        .unwrap();
    let status = stacks.stacks()[0]
        .stack_status()
        .unwrap()
        .as_str()
        .to_string();
    assert_eq!(status, "CREATE_COMPLETE");

    let mut from_command = snapshot(&c, &by_command).await;
    let mut from_stack = snapshot(&c, &by_stack).await;
    // moto's CloudFormation leaves out a role's ManagedPolicyArns (the command's node role
    // has them: see the test above); the OIDC provider ids may differ per cluster.
    for snap in [&mut from_command, &mut from_stack] {
        for role in [
            "role KarpenterNodeRole-CLUSTER",
            "role KarpenterControllerRole-CLUSTER",
        ] {
            snap.get_mut(role)
                .unwrap()
                .as_object_mut()
                .unwrap()
                .remove("policies");
        }
        let trust = &mut snap
            .get_mut("role KarpenterControllerRole-CLUSTER")
            .unwrap()["trust"];
        let text = trust.to_string();
        let host = text
            .split("oidc-provider/")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap()
            .to_string();
        *trust = serde_json::from_str(&text.replace(&host, "ISSUER")).unwrap();
    }
    assert_eq!(from_stack, from_command);
}
