//! `karpenter.k8s.aws/v1beta1` EC2NodeClass (Karpenter v0.32 – v0.37), read for conversion.
//!
//! Differences from v1: no `kubelet` (it lived on the NodePool), no AMI `alias`, the `Ubuntu`
//! family, `amiSelectorTerms` optional, and a metadata hop-limit default of 2.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use super::common::{
    AmiStatus, BlockDeviceMapping, Condition, Extra, MetadataOptions, SecurityGroupStatus,
    SubnetStatus, Tags,
};
pub use super::v1::{SecurityGroupSelectorTerm, SubnetSelectorTerm};

pub const API_VERSION: &str = "karpenter.k8s.aws/v1beta1";
pub const KIND: &str = "EC2NodeClass";

/// The hop limit the v1beta1 API server filled in when `metadataOptions` left it out.
pub const DEFAULT_HOP_LIMIT: i64 = 2;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EC2NodeClass {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "super::common::is_default")]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: EC2NodeClassSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<EC2NodeClassStatus>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EC2NodeClassSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet_selector_terms: Option<Vec<SubnetSelectorTerm>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_group_selector_terms: Option<Vec<SecurityGroupSelectorTerm>>,
    #[serde(
        default,
        rename = "associatePublicIPAddress",
        skip_serializing_if = "Option::is_none"
    )]
    pub associate_public_ip_address: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ami_selector_terms: Option<Vec<AmiSelectorTerm>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ami_family: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_profile: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Tags>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_device_mappings: Option<Vec<BlockDeviceMapping>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_store_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detailed_monitoring: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_options: Option<MetadataOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// A v1beta1 AMI selector term: no `alias`, no `ssmParameter`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AmiSelectorTerm {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Tags>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EC2NodeClassStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnets: Option<Vec<SubnetStatus>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_groups: Option<Vec<SecurityGroupStatus>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amis: Option<Vec<AmiStatus>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_profile: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    #[serde(flatten)]
    pub extra: Extra,
}
