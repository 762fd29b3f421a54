//! Rules for `spec.kubelet`: reserved resources, eviction thresholds, image GC thresholds.

use std::collections::BTreeMap;

use nodewright_core::time::parse_go_duration;
use serde_json::Value;

use super::super::crd::ec2nodeclass_schema;
use super::super::rules::*;
use super::super::v1::KubeletConfiguration;
use super::{at_least_value, in_range, matches};
use crate::error::{FieldError, Path};
use crate::validation::structural;

/// Kubelet fields older generations had and v1 drops (conversion warns about them).
const DROPPED: &[&str] = &["containerRuntime"];

/// The kubelet settings of an older NodePool or Provisioner, which conversion moves into an
/// EC2NodeClass's `spec.kubelet`: checked with that field's schema (types and bounds) and
/// rules, and reported at `p`, where they are in the older object.
pub fn kubelet_value(value: &Value, p: &Path) -> Vec<FieldError> {
    let schema = ec2nodeclass_schema();
    let Some(schema) = schema.pointer("/properties/spec/properties/kubelet") else {
        return Vec::new();
    };
    let mut value = value.clone();
    if let Some(map) = value.as_object_mut() {
        map.retain(|k, _| !DROPPED.contains(&k.as_str()));
    }
    let mut errs = structural::check(schema, &mut value).errors;
    if errs.is_empty() {
        match crate::decode::decode::<KubeletConfiguration>(&value, &Path::default()) {
            Ok(k) => kubelet(&k, &Path::default(), &mut errs),
            Err(e) => errs.push(e),
        }
    }
    errs.into_iter()
        .map(|e| p.append(&e.path).error(e.reason))
        .collect()
}

pub(super) fn kubelet(k: &KubeletConfiguration, p: &Path, errs: &mut Vec<FieldError>) {
    if let Some(n) = k.max_pods {
        at_least_value(n, 0, &p.field("maxPods"), errs);
    }
    if let Some(n) = k.pods_per_core {
        at_least_value(n, 0, &p.field("podsPerCore"), errs);
    }
    reserved(k.system_reserved.as_ref(), "systemReserved", p, errs);
    reserved(k.kube_reserved.as_ref(), "kubeReserved", p, errs);
    eviction(k.eviction_hard.as_ref(), "evictionHard", true, p, errs);
    eviction(k.eviction_soft.as_ref(), "evictionSoft", true, p, errs);
    eviction(
        k.eviction_soft_grace_period.as_ref(),
        "evictionSoftGracePeriod",
        false,
        p,
        errs,
    );
    // The kubelet reads these with Go's time.ParseDuration; what it refuses never runs.
    for (signal, d) in k.eviction_soft_grace_period.iter().flatten() {
        if parse_go_duration(d).is_none() {
            errs.push(p.field("evictionSoftGracePeriod").key(signal).error(format!(
                "invalid duration {d:?}: not a non-negative Go duration (such as 1m30s) of at most 2562047h47m16.854775807s"
            )));
        }
    }
    if let Some(h) = k.image_gc_high_threshold_percent {
        in_range(h, 0, 100, &p.field("imageGCHighThresholdPercent"), errs);
    }
    if let Some(l) = k.image_gc_low_threshold_percent {
        in_range(l, 0, 100, &p.field("imageGCLowThresholdPercent"), errs);
    }
    if let (Some(h), Some(l)) = (
        k.image_gc_high_threshold_percent,
        k.image_gc_low_threshold_percent,
    ) && h <= l
    {
        errs.push(p.error(IMAGE_GC_ORDER));
    }
    let empty = BTreeMap::new();
    if let Some(soft) = &k.eviction_soft {
        let grace = k.eviction_soft_grace_period.as_ref().unwrap_or(&empty);
        if soft.keys().any(|s| !grace.contains_key(s)) {
            errs.push(p.error(EVICTION_SOFT_UNMATCHED));
        }
    }
    if let Some(grace) = &k.eviction_soft_grace_period {
        let soft = k.eviction_soft.as_ref().unwrap_or(&empty);
        if grace.keys().any(|g| !soft.contains_key(g)) {
            errs.push(p.error(EVICTION_GRACE_UNMATCHED));
        }
    }
    if k.extra.contains_key("registerWithTaints") {
        errs.push(p.field("registerWithTaints").error(REGISTER_WITH_TAINTS));
    }
}

fn reserved(
    map: Option<&BTreeMap<String, String>>,
    field: &str,
    p: &Path,
    errs: &mut Vec<FieldError>,
) {
    let Some(map) = map else { return };
    let fp = p.field(field);
    if map
        .keys()
        .any(|k| !RESERVED_RESOURCES.contains(&k.as_str()))
    {
        errs.push(fp.error(reserved_keys_message(field)));
    }
    if map.values().any(|v| v.starts_with('-')) {
        errs.push(fp.error(reserved_negative_message(field)));
    }
    for (k, v) in map {
        matches(v, QUANTITY_PATTERN, &fp.key(k), errs);
    }
}

fn eviction(
    map: Option<&BTreeMap<String, String>>,
    field: &str,
    thresholds: bool,
    p: &Path,
    errs: &mut Vec<FieldError>,
) {
    let Some(map) = map else { return };
    let fp = p.field(field);
    if map.keys().any(|k| !EVICTION_SIGNALS.contains(&k.as_str())) {
        errs.push(fp.error(eviction_keys_message(field)));
    }
    if thresholds {
        for (k, v) in map {
            matches(v, EVICTION_VALUE_PATTERN, &fp.key(k), errs);
        }
    }
}
