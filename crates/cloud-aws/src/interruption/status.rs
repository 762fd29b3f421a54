//! EC2's health checks as the instance-status poller reads them: DescribeInstanceStatus, asked
//! three times because EC2 ANDs filters of different names and the poller wants any of
//! impaired instance status, impaired system status, or a scheduled event of the kinds that
//! take an instance away. Every page is read; an instance found by more than one question is
//! reported once, with only its failed checks.
//!
//! EBS status checks are left out as upstream does: a failing volume may belong to a pod's
//! claim rather than to the node. Scheduled events that EC2 marks `[Completed]` or
//! `[Canceled]` in their description are over and count for nothing.

use aws_sdk_ec2::types::{
    EventCode, Filter, InstanceStatus as SdkStatus, InstanceStatusSummary, StatusType,
    SummaryStatus,
};
use nodewright_cloud::{FailedCheck, HealthCategory, InstanceHealth};
use nodewright_core::time::Timestamp;

use crate::AwsClients;
use crate::error::AwsError;

/// The scheduled events that mean the host is going away or must restart the instance.
pub const EVENT_CODES: &[EventCode] = &[
    EventCode::InstanceReboot,
    EventCode::SystemReboot,
    EventCode::SystemMaintenance,
    EventCode::InstanceRetirement,
    EventCode::InstanceStop,
];

/// One filter set per question; each is a separate, paged DescribeInstanceStatus.
pub fn filter_sets() -> Vec<Filter> {
    let impaired = SummaryStatus::Impaired.as_str();
    let mut events = Filter::builder().name("event.code");
    for c in EVENT_CODES {
        events = events.values(c.as_str());
    }
    vec![
        Filter::builder()
            .name("instance-status.status")
            .values(impaired)
            .build(),
        Filter::builder()
            .name("system-status.status")
            .values(impaired)
            .build(),
        events.build(),
    ]
}

fn timestamp(d: &aws_sdk_ec2::primitives::DateTime) -> Option<Timestamp> {
    d.to_millis().ok().map(Timestamp)
}

fn failed_details(
    summary: Option<&InstanceStatusSummary>,
    category: HealthCategory,
) -> impl Iterator<Item = FailedCheck> + '_ {
    summary
        .map(|s| s.details())
        .unwrap_or_default()
        .iter()
        .filter(|d| d.status() == Some(&StatusType::Failed))
        .map(move |d| FailedCheck {
            category,
            name: d.name().map(|n| n.as_str().to_string()).unwrap_or_default(),
            since: d.impaired_since().and_then(timestamp),
        })
}

fn is_over(description: Option<&str>) -> bool {
    description.is_some_and(|d| d.starts_with("[Completed]") || d.starts_with("[Canceled]"))
}

/// The failed checks of one DescribeInstanceStatus entry; `None` when nothing failed (EC2
/// reports a summary as impaired while the detail that failed is still `initializing`, and
/// moto reports every running instance as `ok`).
pub fn from_sdk(s: &SdkStatus) -> Option<InstanceHealth> {
    let instance_id = s.instance_id().filter(|i| !i.is_empty())?.to_string();
    let mut failed: Vec<FailedCheck> =
        failed_details(s.instance_status(), HealthCategory::InstanceStatus)
            .chain(failed_details(
                s.system_status(),
                HealthCategory::SystemStatus,
            ))
            .collect();
    failed.extend(
        s.events()
            .iter()
            .filter(|e| e.code().is_some_and(|c| EVENT_CODES.contains(c)))
            .filter(|e| !is_over(e.description()))
            .map(|e| FailedCheck {
                category: HealthCategory::ScheduledEvent,
                name: e.code().map(|c| c.as_str().to_string()).unwrap_or_default(),
                since: None,
            }),
    );
    (!failed.is_empty()).then_some(InstanceHealth {
        instance_id,
        failed,
    })
}

/// Every instance with a failed check, sorted by id, each once.
pub async fn unhealthy_instances(clients: &AwsClients) -> Result<Vec<InstanceHealth>, AwsError> {
    let mut found: Vec<InstanceHealth> = Vec::new();
    for filter in filter_sets() {
        let mut pages = clients
            .ec2
            .describe_instance_status()
            .filters(filter)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| AwsError::from_sdk("DescribeInstanceStatus", e))?;
            for h in page.instance_statuses().iter().filter_map(from_sdk) {
                if !found.iter().any(|f| f.instance_id == h.instance_id) {
                    found.push(h);
                }
            }
        }
    }
    found.sort_by(|a, b| a.instance_id.cmp(&b.instance_id));
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ec2::primitives::DateTime;
    use aws_sdk_ec2::types::{InstanceStatusDetails, InstanceStatusEvent, StatusName};

    fn summary(status: StatusType, since: Option<i64>) -> InstanceStatusSummary {
        let mut d = InstanceStatusDetails::builder()
            .name(StatusName::Reachability)
            .status(status);
        if let Some(s) = since {
            d = d.impaired_since(DateTime::from_secs(s));
        }
        InstanceStatusSummary::builder()
            .status(SummaryStatus::Impaired)
            .details(d.build())
            .build()
    }

    #[test]
    fn only_failed_checks_and_live_events_count() {
        let s = SdkStatus::builder()
            .instance_id("i-1")
            .instance_status(summary(StatusType::Failed, Some(1_700_000_000)))
            .system_status(summary(StatusType::Passed, None))
            .events(
                InstanceStatusEvent::builder()
                    .code(EventCode::InstanceRetirement)
                    .description("The instance is running on degraded hardware")
                    .build(),
            )
            .events(
                InstanceStatusEvent::builder()
                    .code(EventCode::SystemReboot)
                    .description("[Completed] scheduled reboot")
                    .build(),
            )
            .build();
        let h = from_sdk(&s).unwrap();
        assert_eq!(h.instance_id, "i-1");
        assert_eq!(
            h.failed,
            vec![
                FailedCheck {
                    category: HealthCategory::InstanceStatus,
                    name: "reachability".into(),
                    since: Some(Timestamp(1_700_000_000_000)),
                },
                FailedCheck {
                    category: HealthCategory::ScheduledEvent,
                    name: "instance-retirement".into(),
                    since: None,
                },
            ]
        );
    }

    #[test]
    fn healthy_or_initializing_instances_are_left_out() {
        let ok = SdkStatus::builder()
            .instance_id("i-2")
            .instance_status(summary(StatusType::Passed, None))
            .system_status(summary(StatusType::Initializing, None))
            .build();
        assert_eq!(from_sdk(&ok), None);
        let system = SdkStatus::builder()
            .instance_id("i-3")
            .system_status(summary(StatusType::Failed, None))
            .build();
        assert_eq!(
            from_sdk(&system).unwrap().failed[0].category,
            HealthCategory::SystemStatus
        );
        assert_eq!(
            from_sdk(&SdkStatus::builder().build()),
            None,
            "no instance id"
        );
    }

    #[test]
    fn three_questions_cover_instance_system_and_events() {
        let names: Vec<String> = filter_sets()
            .iter()
            .map(|f| f.name().unwrap_or_default().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "instance-status.status",
                "system-status.status",
                "event.code"
            ]
        );
        assert_eq!(filter_sets()[2].values().len(), 5);
    }
}
