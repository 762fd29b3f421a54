//! The interruption queue's families, upstream's `karpenter_interruption_*`:
//! `_received_messages_total{message_type}` (`no_op` included), `_deleted_messages_total` and
//! `_message_queue_duration_seconds` (from the event being emitted to its handling); and the
//! instance-status poller's `karpenter_interruption_instance_status_unhealthy_total{category}`.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::metrics::{Counters, duration_histogram, register, registered};

pub struct InterruptionMetrics {
    received: Counters,
    deleted: Counter,
    queue_duration: Histogram,
    status_unhealthy: Counters,
}

impl InterruptionMetrics {
    pub(crate) fn register(r: &mut Registry) -> Self {
        InterruptionMetrics {
            received: registered(
                r,
                "karpenter_interruption_received_messages",
                "Messages read from the interruption queue, by kind (spot interruption, rebalance, state change, scheduled change, unknown).",
            ),
            deleted: registered(
                r,
                "karpenter_interruption_deleted_messages",
                "Messages removed from the interruption queue once handled.",
            ),
            queue_duration: register(
                r,
                "karpenter_interruption_message_queue_duration_seconds",
                "Time from an interruption event being emitted until the controller handles it.",
                duration_histogram(),
            ),
            status_unhealthy: registered(
                r,
                "karpenter_interruption_instance_status_unhealthy",
                "Instances found failing an EC2 status check or with a scheduled event, by category.",
            ),
        }
    }

    /// A message read from the interruption queue, by kind (`no_op` included).
    pub fn received(&self, message_type: &str) {
        self.received
            .get_or_create(&vec![("message_type", message_type.to_owned())])
            .inc();
    }

    /// A message deleted from the interruption queue after it was handled.
    pub fn deleted(&self) {
        self.deleted.inc();
    }

    /// How long the message's event waited between being emitted and being handled.
    pub fn queue_duration(&self, seconds: f64) {
        self.queue_duration.observe(seconds);
    }

    /// An instance newly found unhealthy in `category` (`InstanceStatus`, `SystemStatus`,
    /// `EventStatus`).
    pub fn instance_status_unhealthy(&self, category: &str) {
        self.status_unhealthy
            .get_or_create(&vec![("category", category.to_owned())])
            .inc();
    }
}
