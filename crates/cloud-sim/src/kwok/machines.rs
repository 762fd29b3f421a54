//! Where the node agent's instances come from: the simulated cloud's own records; any cloud
//! provider's `list` (EC2 through moto, say) read together with the NodeClaims, whose status
//! says what capacity each instance has and whose labels its kubelet registers with; or, for
//! an agent in a process apart from the simulated cloud's, the NodeClaims alone.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use nodewright_api::quantity::parse_resource;
use nodewright_api::v1::nodeclaim::{NodeClaim, NodeClaimStatus};
use nodewright_api::v1::shared::ResourceList;
use nodewright_cloud::{CloudError, CloudProvider, Instance, InstanceState, tags};
use nodewright_core::labels;
use nodewright_core::model::CapacityType;
use nodewright_core::resources::Resources;
use tokio::time::Instant;

use super::node::Claims;
use crate::cloud::{SimCloud, SimInstance};

#[async_trait]
pub trait Machines: Send + Sync {
    /// The instances to play the kubelet for, as they are now.
    async fn machines(&self, claims: &Claims) -> Result<Vec<SimInstance>, CloudError>;

    /// How long an instance takes to boot before its kubelet starts.
    fn boot_time(&self) -> Duration;
}

#[async_trait]
impl Machines for SimCloud {
    async fn machines(&self, _claims: &Claims) -> Result<Vec<SimInstance>, CloudError> {
        Ok(self.instances())
    }

    fn boot_time(&self) -> Duration {
        self.config().fleet.launch_delay
    }
}

/// Any provider's instances: those launched for a NodeClaim that records the instance's
/// capacity. Boot time is counted from when the agent first saw the instance.
pub struct ProviderMachines {
    cloud: Arc<dyn CloudProvider>,
    first_seen: Mutex<BTreeMap<String, Instant>>,
}

impl ProviderMachines {
    pub fn new(cloud: Arc<dyn CloudProvider>) -> Self {
        ProviderMachines {
            cloud,
            first_seen: Mutex::new(BTreeMap::new()),
        }
    }
}

#[async_trait]
impl Machines for ProviderMachines {
    async fn machines(&self, claims: &Claims) -> Result<Vec<SimInstance>, CloudError> {
        let listed = self.cloud.list().await?;
        let now = Instant::now();
        let mut seen = self.first_seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.retain(|id, _| listed.iter().any(|i| &i.provider_id == id));
        Ok(listed
            .into_iter()
            .filter_map(|i| {
                let claim = claims.get(i.nodeclaim()?)?;
                let at = *seen.entry(i.provider_id.clone()).or_insert(now);
                machine(i, claim, at)
            })
            .collect())
    }

    fn boot_time(&self) -> Duration {
        Duration::ZERO
    }
}

/// The simulated cloud's instances as an agent in a process of its own sees them, through the
/// NodeClaims (as kwok sees upstream's kwok provider's instances through its Nodes): each claim
/// whose status names its instance and capacity stands for a running instance. Once the claim
/// is being deleted the instance runs on while its registered Node drains, and shuts down
/// when the controller terminates it or if it never registered (the controller then deletes
/// its Node, and the agent must not register it again); it is gone with the claim. Boot time
/// is the simulated cloud's, counted from when the agent first saw the claim so. What the
/// cloud does behind the controller's back (an instance terminated, say) does not show here
/// until the controller acts on it.
pub struct ClaimMachines {
    boot_time: Duration,
    first_seen: Mutex<BTreeMap<String, Instant>>,
}

impl ClaimMachines {
    pub fn new(boot_time: Duration) -> Self {
        ClaimMachines {
            boot_time,
            first_seen: Mutex::new(BTreeMap::new()),
        }
    }
}

#[async_trait]
impl Machines for ClaimMachines {
    async fn machines(&self, claims: &Claims) -> Result<Vec<SimInstance>, CloudError> {
        let now = Instant::now();
        let mut seen = self.first_seen.lock().unwrap_or_else(|e| e.into_inner());
        let machines: Vec<SimInstance> = claims
            .iter()
            .filter_map(|(name, claim)| {
                let instance = claimed_instance(name, claim)?;
                let at = *seen.entry(instance.provider_id.clone()).or_insert(now);
                machine(instance, claim, at)
            })
            .collect();
        seen.retain(|id, _| machines.iter().any(|m| &m.instance.provider_id == id));
        Ok(machines)
    }

    fn boot_time(&self) -> Duration {
        self.boot_time
    }
}

/// The instance a claim's status and labels describe; `None` before the launch wrote its
/// provider id.
fn claimed_instance(name: &str, claim: &NodeClaim) -> Option<Instance> {
    let provider_id = claim.status.as_ref()?.provider_id.clone()?;
    let label = |key: &str| {
        claim
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(key))
            .cloned()
            .unwrap_or_default()
    };
    let status = claim.status.as_ref()?;
    let state = if claim.metadata.deletion_timestamp.is_none() || draining(status) {
        InstanceState::Running
    } else {
        InstanceState::ShuttingDown
    };
    Some(Instance {
        provider_id,
        instance_type: label(labels::INSTANCE_TYPE),
        zone: label(labels::ZONE),
        capacity_type: CapacityType::parse(&label(labels::CAPACITY_TYPE))
            .unwrap_or(CapacityType::OnDemand),
        image_id: status.image_id.clone(),
        state,
        launched_at: None,
        tags: BTreeMap::from([(tags::NODECLAIM.to_string(), name.to_string())]),
    })
}

/// Whether a claim being deleted still has its instance running: its Node registered and
/// the controller not yet terminating the instance (its `InstanceTerminating` condition). The
/// kubelet runs on through the drain, deleting the pods evicted from it, as on EC2; a
/// kubelet stopped at the claim's deletion left every evicted pod with a grace period
/// terminating until the drain gave up on it. An instance not yet registered registers no
/// more.
fn draining(status: &NodeClaimStatus) -> bool {
    let terminating = status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == INSTANCE_TERMINATING && c.status == "True");
    status.node_name.is_some() && !terminating
}

/// The claim condition the controller sets once it has asked the cloud to terminate the
/// instance (upstream's `InstanceTerminating`).
pub const INSTANCE_TERMINATING: &str = "InstanceTerminating";

/// The record of one instance launched for `claim`; `None` until the claim's status says
/// what the instance holds (the controller writes it right after the launch).
pub fn machine(instance: Instance, claim: &NodeClaim, seen: Instant) -> Option<SimInstance> {
    let status = claim.status.as_ref()?;
    let capacity = resources(status.capacity.as_ref()?);
    let allocatable = resources(status.allocatable.as_ref()?);
    let labels = BTreeMap::from([
        (
            labels::INSTANCE_TYPE.to_string(),
            instance.instance_type.clone(),
        ),
        (labels::ZONE.to_string(), instance.zone.clone()),
        (
            labels::CAPACITY_TYPE.to_string(),
            instance.capacity_type.as_str().to_string(),
        ),
    ]);
    Some(SimInstance::for_tests(
        instance,
        capacity,
        allocatable,
        labels,
        seen,
    ))
}

/// Amounts that do not parse are left out: the agent reports what it can read.
fn resources(list: &ResourceList) -> Resources {
    let mut r = Resources::new();
    for (name, q) in list {
        if let Ok(amount) = parse_resource(name, &q.text()) {
            r.set(name, amount);
        }
    }
    r
}
