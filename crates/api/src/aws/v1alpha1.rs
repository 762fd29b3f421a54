//! `karpenter.k8s.aws/v1alpha1` AWSNodeTemplate (Karpenter before v0.32), read for conversion.
//!
//! Selectors are plain maps: each key is a tag key, except the special keys that list ids
//! (`aws-ids`, `aws::ids`, comma-separated) and, for AMIs, `aws::name` and `aws::owners`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use super::common::{
    AmiStatus, BlockDeviceMapping, Extra, MetadataOptions, SecurityGroupStatus, SubnetStatus, Tags,
};

pub const API_VERSION: &str = "karpenter.k8s.aws/v1alpha1";
pub const KIND: &str = "AWSNodeTemplate";

/// The family an AWSNodeTemplate without `amiFamily` used.
pub const DEFAULT_AMI_FAMILY: &str = "AL2";

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AWSNodeTemplate {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "super::common::is_default")]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: AWSNodeTemplateSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<AWSNodeTemplateStatus>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AWSNodeTemplateSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet_selector: Option<Tags>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_group_selector: Option<Tags>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ami_selector: Option<Tags>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ami_family: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_profile: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Tags>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// The name of a user-managed launch template (`launchTemplate` on the wire).
    #[serde(
        default,
        rename = "launchTemplate",
        skip_serializing_if = "Option::is_none"
    )]
    pub launch_template_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_options: Option<MetadataOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_device_mappings: Option<Vec<BlockDeviceMapping>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detailed_monitoring: Option<bool>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AWSNodeTemplateStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnets: Option<Vec<SubnetStatus>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_groups: Option<Vec<SecurityGroupStatus>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amis: Option<Vec<AmiStatus>>,
    #[serde(flatten)]
    pub extra: Extra,
}
