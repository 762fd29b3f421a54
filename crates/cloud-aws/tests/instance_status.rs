//! EC2 health checks through the real SDK. Against moto alone: the three DescribeInstanceStatus
//! questions are accepted and a running instance, which moto always reports as `ok`, is not
//! reported. moto 5.2 ignores the status and event filters and has no impaired checks,
//! scheduled events or pages, so a proxy on 127.0.0.1 answers DescribeInstanceStatus with
//! recorded EC2 XML to show failed checks, events and paging end to end.

#[macro_use]
mod support;

use std::sync::Arc;

use aws_sdk_ec2::types::InstanceType;
use nodewright_cloud::{CloudProvider, FailedCheck, HealthCategory};
use nodewright_core::time::Timestamp;

use support::proxy;
use support::{Moto, REGION};

fn cloud(moto: &Moto) -> nodewright_cloud_aws::AwsCloud {
    let cluster = support::unique("health");
    support::cloud(moto, &cluster, &format!("/{cluster}"), "1.32")
}

async fn via(url: &str) -> Moto {
    let options = nodewright_cloud_aws::ClientOptions {
        region: REGION.into(),
        endpoint_url: Some(url.to_string()),
        credentials: Some(nodewright_cloud_aws::StaticCredentials {
            access_key_id: "testing".into(),
            secret_access_key: "testing".into(),
        }),
    };
    Moto {
        url: url.to_string(),
        clients: nodewright_cloud_aws::AwsClients::new(&options).await,
    }
}

#[tokio::test]
async fn moto_reports_running_instances_healthy_so_nothing_is_unhealthy() {
    let moto = moto_or_skip!("instance_status_moto");
    let image = support::copy_image(&moto.clients, &support::unique("img"), &[]).await;
    let out = moto
        .clients
        .ec2
        .run_instances()
        .image_id(image)
        .instance_type(InstanceType::M5Large)
        .min_count(1)
        .max_count(1)
        .send()
        .await
        .expect("RunInstances");
    let id = out.instances()[0].instance_id().unwrap().to_string();
    // moto lists the instance with passing checks...
    let listed = moto
        .clients
        .ec2
        .describe_instance_status()
        .instance_ids(&id)
        .send()
        .await
        .expect("DescribeInstanceStatus");
    let s = &listed.instance_statuses()[0];
    assert_eq!(
        s.instance_status()
            .and_then(|x| x.status())
            .map(|x| x.as_str()),
        Some("ok")
    );
    // ...so the poller's three filtered questions, which moto answers with every running
    // instance, find nothing failing.
    let found = cloud(&moto).unhealthy_instances().await.expect("poll");
    assert!(
        !found.iter().any(|h| h.instance_id == id),
        "a healthy instance is not reported: {found:?}"
    );
}

fn status_item(id: &str, instance: &str, system: &str, events: &str) -> String {
    format!(
        "<item><instanceId>{id}</instanceId><availabilityZone>us-east-1a</availabilityZone>\
<instanceState><code>16</code><name>running</name></instanceState>\
<systemStatus>{system}</systemStatus><instanceStatus>{instance}</instanceStatus>\
<eventsSet>{events}</eventsSet></item>"
    )
}

fn summary(status: &str, detail: &str, since: Option<&str>) -> String {
    let since = since
        .map(|s| format!("<impairedSince>{s}</impairedSince>"))
        .unwrap_or_default();
    format!(
        "<status>{status}</status><details><item><name>reachability</name><status>{detail}</status>{since}</item></details>"
    )
}

fn page(items: &[String], next: Option<&str>) -> String {
    let next = next
        .map(|t| format!("<nextToken>{t}</nextToken>"))
        .unwrap_or_default();
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<DescribeInstanceStatusResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">\
<requestId>00000000-0000-4000-8000-000000000002</requestId><instanceStatusSet>{}</instanceStatusSet>{next}</DescribeInstanceStatusResponse>",
        items.concat()
    )
}

#[tokio::test]
async fn failed_checks_and_events_are_read_from_every_page_once_each() {
    let moto = moto_or_skip!("instance_status_recorded");
    let ok = summary("ok", "passed", None);
    let impaired_a = status_item(
        "i-0aaa",
        &summary("impaired", "failed", Some("2026-03-01T10:00:00.000Z")),
        &ok,
        "",
    );
    // Impaired in summary, but the failing detail is still initializing: not yet failed.
    let initializing = status_item(
        "i-0bbb",
        &summary("impaired", "initializing", None),
        &ok,
        "",
    );
    let system = status_item(
        "i-0ccc",
        &ok,
        &summary("impaired", "failed", Some("2026-03-01T11:00:00.000Z")),
        "",
    );
    let retiring = status_item(
        "i-0ddd",
        &ok,
        &ok,
        "<item><code>instance-retirement</code><description>The instance is running on degraded hardware</description>\
<notBefore>2026-03-08T00:00:00.000Z</notBefore></item>\
<item><code>system-reboot</code><description>[Completed] The instance was rebooted</description></item>",
    );
    let answers = {
        let (impaired_a, initializing, system, retiring) = (
            impaired_a.clone(),
            initializing.clone(),
            system.clone(),
            retiring.clone(),
        );
        Arc::new(move |form: &str| {
            if !form.contains("Action=DescribeInstanceStatus") {
                return None;
            }
            Some(if form.contains("Name=instance-status.status") {
                if form.contains("NextToken=page-2") {
                    page(std::slice::from_ref(&initializing), None)
                } else {
                    page(std::slice::from_ref(&impaired_a), Some("page-2"))
                }
            } else if form.contains("Name=system-status.status") {
                page(&[system.clone(), impaired_a.clone()], None)
            } else {
                page(std::slice::from_ref(&retiring), None)
            })
        }) as proxy::Answer
    };
    let p = proxy::start(&moto.url, answers, proxy::unchanged()).await;
    let found = cloud(&via(&p.url).await)
        .unhealthy_instances()
        .await
        .expect("poll");

    let ids: Vec<&str> = found.iter().map(|h| h.instance_id.as_str()).collect();
    assert_eq!(ids, ["i-0aaa", "i-0ccc", "i-0ddd"]);
    let since = |s: &str| {
        Some(Timestamp(
            aws_sdk_ec2::primitives::DateTime::from_str(
                s,
                aws_sdk_ec2::primitives::DateTimeFormat::DateTime,
            )
            .unwrap()
            .to_millis()
            .unwrap(),
        ))
    };
    assert_eq!(
        found[0].failed,
        [FailedCheck {
            category: HealthCategory::InstanceStatus,
            name: "reachability".into(),
            since: since("2026-03-01T10:00:00Z"),
        }]
    );
    assert_eq!(found[1].failed[0].category, HealthCategory::SystemStatus);
    assert_eq!(found[1].failed[0].since, since("2026-03-01T11:00:00Z"));
    assert_eq!(
        found[2].failed,
        [FailedCheck {
            category: HealthCategory::ScheduledEvent,
            name: "instance-retirement".into(),
            since: None,
        }],
        "a completed event counts for nothing"
    );

    let sent = p.sent("Action=DescribeInstanceStatus");
    assert_eq!(sent.len(), 4, "two pages, then one each: {sent:?}");
    assert!(sent[0].contains("Filter.1.Name=instance-status.status"));
    assert!(sent[0].contains("Filter.1.Value.1=impaired"));
    assert!(sent[1].contains("NextToken=page-2"));
    assert!(sent[2].contains("Filter.1.Name=system-status.status"));
    assert!(sent[3].contains("Filter.1.Name=event.code"));
    for code in [
        "instance-reboot",
        "system-reboot",
        "system-maintenance",
        "instance-retirement",
        "instance-stop",
    ] {
        assert!(sent[3].contains(code), "{code} in {}", sent[3]);
    }
}
