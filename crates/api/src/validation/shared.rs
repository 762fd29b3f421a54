//! Rules shared by NodePool and NodeClaim specs: requirements, taints, the node class
//! reference and how long a duration may be.

use std::collections::BTreeSet;

use nodewright_core::labels as core_labels;

use super::labels::{self, KeyContext};
use crate::crd::shared::{MSG_IN_NEEDS_VALUES, MSG_MIN_VALUES, MSG_NUMERIC_OPERATOR, OPERATORS};
use crate::error::{FieldError, Path};
use crate::v1::shared::{DurationError, read_duration};
use crate::v1::{NodeClassReference, NodeSelectorRequirementWithMinValues, Taint};

/// A duration the CRD's pattern accepts but Karpenter cannot hold (`99999999999999999999s`):
/// its Go `time.ParseDuration` refuses it, so the object would never be read back.
pub fn duration_length(value: Option<&str>, path: &Path, errs: &mut Vec<FieldError>) {
    if let Some(s) = value.filter(|s| *s != "Never")
        && let Err(e @ DurationError::TooLong(_)) = read_duration(s)
    {
        errs.push(path.error(e.to_string()));
    }
}

/// Well-known labels with a closed set of values; `In` must name at least one of them.
const KNOWN_VALUES: &[(&str, &[&str])] = &[
    (
        core_labels::CAPACITY_TYPE,
        &["on-demand", "spot", "reserved"],
    ),
    (
        core_labels::aws::INSTANCE_TENANCY,
        &["default", "dedicated"],
    ),
];

pub fn requirements(
    reqs: &[NodeSelectorRequirementWithMinValues],
    path: &Path,
    ctx: KeyContext,
    errs: &mut Vec<FieldError>,
) {
    for (i, r) in reqs.iter().enumerate() {
        requirement(r, &path.index(i), ctx, errs);
    }
}

fn requirement(
    r: &NodeSelectorRequirementWithMinValues,
    path: &Path,
    ctx: KeyContext,
    errs: &mut Vec<FieldError>,
) {
    let key_path = path.field("key");
    for reason in labels::key_violations(&r.key, ctx) {
        errs.push(key_path.error(reason));
    }
    if !OPERATORS.contains(&r.operator.as_str()) {
        errs.push(path.field("operator").error(format!(
            "unsupported operator {:?}: supported operators: {}",
            r.operator,
            OPERATORS.join(", ")
        )));
    }
    let values = r.values();
    match r.operator.as_str() {
        "In" if values.is_empty() => errs.push(path.error(MSG_IN_NEEDS_VALUES)),
        "Gt" | "Lt" | "Gte" | "Lte" => {
            let ok = values.len() == 1 && values[0].parse::<i64>().is_ok_and(|v| v >= 0);
            if !ok {
                errs.push(path.error(MSG_NUMERIC_OPERATOR));
            }
        }
        _ => {}
    }
    if let (Some(min), "In") = (r.min_values, r.operator.as_str())
        && (values.len() as i64) < min
    {
        errs.push(path.error(MSG_MIN_VALUES));
    }
    // Karpenter's runtime check: a well-known key with a closed value set must keep at least
    // one (and at least minValues) valid values.
    let key = core_labels::normalize_key(&r.key);
    if r.operator == "In"
        && !values.is_empty()
        && let Some((_, known)) = KNOWN_VALUES.iter().find(|(k, _)| *k == key)
    {
        let valid: BTreeSet<&str> = values
            .iter()
            .map(String::as_str)
            .filter(|v| known.contains(v))
            .collect();
        if valid.is_empty() {
            errs.push(path.field("values").error(format!(
                "no valid value for {key:?}: expected one of {}",
                known.join(", ")
            )));
        } else if r.min_values.is_some_and(|m| (valid.len() as i64) < m) {
            errs.push(path.field("values").error(format!(
                "{key:?} has {} valid values, fewer than minValues",
                valid.len()
            )));
        }
    }
}

/// `taints` and `startupTaints` together must not repeat a (key, effect) pair.
pub fn taints(taints: &[(Path, &[Taint])], errs: &mut Vec<FieldError>) {
    let mut seen = BTreeSet::new();
    for (path, list) in taints {
        for (i, t) in list.iter().enumerate() {
            if !seen.insert((t.key.clone(), t.effect.clone())) {
                errs.push(path.index(i).error(format!(
                    "duplicate taint key/effect pair {:?}",
                    format!("{}:{}", t.key, t.effect)
                )));
            }
        }
    }
}

pub fn node_class_ref(r: &NodeClassReference, path: &Path, errs: &mut Vec<FieldError>) {
    for (field, value) in [("group", &r.group), ("kind", &r.kind), ("name", &r.name)] {
        if value.is_empty() {
            errs.push(path.field(field).error(format!("{field} may not be empty")));
        }
    }
}

/// Object names are lowercase RFC 1123 subdomains.
pub fn object_name(name: Option<&str>, errs: &mut Vec<FieldError>) {
    match name {
        None | Some("") => errs.push(FieldError::new(
            "metadata.name",
            "required field is missing",
        )),
        Some(n) if !labels::is_dns_subdomain(n) => errs.push(FieldError::new(
            "metadata.name",
            format!("invalid name {n:?}: must be a lowercase RFC 1123 subdomain"),
        )),
        _ => {}
    }
}
