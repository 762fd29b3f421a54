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
mod tests;
