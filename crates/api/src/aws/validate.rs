//! Offline validation of a v1 EC2NodeClass with the rules the CRD schema gives a real API
//! server (same patterns, limits and messages, from [`super::rules`]), each error pointing at
//! the exact field.

mod kubelet;
mod selectors;
mod storage;

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

use super::rules::{self, *};
use super::v1::{EC2NodeClass, EC2NodeClassSpec};
use crate::error::{FieldError, Path};

pub use kubelet::kubelet_value;

/// Every problem with `nc`, as the API server would report it on create.
pub fn ec2nodeclass(nc: &EC2NodeClass) -> Vec<FieldError> {
    let mut errs = Vec::new();
    spec(&nc.spec, &Path::root("spec"), &mut errs);
    errs
}

/// The create rules on `new`, plus the rules that compare it with `old` (immutable `role`, no
/// switch between `role` and `instanceProfile`).
pub fn ec2nodeclass_update(old: &EC2NodeClass, new: &EC2NodeClass) -> Vec<FieldError> {
    let mut errs = ec2nodeclass(new);
    let p = Path::root("spec");
    let (o, n) = (&old.spec, &new.spec);
    if let (Some(a), Some(b)) = (&o.role, &n.role)
        && a != b
    {
        errs.push(p.field("role").error(IMMUTABLE));
    }
    let kept_role = o.role.is_some() && n.role.is_some();
    let kept_profile = o.instance_profile.is_some() && n.instance_profile.is_some();
    if !(kept_role || kept_profile) {
        errs.push(p.error(ROLE_PROFILE_SWITCH));
    }
    errs
}

fn spec(s: &EC2NodeClassSpec, p: &Path, errs: &mut Vec<FieldError>) {
    if s.role.is_some() == s.instance_profile.is_some() {
        errs.push(p.error(ROLE_XOR_INSTANCE_PROFILE));
    }
    if s.role.as_deref() == Some("") {
        errs.push(p.field("role").error(ROLE_EMPTY));
    }
    if s.instance_profile.as_deref() == Some("") {
        errs.push(p.field("instanceProfile").error(INSTANCE_PROFILE_EMPTY));
    }
    if let Some(f) = &s.ami_family {
        one_of(f, AMI_FAMILIES, &p.field("amiFamily"), errs);
    }
    ami_family_rules(s, p, errs);

    selectors::subnets(
        s.subnet_selector_terms.as_deref(),
        &p.field("subnetSelectorTerms"),
        errs,
    );
    selectors::security_groups(
        s.security_group_selector_terms.as_deref(),
        &p.field("securityGroupSelectorTerms"),
        errs,
    );
    selectors::amis(
        s.ami_selector_terms.as_deref(),
        &p.field("amiSelectorTerms"),
        errs,
    );
    if let Some(terms) = &s.capacity_reservation_selector_terms {
        selectors::capacity_reservations(terms, &p.field("capacityReservationSelectorTerms"), errs);
    }
    if let Some(pg) = &s.placement_group_selector {
        selectors::placement_group(pg, &p.field("placementGroupSelector"), errs);
    }
    if let Some(n) = s.ip_prefix_count {
        at_least_value(n, 0, &p.field("ipPrefixCount"), errs);
    }
    if let Some(tags) = &s.tags {
        node_tags(tags, &p.field("tags"), errs);
    }
    if let Some(k) = &s.kubelet {
        kubelet::kubelet(k, &p.field("kubelet"), errs);
    }
    if let Some(bdms) = &s.block_device_mappings {
        storage::block_device_mappings(bdms, &p.field("blockDeviceMappings"), errs);
    }
    if let Some(policy) = &s.instance_store_policy {
        one_of(
            policy,
            INSTANCE_STORE_POLICIES,
            &p.field("instanceStorePolicy"),
            errs,
        );
    }
    if let Some(nis) = &s.network_interfaces {
        storage::network_interfaces(nis, &p.field("networkInterfaces"), errs);
    }
    if let Some(m) = &s.metadata_options {
        storage::metadata_options(m, &p.field("metadataOptions"), errs);
    }
    if let Some(ct) = &s.connection_tracking {
        storage::connection_tracking(ct, &p.field("connectionTracking"), errs);
    }
    if let Some(nested) = s
        .cpu_options
        .as_ref()
        .and_then(|c| c.nested_virtualization.as_ref())
    {
        one_of(
            nested,
            ENABLED_DISABLED,
            &p.field("cpuOptions").field("nestedVirtualization"),
            errs,
        );
    }
}

/// An alias decides the family; `amiFamily` may only repeat it or say `Custom`. Without an
/// alias, `amiFamily` is required.
fn ami_family_rules(s: &EC2NodeClassSpec, p: &Path, errs: &mut Vec<FieldError>) {
    let Some(terms) = &s.ami_selector_terms else {
        return;
    };
    let alias_families: Vec<&str> = terms
        .iter()
        .filter_map(|t| t.alias.as_deref())
        .map(|a| a.split('@').next().unwrap_or(""))
        .collect();
    if alias_families.is_empty() {
        if s.ami_family.is_none() {
            errs.push(p.error(AMI_FAMILY_REQUIRED));
        }
        return;
    }
    let Some(family) = s.ami_family.as_deref() else {
        return;
    };
    for (alias, implied) in super::v1::ALIAS_FAMILIES {
        if alias_families.contains(alias) && family != "Custom" && family != *implied {
            errs.push(p.error(alias_family_message(implied)));
        }
    }
}

fn node_tags(tags: &BTreeMap<String, String>, p: &Path, errs: &mut Vec<FieldError>) {
    for key in tags.keys() {
        if key.is_empty() {
            errs.push(p.error(TAG_KEY_EMPTY));
            continue;
        }
        for (_, message, restricted) in RESTRICTED_TAGS {
            if restricted(key) {
                errs.push(p.key(key).error(*message));
            }
        }
    }
}

// Small checks shared by the rule modules, worded like the API server.

fn one_of(value: &str, allowed: &[&str], p: &Path, errs: &mut Vec<FieldError>) {
    if !allowed.contains(&value) {
        errs.push(p.error(unsupported_value(value, allowed)));
    }
}

fn at_least_value(v: i64, min: i64, p: &Path, errs: &mut Vec<FieldError>) {
    if v < min {
        errs.push(p.error(rules::at_least(min)));
    }
}

fn in_range(v: i64, min: i64, max: i64, p: &Path, errs: &mut Vec<FieldError>) {
    if v < min {
        errs.push(p.error(rules::at_least(min)));
    } else if v > max {
        errs.push(p.error(rules::at_most(max)));
    }
}

fn matches(value: &str, pattern: &'static str, p: &Path, errs: &mut Vec<FieldError>) {
    if !regex_for(pattern).is_match(value) {
        errs.push(p.error(should_match(pattern)));
    }
}

/// Compiled patterns, built once. Every pattern is a constant in [`super::rules`], checked by
/// a test, so compiling cannot fail at run time.
pub(super) fn regex_for(pattern: &'static str) -> &'static Regex {
    static CACHE: LazyLock<BTreeMap<&'static str, Regex>> = LazyLock::new(|| {
        [
            SUBNET_ID_PATTERN,
            SECURITY_GROUP_ID_PATTERN,
            AMI_ID_PATTERN,
            CAPACITY_RESERVATION_ID_PATTERN,
            OWNER_ID_PATTERN,
            PLACEMENT_GROUP_ID_PATTERN,
            VOLUME_SIZE_PATTERN,
            QUANTITY_PATTERN,
            EVICTION_VALUE_PATTERN,
            ALIAS_FORMAT_PATTERN,
        ]
        .into_iter()
        .map(|p| {
            (
                p,
                Regex::new(p).expect("pattern constants are valid regular expressions"),
            )
        })
        .collect()
    });
    CACHE
        .get(pattern)
        .expect("every pattern used is registered in the cache")
}

/// Selector tags: at most 20, no empty key or value.
fn selector_tags(tags: &BTreeMap<String, String>, p: &Path, errs: &mut Vec<FieldError>) {
    if tags.len() as u64 > MAX_SELECTOR_TAGS {
        errs.push(p.error(too_many(tags.len(), MAX_SELECTOR_TAGS)));
    }
    if tags.iter().any(|(k, v)| k.is_empty() || v.is_empty()) {
        errs.push(p.error(SELECTOR_TAG_EMPTY));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_compiles() {
        for p in [
            SUBNET_ID_PATTERN,
            VOLUME_SIZE_PATTERN,
            EVICTION_VALUE_PATTERN,
            QUANTITY_PATTERN,
        ] {
            assert!(regex_for(p).as_str() == p);
        }
        assert!(regex_for(VOLUME_SIZE_PATTERN).is_match("20Gi"));
        assert!(!regex_for(VOLUME_SIZE_PATTERN).is_match("65T"));
        assert!(regex_for(EVICTION_VALUE_PATTERN).is_match("10%"));
        assert!(regex_for(EVICTION_VALUE_PATTERN).is_match("100Mi"));
        assert!(!regex_for(EVICTION_VALUE_PATTERN).is_match("lots"));
    }
}
