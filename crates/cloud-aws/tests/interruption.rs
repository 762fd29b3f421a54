//! The interruption queue against moto's SQS through the real SDK: every event kind sent as
//! EventBridge would deliver it comes back parsed, acknowledged messages are gone for good
//! while unacknowledged ones return, an unreadable body is delivered as such, and the pool of
//! an interrupted claim the controller hands back is kept out of launches.

#[macro_use]
mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_ec2::types::{InstanceMarketOptionsRequest, InstanceType, MarketType};
use aws_sdk_sqs::types::QueueAttributeName;
use nodewright_cloud::{Delivery, InterruptedOffering, InterruptionKind, InterruptionSource};
use nodewright_cloud_aws::AwsCloud;
use nodewright_cloud_aws::cloud::now;
use nodewright_cloud_aws::interruption::{QueueOptions, SqsInterruptionQueue};
use nodewright_core::model::CapacityType;
use support::Moto;

fn event(detail_type: &str, source: &str, detail: &str) -> String {
    format!(
        r#"{{"version":"0","id":"{id}","detail-type":"{detail_type}","source":"{source}","account":"123456789012","time":"2024-06-01T00:00:00Z","region":"us-east-1","resources":[],"detail":{detail}}}"#,
        id = support::unique("event")
    )
}

fn health(instances: &[&str]) -> String {
    let entities: Vec<String> = instances
        .iter()
        .map(|i| format!(r#"{{"entityValue":"{i}"}}"#))
        .collect();
    event(
        "AWS Health Event",
        "aws.health",
        &format!(
            r#"{{"eventArn":"arn:aws:health:us-east-1::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/x","service":"EC2","eventTypeCode":"AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED","eventTypeCategory":"scheduledChange","startTime":"Sat, 08 Jun 2024 00:00:00 GMT","eventDescription":[{{"language":"en_US","latestDescription":"retiring"}}],"affectedEntities":[{}]}}"#,
            entities.join(",")
        ),
    )
}

async fn create_queue(moto: &Moto) -> (String, String) {
    let name = support::unique("interruption");
    let url = moto
        .clients
        .sqs
        .create_queue()
        .queue_name(&name)
        .send()
        .await
        .expect("CreateQueue")
        .queue_url
        .expect("queue url");
    (name, url)
}

async fn send(moto: &Moto, url: &str, body: &str) {
    moto.clients
        .sqs
        .send_message()
        .queue_url(url)
        .message_body(body)
        .send()
        .await
        .expect("SendMessage");
}

async fn queued(moto: &Moto, url: &str) -> (String, String) {
    let out = moto
        .clients
        .sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .expect("GetQueueAttributes");
    let attrs = out.attributes.unwrap_or_default();
    let get = |k: QueueAttributeName| attrs.get(&k).cloned().unwrap_or_default();
    (
        get(QueueAttributeName::ApproximateNumberOfMessages),
        get(QueueAttributeName::ApproximateNumberOfMessagesNotVisible),
    )
}

/// A spot m5.large; returns (instance id, zone).
async fn run_spot_instance(moto: &Moto) -> (String, String) {
    let image = support::copy_image(&moto.clients, &support::unique("img"), &[]).await;
    let out = moto
        .clients
        .ec2
        .run_instances()
        .image_id(image)
        .instance_type(InstanceType::M5Large)
        .min_count(1)
        .max_count(1)
        .instance_market_options(
            InstanceMarketOptionsRequest::builder()
                .market_type(MarketType::Spot)
                .build(),
        )
        .send()
        .await
        .expect("RunInstances");
    let i = &out.instances()[0];
    (
        i.instance_id().unwrap().to_string(),
        i.placement()
            .and_then(|p| p.availability_zone())
            .unwrap()
            .to_string(),
    )
}

fn cloud(moto: &Moto) -> Arc<AwsCloud> {
    let cluster = support::unique("intr");
    Arc::new(support::cloud(
        moto,
        &cluster,
        &format!("/{cluster}"),
        "1.32",
    ))
}

fn options(name: &str, visibility: Duration) -> QueueOptions {
    QueueOptions {
        wait: Duration::from_secs(1),
        visibility,
        ..QueueOptions::new(name)
    }
}

/// Receives until `n` deliveries arrived or a receive comes back empty.
async fn receive_all(queue: &SqsInterruptionQueue, n: usize) -> Vec<Delivery> {
    let mut all = Vec::new();
    while all.len() < n {
        let batch = queue.receive().await.expect("receive");
        assert!(batch.len() <= 10);
        if batch.is_empty() {
            break;
        }
        all.extend(batch);
    }
    all
}

#[tokio::test]
async fn every_kind_is_parsed_acknowledged_and_deleted() {
    let moto = moto_or_skip!("every_kind_is_parsed_acknowledged_and_deleted");
    let (name, url) = create_queue(&moto).await;
    let (spot_id, zone) = run_spot_instance(&moto).await;
    let cloud = cloud(&moto);
    let queue = SqsInterruptionQueue::new(cloud.clone(), options(&name, Duration::from_secs(2)));

    let bodies = [
        event(
            "EC2 Spot Instance Interruption Warning",
            "aws.ec2",
            &format!(r#"{{"instance-id":"{spot_id}","instance-action":"terminate"}}"#),
        ),
        event(
            "EC2 Instance Rebalance Recommendation",
            "aws.ec2",
            r#"{"instance-id":"i-0000000000000000b"}"#,
        ),
        health(&["i-0000000000000000c", "i-0000000000000000d"]),
        event(
            "EC2 Instance State-change Notification",
            "aws.ec2",
            r#"{"instance-id":"i-0000000000000000e","state":"stopping"}"#,
        ),
        event(
            "EC2 Instance State-change Notification",
            "aws.ec2",
            r#"{"instance-id":"i-0000000000000000f","state":"running"}"#,
        ),
        event(
            "EC2 Capacity Reservation Instance Interruption Warning",
            "aws.ec2",
            r#"{"instance-id":"i-00000000000000010","instance-action":"terminate"}"#,
        ),
        "this is not an event".to_string(),
    ];
    for b in &bodies {
        send(&moto, &url, b).await;
    }
    assert!(!cloud.launch.unavailable().is_unavailable(
        CapacityType::Spot,
        "m5.large",
        &zone,
        now()
    ));

    let got = receive_all(&queue, bodies.len()).await;
    assert_eq!(got.len(), bodies.len());
    let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut unreadable = 0;
    for d in &got {
        match &d.message {
            Ok(m) => {
                assert!(m.time.is_some());
                seen.entry(m.kind.as_str().to_string())
                    .or_default()
                    .extend(m.instance_ids.clone());
            }
            Err(reason) => {
                assert!(reason.contains("not an EventBridge event"), "{reason}");
                unreadable += 1;
            }
        }
    }
    assert_eq!(unreadable, 1);
    let expected: BTreeMap<String, Vec<String>> = [
        ("spot_interrupted", vec![spot_id.as_str()]),
        ("rebalance_recommendation", vec!["i-0000000000000000b"]),
        (
            "scheduled_change",
            vec!["i-0000000000000000c", "i-0000000000000000d"],
        ),
        ("instance_stopped", vec!["i-0000000000000000e"]),
        ("no_op", vec![]),
        (
            "capacity_reservation_interrupted",
            vec!["i-00000000000000010"],
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(seen, expected);

    // Receiving marks nothing: the pool is marked only for an instance the controller finds
    // a claim for, from that claim's labels.
    assert!(!cloud.launch.unavailable().is_unavailable(
        CapacityType::Spot,
        "m5.large",
        &zone,
        now()
    ));
    queue.offering_interrupted(&InterruptedOffering {
        kind: InterruptionKind::SpotInterrupted,
        instance_type: "m5.large".into(),
        zone: zone.clone(),
        reservation_id: None,
    });
    {
        let cache = cloud.launch.unavailable();
        assert!(cache.is_unavailable(CapacityType::Spot, "m5.large", &zone, now()));
        assert!(!cache.is_unavailable(CapacityType::OnDemand, "m5.large", &zone, now()));
        assert!(!cache.is_unavailable(CapacityType::Spot, "m5.xlarge", &zone, now()));
    }
    // A reservation interruption marks the claim's reservation full instead.
    cloud.launch.reservations().observe(&[
        nodewright_aws_model::reservations::CapacityReservation {
            id: "cr-9".into(),
            available_instance_count: 2,
            state: "active".into(),
            ..Default::default()
        },
    ]);
    queue.offering_interrupted(&InterruptedOffering {
        kind: InterruptionKind::CapacityReservationInterrupted,
        instance_type: "m5.large".into(),
        zone: zone.clone(),
        reservation_id: Some("cr-9".into()),
    });
    assert_eq!(cloud.launch.reservations().free("cr-9"), Some(0));

    // Acknowledge everything but the rebalance recommendation: only it comes back once its
    // visibility timeout ran out.
    for d in &got {
        let keep =
            matches!(&d.message, Ok(m) if m.kind == InterruptionKind::RebalanceRecommendation);
        if !keep {
            queue.ack(&d.ack).await.expect("ack");
        }
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let again = receive_all(&queue, 1).await;
    assert_eq!(again.len(), 1, "{again:?}");
    let m = again[0].message.as_ref().unwrap();
    assert_eq!(m.kind, InterruptionKind::RebalanceRecommendation);
    queue.ack(&again[0].ack).await.expect("ack");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(queue.receive().await.unwrap().is_empty());
    assert_eq!(queued(&moto, &url).await, ("0".into(), "0".into()));
}

#[tokio::test]
async fn the_url_is_resolved_by_name_and_a_missing_queue_is_an_error() {
    let moto = moto_or_skip!("the_url_is_resolved_by_name_and_a_missing_queue_is_an_error");
    let (name, url) = create_queue(&moto).await;
    let cloud = cloud(&moto);
    let queue = SqsInterruptionQueue::new(cloud.clone(), options(&name, Duration::from_secs(20)));
    assert_eq!(queue.url().await.unwrap(), url);
    assert!(queue.receive().await.unwrap().is_empty());

    let missing = SqsInterruptionQueue::new(
        cloud,
        options(&support::unique("missing"), Duration::from_secs(20)),
    );
    let e = missing.receive().await.unwrap_err();
    assert!(e.to_string().contains("GetQueueUrl"), "{e}");
}
