//! Rules for the selector terms: subnets, security groups, AMIs (with aliases), capacity
//! reservations and the placement group.

use super::super::rules::*;
use super::super::v1::{
    AmiSelectorTerm, CapacityReservationSelectorTerm, PlacementGroupSelector,
    SecurityGroupSelectorTerm, SubnetSelectorTerm,
};
use super::{matches, one_of, selector_tags};
use crate::error::{FieldError, Path};

/// Checks the list-level limits; `None` means the required list is missing.
fn term_count<T>(terms: Option<&[T]>, empty: &str, p: &Path, errs: &mut Vec<FieldError>) -> bool {
    let Some(terms) = terms else {
        errs.push(p.error(REQUIRED));
        return false;
    };
    if terms.is_empty() {
        errs.push(p.error(empty));
    }
    if terms.len() as u64 > MAX_SELECTOR_TERMS {
        errs.push(p.error(too_many(terms.len(), MAX_SELECTOR_TERMS)));
    }
    true
}

pub(super) fn subnets(terms: Option<&[SubnetSelectorTerm]>, p: &Path, errs: &mut Vec<FieldError>) {
    if !term_count(terms, SUBNET_TERMS_EMPTY, p, errs) {
        return;
    }
    for (i, t) in terms.unwrap_or_default().iter().enumerate() {
        let tp = p.index(i);
        if t.tags.is_none() && t.id.is_none() {
            errs.push(tp.error(SUBNET_TERM_NONE));
        }
        if t.id.is_some() && t.tags.is_some() {
            errs.push(tp.error(SUBNET_ID_EXCLUSIVE));
        }
        if let Some(id) = &t.id {
            matches(id, SUBNET_ID_PATTERN, &tp.field("id"), errs);
        }
        if let Some(tags) = &t.tags {
            selector_tags(tags, &tp.field("tags"), errs);
        }
    }
}

pub(super) fn security_groups(
    terms: Option<&[SecurityGroupSelectorTerm]>,
    p: &Path,
    errs: &mut Vec<FieldError>,
) {
    if !term_count(terms, SG_TERMS_EMPTY, p, errs) {
        return;
    }
    for (i, t) in terms.unwrap_or_default().iter().enumerate() {
        let tp = p.index(i);
        if t.tags.is_none() && t.id.is_none() && t.name.is_none() {
            errs.push(tp.error(SG_TERM_NONE));
        }
        if t.id.is_some() && (t.tags.is_some() || t.name.is_some()) {
            errs.push(tp.error(SG_ID_EXCLUSIVE));
        }
        if t.name.is_some() && (t.tags.is_some() || t.id.is_some()) {
            errs.push(tp.error(SG_NAME_EXCLUSIVE));
        }
        if let Some(id) = &t.id {
            matches(id, SECURITY_GROUP_ID_PATTERN, &tp.field("id"), errs);
        }
        if let Some(tags) = &t.tags {
            selector_tags(tags, &tp.field("tags"), errs);
        }
    }
}

pub(super) fn amis(terms: Option<&[AmiSelectorTerm]>, p: &Path, errs: &mut Vec<FieldError>) {
    let Some(terms) = terms else {
        errs.push(p.error(REQUIRED));
        return;
    };
    if terms.is_empty() {
        errs.push(p.error(too_few(0, 1)));
    }
    if terms.len() as u64 > MAX_SELECTOR_TERMS {
        errs.push(p.error(too_many(terms.len(), MAX_SELECTOR_TERMS)));
    }
    if terms.iter().any(|t| t.alias.is_some()) && terms.len() != 1 {
        errs.push(p.error(AMI_ALIAS_EXCLUSIVE_TERMS));
    }
    for (i, t) in terms.iter().enumerate() {
        let tp = p.index(i);
        let others = t.tags.is_some() || t.name.is_some() || t.owner.is_some();
        if t.tags.is_none()
            && t.id.is_none()
            && t.name.is_none()
            && t.alias.is_none()
            && t.ssm_parameter.is_none()
        {
            errs.push(tp.error(AMI_TERM_NONE));
        }
        if t.id.is_some() && (t.alias.is_some() || others || t.ssm_parameter.is_some()) {
            errs.push(tp.error(AMI_ID_EXCLUSIVE));
        }
        if t.alias.is_some() && (t.id.is_some() || others || t.ssm_parameter.is_some()) {
            errs.push(tp.error(AMI_ALIAS_EXCLUSIVE_FIELDS));
        }
        if let Some(id) = &t.id {
            matches(id, AMI_ID_PATTERN, &tp.field("id"), errs);
        }
        if let Some(tags) = &t.tags {
            selector_tags(tags, &tp.field("tags"), errs);
        }
        if let Some(alias) = &t.alias {
            alias_rules(alias, &tp.field("alias"), errs);
        }
    }
}

fn alias_rules(alias: &str, p: &Path, errs: &mut Vec<FieldError>) {
    if alias.len() as u64 > MAX_ALIAS_LENGTH {
        errs.push(p.error(too_long(MAX_ALIAS_LENGTH)));
    }
    let before = errs.len();
    matches(alias, ALIAS_FORMAT_PATTERN, p, errs);
    if errs.len() > before {
        // The API server states the format rule in its own words, not as a pattern.
        errs.truncate(before);
        errs.push(p.error(ALIAS_FORMAT));
    }
    let family = alias.split('@').next().unwrap_or("");
    if !ALIAS_FAMILY_NAMES.contains(&family) {
        errs.push(p.error(ALIAS_FAMILY));
    }
    let version = alias.rsplit('@').next().unwrap_or("");
    if WINDOWS_ALIAS_FAMILIES.contains(&family) && version != "latest" {
        errs.push(p.error(ALIAS_WINDOWS_LATEST));
    }
}

pub(super) fn capacity_reservations(
    terms: &[CapacityReservationSelectorTerm],
    p: &Path,
    errs: &mut Vec<FieldError>,
) {
    if terms.len() as u64 > MAX_SELECTOR_TERMS {
        errs.push(p.error(too_many(terms.len(), MAX_SELECTOR_TERMS)));
    }
    for (i, t) in terms.iter().enumerate() {
        let tp = p.index(i);
        if t.tags.is_none() && t.id.is_none() && t.instance_match_criteria.is_none() {
            errs.push(tp.error(CR_TERM_NONE));
        }
        if t.id.is_some()
            && (t.tags.is_some() || t.owner_id.is_some() || t.instance_match_criteria.is_some())
        {
            errs.push(tp.error(CR_ID_EXCLUSIVE));
        }
        if let Some(id) = &t.id {
            matches(id, CAPACITY_RESERVATION_ID_PATTERN, &tp.field("id"), errs);
        }
        if let Some(owner) = &t.owner_id {
            matches(owner, OWNER_ID_PATTERN, &tp.field("ownerID"), errs);
        }
        if let Some(c) = &t.instance_match_criteria {
            one_of(
                c,
                INSTANCE_MATCH_CRITERIA,
                &tp.field("instanceMatchCriteria"),
                errs,
            );
        }
        if let Some(tags) = &t.tags {
            selector_tags(tags, &tp.field("tags"), errs);
        }
    }
}

pub(super) fn placement_group(pg: &PlacementGroupSelector, p: &Path, errs: &mut Vec<FieldError>) {
    if pg.name.is_some() == pg.id.is_some() {
        errs.push(p.error(PLACEMENT_GROUP_XOR));
    }
    if let Some(id) = &pg.id {
        matches(id, PLACEMENT_GROUP_ID_PATTERN, &p.field("id"), errs);
    }
}
