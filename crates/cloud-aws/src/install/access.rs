//! The cluster side in EKS: an access entry (type EC2_LINUX) that lets nodes with the node
//! role join, and with EKS Pod Identity the association of the controller's service account
//! with the controller role.

use std::collections::HashMap;

use super::desired::{self, OWNER_TAG};
use super::{Action, Result, Run, fail};

const ENTRY: &str = "eks access entry";
const ASSOCIATION: &str = "eks pod identity association";

fn owner_tags(run: &Run<'_>) -> HashMap<String, String> {
    HashMap::from([(OWNER_TAG.to_string(), run.inputs.cluster.clone())])
}

/// The entry's tags when it exists.
async fn access_entry(run: &Run<'_>, principal: &str) -> Result<Option<HashMap<String, String>>> {
    match run
        .clients
        .eks
        .describe_access_entry()
        .cluster_name(&run.inputs.cluster)
        .principal_arn(principal)
        .send()
        .await
    {
        Ok(out) => Ok(Some(
            out.access_entry()
                .and_then(|e| e.tags())
                .cloned()
                .unwrap_or_default(),
        )),
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_resource_not_found_exception()) =>
        {
            Ok(None)
        }
        Err(e) => Err(fail(ENTRY, principal, e)),
    }
}

pub async fn ensure_access_entry(run: &mut Run<'_>) -> Result<()> {
    let principal = desired::iam_arn(run.inputs, "role", &run.names.node_role);
    if access_entry(run, &principal).await?.is_some() {
        // An entry made elsewhere (eksctl, the console) lets the nodes join just the same.
        run.log(ENTRY, &principal, Action::Unchanged);
        return Ok(());
    }
    run.log(ENTRY, &principal, Action::Create);
    if run.writes() {
        run.clients
            .eks
            .create_access_entry()
            .cluster_name(&run.inputs.cluster)
            .principal_arn(&principal)
            .r#type("EC2_LINUX")
            .set_tags(Some(owner_tags(run)))
            .send()
            .await
            .map_err(|e| fail(ENTRY, &principal, e))?;
    }
    Ok(())
}

pub async fn remove_access_entry(run: &mut Run<'_>) -> Result<()> {
    if run.inputs.node_access != desired::NodeAccess::AccessEntry {
        return Ok(());
    }
    let principal = desired::iam_arn(run.inputs, "role", &run.names.node_role);
    match access_entry(run, &principal).await? {
        None => run.log(ENTRY, &principal, Action::Skip("absent".into())),
        Some(tags) if tags.get(OWNER_TAG) != Some(&run.inputs.cluster) => run.log(
            ENTRY,
            &principal,
            Action::Skip("not made by nodewright install".into()),
        ),
        Some(_) => {
            run.log(ENTRY, &principal, Action::Delete);
            if run.writes() {
                run.clients
                    .eks
                    .delete_access_entry()
                    .cluster_name(&run.inputs.cluster)
                    .principal_arn(&principal)
                    .send()
                    .await
                    .map_err(|e| fail(ENTRY, &principal, e))?;
            }
        }
    }
    Ok(())
}

/// The association of the controller's service account: (id, role ARN).
async fn association(run: &Run<'_>, name: &str) -> Result<Option<(String, String)>> {
    let eks = &run.clients.eks;
    let list = eks
        .list_pod_identity_associations()
        .cluster_name(&run.inputs.cluster)
        .namespace(&run.inputs.namespace)
        .service_account(&run.inputs.service_account)
        .send()
        .await
        .map_err(|e| fail(ASSOCIATION, name, e))?;
    let Some(id) = list
        .associations()
        .first()
        .and_then(|a| a.association_id())
        .map(str::to_string)
    else {
        return Ok(None);
    };
    let described = eks
        .describe_pod_identity_association()
        .cluster_name(&run.inputs.cluster)
        .association_id(&id)
        .send()
        .await
        .map_err(|e| fail(ASSOCIATION, name, e))?;
    let role = described
        .association()
        .and_then(|a| a.role_arn())
        .unwrap_or_default()
        .to_string();
    Ok(Some((id, role)))
}

pub async fn ensure_pod_identity(run: &mut Run<'_>) -> Result<()> {
    let name = format!("{}/{}", run.inputs.namespace, run.inputs.service_account);
    let role = desired::iam_arn(run.inputs, "role", &run.names.controller_role);
    let eks = run.clients.eks.clone();
    match association(run, &name).await? {
        Some((_, r)) if r == role => run.log(ASSOCIATION, &name, Action::Unchanged),
        Some((id, _)) => {
            run.log(ASSOCIATION, &name, Action::Update(format!("role {role}")));
            if run.writes() {
                eks.update_pod_identity_association()
                    .cluster_name(&run.inputs.cluster)
                    .association_id(id)
                    .role_arn(&role)
                    .send()
                    .await
                    .map_err(|e| fail(ASSOCIATION, &name, e))?;
            }
        }
        None => {
            run.log(ASSOCIATION, &name, Action::Create);
            if run.writes() {
                eks.create_pod_identity_association()
                    .cluster_name(&run.inputs.cluster)
                    .namespace(&run.inputs.namespace)
                    .service_account(&run.inputs.service_account)
                    .role_arn(&role)
                    .set_tags(Some(owner_tags(run)))
                    .send()
                    .await
                    .map_err(|e| fail(ASSOCIATION, &name, e))?;
            }
        }
    }
    Ok(())
}

pub async fn remove_pod_identity(run: &mut Run<'_>) -> Result<()> {
    if run.inputs.identity != desired::Identity::PodIdentity {
        return Ok(());
    }
    let name = format!("{}/{}", run.inputs.namespace, run.inputs.service_account);
    let role = desired::iam_arn(run.inputs, "role", &run.names.controller_role);
    match association(run, &name).await? {
        Some((id, r)) if r == role => {
            run.log(ASSOCIATION, &name, Action::Delete);
            if run.writes() {
                run.clients
                    .eks
                    .delete_pod_identity_association()
                    .cluster_name(&run.inputs.cluster)
                    .association_id(id)
                    .send()
                    .await
                    .map_err(|e| fail(ASSOCIATION, &name, e))?;
            }
        }
        Some(_) => run.log(
            ASSOCIATION,
            &name,
            Action::Skip("names another role".into()),
        ),
        None => run.log(ASSOCIATION, &name, Action::Skip("absent".into())),
    }
    Ok(())
}
