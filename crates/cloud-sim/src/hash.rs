//! The simulated cloud's node class hash, under the same annotation keys the AWS provider
//! uses, so static drift (`NodeClassDrift`) works without an account: editing a class's spec
//! changes its hash, and claims launched before the edit carry the old one.
//!
//! What is hashed is the spec without its selector terms (those resolve into status, and a
//! change there shows up as a different image instead). The value is FNV-1a 64 over
//! canonical JSON (object keys sorted), in decimal. Its version differs from the AWS
//! provider's, so switching a cluster between the two never reports drift on its own.

use std::collections::BTreeMap;

use nodewright_api::aws::v1::EC2NodeClass;
use nodewright_api::stable_hash::{hash_fields, spec_fields};
use nodewright_cloud::annotations::{NODECLASS_HASH, NODECLASS_HASH_VERSION};

pub const HASH_VERSION: &str = "sim1";

/// Spec fields that resolve into status and so are not part of the hash.
const IGNORED: &[&str] = &[
    "subnetSelectorTerms",
    "securityGroupSelectorTerms",
    "capacityReservationSelectorTerms",
    "amiSelectorTerms",
];

/// The hash of `class`'s spec.
pub fn nodeclass_hash(class: &EC2NodeClass) -> String {
    hash_fields(spec_fields(&class.spec, IGNORED))
}

/// The hash annotations for `class` as its spec stands now.
pub fn hash_annotations(class: &EC2NodeClass) -> BTreeMap<String, String> {
    BTreeMap::from([
        (NODECLASS_HASH.to_string(), nodeclass_hash(class)),
        (NODECLASS_HASH_VERSION.to_string(), HASH_VERSION.to_string()),
    ])
}

/// `NodeClassDrift` when the claim was launched from a class whose hash (at this version)
/// differs from `class`'s current one. A claim without a hash, or with one of another
/// version, says nothing.
pub fn static_drift(
    claim_annotations: Option<&BTreeMap<String, String>>,
    class: &EC2NodeClass,
) -> Option<&'static str> {
    let ann = claim_annotations?;
    let (hash, version) = (ann.get(NODECLASS_HASH)?, ann.get(NODECLASS_HASH_VERSION)?);
    (version == HASH_VERSION && *hash != nodeclass_hash(class)).then_some("NodeClassDrift")
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodewright_api::aws::v1::{EC2NodeClassSpec, SubnetSelectorTerm};

    fn class() -> EC2NodeClass {
        EC2NodeClass {
            spec: EC2NodeClassSpec {
                ami_family: Some("AL2023".into()),
                role: Some("r".into()),
                tags: Some(
                    [("b", "2"), ("a", "1")]
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn selector_terms_leave_the_hash_alone_and_other_fields_change_it() {
        let c = class();
        let h = nodeclass_hash(&c);
        let mut with_subnets = c.clone();
        with_subnets.spec.subnet_selector_terms = Some(vec![SubnetSelectorTerm {
            id: Some("subnet-1".into()),
            ..Default::default()
        }]);
        assert_eq!(nodeclass_hash(&with_subnets), h);
        let mut retagged = c.clone();
        retagged
            .spec
            .tags
            .get_or_insert_with(Default::default)
            .insert("team".into(), "web".into());
        assert_ne!(nodeclass_hash(&retagged), h);
    }

    #[test]
    fn drift_needs_the_same_version_and_a_different_hash() {
        let c = class();
        let stamped = hash_annotations(&c);
        assert_eq!(static_drift(Some(&stamped), &c), None);
        let mut edited = c.clone();
        edited.spec.role = Some("other".into());
        assert_eq!(
            static_drift(Some(&stamped), &edited),
            Some("NodeClassDrift")
        );
        let mut other_version = stamped.clone();
        other_version.insert(NODECLASS_HASH_VERSION.into(), "nw1".into());
        assert_eq!(static_drift(Some(&other_version), &edited), None);
        assert_eq!(static_drift(None, &edited), None);
    }
}
