//! Types shared by every generation of the AWS node class: tag maps, metadata options, block
//! device mappings, status entries and conditions.
//!
//! Every struct keeps fields it does not know in `extra`, so reading and writing an object
//! never loses anything, even a field from a newer release.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Fields this version of the types does not model, kept verbatim.
pub type Extra = BTreeMap<String, Value>;

/// A tag selector or tag set: key to value (`*` in a selector means "the key exists").
pub type Tags = BTreeMap<String, String>;

/// A value that may be written as a number or a string (`volumeSize: 20Gi` or `volumeSize: 20`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum IntOrString {
    Int(i64),
    String(String),
}

impl IntOrString {
    /// The value as written, numbers rendered in decimal.
    pub fn to_text(&self) -> String {
        match self {
            IntOrString::Int(i) => i.to_string(),
            IntOrString::String(s) => s.clone(),
        }
    }
}

/// Instance Metadata Service options of the generated launch template.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetadataOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_endpoint: Option<String>,
    #[serde(
        default,
        rename = "httpProtocolIPv6",
        skip_serializing_if = "Option::is_none"
    )]
    pub http_protocol_ipv6: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_put_response_hop_limit: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_tokens: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl MetadataOptions {
    /// The options with every unset field given its default, `hop_limit` being the default hop
    /// limit of the generation (2 before v1, 1 in v1).
    pub fn with_defaults(&self, hop_limit: i64) -> MetadataOptions {
        MetadataOptions {
            http_endpoint: Some(
                self.http_endpoint
                    .clone()
                    .unwrap_or_else(|| "enabled".into()),
            ),
            http_protocol_ipv6: Some(
                self.http_protocol_ipv6
                    .clone()
                    .unwrap_or_else(|| "disabled".into()),
            ),
            http_put_response_hop_limit: Some(
                self.http_put_response_hop_limit.unwrap_or(hop_limit),
            ),
            http_tokens: Some(
                self.http_tokens
                    .clone()
                    .unwrap_or_else(|| "required".into()),
            ),
            extra: self.extra.clone(),
        }
    }
}

/// One entry of `blockDeviceMappings`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockDeviceMapping {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ebs: Option<BlockDevice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_volume: Option<bool>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// The EBS volume of a block device mapping.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockDevice {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_on_termination: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iops: Option<i64>,
    #[serde(default, rename = "kmsKeyID", skip_serializing_if = "Option::is_none")]
    pub kms_key_id: Option<String>,
    #[serde(
        default,
        rename = "snapshotID",
        skip_serializing_if = "Option::is_none"
    )]
    pub snapshot_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_initialization_rate: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_size: Option<IntOrString>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_type: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// A status condition (`Ready`, `AMIsReady`, ...). Only `type`, `status` and
/// `lastTransitionTime` are required upstream, so the rest are optional here.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(default, rename = "type")]
    pub type_: String,
    #[serde(default)]
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// A resolved subnet in status.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubnetStatus {
    #[serde(default)]
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    #[serde(default, rename = "zoneID", skip_serializing_if = "Option::is_none")]
    pub zone_id: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// A resolved security group in status.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecurityGroupStatus {
    #[serde(default)]
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// A resolved AMI in status, with the node requirements it serves.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AmiStatus {
    #[serde(default)]
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Always written, empty or not: the CRD requires the field, as upstream's does.
    #[serde(default)]
    pub requirements: Vec<AmiRequirement>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// A node selector requirement attached to a resolved AMI.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AmiRequirement {
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub operator: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_values: Option<i64>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// For `skip_serializing_if`: an absent `metadata` stays absent.
pub fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The EC2NodeClass CRD requires `status.amis[].requirements`; an image that serves every
    /// node (no requirements) must still write the empty list, or the status write is refused.
    #[test]
    fn an_ami_without_requirements_writes_an_empty_list() {
        let ami = AmiStatus {
            id: "ami-1".into(),
            ..AmiStatus::default()
        };
        let v = serde_json::to_value(&ami).unwrap();
        assert_eq!(v, serde_json::json!({"id": "ami-1", "requirements": []}));
    }
}
