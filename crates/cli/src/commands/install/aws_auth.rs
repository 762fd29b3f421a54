//! `--node-access aws-auth`: the node role mapped in the `kube-system/aws-auth` ConfigMap, as
//! eksdemo and the older guides let nodes join (clusters without access entries). The entry
//! is added or removed through the kubeconfig; the others in `mapRoles` are kept as they are.

use anyhow::Context;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams};
use nodewright_cloud_aws::install::{Action, Step};
use serde_yaml::{Mapping, Value};

const NAMESPACE: &str = "kube-system";
const NAME: &str = "aws-auth";
const KIND: &str = "aws-auth mapRoles entry";

/// `map_roles` with the node entry for `role_arn` added (`add`) or taken out; `None` when it
/// is already so. Errors name the ConfigMap when `mapRoles` is not a YAML list.
pub fn edit(map_roles: Option<&str>, role_arn: &str, add: bool) -> anyhow::Result<Option<String>> {
    let mut roles: Vec<Value> = match map_roles.map(str::trim) {
        None | Some("") => Vec::new(),
        Some(text) => serde_yaml::from_str(text).with_context(|| {
            format!("ConfigMap {NAMESPACE}/{NAME}: data.mapRoles is not a YAML list of roles")
        })?,
    };
    let ours = |v: &Value| v.get("rolearn").and_then(Value::as_str) == Some(role_arn);
    let present = roles.iter().any(ours);
    if present == add {
        return Ok(None);
    }
    if add {
        let mut entry = Mapping::new();
        entry.insert("rolearn".into(), role_arn.into());
        entry.insert(
            "username".into(),
            "system:node:{{EC2PrivateDNSName}}".into(),
        );
        entry.insert(
            "groups".into(),
            Value::Sequence(vec!["system:bootstrappers".into(), "system:nodes".into()]),
        );
        roles.push(Value::Mapping(entry));
    } else {
        roles.retain(|v| !ours(v));
    }
    Ok(Some(serde_yaml::to_string(&roles)?))
}

/// Adds (or, with `remove`, removes) the entry for `role_arn` in the cluster of `kubeconfig`;
/// with `dry_run`, only reads. One step, as the AWS resources log theirs.
pub async fn apply(
    kubeconfig: Option<&std::path::Path>,
    role_arn: &str,
    remove: bool,
    dry_run: bool,
) -> anyhow::Result<Step> {
    let client = crate::commands::live::client(kubeconfig).await?;
    let api: Api<ConfigMap> = Api::namespaced(client, NAMESPACE);
    let current = api
        .get_opt(NAME)
        .await
        .with_context(|| format!("reading ConfigMap {NAMESPACE}/{NAME}"))?;
    let step = |action| Step {
        kind: KIND,
        name: format!("{NAMESPACE}/{NAME} {role_arn}"),
        action,
    };
    let Some(mut cm) = current else {
        if remove {
            return Ok(step(Action::Skip("no aws-auth ConfigMap".into())));
        }
        if !dry_run {
            let map_roles = edit(None, role_arn, true)?.unwrap_or_default();
            let cm = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(NAME.into()),
                    namespace: Some(NAMESPACE.into()),
                    ..ObjectMeta::default()
                },
                data: Some([("mapRoles".to_string(), map_roles)].into()),
                ..ConfigMap::default()
            };
            api.create(&PostParams::default(), &cm)
                .await
                .with_context(|| format!("creating ConfigMap {NAMESPACE}/{NAME}"))?;
        }
        return Ok(step(Action::Create));
    };
    let data = cm.data.get_or_insert_with(Default::default);
    let Some(map_roles) = edit(data.get("mapRoles").map(String::as_str), role_arn, !remove)? else {
        return Ok(step(if remove {
            Action::Skip("not mapped".into())
        } else {
            Action::Unchanged
        }));
    };
    data.insert("mapRoles".into(), map_roles);
    if !dry_run {
        // The read's resourceVersion rides along: a concurrent edit fails the write instead of
        // being overwritten.
        api.replace(NAME, &PostParams::default(), &cm)
            .await
            .with_context(|| format!("writing ConfigMap {NAMESPACE}/{NAME}"))?;
    }
    Ok(step(if remove {
        Action::Delete
    } else {
        Action::Update("node role mapped".into())
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARN: &str = "arn:aws:iam::111122223333:role/KarpenterNodeRole-c";
    const GROUP: &str = "- rolearn: arn:aws:iam::111122223333:role/ng\n  username: system:node:{{EC2PrivateDNSName}}\n  groups: [system:bootstrappers, system:nodes]\n";

    #[test]
    fn adds_once_keeps_the_others_and_removes_only_its_own() {
        let added = edit(Some(GROUP), ARN, true).unwrap().unwrap();
        let roles: Vec<Value> = serde_yaml::from_str(&added).unwrap();
        assert_eq!(roles.len(), 2);
        assert_eq!(roles[0]["rolearn"], "arn:aws:iam::111122223333:role/ng");
        assert_eq!(roles[1]["rolearn"], ARN);
        assert_eq!(roles[1]["username"], "system:node:{{EC2PrivateDNSName}}");
        assert_eq!(roles[1]["groups"][1], "system:nodes");
        assert_eq!(edit(Some(&added), ARN, true).unwrap(), None);

        let removed = edit(Some(&added), ARN, false).unwrap().unwrap();
        let roles: Vec<Value> = serde_yaml::from_str(&removed).unwrap();
        assert_eq!(roles.len(), 1);
        assert_eq!(roles[0]["rolearn"], "arn:aws:iam::111122223333:role/ng");
        assert_eq!(edit(Some(&removed), ARN, false).unwrap(), None);
        assert!(edit(None, ARN, true).unwrap().is_some());
        assert_eq!(edit(Some(""), ARN, false).unwrap(), None);
    }

    #[test]
    fn a_map_roles_that_is_not_a_list_is_refused_by_name() {
        let err = edit(Some("rolearn: x"), ARN, true).unwrap_err();
        assert!(
            err.to_string()
                .contains("ConfigMap kube-system/aws-auth: data.mapRoles"),
            "{err}"
        );
    }
}
