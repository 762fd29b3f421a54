//! Conversion of older node classes to `karpenter.k8s.aws/v1`.
//!
//! A v1alpha1 AWSNodeTemplate is first lifted to a v1beta1 EC2NodeClass (selector maps become
//! terms, implicit defaults become explicit), then converted like any v1beta1 class. The
//! kubelet settings, which lived on the NodePool or Provisioner in those generations, are
//! passed in and land in `spec.kubelet`. Anything without a v1 home becomes a warning.

use std::collections::BTreeMap;

use serde_json::Value;

use super::common::{BlockDevice, BlockDeviceMapping, IntOrString, MetadataOptions};
use super::v1::{self, AmiSelectorTerm, EC2NodeClass, KubeletConfiguration};
use super::{v1alpha1, v1beta1};
use crate::conversion::Converted;

mod lift;

/// Annotation that records what the conversion of an Ubuntu class changed.
pub const UBUNTU_COMPATIBILITY_ANNOTATION: &str = "compatibility.karpenter.k8s.aws/v1beta1-ubuntu";

/// Kubelet fields of older generations that have no v1 home.
const DROPPED_KUBELET_FIELDS: &[&str] = &["containerRuntime"];

/// Converts a v1beta1 EC2NodeClass. `kubelet` is the kubelet configuration of the NodePool
/// that referenced it (`spec.template.spec.kubelet`), if any.
pub fn from_v1beta1(
    old: &v1beta1::EC2NodeClass,
    kubelet: Option<Value>,
) -> Converted<EC2NodeClass> {
    let mut out = Converted::new(EC2NodeClass {
        api_version: v1::API_VERSION.to_string(),
        kind: v1::KIND.to_string(),
        metadata: old.metadata.clone(),
        spec: v1::EC2NodeClassSpec::default(),
        status: old.status.as_ref().map(status_from_v1beta1),
        extra: old.extra.clone(),
    });
    let s = &old.spec;
    let mut spec = v1::EC2NodeClassSpec {
        subnet_selector_terms: s.subnet_selector_terms.clone(),
        security_group_selector_terms: s.security_group_selector_terms.clone(),
        associate_public_ip_address: s.associate_public_ip_address,
        ami_family: s.ami_family.clone(),
        user_data: s.user_data.clone(),
        role: s.role.clone(),
        instance_profile: s.instance_profile.clone(),
        tags: s.tags.clone(),
        instance_store_policy: s.instance_store_policy.clone(),
        detailed_monitoring: s.detailed_monitoring,
        context: s.context.clone(),
        ..Default::default()
    };
    spec.block_device_mappings = s.block_device_mappings.as_ref().map(|bdms| {
        bdms.iter()
            .enumerate()
            .map(|(i, b)| {
                let mut b = b.clone();
                if let Some(ebs) = b.ebs.as_mut() {
                    volume_size(&mut ebs.volume_size, i, &mut out);
                }
                b
            })
            .collect()
    });
    spec.ami_selector_terms = s.ami_selector_terms.as_ref().map(|terms| {
        terms
            .iter()
            .map(|t| AmiSelectorTerm {
                tags: t.tags.clone(),
                id: t.id.clone(),
                name: t.name.clone(),
                owner: t.owner.clone(),
                extra: t.extra.clone(),
                ..Default::default()
            })
            .collect()
    });
    spec.metadata_options = Some(metadata_options(s.metadata_options.as_ref(), &mut out));
    for (key, value) in &s.extra {
        out.warn(format!(
            "spec.{key}: not a v1beta1 EC2NodeClass field; carried over to v1 unchanged"
        ));
        spec.extra.insert(key.clone(), value.clone());
    }
    ami_selection(&mut spec, &mut out);
    spec.kubelet = kubelet.and_then(|k| convert_kubelet(k, &mut out));
    out.object.spec = spec;
    out
}

/// Converts a v1alpha1 AWSNodeTemplate. `kubelet` is the `kubeletConfiguration` of the
/// Provisioner that referenced it, if any.
pub fn from_v1alpha1(
    old: &v1alpha1::AWSNodeTemplate,
    kubelet: Option<Value>,
) -> Converted<EC2NodeClass> {
    from_v1alpha1_with_default_profile(old, kubelet, None)
}

/// As [`from_v1alpha1`], with the instance profile the cluster's global
/// `aws.defaultInstanceProfile` setting gave templates that did not name one.
pub fn from_v1alpha1_with_default_profile(
    old: &v1alpha1::AWSNodeTemplate,
    kubelet: Option<Value>,
    default_instance_profile: Option<&str>,
) -> Converted<EC2NodeClass> {
    let mut warnings = Vec::new();
    let mut beta = lift::to_v1beta1(old, &mut warnings);
    if beta.spec.instance_profile.is_none()
        && let Some(profile) = default_instance_profile
    {
        beta.spec.instance_profile = Some(profile.to_string());
    } else if beta.spec.instance_profile.is_none() {
        warnings.push(
            "spec.instanceProfile: not set; v1alpha1 fell back to the global defaultInstanceProfile setting, which v1 does not have: set spec.role or spec.instanceProfile".to_string(),
        );
    }
    let mut out = from_v1beta1(&beta, kubelet);
    warnings.append(&mut out.warnings);
    out.warnings = warnings;
    out
}

/// v1beta1 defaulted the hop limit to 2 and v1 defaults it to 1; a class that relied on the
/// old default keeps 2 so converted nodes behave as before.
fn metadata_options(
    old: Option<&MetadataOptions>,
    out: &mut Converted<EC2NodeClass>,
) -> MetadataOptions {
    match old {
        Some(m) if m.http_put_response_hop_limit.is_some() => m.clone(),
        Some(m) => {
            out.warn(
                "spec.metadataOptions.httpPutResponseHopLimit: not set; the v1beta1 default 2 is made explicit (v1 defaults to 1)",
            );
            MetadataOptions {
                http_put_response_hop_limit: Some(v1beta1::DEFAULT_HOP_LIMIT),
                ..m.clone()
            }
        }
        None => {
            out.warn(
                "spec.metadataOptions: not set; the v1beta1 defaults (httpPutResponseHopLimit 2) are made explicit (v1 defaults the hop limit to 1)",
            );
            MetadataOptions::default().with_defaults(v1beta1::DEFAULT_HOP_LIMIT)
        }
    }
}

/// v1 accepts volume sizes only in Gi, G, Ti or T, where v1beta1 took any quantity. A size
/// written otherwise is restated in Gi (or G) when that is exact, as Kubernetes would print it.
fn volume_size(size: &mut Option<IntOrString>, index: usize, out: &mut Converted<EC2NodeClass>) {
    let Some(old) = size.clone() else { return };
    let text = old.to_text();
    if matches!(old, IntOrString::String(_))
        && super::validate::regex_for(super::rules::VOLUME_SIZE_PATTERN).is_match(&text)
    {
        return;
    }
    let field = format!("spec.blockDeviceMappings[{index}].ebs.volumeSize");
    let restated = crate::quantity::parse_units(&text).ok().and_then(|bytes| {
        const GI: i64 = 1 << 30;
        const G: i64 = 1_000_000_000;
        if bytes > 0 && bytes % GI == 0 {
            Some(format!("{}Gi", bytes / GI))
        } else if bytes > 0 && bytes % G == 0 {
            Some(format!("{}G", bytes / G))
        } else {
            None
        }
    });
    match restated {
        Some(new) => {
            out.warn(format!(
                "{field}: {text} restated as {new} (v1 takes Gi, G, Ti or T)"
            ));
            *size = Some(IntOrString::String(new));
        }
        None => out.warn(format!(
            "{field}: {text} is not a whole number of Gi or G, which v1 requires; kept as written"
        )),
    }
}

/// The alias a family without AMI selector terms used implicitly (its latest EKS-optimized AMI).
fn implicit_alias(family: &str) -> Option<&'static str> {
    match family {
        "AL2" => Some("al2@latest"),
        "AL2023" => Some("al2023@latest"),
        "Bottlerocket" => Some("bottlerocket@latest"),
        "Windows2019" => Some("windows2019@latest"),
        "Windows2022" => Some("windows2022@latest"),
        "Windows2025" => Some("windows2025@latest"),
        _ => None,
    }
}

/// v1 requires `amiSelectorTerms` and has no Ubuntu family.
fn ami_selection(spec: &mut v1::EC2NodeClassSpec, out: &mut Converted<EC2NodeClass>) {
    let has_terms = spec
        .ami_selector_terms
        .as_ref()
        .is_some_and(|t| !t.is_empty());
    let family = spec.ami_family.clone();
    if family.as_deref() == Some("Ubuntu") {
        ubuntu(spec, has_terms, out);
        return;
    }
    if has_terms {
        return;
    }
    match family.as_deref() {
        Some(f) => match implicit_alias(f) {
            Some(alias) => {
                out.warn(format!(
                    "spec.amiSelectorTerms: not set; amiFamily {f} selected its latest EKS-optimized AMI, now stated as alias {alias:?}"
                ));
                spec.ami_selector_terms =
                    Some(vec![AmiSelectorTerm { alias: Some(alias.to_string()), ..Default::default() }]);
            }
            None => out.warn(format!(
                "spec.amiSelectorTerms: not set and amiFamily {f} has no alias; v1 requires amiSelectorTerms"
            )),
        },
        None => out.warn(
            "spec.amiSelectorTerms: not set and no amiFamily to derive an alias from; v1 requires amiSelectorTerms",
        ),
    }
}

/// Ubuntu becomes AL2 (same bootstrap) with Ubuntu's root device made explicit, recorded in the
/// compatibility annotation. Without AMI selector terms there is nothing to select an Ubuntu
/// AMI with, so the class is marked incompatible.
fn ubuntu(spec: &mut v1::EC2NodeClassSpec, has_terms: bool, out: &mut Converted<EC2NodeClass>) {
    let annotation = if has_terms {
        spec.ami_family = Some("AL2".to_string());
        let mut changed = vec!["amiFamily"];
        if spec.block_device_mappings.is_none() {
            spec.block_device_mappings = Some(vec![ubuntu_root_volume()]);
            changed.push("blockDeviceMappings");
        }
        out.warn(format!(
            "spec.amiFamily: Ubuntu is not a v1 family; converted to AL2 (changed: {})",
            changed.join(", ")
        ));
        changed.join(",")
    } else {
        out.warn(
            "spec.amiFamily: Ubuntu is not a v1 family and there are no amiSelectorTerms to select an Ubuntu AMI; add amiSelectorTerms",
        );
        "incompatible".to_string()
    };
    out.object
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(UBUNTU_COMPATIBILITY_ANNOTATION.to_string(), annotation);
}

fn ubuntu_root_volume() -> BlockDeviceMapping {
    BlockDeviceMapping {
        device_name: Some("/dev/sda1".to_string()),
        root_volume: Some(true),
        ebs: Some(BlockDevice {
            encrypted: Some(true),
            volume_type: Some("gp3".to_string()),
            volume_size: Some(IntOrString::String("20Gi".to_string())),
            ..Default::default()
        }),
        extra: Default::default(),
    }
}

/// The kubelet JSON of a NodePool or Provisioner as v1 `spec.kubelet`.
fn convert_kubelet(
    value: Value,
    out: &mut Converted<EC2NodeClass>,
) -> Option<KubeletConfiguration> {
    let Value::Object(mut map) = value else {
        if !value.is_null() {
            out.warn(format!("kubelet: expected an object, got {value}; dropped"));
        }
        return None;
    };
    for field in DROPPED_KUBELET_FIELDS {
        if let Some(v) = map.remove(*field) {
            out.warn(format!(
                "kubelet.{field}: {v} has no v1 equivalent; dropped"
            ));
        }
    }
    let map = Value::Object(map);
    match crate::decode::decode::<KubeletConfiguration>(&map, &crate::error::Path::root("kubelet"))
    {
        Ok(k) => {
            for key in k.extra.keys() {
                out.warn(format!(
                    "spec.kubelet.{key}: not one of the kubelet fields Karpenter manages; kept as written (only AL2023 passes it to the kubelet)"
                ));
            }
            Some(k)
        }
        Err(e) => {
            out.warn(format!("kubelet: cannot be read ({e}); dropped"));
            None
        }
    }
}

fn status_from_v1beta1(s: &v1beta1::EC2NodeClassStatus) -> v1::EC2NodeClassStatus {
    v1::EC2NodeClassStatus {
        subnets: s.subnets.clone(),
        security_groups: s.security_groups.clone(),
        amis: s.amis.clone(),
        instance_profile: s.instance_profile.clone(),
        conditions: s.conditions.clone(),
        extra: s.extra.clone(),
        ..Default::default()
    }
}
