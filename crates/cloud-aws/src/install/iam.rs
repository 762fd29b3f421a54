//! The IAM side: the node role with its instance profile, the controller role with the
//! policies of docs/IAM.md (inline, one per group), the cluster's OIDC provider (IRSA) and the
//! spot service-linked role.

use std::collections::BTreeSet;

use aws_sdk_iam::types::Tag;
use serde_json::Value;

use super::desired::{self, OWNER_TAG};
use super::{Action, InstallError, Result, Run, document, fail};

const ROLE: &str = "iam role";
const PROFILE: &str = "iam instance profile";
const POLICY: &str = "iam role policy";
const OIDC: &str = "iam oidc provider";
const SPOT_ROLE: &str = "AWSServiceRoleForEC2Spot";
const SPOT_SERVICE: &str = "spot.amazonaws.com";

fn owner_tag(run: &Run<'_>) -> Tag {
    Tag::builder()
        .key(OWNER_TAG)
        .value(&run.inputs.cluster)
        .build()
        .expect("key and value are set")
}

fn is_ours(tags: &[Tag], cluster: &str) -> bool {
    tags.iter()
        .any(|t| t.key() == OWNER_TAG && t.value() == cluster)
}

fn not_ours(kind: &'static str, name: &str, cluster: &str) -> InstallError {
    InstallError {
        kind,
        name: name.to_string(),
        message: format!(
            "exists but was not made by `nodewright install aws` (it has no tag {OWNER_TAG}={cluster}); \
             delete it, or tag it so to let the command manage it"
        ),
    }
}

async fn attached(run: &Run<'_>, role: &str) -> Result<BTreeSet<String>> {
    match run
        .clients
        .iam
        .list_attached_role_policies()
        .role_name(role)
        .send()
        .await
    {
        Ok(out) => Ok(out
            .attached_policies()
            .iter()
            .filter_map(|p| p.policy_arn().map(str::to_string))
            .collect()),
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_no_such_entity_exception()) =>
        {
            Ok(BTreeSet::new())
        }
        Err(e) => Err(fail(ROLE, role, e)),
    }
}

/// Creates the role, or brings its trust policy and attached managed policies in line.
async fn ensure_role(
    run: &mut Run<'_>,
    name: &str,
    trust: &Value,
    managed: &[String],
) -> Result<()> {
    let iam = run.clients.iam.clone();
    let current = match iam.get_role().role_name(name).send().await {
        Ok(out) => out.role().cloned(),
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_no_such_entity_exception()) =>
        {
            None
        }
        Err(e) => return Err(fail(ROLE, name, e)),
    };
    let mut changes = Vec::new();
    let created = current.is_none();
    match current {
        None if run.writes() => {
            iam.create_role()
                .role_name(name)
                .assume_role_policy_document(trust.to_string())
                .tags(owner_tag(run))
                .send()
                .await
                .map_err(|e| fail(ROLE, name, e))?;
        }
        None => {}
        Some(role) => {
            if !is_ours(role.tags(), &run.inputs.cluster) {
                return Err(not_ours(ROLE, name, &run.inputs.cluster));
            }
            if document(role.assume_role_policy_document().unwrap_or_default()) != *trust {
                changes.push("trust policy".to_string());
                if run.writes() {
                    iam.update_assume_role_policy()
                        .role_name(name)
                        .policy_document(trust.to_string())
                        .send()
                        .await
                        .map_err(|e| fail(ROLE, name, e))?;
                }
            }
        }
    }
    let have = attached(run, name).await?;
    for arn in managed.iter().filter(|a| !have.contains(*a)) {
        changes.push(format!("attach {}", arn.rsplit('/').next().unwrap_or(arn)));
        if run.writes() {
            iam.attach_role_policy()
                .role_name(name)
                .policy_arn(arn)
                .send()
                .await
                .map_err(|e| fail(ROLE, name, e))?;
        }
    }
    let action = match (created, changes.is_empty()) {
        (true, _) => Action::Create,
        (false, true) => Action::Unchanged,
        (false, false) => Action::Update(changes.join(", ")),
    };
    run.log(ROLE, name, action);
    Ok(())
}

pub async fn ensure_node_role(run: &mut Run<'_>) -> Result<()> {
    let managed: Vec<String> = desired::NODE_POLICIES
        .iter()
        .map(|p| desired::aws_managed_policy(run.inputs, p))
        .collect();
    let name = run.names.node_role.clone();
    ensure_role(run, &name, &desired::node_role_trust(), &managed).await
}

pub async fn ensure_controller_role(run: &mut Run<'_>) -> Result<()> {
    let trust = desired::controller_role_trust(run.inputs).map_err(|message| InstallError {
        kind: ROLE,
        name: run.names.controller_role.clone(),
        message,
    })?;
    let name = run.names.controller_role.clone();
    ensure_role(run, &name, &trust, &[]).await
}

pub async fn ensure_instance_profile(run: &mut Run<'_>) -> Result<()> {
    let iam = run.clients.iam.clone();
    let (name, role) = (
        run.names.instance_profile.clone(),
        run.names.node_role.clone(),
    );
    let current = match iam
        .get_instance_profile()
        .instance_profile_name(&name)
        .send()
        .await
    {
        Ok(out) => out.instance_profile().cloned(),
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_no_such_entity_exception()) =>
        {
            None
        }
        Err(e) => return Err(fail(PROFILE, &name, e)),
    };
    let Some(profile) = current else {
        run.log(PROFILE, &name, Action::Create);
        if run.writes() {
            iam.create_instance_profile()
                .instance_profile_name(&name)
                .tags(owner_tag(run))
                .send()
                .await
                .map_err(|e| fail(PROFILE, &name, e))?;
            iam.add_role_to_instance_profile()
                .instance_profile_name(&name)
                .role_name(&role)
                .send()
                .await
                .map_err(|e| fail(PROFILE, &name, e))?;
        }
        return Ok(());
    };
    if !is_ours(profile.tags(), &run.inputs.cluster) {
        return Err(not_ours(PROFILE, &name, &run.inputs.cluster));
    }
    if profile.roles().iter().any(|r| r.role_name() == role) {
        run.log(PROFILE, &name, Action::Unchanged);
        return Ok(());
    }
    run.log(PROFILE, &name, Action::Update(format!("role {role}")));
    if run.writes() {
        // A profile holds one role.
        for other in profile.roles() {
            iam.remove_role_from_instance_profile()
                .instance_profile_name(&name)
                .role_name(other.role_name())
                .send()
                .await
                .map_err(|e| fail(PROFILE, &name, e))?;
        }
        iam.add_role_to_instance_profile()
            .instance_profile_name(&name)
            .role_name(&role)
            .send()
            .await
            .map_err(|e| fail(PROFILE, &name, e))?;
    }
    Ok(())
}

/// One inline policy per docs/IAM.md group on the controller role, put when missing or
/// different. Inline, they go with the role and need no ARNs, versions or attachments.
pub async fn ensure_controller_policies(run: &mut Run<'_>) -> Result<()> {
    let role = run.names.controller_role.clone();
    let iam = run.clients.iam.clone();
    for (group, policy) in run.names.policies.clone() {
        let name = format!("{role}/{policy}");
        let want = desired::controller_policy(run.inputs, run.names, &group);
        let have = match iam
            .get_role_policy()
            .role_name(&role)
            .policy_name(&policy)
            .send()
            .await
        {
            Ok(out) => Some(document(out.policy_document())),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_no_such_entity_exception()) =>
            {
                None
            }
            Err(e) => return Err(fail(POLICY, &name, e)),
        };
        let action = match have {
            None => Action::Create,
            Some(doc) if doc == want => Action::Unchanged,
            Some(_) => Action::Update("document".into()),
        };
        let write = action != Action::Unchanged && run.writes();
        run.log(POLICY, &name, action);
        if write {
            iam.put_role_policy()
                .role_name(&role)
                .policy_name(&policy)
                .policy_document(want.to_string())
                .send()
                .await
                .map_err(|e| fail(POLICY, &name, e))?;
        }
    }
    Ok(())
}

/// IRSA needs the cluster's issuer as an IAM OIDC provider; made when missing.
pub async fn ensure_oidc_provider(run: &mut Run<'_>) -> Result<()> {
    let Some(issuer) = run.inputs.oidc_issuer.clone() else {
        return Ok(());
    };
    let host = desired::issuer_host(&issuer).to_string();
    let arn = desired::iam_arn(run.inputs, "oidc-provider", &host);
    let iam = run.clients.iam.clone();
    match iam
        .get_open_id_connect_provider()
        .open_id_connect_provider_arn(&arn)
        .send()
        .await
    {
        Ok(out) => {
            let action = if out
                .client_id_list()
                .iter()
                .any(|c| c == "sts.amazonaws.com")
            {
                Action::Unchanged
            } else if is_ours(out.tags(), &run.inputs.cluster) {
                if run.writes() {
                    iam.add_client_id_to_open_id_connect_provider()
                        .open_id_connect_provider_arn(&arn)
                        .client_id("sts.amazonaws.com")
                        .send()
                        .await
                        .map_err(|e| fail(OIDC, &host, e))?;
                }
                Action::Update("audience sts.amazonaws.com".into())
            } else {
                return Err(InstallError {
                    kind: OIDC,
                    name: host,
                    message: "exists without the audience sts.amazonaws.com, which IRSA needs"
                        .into(),
                });
            };
            run.log(OIDC, &host, action);
        }
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_no_such_entity_exception()) =>
        {
            run.log(OIDC, &host, Action::Create);
            if run.writes() {
                iam.create_open_id_connect_provider()
                    .url(&issuer)
                    .client_id_list("sts.amazonaws.com")
                    .tags(owner_tag(run))
                    .send()
                    .await
                    .map_err(|e| fail(OIDC, &host, e))?;
            }
        }
        Err(e) => return Err(fail(OIDC, &host, e)),
    }
    Ok(())
}

/// Spot launches need the account's EC2 Spot service-linked role; made when missing. It is
/// found by its path, which names the service (`/aws-service-role/spot.amazonaws.com/`).
pub async fn ensure_spot_service_linked_role(run: &mut Run<'_>) -> Result<()> {
    let iam = run.clients.iam.clone();
    let listed = iam
        .list_roles()
        .path_prefix(format!("/aws-service-role/{SPOT_SERVICE}/"))
        .send()
        .await
        .map_err(|e| fail(ROLE, SPOT_ROLE, e))?;
    if !listed.roles().is_empty() {
        run.log(ROLE, SPOT_ROLE, Action::Unchanged);
        return Ok(());
    }
    run.log(ROLE, SPOT_ROLE, Action::Create);
    if run.writes() {
        iam.create_service_linked_role()
            .aws_service_name(SPOT_SERVICE)
            .send()
            .await
            .map_err(|e| fail(ROLE, SPOT_ROLE, e))?;
    }
    Ok(())
}

pub async fn remove_instance_profile(run: &mut Run<'_>) -> Result<()> {
    let iam = run.clients.iam.clone();
    let name = run.names.instance_profile.clone();
    let profile = match iam
        .get_instance_profile()
        .instance_profile_name(&name)
        .send()
        .await
    {
        Ok(out) => out.instance_profile().cloned(),
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_no_such_entity_exception()) =>
        {
            None
        }
        Err(e) => return Err(fail(PROFILE, &name, e)),
    };
    let Some(profile) = profile else {
        run.log(PROFILE, &name, Action::Skip("absent".into()));
        return Ok(());
    };
    if !is_ours(profile.tags(), &run.inputs.cluster) {
        run.log(
            PROFILE,
            &name,
            Action::Skip("not made by nodewright install".into()),
        );
        return Ok(());
    }
    run.log(PROFILE, &name, Action::Delete);
    if run.writes() {
        for r in profile.roles() {
            iam.remove_role_from_instance_profile()
                .instance_profile_name(&name)
                .role_name(r.role_name())
                .send()
                .await
                .map_err(|e| fail(PROFILE, &name, e))?;
        }
        iam.delete_instance_profile()
            .instance_profile_name(&name)
            .send()
            .await
            .map_err(|e| fail(PROFILE, &name, e))?;
    }
    Ok(())
}

/// Deletes a role the command made, after detaching its managed policies.
pub async fn remove_role(run: &mut Run<'_>, name: &str) -> Result<()> {
    let iam = run.clients.iam.clone();
    let role = match iam.get_role().role_name(name).send().await {
        Ok(out) => out.role().cloned(),
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_no_such_entity_exception()) =>
        {
            None
        }
        Err(e) => return Err(fail(ROLE, name, e)),
    };
    let Some(role) = role else {
        run.log(ROLE, name, Action::Skip("absent".into()));
        return Ok(());
    };
    if !is_ours(role.tags(), &run.inputs.cluster) {
        run.log(
            ROLE,
            name,
            Action::Skip("not made by nodewright install".into()),
        );
        return Ok(());
    }
    run.log(ROLE, name, Action::Delete);
    if run.writes() {
        let inline = iam
            .list_role_policies()
            .role_name(name)
            .send()
            .await
            .map_err(|e| fail(ROLE, name, e))?;
        for policy in inline.policy_names() {
            iam.delete_role_policy()
                .role_name(name)
                .policy_name(policy)
                .send()
                .await
                .map_err(|e| fail(ROLE, name, e))?;
        }
        for arn in attached(run, name).await? {
            iam.detach_role_policy()
                .role_name(name)
                .policy_arn(&arn)
                .send()
                .await
                .map_err(|e| fail(ROLE, name, e))?;
        }
        iam.delete_role()
            .role_name(name)
            .send()
            .await
            .map_err(|e| fail(ROLE, name, e))?;
    }
    Ok(())
}

/// The OIDC provider goes only if this command made it (eksctl's stays).
pub async fn remove_oidc_provider(run: &mut Run<'_>) -> Result<()> {
    let Some(issuer) = run.inputs.oidc_issuer.clone() else {
        return Ok(());
    };
    let host = desired::issuer_host(&issuer).to_string();
    let arn = desired::iam_arn(run.inputs, "oidc-provider", &host);
    let iam = run.clients.iam.clone();
    match iam
        .get_open_id_connect_provider()
        .open_id_connect_provider_arn(&arn)
        .send()
        .await
    {
        Ok(out) if is_ours(out.tags(), &run.inputs.cluster) => {
            run.log(OIDC, &host, Action::Delete);
            if run.writes() {
                iam.delete_open_id_connect_provider()
                    .open_id_connect_provider_arn(&arn)
                    .send()
                    .await
                    .map_err(|e| fail(OIDC, &host, e))?;
            }
        }
        Ok(_) => run.log(
            OIDC,
            &host,
            Action::Skip("not made by nodewright install".into()),
        ),
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_no_such_entity_exception()) =>
        {
            run.log(OIDC, &host, Action::Skip("absent".into()))
        }
        Err(e) => return Err(fail(OIDC, &host, e)),
    }
    Ok(())
}
