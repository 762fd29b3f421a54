//! What `nodewright install aws` wants to exist for one cluster, computed from the cluster's
//! facts alone: resource names (Karpenter's, so existing EC2NodeClasses and values keep
//! working), trust and permission documents, the queue's policy and the EventBridge patterns.
//! Pure: no SDK, no I/O.

use serde_json::{Value, json};

/// The tag every resource the command creates carries; uninstall removes only what has it.
pub const OWNER_TAG: &str = "nodewright.io/cluster";

/// The controller policy of docs/IAM.md, one inline policy per group, with its placeholders.
const CONTROLLER_POLICY: &str = include_str!("../../../../deploy/controller-policy.json");

/// The managed policies the node role gets (Karpenter's node role).
pub const NODE_POLICIES: [&str; 4] = [
    "AmazonEKSWorkerNodePolicy",
    "AmazonEKS_CNI_Policy",
    "AmazonEC2ContainerRegistryPullOnly",
    "AmazonSSMManagedInstanceCore",
];

/// The interruption events the controller handles, as (rule suffix, source, detail-type).
pub const EVENT_RULES: [(&str, &str, &str); 5] = [
    ("ScheduledChange", "aws.health", "AWS Health Event"),
    (
        "SpotInterruption",
        "aws.ec2",
        "EC2 Spot Instance Interruption Warning",
    ),
    (
        "Rebalance",
        "aws.ec2",
        "EC2 Instance Rebalance Recommendation",
    ),
    (
        "InstanceStateChange",
        "aws.ec2",
        "EC2 Instance State-change Notification",
    ),
    (
        "CapacityReservationInterruption",
        "aws.ec2",
        "EC2 Capacity Reservation Instance Interruption Warning",
    ),
];

/// How the controller's pods get the controller role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Identity {
    /// IRSA: the role trusts the cluster's OIDC provider for the service account.
    Irsa,
    /// EKS Pod Identity: the role trusts `pods.eks.amazonaws.com`, and an association names
    /// the service account.
    PodIdentity,
}

/// How nodes with the node role join the cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeAccess {
    /// An EKS access entry of type EC2_LINUX for the node role.
    AccessEntry,
    /// Left to the user (aws-auth ConfigMap, or an entry made elsewhere).
    None,
}

/// The facts the plan is made from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inputs {
    pub cluster: String,
    pub partition: String,
    pub region: String,
    pub account: String,
    /// The cluster's OIDC issuer URL (`https://oidc.eks.REGION.amazonaws.com/id/ID`).
    pub oidc_issuer: Option<String>,
    pub identity: Identity,
    pub node_access: NodeAccess,
    pub namespace: String,
    pub service_account: String,
}

/// Every name the command uses for one cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Names {
    pub node_role: String,
    pub instance_profile: String,
    pub controller_role: String,
    /// (docs/IAM.md group, name of the controller role's inline policy).
    pub policies: Vec<(String, String)>,
    pub queue: String,
    /// (rule name, source, detail-type).
    pub rules: Vec<(String, String, String)>,
}

/// IAM role names are at most 64 characters, EventBridge rule names 64, queue names 80.
pub fn names(cluster: &str) -> Result<Names, String> {
    if cluster.is_empty()
        || !cluster
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(format!(
            "cluster name {cluster:?}: EKS cluster names are letters, digits, '-' and '_'"
        ));
    }
    let names = Names {
        node_role: format!("KarpenterNodeRole-{cluster}"),
        instance_profile: format!("KarpenterNodeInstanceProfile-{cluster}"),
        controller_role: format!("KarpenterControllerRole-{cluster}"),
        policies: policy_groups()
            .into_iter()
            .map(|g| {
                let name = format!("KarpenterController{g}Policy");
                (g, name)
            })
            .collect(),
        queue: cluster.to_string(),
        rules: EVENT_RULES
            .iter()
            .map(|(suffix, source, detail)| {
                (
                    format!("{cluster}-{suffix}"),
                    source.to_string(),
                    detail.to_string(),
                )
            })
            .collect(),
    };
    let limits = [
        (&names.node_role, 64, "IAM role"),
        (&names.controller_role, 64, "IAM role"),
        (&names.instance_profile, 128, "instance profile"),
        (&names.queue, 80, "SQS queue"),
    ];
    for (name, max, what) in limits
        .into_iter()
        .chain(names.rules.iter().map(|r| (&r.0, 64, "EventBridge rule")))
    {
        if name.len() > max {
            return Err(format!(
                "cluster name {cluster:?} is too long: the {what} name {name} has {} characters, the limit is {max}",
                name.len()
            ));
        }
    }
    Ok(names)
}

fn policy_groups() -> Vec<String> {
    let doc: Value = serde_json::from_str(CONTROLLER_POLICY).expect("the policy file is JSON");
    doc.as_object()
        .expect("the policy file maps groups to statements")
        .keys()
        .cloned()
        .collect()
}

/// `arn:PARTITION:iam::ACCOUNT:KIND/NAME`.
pub fn iam_arn(i: &Inputs, kind: &str, name: &str) -> String {
    format!("arn:{}:iam::{}:{kind}/{name}", i.partition, i.account)
}

pub fn aws_managed_policy(i: &Inputs, name: &str) -> String {
    format!("arn:{}:iam::aws:policy/{name}", i.partition)
}

pub fn queue_arn(i: &Inputs, queue: &str) -> String {
    format!("arn:{}:sqs:{}:{}:{queue}", i.partition, i.region, i.account)
}

pub fn node_role_trust() -> Value {
    json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": {"Service": "ec2.amazonaws.com"},
            "Action": "sts:AssumeRole"
        }]
    })
}

/// The issuer without its scheme: the OIDC provider's name in IAM and the condition keys'
/// prefix.
pub fn issuer_host(issuer: &str) -> &str {
    issuer.trim_start_matches("https://").trim_end_matches('/')
}

pub fn controller_role_trust(i: &Inputs) -> Result<Value, String> {
    match i.identity {
        Identity::Irsa => {
            let issuer = i.oidc_issuer.as_deref().ok_or_else(|| {
                format!(
                    "cluster {}: EKS reports no OIDC issuer, which IRSA needs; use --identity pod-identity",
                    i.cluster
                )
            })?;
            let host = issuer_host(issuer);
            Ok(json!({
                "Version": "2012-10-17",
                "Statement": [{
                    "Effect": "Allow",
                    "Principal": {"Federated": iam_arn(i, "oidc-provider", host)},
                    "Action": "sts:AssumeRoleWithWebIdentity",
                    "Condition": {"StringEquals": {
                        format!("{host}:aud"): "sts.amazonaws.com",
                        format!("{host}:sub"): format!("system:serviceaccount:{}:{}", i.namespace, i.service_account)
                    }}
                }]
            }))
        }
        Identity::PodIdentity => Ok(json!({
            "Version": "2012-10-17",
            "Statement": [{
                "Effect": "Allow",
                "Principal": {"Service": "pods.eks.amazonaws.com"},
                "Action": ["sts:AssumeRole", "sts:TagSession"]
            }]
        })),
    }
}

/// One group's policy document, its placeholders filled in.
pub fn controller_policy(i: &Inputs, names: &Names, group: &str) -> Value {
    let text = CONTROLLER_POLICY
        .replace("${Partition}", &i.partition)
        .replace("${Region}", &i.region)
        .replace("${AccountId}", &i.account)
        .replace("${ClusterName}", &i.cluster)
        .replace("${NodeRole}", &names.node_role)
        .replace("${QueueName}", &names.queue);
    let doc: Value = serde_json::from_str(&text).expect("the policy file is JSON");
    json!({"Version": "2012-10-17", "Statement": doc[group].clone()})
}

/// EventBridge and SQS itself may send to the queue; nothing may use it without TLS.
pub fn queue_policy(i: &Inputs, queue: &str) -> Value {
    let arn = queue_arn(i, queue);
    json!({
        "Version": "2012-10-17",
        "Id": "EC2InterruptionPolicy",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]},
                "Action": "sqs:SendMessage",
                "Resource": arn
            },
            {
                "Sid": "DenyHTTP",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "sqs:*",
                "Resource": arn,
                "Condition": {"Bool": {"aws:SecureTransport": false}}
            }
        ]
    })
}

/// The queue's attributes besides its policy: messages kept five minutes (a notice older
/// than that is past acting on), encrypted with SQS-managed keys.
pub const QUEUE_ATTRIBUTES: [(&str, &str); 2] = [
    ("MessageRetentionPeriod", "300"),
    ("SqsManagedSseEnabled", "true"),
];

pub fn event_pattern(source: &str, detail_type: &str) -> Value {
    json!({"source": [source], "detail-type": [detail_type]})
}

/// The `helm install` command the created resources imply.
pub fn helm_command(i: &Inputs, names: &Names) -> String {
    let mut lines = vec![
        format!(
            "helm upgrade --install karpenter charts/nodewright --namespace {} --create-namespace",
            i.namespace
        ),
        "  --set controller.image.repository=<registry>/nodewright --set controller.image.tag=<tag>"
            .to_string(),
        format!("  --set settings.clusterName={}", i.cluster),
        format!("  --set settings.interruptionQueue={}", names.queue),
        format!(
            "  --set-json 'controller.env=[{{\"name\":\"AWS_REGION\",\"value\":\"{}\"}}]'",
            i.region
        ),
    ];
    if i.service_account != "karpenter" {
        lines.push(format!("  --set serviceAccount.name={}", i.service_account));
    }
    if i.identity == Identity::Irsa {
        lines.push(format!(
            "  --set serviceAccount.annotations.\"eks\\.amazonaws\\.com/role-arn\"={}",
            iam_arn(i, "role", &names.controller_role)
        ));
    }
    lines.join(" \\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs() -> Inputs {
        Inputs {
            cluster: "demo".into(),
            partition: "aws".into(),
            region: "us-west-2".into(),
            account: "111122223333".into(),
            oidc_issuer: Some("https://oidc.eks.us-west-2.amazonaws.com/id/ABC".into()),
            identity: Identity::Irsa,
            node_access: NodeAccess::AccessEntry,
            namespace: "karpenter".into(),
            service_account: "karpenter".into(),
        }
    }

    #[test]
    fn names_follow_karpenters_and_respect_aws_limits() {
        let n = names("demo").unwrap();
        assert_eq!(n.node_role, "KarpenterNodeRole-demo");
        assert_eq!(n.controller_role, "KarpenterControllerRole-demo");
        assert_eq!(n.queue, "demo");
        assert_eq!(n.rules[1].0, "demo-SpotInterruption");
        assert!(n.policies.iter().any(
            |(g, p)| g == "NodeLifecycle" && p == "KarpenterControllerNodeLifecyclePolicy"
        ));
        let long = "c".repeat(41);
        let e = names(&long).unwrap_err();
        assert!(
            e.contains("KarpenterControllerRole-") && e.contains("limit is 64"),
            "{e}"
        );
        assert!(names("a b").unwrap_err().contains("letters, digits"));
    }

    #[test]
    fn irsa_trusts_exactly_the_service_account() {
        let t = controller_role_trust(&inputs()).unwrap();
        let s = &t["Statement"][0];
        assert_eq!(
            s["Principal"]["Federated"],
            "arn:aws:iam::111122223333:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/ABC"
        );
        assert_eq!(
            s["Condition"]["StringEquals"]["oidc.eks.us-west-2.amazonaws.com/id/ABC:sub"],
            "system:serviceaccount:karpenter:karpenter"
        );
        let mut no_issuer = inputs();
        no_issuer.oidc_issuer = None;
        assert!(
            controller_role_trust(&no_issuer)
                .unwrap_err()
                .contains("pod-identity")
        );
    }

    #[test]
    fn the_policy_has_no_placeholder_left() {
        let i = inputs();
        let n = names("demo").unwrap();
        for (group, _) in &n.policies {
            let text = controller_policy(&i, &n, group).to_string();
            assert!(!text.contains("${"), "{group}: {text}");
            assert!(text.contains("Statement"), "{group}");
        }
        let text = controller_policy(&i, &n, "Interruption").to_string();
        assert!(
            text.contains("arn:aws:sqs:us-west-2:111122223333:demo"),
            "{text}"
        );
        let text = controller_policy(&i, &n, "IAMIntegration").to_string();
        assert!(text.contains("role/KarpenterNodeRole-demo"), "{text}");
    }

    #[test]
    fn the_helm_command_names_the_role_and_queue() {
        let i = inputs();
        let cmd = helm_command(&i, &names("demo").unwrap());
        assert!(cmd.contains("settings.interruptionQueue=demo"), "{cmd}");
        assert!(
            cmd.contains("role-arn\"=arn:aws:iam::111122223333:role/KarpenterControllerRole-demo"),
            "{cmd}"
        );
    }

    fn repo_file(path: &str) -> String {
        std::fs::read_to_string(format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR")))
            .unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// docs/IAM.md shows the statements this file holds, group by group (its `## Group`
    /// headings), so the page and the policies made cannot drift apart.
    #[test]
    fn the_policy_file_is_the_one_docs_iam_md_shows() {
        let page = repo_file("docs/IAM.md");
        let mut shown: serde_json::Map<String, Value> = serde_json::Map::new();
        let (mut group, mut block): (Option<String>, Option<String>) = (None, None);
        for line in page.lines() {
            if let Some(h) = line.strip_prefix("## ") {
                group = h.split([':', ' ']).next().map(str::to_string);
            } else if line.trim() == "```json" {
                block = Some(String::new());
            } else if line.trim() == "```" && block.is_some() {
                let v: Value = serde_json::from_str(&block.take().unwrap()).unwrap();
                let list = shown
                    .entry(group.clone().unwrap())
                    .or_insert_with(|| json!([]));
                match v {
                    Value::Array(items) => list.as_array_mut().unwrap().extend(items),
                    one => list.as_array_mut().unwrap().push(one),
                }
            } else if let Some(b) = block.as_mut() {
                b.push_str(line);
                b.push('\n');
            }
        }
        let file: Value = serde_json::from_str(CONTROLLER_POLICY).unwrap();
        assert_eq!(Value::Object(shown), file);
    }

    /// The Terraform module reads the same policy file and names what the command names.
    #[test]
    fn the_terraform_module_names_what_the_command_makes() {
        let tf = repo_file("deploy/terraform/main.tf");
        assert!(tf.contains("templatefile(\"${path.module}/../controller-policy.json\""));
        for name in [
            "KarpenterNodeRole-${var.cluster_name}",
            "KarpenterNodeInstanceProfile-${var.cluster_name}",
            "KarpenterControllerRole-${var.cluster_name}",
            "KarpenterController${each.key}Policy",
            "\"${var.cluster_name}-${each.key}\"",
            "message_retention_seconds = 300",
            "sqs_managed_sse_enabled   = true",
            "\"EC2InterruptionPolicy\"",
            "\"EC2_LINUX\"",
        ] {
            assert!(tf.contains(name), "{name} not in main.tf");
        }
        for p in NODE_POLICIES {
            assert!(tf.contains(&format!("\"{p}\"")), "{p} not in main.tf");
        }
        for (suffix, source, detail) in EVENT_RULES {
            let line = format!("{suffix} ");
            let row = tf
                .lines()
                .find(|l| l.trim_start().starts_with(&line))
                .unwrap_or_else(|| panic!("no rule {suffix} in main.tf"));
            assert!(row.contains(source) && row.contains(detail), "{row}");
        }
    }
}
