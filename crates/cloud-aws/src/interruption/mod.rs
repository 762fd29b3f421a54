//! The interruption queue: the SQS queue named by `INTERRUPTION_QUEUE`, into which EventBridge
//! rules deliver spot interruption warnings, rebalance recommendations, AWS Health scheduled
//! changes, instance state changes and capacity-reservation interruption warnings.
//!
//! [`SqsInterruptionQueue`] resolves the queue's URL once (GetQueueUrl), long-polls
//! ReceiveMessage, parses each body with `nodewright_aws_model::interruption` and deletes a
//! message when the controller acknowledges it. When the controller reports that a spot (or
//! capacity-reservation) warning interrupted one of its claims, the claim's pool is marked
//! unavailable in the launch path's books, so the replacement is not launched into the pool
//! that is being reclaimed. `status` reads EC2's health checks for the instance-status poller.

mod offerings;
pub mod status;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use nodewright_aws_model::interruption as model;
use nodewright_cloud::{
    AckHandle, CloudError, Delivery, InterruptedOffering, Interruption, InterruptionSource,
};
use tokio::sync::OnceCell;

use crate::cloud::{AwsCloud, now};
use crate::error::AwsError;

pub use offerings::{Marked, mark_interrupted_offering};

/// How the queue is polled. The defaults are upstream's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueOptions {
    /// The queue's name (`INTERRUPTION_QUEUE`), resolved to a URL with GetQueueUrl.
    pub name: String,
    /// Long-poll time of one ReceiveMessage (at most 20 s).
    pub wait: Duration,
    /// How long a received message stays hidden from other receivers.
    pub visibility: Duration,
    /// Messages per ReceiveMessage (at most 10).
    pub max_messages: i32,
}

impl QueueOptions {
    pub fn new(name: &str) -> Self {
        QueueOptions {
            name: name.to_string(),
            wait: Duration::from_secs(20),
            visibility: Duration::from_secs(20),
            max_messages: 10,
        }
    }
}

pub struct SqsInterruptionQueue {
    cloud: Arc<AwsCloud>,
    options: QueueOptions,
    url: OnceCell<String>,
}

impl SqsInterruptionQueue {
    pub fn new(cloud: Arc<AwsCloud>, options: QueueOptions) -> Self {
        SqsInterruptionQueue {
            cloud,
            options,
            url: OnceCell::new(),
        }
    }

    /// The queue's URL, looked up on first use and kept; a failed lookup is retried next time.
    pub async fn url(&self) -> Result<&str, AwsError> {
        self.url
            .get_or_try_init(|| async {
                let out = self
                    .cloud
                    .clients
                    .sqs
                    .get_queue_url()
                    .queue_name(&self.options.name)
                    .send()
                    .await
                    .map_err(|e| AwsError::from_sdk("GetQueueUrl", e))?;
                out.queue_url
                    .filter(|u| !u.is_empty())
                    .ok_or_else(|| AwsError::new("GetQueueUrl", "the response carried no URL"))
            })
            .await
            .map(String::as_str)
    }
}

/// A message body as the controller sees it: the notice, or why the body is unreadable.
pub fn interpret(body: &str) -> Result<Interruption, String> {
    model::parse(body)
        .map(|m| Interruption {
            kind: m.kind,
            id: m.id,
            instance_ids: m.instance_ids,
            time: m.time,
        })
        .map_err(|e| e.to_string())
}

fn seconds(d: Duration) -> i32 {
    i32::try_from(d.as_secs()).unwrap_or(i32::MAX)
}

#[async_trait]
impl InterruptionSource for SqsInterruptionQueue {
    async fn receive(&self) -> Result<Vec<Delivery>, CloudError> {
        let url = self.url().await?;
        let out = self
            .cloud
            .clients
            .sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(self.options.max_messages)
            .visibility_timeout(seconds(self.options.visibility))
            .wait_time_seconds(seconds(self.options.wait))
            .send()
            .await
            .map_err(|e| AwsError::from_sdk("ReceiveMessage", e))?;
        let deliveries: Vec<Delivery> = out
            .messages()
            .iter()
            .filter_map(|m| {
                // Without a receipt handle the message cannot be deleted; it will come back.
                let handle = m.receipt_handle().filter(|h| !h.is_empty())?;
                Some(Delivery {
                    message: interpret(m.body().unwrap_or_default()),
                    ack: AckHandle(handle.to_string()),
                })
            })
            .collect();
        Ok(deliveries)
    }

    async fn ack(&self, handle: &AckHandle) -> Result<(), CloudError> {
        let url = self.url().await?;
        self.cloud
            .clients
            .sqs
            .delete_message()
            .queue_url(url)
            .receipt_handle(&handle.0)
            .send()
            .await
            .map_err(|e| AwsError::from_sdk("DeleteMessage", e))?;
        Ok(())
    }

    fn offering_interrupted(&self, offering: &InterruptedOffering) {
        mark_interrupted_offering(&self.cloud, offering, now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodewright_cloud::InterruptionKind;

    #[test]
    fn bodies_become_notices_or_reasons() {
        let body = r#"{"version":"0","id":"e1","detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","account":"1","time":"2024-06-01T00:00:00Z","region":"us-east-1","resources":[],"detail":{"instance-id":"i-1","state":"terminated"}}"#;
        let n = interpret(body).unwrap();
        assert_eq!(n.kind, InterruptionKind::InstanceTerminated);
        assert_eq!(n.instance_ids, vec!["i-1"]);
        assert_eq!(n.id, "e1");
        assert!(interpret("{").unwrap_err().contains("unreadable"));
    }

    #[test]
    fn upstream_poll_settings() {
        let o = QueueOptions::new("q");
        assert_eq!(
            (o.wait, o.visibility, o.max_messages),
            (Duration::from_secs(20), Duration::from_secs(20), 10)
        );
    }
}
