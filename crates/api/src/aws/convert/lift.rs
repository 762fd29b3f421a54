//! v1alpha1 AWSNodeTemplate → v1beta1 EC2NodeClass: selector maps become selector terms, the
//! implicit AL2 family becomes explicit, and the user-managed launch template is reported.

use super::super::common::{MetadataOptions, Tags};
use super::super::{v1, v1alpha1, v1beta1};

/// v1alpha1 → v1beta1: selector maps to terms, the implicit AL2 family made explicit,
/// `launchTemplate` dropped with a warning.
pub(super) fn to_v1beta1(
    old: &v1alpha1::AWSNodeTemplate,
    warnings: &mut Vec<String>,
) -> v1beta1::EC2NodeClass {
    let s = &old.spec;
    let mut spec = v1beta1::EC2NodeClassSpec {
        ami_family: Some(
            s.ami_family
                .clone()
                .unwrap_or_else(|| v1alpha1::DEFAULT_AMI_FAMILY.to_string()),
        ),
        user_data: s.user_data.clone(),
        instance_profile: s.instance_profile.clone(),
        tags: s.tags.clone(),
        context: s.context.clone(),
        metadata_options: s
            .metadata_options
            .as_ref()
            .map(|m| metadata_options(m, warnings)),
        block_device_mappings: s.block_device_mappings.clone(),
        detailed_monitoring: s.detailed_monitoring,
        ..Default::default()
    };
    if let Some(lt) = &s.launch_template_name {
        warnings.push(format!(
            "spec.launchTemplate: launch template {lt:?} has no v1 equivalent (Karpenter generates launch templates); dropped"
        ));
    }
    spec.subnet_selector_terms = s.subnet_selector.as_ref().map(|sel| {
        id_or_tag_terms(sel, "spec.subnetSelector", warnings)
            .into_iter()
            .map(|(id, tags)| v1::SubnetSelectorTerm {
                id,
                tags,
                ..Default::default()
            })
            .collect()
    });
    spec.security_group_selector_terms = s.security_group_selector.as_ref().map(|sel| {
        id_or_tag_terms(sel, "spec.securityGroupSelector", warnings)
            .into_iter()
            .map(|(id, tags)| v1::SecurityGroupSelectorTerm {
                id,
                tags,
                ..Default::default()
            })
            .collect()
    });
    spec.ami_selector_terms = s.ami_selector.as_ref().map(|sel| ami_terms(sel, warnings));
    for (key, value) in &s.extra {
        match (key.as_str(), value) {
            ("launchTemplateName", _) => {
                warnings.push(format!(
                    "spec.launchTemplateName: launch template {value} has no v1 equivalent (Karpenter generates launch templates); dropped"
                ));
                continue;
            }
            // Written by some releases with this spelling.
            (
                "associatePublicIpAddress" | "associatePublicIPAddress",
                serde_json::Value::Bool(b),
            ) => {
                spec.associate_public_ip_address = Some(*b);
                continue;
            }
            // Left over from templates copied out of a Provisioner's inline `spec.provider`.
            ("apiVersion" | "kind", _) => {
                warnings.push(format!(
                    "spec.{key}: {value} described the inline provider block and has no v1 equivalent; dropped"
                ));
                continue;
            }
            _ => {}
        }
        warnings.push(format!(
            "spec.{key}: not a v1alpha1 AWSNodeTemplate field; carried over to v1 unchanged"
        ));
        spec.extra.insert(key.clone(), value.clone());
    }
    v1beta1::EC2NodeClass {
        api_version: v1beta1::API_VERSION.to_string(),
        kind: v1beta1::KIND.to_string(),
        metadata: old.metadata.clone(),
        spec,
        status: old.status.as_ref().map(|st| v1beta1::EC2NodeClassStatus {
            subnets: st.subnets.clone(),
            security_groups: st.security_groups.clone(),
            amis: st.amis.clone(),
            extra: st.extra.clone(),
            ..Default::default()
        }),
        extra: old.extra.clone(),
    }
}

/// Whether `key` is a v1alpha1 selector key that lists ids rather than a tag key.
fn is_ids_key(key: &str) -> bool {
    key == "aws-ids" || key == "aws::ids"
}

fn split_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// A subnet or security-group selector map as `(id, tags)` terms: one term per listed id, or
/// one term with every tag. v1alpha1 ANDed ids with tags; v1 cannot, so ids win (the narrower
/// choice) and the tags are reported.
fn id_or_tag_terms(
    selector: &Tags,
    field: &str,
    warnings: &mut Vec<String>,
) -> Vec<(Option<String>, Option<Tags>)> {
    let ids: Vec<String> = selector
        .iter()
        .filter(|(k, _)| is_ids_key(k))
        .flat_map(|(_, v)| split_list(v))
        .collect();
    let tags: Tags = selector
        .iter()
        .filter(|(k, _)| !is_ids_key(k))
        .map(|(k, v)| (k.clone(), wildcard(v)))
        .collect();
    if ids.is_empty() {
        return vec![(None, Some(tags))];
    }
    if !tags.is_empty() {
        let keys: Vec<&str> = tags.keys().map(String::as_str).collect();
        warnings.push(format!(
            "{field}: tags {keys:?} were ANDed with the listed ids; v1 id terms cannot carry tags, so only the ids are kept"
        ));
    }
    ids.into_iter().map(|id| (Some(id), None)).collect()
}

/// A v1alpha1 `amiSelector` map as v1beta1 terms: `aws::ids` become id terms; otherwise one
/// term per owner in `aws::owners`, each with `aws::name` and the remaining tags.
fn ami_terms(selector: &Tags, warnings: &mut Vec<String>) -> Vec<v1beta1::AmiSelectorTerm> {
    let ids: Vec<String> = selector
        .iter()
        .filter(|(k, _)| is_ids_key(k))
        .flat_map(|(_, v)| split_list(v))
        .collect();
    let name = selector.get("aws::name").cloned();
    let owners = selector
        .get("aws::owners")
        .map(|o| split_list(o))
        .unwrap_or_default();
    let tags: Tags = selector
        .iter()
        .filter(|(k, _)| !is_ids_key(k) && *k != "aws::name" && *k != "aws::owners")
        .map(|(k, v)| (k.clone(), wildcard(v)))
        .collect();
    if !ids.is_empty() {
        if name.is_some() || !owners.is_empty() || !tags.is_empty() {
            warnings.push(
                "spec.amiSelector: name, owners and tags were ANDed with the listed ids; v1 id terms cannot carry them, so only the ids are kept".to_string(),
            );
        }
        return ids
            .into_iter()
            .map(|id| v1beta1::AmiSelectorTerm {
                id: Some(id),
                ..Default::default()
            })
            .collect();
    }
    let tags = (!tags.is_empty()).then_some(tags);
    let owners: Vec<Option<String>> = if owners.is_empty() {
        vec![None]
    } else {
        owners.into_iter().map(Some).collect()
    };
    owners
        .into_iter()
        .map(|owner| v1beta1::AmiSelectorTerm {
            tags: tags.clone(),
            name: name.clone(),
            owner,
            ..Default::default()
        })
        .collect()
}

/// v1alpha1 selectors matched any value of a tag written as `""`; v1 writes that `*` and
/// rejects empty values.
fn wildcard(value: &str) -> String {
    if value.is_empty() {
        "*".to_string()
    } else {
        value.to_string()
    }
}

/// v1alpha1 passed a partly written `metadataOptions` to EC2 as is, so the missing fields took
/// EC2's own defaults (hop limit 1, tokens optional), not Karpenter's. They are made explicit
/// so converted nodes behave as before.
fn metadata_options(m: &MetadataOptions, warnings: &mut Vec<String>) -> MetadataOptions {
    let mut filled = Vec::new();
    let mut fill = |field: &Option<String>, name: &str, default: &str| {
        field.clone().or_else(|| {
            filled.push(format!("{name}: {default}"));
            Some(default.to_string())
        })
    };
    let out = MetadataOptions {
        http_endpoint: fill(&m.http_endpoint, "httpEndpoint", "enabled"),
        http_protocol_ipv6: fill(&m.http_protocol_ipv6, "httpProtocolIPv6", "disabled"),
        http_tokens: fill(&m.http_tokens, "httpTokens", "optional"),
        http_put_response_hop_limit: m.http_put_response_hop_limit.or_else(|| {
            filled.push("httpPutResponseHopLimit: 1".to_string());
            Some(1)
        }),
        extra: m.extra.clone(),
    };
    if !filled.is_empty() {
        warnings.push(format!(
            "spec.metadataOptions: fields left out took EC2's defaults in v1alpha1; made explicit ({}){}",
            filled.join(", "),
            if out.http_tokens.as_deref() == Some("optional") && m.http_tokens.is_none() {
                "; consider httpTokens: required"
            } else {
                ""
            }
        ));
    }
    out
}
