//! Assembling the controller: watchers into the state, the lease gating every writer, the
//! metrics and health servers, the periodic cluster-state gauges, and the loops
//! (provisioner, lifecycle, termination, disruption, pod events, status, garbage collection,
//! instance health, capacity-reservation upkeep, zonal shifts (with `ENABLE_ZONAL_SHIFT`),
//! instance tagging after registration,
//! instance-type metrics), the first four given the metrics and the event sink. The cloud
//! provider is chosen by the caller.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use nodewright_cloud::{CloudProvider, InterruptionSource};
use nodewright_core::cadence::BatchWindow;
use thiserror::Error;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::clock::Clock;
use crate::cloud_metrics::CloudMetrics;
use crate::disruption::Disruptor;
use crate::events::{Event, EventSink, KubeEvents};
use crate::gc::GarbageCollector;
use crate::health;
use crate::interruption::InterruptionController;
use crate::interruption::health::InstanceHealthController;
use crate::interruption::reservations::ReservationController;
use crate::leader::{self, KubeLeaseStore, LeaseConfig};
use crate::lifecycle::Lifecycle;
use crate::metered::MeteredCloud;
use crate::metrics::Metrics;
use crate::podevents::PodEvents;
use crate::provisioner::Provisioner;
use crate::settings::Settings;
use crate::state::gauges::{self, PodStartup};
use crate::state::{ClusterState, lock};
use crate::status::{STATUS_EVERY, StatusController};
use crate::tagging::TaggingController;
use crate::termination::Termination;
use crate::watch as watchers;
use crate::write::kube::{KubeApi, without_retry};
use crate::write::{KubeWriter, LeaderGate};
use crate::zonalshift::ZonalShiftController;

#[derive(Debug, Error)]
pub enum RunError {
    #[error("building the kubernetes client: {0}")]
    Client(#[from] kube::Error),
}

/// How often the per-object loops (lifecycle, termination) pass over the state.
const RECONCILE_EVERY: Duration = Duration::from_secs(1);

/// How often the cluster-state gauges are refreshed (upstream's node metrics period).
const GAUGES_EVERY: Duration = Duration::from_secs(5);

/// The event source component, as upstream's events name it.
const COMPONENT: &str = "karpenter";

/// Drops events while this replica does not hold the lease: the loops run on every replica
/// (their writes are refused by [`LeaderGate`]), and a standby must not narrate decisions it
/// cannot carry out.
pub struct LeaderEvents {
    pub inner: Arc<dyn EventSink>,
    pub leader: watch::Receiver<bool>,
}

impl EventSink for LeaderEvents {
    fn publish(&self, event: Event) {
        if *self.leader.borrow() {
            self.inner.publish(event);
        }
    }
}

/// Runs until ctrl-c. With an `interruption` source (the AWS provider's queue when
/// `INTERRUPTION_QUEUE` is set) the leader also handles interruption notices.
pub async fn run(
    config: kube::Config,
    cloud: Arc<dyn CloudProvider>,
    interruption: Option<Arc<dyn InterruptionSource>>,
    settings: Settings,
    identity: String,
) -> Result<(), RunError> {
    let client = kube::Client::try_from(config.clone())?;
    let write_client = kube::Client::try_from(without_retry(config))?;
    let metrics = Arc::new(Metrics::new());
    let state = ClusterState::shared();
    let _watchers = watchers::spawn_all(client.clone(), state.clone());

    let (election, leader) = if settings.leader_election_enabled() {
        let election = leader::spawn(
            Arc::new(KubeLeaseStore::new(client.clone())),
            LeaseConfig::from_settings(&settings, &identity),
        );
        let leader = election.leader.clone();
        (Some(election), leader)
    } else {
        (None, watch::channel(true).1)
    };
    tokio::spawn(crate::metrics::operations::follow_leader(
        leader.clone(),
        metrics.clone(),
        settings.leader_election_name.clone(),
    ));
    let writer: Arc<dyn KubeWriter> = Arc::new(LeaderGate::new(
        Arc::new(KubeApi::new(write_client)),
        leader.clone(),
    ));

    let events: Arc<dyn EventSink> = Arc::new(LeaderEvents {
        inner: Arc::new(KubeEvents::new(client.clone(), COMPONENT).with_metrics(metrics.clone())),
        leader: leader.clone(),
    });

    // Ready once every watch has listed.
    let (ready_tx, ready_rx) = watch::channel(false);
    {
        let state = state.clone();
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let mut startup = PodStartup::default();
            let mut last_gauges: Option<std::time::Instant> = None;
            loop {
                let synced = {
                    let s = lock(&state);
                    metrics.cluster_state(s.synced(), s.nodes.len());
                    startup.observe(&s, &metrics);
                    if last_gauges.is_none_or(|t| t.elapsed() >= GAUGES_EVERY) {
                        gauges::set_all(&s, &metrics);
                        last_gauges = Some(std::time::Instant::now());
                    }
                    s.synced()
                };
                let _ = ready_tx.send(synced);
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
    }
    let metrics_addr = SocketAddr::new(settings.listen_address, settings.metrics_port);
    let health_addr = SocketAddr::new(settings.listen_address, settings.health_probe_port);
    tokio::spawn({
        let metrics = metrics.clone();
        async move {
            if let Err(e) = health::serve_metrics(metrics_addr, metrics).await {
                warn!(error = %e, "metrics server stopped");
            }
        }
    });
    tokio::spawn(async move {
        if let Err(e) = health::serve_health(health_addr, ready_rx).await {
            warn!(error = %e, "health server stopped");
        }
    });

    let clock = Clock::system();
    let provisioner = Arc::new(
        Provisioner::new(
            state.clone(),
            writer.clone(),
            cloud.clone(),
            clock,
            metrics.clone(),
            events.clone(),
        )
        .with_leader(leader.clone()),
    );
    let lifecycle = Arc::new(
        Lifecycle::new(
            state.clone(),
            writer.clone(),
            cloud.clone(),
            clock,
            metrics.clone(),
            events.clone(),
        )
        .with_leader(leader.clone()),
    );
    let termination = Arc::new(
        Termination::new(
            state.clone(),
            writer.clone(),
            cloud.clone(),
            clock,
            metrics.clone(),
            events.clone(),
        )
        .with_leader(leader.clone()),
    );
    let status = Arc::new(StatusController::new(
        state.clone(),
        writer.clone(),
        cloud.clone(),
        clock,
        leader.clone(),
    ));
    let gc = Arc::new(GarbageCollector::new(
        state.clone(),
        writer.clone(),
        cloud.clone(),
        clock,
        leader.clone(),
        metrics.clone(),
    ));
    if let Some(source) = interruption {
        let handler = InterruptionController::new(
            state.clone(),
            writer.clone(),
            source,
            clock,
            metrics.clone(),
            events.clone(),
        )
        .with_leader(leader.clone());
        tokio::spawn(Arc::new(handler).run());
    }
    cloud.observe_with(metrics.clone());
    let cloud_metrics = CloudMetrics::new(
        state.clone(),
        MeteredCloud::wrap(cloud.clone(), metrics.clone(), "cloudprovider.metrics"),
        metrics.clone(),
    )
    .with_leader(leader.clone());
    tokio::spawn(Arc::new(cloud_metrics).run());
    let health = InstanceHealthController::new(
        state.clone(),
        writer.clone(),
        MeteredCloud::wrap(
            cloud.clone(),
            metrics.clone(),
            "interruption.instancestatus",
        ),
        clock,
        metrics.clone(),
        events.clone(),
    )
    .with_leader(leader.clone());
    tokio::spawn(Arc::new(health).run());
    let reservations = ReservationController::new(
        state.clone(),
        writer.clone(),
        MeteredCloud::wrap(
            cloud.clone(),
            metrics.clone(),
            "capacityreservation.capacitytype",
        ),
        clock,
    )
    .with_leader(leader.clone());
    tokio::spawn(Arc::new(reservations).run());
    if settings.enable_zonal_shift {
        let shifts = ZonalShiftController::new(
            state.clone(),
            MeteredCloud::wrap(cloud.clone(), metrics.clone(), "zonalshift"),
            metrics.clone(),
            events.clone(),
        )
        .with_leader(leader.clone());
        tokio::spawn(Arc::new(shifts).run());
    }
    let tagging = TaggingController::new(
        state.clone(),
        writer.clone(),
        MeteredCloud::wrap(cloud.clone(), metrics.clone(), "nodeclaim.tagging"),
    )
    .with_leader(leader.clone());
    tokio::spawn(Arc::new(tagging).run(crate::tagging::CHECK_EVERY));
    let pod_events =
        Arc::new(PodEvents::new(state.clone(), writer.clone(), clock).with_leader(leader.clone()));
    let disruptor =
        Arc::new(Disruptor::new(state, writer, cloud, clock, metrics, events).with_leader(leader));
    let window = BatchWindow {
        idle: settings.batch_idle_duration,
        max: settings.batch_max_duration,
    };
    tokio::spawn(provisioner.run(window));
    tokio::spawn(lifecycle.run(RECONCILE_EVERY));
    tokio::spawn(termination.run(RECONCILE_EVERY));
    tokio::spawn(pod_events.run(RECONCILE_EVERY));
    tokio::spawn(disruptor.run());
    tokio::spawn(status.run(STATUS_EVERY));
    tokio::spawn(gc.run());
    info!(identity = %identity, "controller started");
    shutdown_signal().await;
    info!("shutting down");
    if let Some(election) = election {
        // A successor takes over at once instead of waiting out the lease.
        if tokio::time::timeout(RELEASE_WITHIN, election.release())
            .await
            .is_err()
        {
            warn!("the lease was not released in time; a successor waits for it to expire");
        }
    }
    Ok(())
}

/// How long shutdown waits for the lease to be released.
const RELEASE_WITHIN: Duration = Duration::from_secs(5);

/// SIGTERM (what the kubelet and `kill` send) or SIGINT (ctrl-c).
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(e) => {
            warn!(error = %e, "cannot listen for SIGTERM; stopping on ctrl-c only");
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{MemoryEvents, ObjectRef, nominated};

    #[test]
    fn only_the_leader_publishes_events() {
        let sink = Arc::new(MemoryEvents::new());
        let (tx, rx) = watch::channel(false);
        let gated = LeaderEvents {
            inner: sink.clone(),
            leader: rx,
        };
        gated.publish(nominated(ObjectRef::pod("default", "a"), "default-x"));
        assert!(sink.events().is_empty());
        tx.send(true).unwrap();
        gated.publish(nominated(ObjectRef::pod("default", "b"), "default-x"));
        assert_eq!(sink.events().len(), 1);
        assert_eq!(sink.events()[0].regarding.name, "b");
    }
}
