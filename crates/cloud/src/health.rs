//! What a provider observes about its instances beyond their lifecycle: failed health checks
//! (EC2's instance and system status checks, scheduled maintenance) for the controller's
//! instance-status poller, and launch and termination failures and batched calls for the
//! controller's metrics. All are plain data; the controller decides what to do with them.

use nodewright_core::time::Timestamp;

/// Which kind of check failed, spelled as upstream's `category` metric label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HealthCategory {
    /// The instance's own status check (its operating system is unreachable).
    InstanceStatus,
    /// The host's status check (hardware, network or power under the instance).
    SystemStatus,
    /// A scheduled event (reboot, maintenance, retirement, stop) the cloud announced.
    ScheduledEvent,
}

impl HealthCategory {
    /// The `category` label of `karpenter_interruption_instance_status_unhealthy_total`.
    pub fn as_str(self) -> &'static str {
        match self {
            HealthCategory::InstanceStatus => "InstanceStatus",
            HealthCategory::SystemStatus => "SystemStatus",
            HealthCategory::ScheduledEvent => "EventStatus",
        }
    }

    /// The disruption reason a deletion for this category carries.
    pub fn reason(self) -> &'static str {
        match self {
            HealthCategory::InstanceStatus => "instance_status",
            HealthCategory::SystemStatus => "system_status",
            HealthCategory::ScheduledEvent => "event_status",
        }
    }
}

/// One failed check of one instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailedCheck {
    pub category: HealthCategory,
    /// The check's or event's name (`reachability`, `instance-retirement` ...).
    pub name: String,
    /// When the cloud says the check started failing; `None` when it does not say.
    pub since: Option<Timestamp>,
}

/// An instance with at least one failed check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceHealth {
    /// The cloud's instance id (the last segment of a provider id).
    pub instance_id: String,
    pub failed: Vec<FailedCheck>,
}

/// One failed launch attempt of one offering, as the cloud reported it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchFailure {
    pub zone: String,
    /// The zone's id (`use1-az1`); empty when unknown.
    pub zone_id: String,
    pub capacity_type: String,
    /// The cloud's error code (`InsufficientInstanceCapacity` ...).
    pub reason: String,
}

/// A termination the cloud refused (the instance is protected, the call was not allowed ...).
/// An instance that is already gone is not a failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TerminationFailure {
    pub zone: String,
    /// The zone's id (`use1-az1`); empty when unknown.
    pub zone_id: String,
}

/// One batch of merged cloud calls, as it was sent.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchFlushed {
    /// Which batcher (`create_fleet` ...), the `batcher` label of upstream's batcher metrics.
    pub batcher: &'static str,
    /// How many calls the batch merged.
    pub size: usize,
    /// Seconds from the batch's first call to its sending.
    pub window_seconds: f64,
}

/// Where a provider reports what it observes while working (the controller's metrics).
pub trait ProviderObserver: Send + Sync {
    fn launch_failed(&self, failure: &LaunchFailure);

    fn termination_failed(&self, _failure: &TerminationFailure) {}

    fn batch_flushed(&self, _batch: &BatchFlushed) {}

    /// The user data rendered for a launch template of the node class `nodeclass`: `bytes`
    /// before base64, the size EC2 limits.
    fn user_data_rendered(&self, _nodeclass: &str, _bytes: usize) {}
}
