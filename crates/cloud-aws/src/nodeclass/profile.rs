//! The instance profile of a class with `spec.role`: created (under a path scoped to the
//! cluster and class, tagged for cleanup) on first use, with exactly that role in it.

use std::collections::BTreeMap;

use aws_sdk_iam::types::Tag;

use crate::AwsClients;
use crate::error::AwsError;

use nodewright_api::stable_hash::fnv1a64;

/// `<cluster>_<hash(region + class name + class uid)>`.
pub fn profile_name(cluster: &str, region: &str, class: &str, uid: &str) -> String {
    format!(
        "{cluster}_{}",
        fnv1a64(format!("{region}{class}{uid}").as_bytes())
    )
}

/// `/karpenter/<region>/<cluster>/<uid>/`: instance-profile garbage collection lists under
/// `/karpenter/<region>/<cluster>/`.
pub fn profile_path(cluster: &str, region: &str, uid: &str) -> String {
    format!("/karpenter/{region}/{cluster}/{uid}/")
}

/// The class's tags plus the ones that scope the profile to the cluster, class and region.
pub fn profile_tags(
    class_tags: &BTreeMap<String, String>,
    cluster: &str,
    region: &str,
    class: &str,
) -> BTreeMap<String, String> {
    let mut t = class_tags.clone();
    t.insert(format!("kubernetes.io/cluster/{cluster}"), "owned".into());
    t.insert("eks:eks-cluster-name".into(), cluster.into());
    t.insert("karpenter.k8s.aws/ec2nodeclass".into(), class.into());
    t.insert("topology.kubernetes.io/region".into(), region.into());
    t
}

/// The roles of profile `name`, or `None` when it does not exist.
async fn profile_roles(c: &AwsClients, name: &str) -> Result<Option<Vec<String>>, AwsError> {
    match c
        .iam
        .get_instance_profile()
        .instance_profile_name(name)
        .send()
        .await
    {
        Ok(out) => Ok(out.instance_profile.map(|p| {
            p.roles()
                .iter()
                .map(|r| r.role_name().to_string())
                .collect()
        })),
        Err(e) => {
            let e = AwsError::from_sdk("GetInstanceProfile", e);
            if e.is_not_found() { Ok(None) } else { Err(e) }
        }
    }
}

/// Creates profile `name`, or, when another reconcile created it since we looked
/// (`EntityAlreadyExists`), reads the one that is there. Returns its roles.
pub async fn create_or_adopt(
    c: &AwsClients,
    name: &str,
    path: &str,
    tags: &BTreeMap<String, String>,
) -> Result<Vec<String>, AwsError> {
    let iam_tags: Vec<Tag> = tags
        .iter()
        .filter_map(|(k, v)| Tag::builder().key(k).value(v).build().ok())
        .collect();
    let created = c
        .iam
        .create_instance_profile()
        .instance_profile_name(name)
        .path(path)
        .set_tags(Some(iam_tags))
        .send()
        .await;
    match created {
        Ok(_) => Ok(Vec::new()),
        Err(e) => {
            let e = AwsError::from_sdk("CreateInstanceProfile", e);
            if e.code.as_deref() != Some("EntityAlreadyExists") {
                return Err(e);
            }
            profile_roles(c, name).await?.ok_or_else(|| {
                AwsError::new(
                    "GetInstanceProfile",
                    format!("instance profile {name} already exists but could not be read back"),
                )
            })
        }
    }
}

/// Takes `role` out of profile `name`; someone else removing it first is the same outcome.
async fn remove_role(c: &AwsClients, name: &str, role: &str) -> Result<(), AwsError> {
    let removed = c
        .iam
        .remove_role_from_instance_profile()
        .instance_profile_name(name)
        .role_name(role)
        .send()
        .await
        .map_err(|e| AwsError::from_sdk("RemoveRoleFromInstanceProfile", e));
    match removed {
        Err(e) if !e.is_not_found() => Err(e),
        _ => Ok(()),
    }
}

/// Makes sure profile `name` exists (created at `path` with `tags` if missing) and holds
/// `role` and nothing else. Safe to run concurrently for one profile: a create or role add
/// that loses the race to another reconcile re-reads the profile instead of failing.
pub async fn ensure_instance_profile(
    c: &AwsClients,
    name: &str,
    path: &str,
    tags: &BTreeMap<String, String>,
    role: &str,
) -> Result<(), AwsError> {
    let roles = match profile_roles(c, name).await? {
        Some(roles) => roles,
        None => create_or_adopt(c, name, path, tags).await?,
    };
    if roles.iter().any(|r| r == role) && roles.len() == 1 {
        return Ok(());
    }
    for other in roles.iter().filter(|r| *r != role) {
        remove_role(c, name, other).await?;
    }
    if roles.iter().any(|r| r == role) {
        return Ok(());
    }
    let added = c
        .iam
        .add_role_to_instance_profile()
        .instance_profile_name(name)
        .role_name(role)
        .send()
        .await
        .map_err(|e| AwsError::from_sdk("AddRoleToInstanceProfile", e));
    match added {
        Ok(_) => Ok(()),
        // A profile holds one role: a concurrent reconcile that added it first makes ours
        // fail with LimitExceeded. Success if the role there is ours.
        Err(e)
            if matches!(
                e.code.as_deref(),
                Some("LimitExceeded" | "EntityAlreadyExists")
            ) =>
        {
            let now = profile_roles(c, name).await?.unwrap_or_default();
            if now.len() == 1 && now[0] == role {
                Ok(())
            } else {
                Err(e)
            }
        }
        Err(e) => Err(e),
    }
}

/// Deletes profile `name` after taking its roles out (IAM refuses to delete a profile that
/// holds one). Whether it existed; a profile or role already gone is the same outcome.
pub async fn delete_instance_profile(c: &AwsClients, name: &str) -> Result<bool, AwsError> {
    let Some(roles) = profile_roles(c, name).await? else {
        return Ok(false);
    };
    for role in &roles {
        remove_role(c, name, role).await?;
    }
    let deleted = c
        .iam
        .delete_instance_profile()
        .instance_profile_name(name)
        .send()
        .await
        .map_err(|e| AwsError::from_sdk("DeleteInstanceProfile", e));
    match deleted {
        Ok(_) => Ok(true),
        Err(e) if e.is_not_found() => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_stable_and_scoped() {
        let a = profile_name("blue", "us-east-1", "default", "uid-1");
        assert_eq!(a, profile_name("blue", "us-east-1", "default", "uid-1"));
        assert!(a.starts_with("blue_"));
        assert_ne!(a, profile_name("blue", "us-east-1", "default", "uid-2"));
        assert_eq!(
            profile_path("blue", "us-east-1", "uid-1"),
            "/karpenter/us-east-1/blue/uid-1/"
        );
        let t = profile_tags(&BTreeMap::new(), "blue", "us-east-1", "default");
        assert_eq!(t["kubernetes.io/cluster/blue"], "owned");
        assert_eq!(t["karpenter.k8s.aws/ec2nodeclass"], "default");
    }
}
