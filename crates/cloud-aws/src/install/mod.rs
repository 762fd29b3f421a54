//! `nodewright install aws` and `uninstall aws`: the AWS side of a cluster, made or removed
//! idempotently through the SDK. [`desired`] says what should exist (pure); the other
//! modules read what does, and create or update the difference, logging one [`Step`] per
//! resource. With `dry_run` they only read. Every resource made carries the [`OWNER_TAG`];
//! uninstall deletes only resources that carry it with this cluster's name, and an existing
//! resource without it is refused rather than taken over.

pub mod access;
pub mod desired;
pub mod iam;
pub mod queue;

use aws_config::SdkConfig;
pub use desired::{Identity, Inputs, Names, NodeAccess, OWNER_TAG};

/// What happened (or, in a dry run, would happen) to one resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    Create,
    /// Changed, with what changed.
    Update(String),
    Unchanged,
    Delete,
    /// Nothing to do, and why (absent, not ours).
    Skip(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// `iam role`, `sqs queue`, `eventbridge rule`...
    pub kind: &'static str,
    pub name: String,
    pub action: Action,
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (verb, why) = match &self.action {
            Action::Create => ("create", String::new()),
            Action::Update(what) => ("update", format!(" ({what})")),
            Action::Unchanged => ("ok", String::new()),
            Action::Delete => ("delete", String::new()),
            Action::Skip(why) => ("skip", format!(" ({why})")),
        };
        write!(f, "{verb:<7} {} {}{why}", self.kind, self.name)
    }
}

/// A failed call, named by the resource it was for.
#[derive(Debug, thiserror::Error)]
#[error("{kind} {name}: {message}")]
pub struct InstallError {
    pub kind: &'static str,
    pub name: String,
    pub message: String,
}

pub type Result<T> = std::result::Result<T, InstallError>;

/// The clients the install uses.
#[derive(Clone, Debug)]
pub struct Clients {
    pub iam: aws_sdk_iam::Client,
    pub sqs: aws_sdk_sqs::Client,
    pub events: aws_sdk_eventbridge::Client,
    pub eks: aws_sdk_eks::Client,
}

impl Clients {
    pub fn new(config: &SdkConfig) -> Self {
        Clients {
            iam: aws_sdk_iam::Client::new(config),
            sqs: aws_sdk_sqs::Client::new(config),
            events: aws_sdk_eventbridge::Client::new(config),
            eks: aws_sdk_eks::Client::new(config),
        }
    }
}

/// Runs the steps against AWS and keeps their log.
pub struct Run<'a> {
    pub clients: &'a Clients,
    pub inputs: &'a Inputs,
    pub names: &'a Names,
    pub dry_run: bool,
    pub steps: Vec<Step>,
}

impl Run<'_> {
    fn log(&mut self, kind: &'static str, name: &str, action: Action) {
        self.steps.push(Step {
            kind,
            name: name.to_string(),
            action,
        });
    }

    /// Whether to write: false in a dry run.
    fn writes(&self) -> bool {
        !self.dry_run
    }
}

/// An SDK error as text, with the service's code and message when it gave them.
pub(crate) fn fail<E>(
    kind: &'static str,
    name: &str,
    e: aws_sdk_iam::error::SdkError<E>,
) -> InstallError
where
    E: aws_sdk_iam::error::ProvideErrorMetadata + std::error::Error + 'static,
{
    let message = match e
        .as_service_error()
        .and_then(|s| s.code().map(|c| (c, s.message())))
    {
        Some((code, message)) => format!("{code}: {}", message.unwrap_or_default()),
        // No code: say what did answer (a bare HTTP status, or no answer at all).
        None => match e.raw_response() {
            Some(r) => format!(
                "HTTP {} without an AWS error (does this endpoint serve the call?)",
                r.status().as_u16()
            ),
            None => aws_sdk_iam::error::DisplayErrorContext(&e).to_string(),
        },
    };
    InstallError {
        kind,
        name: name.to_string(),
        message,
    }
}

/// The cluster's facts from EKS DescribeCluster: (partition, account, OIDC issuer).
pub async fn cluster_facts(
    eks: &aws_sdk_eks::Client,
    cluster: &str,
) -> Result<(String, String, Option<String>)> {
    let out = eks
        .describe_cluster()
        .name(cluster)
        .send()
        .await
        .map_err(|e| fail("eks cluster", cluster, e))?;
    let c = out.cluster().ok_or_else(|| InstallError {
        kind: "eks cluster",
        name: cluster.into(),
        message: "DescribeCluster returned no cluster".into(),
    })?;
    let arn = c.arn().unwrap_or_default();
    // arn:PARTITION:eks:REGION:ACCOUNT:cluster/NAME
    let parts: Vec<&str> = arn.split(':').collect();
    if parts.len() < 6 || parts[4].is_empty() {
        return Err(InstallError {
            kind: "eks cluster",
            name: cluster.into(),
            message: format!("unexpected cluster ARN {arn:?}"),
        });
    }
    let issuer = c
        .identity()
        .and_then(|i| i.oidc())
        .and_then(|o| o.issuer())
        .map(str::to_string);
    Ok((parts[1].to_string(), parts[4].to_string(), issuer))
}

/// What the user asked for.
#[derive(Clone, Debug)]
pub struct Request {
    pub cluster: String,
    pub region: String,
    pub identity: Identity,
    pub node_access: NodeAccess,
    pub namespace: String,
    pub service_account: String,
    pub dry_run: bool,
}

/// What a run did (or would do), with the facts it worked from.
#[derive(Debug)]
pub struct Outcome {
    pub inputs: Inputs,
    pub names: Names,
    pub steps: Vec<Step>,
    /// The call that stopped the run, after `steps`.
    pub error: Option<InstallError>,
}

/// Reads the cluster from EKS, then installs (or, with `remove`, uninstalls).
pub async fn apply(clients: &Clients, req: &Request, remove: bool) -> Result<Outcome> {
    let names = desired::names(&req.cluster).map_err(|message| InstallError {
        kind: "eks cluster",
        name: req.cluster.clone(),
        message,
    })?;
    let (partition, account, oidc_issuer) = cluster_facts(&clients.eks, &req.cluster).await?;
    let inputs = Inputs {
        cluster: req.cluster.clone(),
        partition,
        region: req.region.clone(),
        account,
        oidc_issuer,
        identity: req.identity,
        node_access: req.node_access,
        namespace: req.namespace.clone(),
        service_account: req.service_account.clone(),
    };
    let mut run = Run {
        clients,
        inputs: &inputs,
        names: &names,
        dry_run: req.dry_run,
        steps: Vec::new(),
    };
    let result = if remove {
        uninstall(&mut run).await
    } else {
        install(&mut run).await
    };
    let steps = run.steps;
    Ok(Outcome {
        inputs,
        names,
        steps,
        error: result.err(),
    })
}

/// Creates or updates everything, in dependency order: roles and policies, the instance
/// profile, the queue, the rules, then the cluster's access for the roles.
pub async fn install(run: &mut Run<'_>) -> Result<()> {
    iam::ensure_node_role(run).await?;
    iam::ensure_instance_profile(run).await?;
    if run.inputs.identity == Identity::Irsa {
        iam::ensure_oidc_provider(run).await?;
    }
    iam::ensure_controller_role(run).await?;
    iam::ensure_controller_policies(run).await?;
    iam::ensure_spot_service_linked_role(run).await?;
    queue::ensure_queue(run).await?;
    queue::ensure_rules(run).await?;
    if run.inputs.node_access == NodeAccess::AccessEntry {
        access::ensure_access_entry(run).await?;
    }
    if run.inputs.identity == Identity::PodIdentity {
        access::ensure_pod_identity(run).await?;
    }
    Ok(())
}

/// Removes what [`install`] made for this cluster, in reverse order. The spot service-linked
/// role is shared by the account and stays.
pub async fn uninstall(run: &mut Run<'_>) -> Result<()> {
    access::remove_pod_identity(run).await?;
    access::remove_access_entry(run).await?;
    queue::remove_rules(run).await?;
    queue::remove_queue(run).await?;
    iam::remove_instance_profile(run).await?;
    iam::remove_role(run, &run.names.controller_role.clone()).await?;
    iam::remove_role(run, &run.names.node_role.clone()).await?;
    iam::remove_oidc_provider(run).await?;
    Ok(())
}

/// `%XX` escapes decoded: IAM returns policy documents URL-encoded.
pub(crate) fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A policy document as AWS returns it (URL-encoded or not) parsed, for comparing by value.
pub fn document(text: &str) -> serde_json::Value {
    serde_json::from_str(text)
        .or_else(|_| serde_json::from_str(&percent_decode(text)))
        .unwrap_or(serde_json::Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_encoded_documents_compare_by_value() {
        let encoded = "%7B%22Version%22%3A%222012-10-17%22%2C%22Statement%22%3A%5B%5D%7D";
        assert_eq!(
            document(encoded),
            serde_json::json!({"Version": "2012-10-17", "Statement": []})
        );
        assert_eq!(document(r#"{"a": 1}"#), serde_json::json!({"a": 1}));
        assert_eq!(percent_decode("100%"), "100%");
    }

    #[test]
    fn steps_print_as_a_plan() {
        let s = Step {
            kind: "sqs queue",
            name: "demo".into(),
            action: Action::Update("policy".into()),
        };
        assert_eq!(s.to_string(), "update  sqs queue demo (policy)");
    }
}
