//! `capacityReservationSelectorTerms`: DescribeCapacityReservations per term (by id, or by
//! tag, owner and match-criteria filters, active ones only), narrowed by the same rules in
//! `nodewright-aws-model`, and the `status.capacityReservations` entries they become.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{CapacityReservation as SdkReservation, Filter};
use nodewright_api::aws::v1::{CapacityReservationSelectorTerm, CapacityReservationStatus};
use nodewright_aws_model::reservations::{
    self, CapacityReservation, ReservationTerm, ReservationType,
};

use crate::AwsClients;
use crate::error::AwsError;

fn term(t: &CapacityReservationSelectorTerm) -> ReservationTerm {
    ReservationTerm {
        id: t.id.clone(),
        owner_id: t.owner_id.clone(),
        instance_match_criteria: t.instance_match_criteria.clone(),
        tags: t.tags.clone().unwrap_or_default().into_iter().collect(),
    }
}

fn filter(name: &str, value: &str) -> Filter {
    Filter::builder().name(name).values(value).build()
}

/// The model's form of one reservation EC2 reported; `None` without an id.
pub fn from_sdk(r: &SdkReservation) -> Option<CapacityReservation> {
    let id = r.capacity_reservation_id()?.to_string();
    Some(CapacityReservation {
        id,
        instance_type: r.instance_type().unwrap_or_default().to_string(),
        zone: r.availability_zone().unwrap_or_default().to_string(),
        owner_id: r.owner_id().unwrap_or_default().to_string(),
        instance_match_criteria: r
            .instance_match_criteria()
            .map(|c| c.as_str().to_string())
            .unwrap_or_default(),
        reservation_type: r
            .reservation_type()
            .map(|t| ReservationType::parse(t.as_str()))
            .unwrap_or_default(),
        available_instance_count: r
            .available_instance_count()
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(0),
        state: r
            .state()
            .map(|s| s.as_str().to_string())
            .unwrap_or_default(),
        end_time: r.end_date().and_then(|d| {
            d.fmt(aws_sdk_ec2::primitives::DateTimeFormat::DateTime)
                .ok()
        }),
        end_unix: r.end_date().map(|d| d.secs()),
        interruptible: r.interruptible().unwrap_or(false),
        tags: r
            .tags()
            .iter()
            .filter_map(|t| Some((t.key()?.to_string(), t.value()?.to_string())))
            .collect::<BTreeMap<_, _>>(),
    })
}

/// The reservations `terms` select, sorted by id. No terms: none, and no call.
pub async fn resolve_capacity_reservations(
    c: &AwsClients,
    terms: &[CapacityReservationSelectorTerm],
) -> Result<Vec<CapacityReservation>, AwsError> {
    let terms: Vec<ReservationTerm> = terms.iter().map(term).collect();
    let mut found = Vec::new();
    for t in &terms {
        let mut req = c
            .ec2
            .describe_capacity_reservations()
            .filters(filter("state", "active"));
        if let Some(id) = &t.id {
            req = req.capacity_reservation_ids(id);
        }
        if let Some(owner) = &t.owner_id {
            req = req.filters(filter("owner-id", owner));
        }
        if let Some(criteria) = &t.instance_match_criteria {
            req = req.filters(filter("instance-match-criteria", criteria));
        }
        for (k, v) in &t.tags {
            req = if v == "*" {
                req.filters(filter("tag-key", k))
            } else {
                req.filters(filter(&format!("tag:{k}"), v))
            };
        }
        let mut pages = req.into_paginator().send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| AwsError::from_sdk("DescribeCapacityReservations", e))?;
            found.extend(page.capacity_reservations().iter().filter_map(from_sdk));
        }
    }
    Ok(reservations::select(&terms, &found))
}

/// EC2's answer to an id it does not know (or one malformed).
fn is_unknown_id(e: &AwsError) -> bool {
    e.code
        .as_deref()
        .is_some_and(|c| c.starts_with("InvalidCapacityReservationId"))
}

async fn describe_ids(
    c: &AwsClients,
    ids: &[String],
) -> Result<Vec<CapacityReservation>, AwsError> {
    let mut found = Vec::new();
    let mut pages = c
        .ec2
        .describe_capacity_reservations()
        .set_capacity_reservation_ids(Some(ids.to_vec()))
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| AwsError::from_sdk("DescribeCapacityReservations", e))?;
        found.extend(page.capacity_reservations().iter().filter_map(from_sdk));
    }
    Ok(found)
}

/// The reservations with these ids, in whatever state (a block that has ended is still
/// reported), sorted by id. Ids EC2 does not know are left out: as one such id fails the
/// whole call, the ids are then asked for one at a time.
pub async fn reservations_by_id(
    c: &AwsClients,
    ids: &[String],
) -> Result<Vec<CapacityReservation>, AwsError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut found = match describe_ids(c, ids).await {
        Ok(found) => found,
        Err(e) if is_unknown_id(&e) => {
            let mut found = Vec::new();
            for id in ids {
                match describe_ids(c, std::slice::from_ref(id)).await {
                    Ok(r) => found.extend(r),
                    Err(e) if is_unknown_id(&e) => {}
                    Err(e) => return Err(e),
                }
            }
            found
        }
        Err(e) => return Err(e),
    };
    found.sort_by(|a, b| a.id.cmp(&b.id));
    found.dedup_by(|a, b| a.id == b.id);
    Ok(found)
}

/// The status entry of one reservation at `now_unix` (a capacity block near its end is
/// `expiring`).
pub fn status(r: &CapacityReservation, now_unix: i64) -> CapacityReservationStatus {
    CapacityReservationStatus {
        availability_zone: Some(r.zone.clone()),
        end_time: r.end_time.clone(),
        id: r.id.clone(),
        instance_match_criteria: Some(r.instance_match_criteria.clone()),
        instance_type: Some(r.instance_type.clone()),
        owner_id: Some(r.owner_id.clone()),
        reservation_type: Some(r.reservation_type.as_str().to_string()),
        interruptible: Some(r.interruptible),
        state: Some(r.status_state(now_unix).to_string()),
        extra: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ec2::types::{
        CapacityReservationState, CapacityReservationType, InstanceMatchCriteria, Tag,
    };

    #[test]
    fn sdk_reservations_become_model_and_status() {
        let sdk = SdkReservation::builder()
            .capacity_reservation_id("cr-0123")
            .instance_type("p5.48xlarge")
            .availability_zone("us-east-1a")
            .owner_id("123456789012")
            .instance_match_criteria(InstanceMatchCriteria::Targeted)
            .reservation_type(CapacityReservationType::CapacityBlock)
            .available_instance_count(2)
            .state(CapacityReservationState::Active)
            .end_date(aws_sdk_ec2::primitives::DateTime::from_secs(1_767_225_600))
            .tags(Tag::builder().key("team").value("ml").build())
            .build();
        let r = from_sdk(&sdk).unwrap();
        assert_eq!(r.reservation_type, ReservationType::CapacityBlock);
        assert_eq!(r.available_instance_count, 2);
        assert_eq!(r.tags["team"], "ml");
        assert_eq!(r.end_unix, Some(1_767_225_600));
        assert!(!r.interruptible);
        let s = status(&r, 1_767_225_600 - 3600);
        assert_eq!(s.id, "cr-0123");
        assert_eq!(s.reservation_type.as_deref(), Some("capacity-block"));
        assert_eq!(s.instance_match_criteria.as_deref(), Some("targeted"));
        assert_eq!(s.end_time.as_deref(), Some("2026-01-01T00:00:00Z"));
        assert_eq!(s.state.as_deref(), Some("active"));
        assert_eq!(s.interruptible, Some(false));
        let late = status(&r, 1_767_225_600 - 600);
        assert_eq!(
            late.state.as_deref(),
            Some("expiring"),
            "a block in its last 40 minutes"
        );
        assert!(from_sdk(&SdkReservation::builder().build()).is_none());
    }
}
