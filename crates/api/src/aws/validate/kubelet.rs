//! Rules for `spec.kubelet`: reserved resources, eviction thresholds, image GC thresholds.

use std::collections::BTreeMap;

use super::super::rules::*;
use super::super::v1::KubeletConfiguration;
use super::{at_least_value, in_range, matches};
use crate::error::{FieldError, Path};

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
