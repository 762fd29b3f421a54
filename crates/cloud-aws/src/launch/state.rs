//! What launches share across calls: the caches (templates, resolved classes, unavailable
//! offerings, reservations, subnet addresses), the CreateFleet implementation and how nodes
//! reach the cluster.

use std::sync::{Arc, Mutex, MutexGuard};

use nodewright_aws_model::ice::UnavailableOfferings;
use nodewright_aws_model::reservations::ReservationLedger;
use nodewright_aws_model::subnets::InflightAddresses;
use nodewright_core::time::Timestamp;

use super::{BatchingFleet, ClusterInfo, FleetApi, SdkFleet, TemplateCache, resolved};
use crate::AwsClients;
use crate::cloud::now;

/// What launches share across calls: the template cache, the unavailable-offerings cache, the
/// CreateFleet implementation and how nodes reach the cluster.
pub struct LaunchState {
    pub templates: TemplateCache,
    pub resolved: resolved::ResolvedCache,
    pub(super) hydrated: std::sync::atomic::AtomicBool,
    pub(super) unavailable: Mutex<UnavailableOfferings>,
    pub(super) reservations: Mutex<ReservationLedger>,
    pub(super) addresses: Mutex<InflightAddresses>,
    pub(super) fleet: Arc<dyn FleetApi>,
    pub(super) cluster: crate::cluster::ClusterFacts,
    /// When this process began launching: a claim created before may already have an
    /// instance from the process before it.
    pub(super) started: Timestamp,
}

impl LaunchState {
    /// Launch state whose batched CreateFleet calls are reported to `observer`.
    /// Resolved node classes are reused for `resolve_every`.
    pub fn new(
        clients: &AwsClients,
        observer: &crate::observe::Observer,
        resolve_every: std::time::Duration,
    ) -> Self {
        LaunchState {
            templates: TemplateCache::default(),
            resolved: resolved::ResolvedCache::new(resolve_every),
            hydrated: std::sync::atomic::AtomicBool::new(false),
            started: now(),
            unavailable: Mutex::new(UnavailableOfferings::new()),
            reservations: Mutex::new(ReservationLedger::new()),
            addresses: Mutex::new(InflightAddresses::new()),
            fleet: Arc::new(
                BatchingFleet::new(Arc::new(SdkFleet::new(clients.clone())), clients.clone())
                    .observed_by(observer.clone()),
            ),
            cluster: Default::default(),
        }
    }

    /// The unavailable-offerings cache (also for marking offerings from interruption events
    /// and for applying availability to listed instance types).
    pub fn unavailable(&self) -> MutexGuard<'_, UnavailableOfferings> {
        self.unavailable.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Free instances per capacity reservation: EC2's last count, adjusted by launches and
    /// refusals since.
    pub fn reservations(&self) -> MutexGuard<'_, ReservationLedger> {
        self.reservations.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Free addresses per subnet: the last DescribeSubnets count less what launches since are
    /// predicted to have taken.
    pub fn addresses(&self) -> MutexGuard<'_, InflightAddresses> {
        self.addresses.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How nodes reach the cluster, as currently known.
    pub fn cluster(&self) -> ClusterInfo {
        self.cluster.current()
    }
}
