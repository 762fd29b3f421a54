//! The class hash written to `karpenter.k8s.aws/ec2nodeclass-hash` and copied onto claims:
//! when a class's launch-relevant spec changes, claims with the old hash have drifted.
//!
//! Fields resolved into status instead (selector terms, `amiFamily`, `ipPrefixCount`) are left
//! out; the resolved AMI family and the kubelet settings (as one JSON string) are put in. The
//! value is FNV-1a 64 over canonical JSON, in decimal; it is stable across releases of this
//! program, not equal to upstream's value, so a class moved over from Karpenter gets a new
//! hash once (the version annotation differs too, so nothing is reported as drifted).

use nodewright_api::aws::v1::EC2NodeClass;
use serde_json::Value;

use nodewright_api::stable_hash::{hash_fields, sorted_keys, spec_fields};

pub const HASH_ANNOTATION: &str = "karpenter.k8s.aws/ec2nodeclass-hash";
pub const HASH_VERSION_ANNOTATION: &str = "karpenter.k8s.aws/ec2nodeclass-hash-version";
pub const HASH_VERSION: &str = "nw1";

const IGNORED: &[&str] = &[
    "subnetSelectorTerms",
    "securityGroupSelectorTerms",
    "capacityReservationSelectorTerms",
    "ipPrefixCount",
    "amiSelectorTerms",
    "amiFamily",
    "kubelet",
];

/// The hash of `class`'s spec.
pub fn nodeclass_hash(class: &EC2NodeClass) -> String {
    let mut spec = spec_fields(&class.spec, IGNORED);
    if let Some(f) = class.spec.resolved_ami_family() {
        spec.insert("amiFamily".into(), Value::String(f));
    }
    if let Some(k) = &class.spec.kubelet {
        let text = serde_json::to_value(k)
            .map(|v| sorted_keys(v).to_string())
            .unwrap_or_default();
        spec.insert("kubelet".into(), Value::String(text));
    }
    hash_fields(spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodewright_api::aws::v1::{EC2NodeClassSpec, SubnetSelectorTerm};

    #[test]
    fn selector_terms_do_not_change_the_hash_but_tags_and_family_do() {
        let mut c = EC2NodeClass {
            spec: EC2NodeClassSpec {
                ami_family: Some("AL2023".into()),
                role: Some("r".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let h0 = nodeclass_hash(&c);
        assert_eq!(h0, nodeclass_hash(&c.clone()));
        c.spec.subnet_selector_terms = Some(vec![SubnetSelectorTerm {
            id: Some("subnet-1".into()),
            ..Default::default()
        }]);
        assert_eq!(h0, nodeclass_hash(&c));
        c.spec.tags = Some([("team".to_string(), "a".to_string())].into());
        let h1 = nodeclass_hash(&c);
        assert_ne!(h0, h1);
        c.spec.ami_family = Some("Bottlerocket".into());
        assert_ne!(h1, nodeclass_hash(&c));
    }
}
