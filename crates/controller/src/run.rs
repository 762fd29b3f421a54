//! Assembling the controller around a real API server: the clients (throttled, with the test
//! fault layer when asked), the watchers into the state, the lease gating every writer, the
//! conversion webhook, the metrics and health servers and the periodic cluster-state gauges.
//! The loops that decide and act start in [`loops`], from one [`Context`]. The cloud provider
//! is chosen by the caller.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use nodewright_cloud::{CloudProvider, InterruptionSource};
use thiserror::Error;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::clock::Clock;
use crate::context::Context;
use crate::events::{Event, EventSink, KubeEvents};
use crate::failpoint;
use crate::faults::Injector;
use crate::faults::cloud::FaultyCloud;
use crate::faults::kube::KubeFaults;
use crate::health;
use crate::leader::{self, KubeLeaseStore, LeaseConfig};
use crate::metrics::Metrics;
use crate::settings::Settings;
use crate::state::gauges::StateMetrics;
use crate::state::{ClusterState, Kind, SharedState, lock};
use crate::supervise::Supervisor;
use crate::throttle::{self, Throttle};
use crate::watch as watchers;
use crate::write::kube::{KubeApi, without_retry};
use crate::write::{KubeWriter, LeaderGate};

mod loops;
pub use loops::spawn_all;

#[derive(Debug, Error)]
pub enum RunError {
    #[error("building the kubernetes client: {0}")]
    Client(#[from] kube::Error),
    #[error("the conversion webhook cannot start: {0}")]
    Webhook(#[from] crate::webhook::WebhookError),
    #[error("the {name} loop kept stopping ({why}); exiting so the process starts afresh")]
    LoopStopped { name: &'static str, why: String },
    #[error("leader election stopped ({why}); exiting so the process starts afresh")]
    ElectionStopped { why: String },
}

/// How often the per-object loops (lifecycle, termination) pass over the state.
const RECONCILE_EVERY: Duration = Duration::from_secs(1);

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
    let metrics = Arc::new(Metrics::new());
    let (kube_faults, cloud) = faults(&settings, &metrics, cloud);
    if let Some(point) = settings.test_failpoint {
        warn!(failpoint = %point, "TEST ONLY: {} exits the process there", failpoint::ENV);
        failpoint::arm(point);
    }
    let throttle = Throttle::new(settings.kube_client_qps, settings.kube_client_burst);
    let client = throttle::client(config.clone(), &throttle, kube_faults.as_ref())?;
    let write_client = throttle::client(without_retry(config), &throttle, kube_faults.as_ref())?;
    let state = ClusterState::shared();

    let (mut election, leader) = if settings.leader_election_enabled() {
        let election = leader::spawn(
            Arc::new(KubeLeaseStore::new(client.clone())),
            LeaseConfig::from_settings(&settings, &identity),
        );
        let leader = election.leader.clone();
        (Some(election), leader)
    } else {
        (None, watch::channel(true).1)
    };
    let mut loops = Supervisor::new();
    // Before the watchers: objects still stored as v1beta1 are read through the webhook.
    if let Ok(Some(target)) = settings.webhook.target() {
        let addr = SocketAddr::new(settings.listen_address, settings.webhook.webhook_port);
        crate::webhook::start(&mut loops, client.clone(), target, addr).await?;
    }
    for kind in Kind::ALL {
        let (client, state) = (client.clone(), state.clone());
        loops.spawn(kind.name(), move || {
            watchers::watch(client.clone(), state.clone(), kind)
        });
    }
    loops.spawn("leader metrics", {
        let (leader, metrics) = (leader.clone(), metrics.clone());
        let name = settings.leader_election_name.clone();
        move || crate::leader::metrics::follow_leader(leader.clone(), metrics.clone(), name.clone())
    });
    let writer: Arc<dyn KubeWriter> = Arc::new(LeaderGate::new(
        Arc::new(KubeApi::new(write_client)),
        leader.clone(),
    ));

    let events: Arc<dyn EventSink> = Arc::new(LeaderEvents {
        inner: Arc::new(
            KubeEvents::new(client.clone(), COMPONENT, &mut loops).with_metrics(metrics.clone()),
        ),
        leader: leader.clone(),
    });

    let clock = Clock::system();
    spawn_servers(&mut loops, &settings, &state, &metrics, clock);

    let ctx = Context {
        state: state.clone(),
        writer: writer.clone(),
        cloud: cloud.clone(),
        clock,
        metrics: metrics.clone(),
        events: events.clone(),
    };
    loops::spawn_all(&mut loops, &ctx, &settings, leader, interruption);
    info!(identity = %identity, "controller started");
    let election_stopped = async {
        match election.as_mut() {
            Some(e) => e.ended().await,
            None => std::future::pending().await,
        }
    };
    let outcome = tokio::select! {
        () = shutdown_signal() => {
            info!("shutting down");
            Ok(())
        }
        gave_up = loops.watch() => Err(RunError::LoopStopped {
            name: gave_up.name,
            why: gave_up.why,
        }),
        why = election_stopped => Err(RunError::ElectionStopped { why }),
    };
    if let Some(election) = election {
        // A successor takes over at once instead of waiting out the lease.
        if tokio::time::timeout(RELEASE_WITHIN, election.release())
            .await
            .is_err()
        {
            warn!("the lease was not released in time; a successor waits for it to expire");
        }
    }
    outcome
}

/// The cluster-state gauges, which also say when the controller is ready (every watch has
/// listed and every loop runs), and the metrics and health servers.
fn spawn_servers(
    loops: &mut Supervisor,
    settings: &Settings,
    state: &SharedState,
    metrics: &Arc<Metrics>,
    clock: Clock,
) {
    let (ready_tx, ready_rx) = watch::channel(false);
    let observe = !settings.disable_cluster_state_observability;
    spawn_state_metrics(loops, state, metrics, clock, observe, ready_tx);
    let metrics_addr = SocketAddr::new(settings.listen_address, settings.metrics_port);
    let health_addr = SocketAddr::new(settings.listen_address, settings.health_probe_port);
    loops.spawn("metrics server", {
        let metrics = metrics.clone();
        move || {
            let metrics = metrics.clone();
            async move {
                if let Err(e) = health::serve_metrics(metrics_addr, metrics).await {
                    warn!(error = %e, "metrics server stopped");
                }
            }
        }
    });
    loops.spawn("health server", move || {
        let ready = ready_rx.clone();
        async move {
            if let Err(e) = health::serve_health(health_addr, ready).await {
                warn!(error = %e, "health server stopped");
            }
        }
    });
}

/// The cluster-state metrics, ticked once a second on `clock`, and readiness: `ready` is
/// true once every watch has listed, while every loop runs. `bench controller` runs the
/// same loop on its paused clock.
pub fn spawn_state_metrics(
    loops: &mut Supervisor,
    state: &SharedState,
    metrics: &Arc<Metrics>,
    clock: Clock,
    observe: bool,
    ready: watch::Sender<bool>,
) {
    let (state, metrics, ready, up) = (state.clone(), metrics.clone(), Arc::new(ready), loops.up());
    loops.spawn("cluster state metrics", move || {
        let (state, metrics, ready, up) =
            (state.clone(), metrics.clone(), ready.clone(), up.clone());
        async move {
            let mut observed = StateMetrics::new(observe, clock);
            loop {
                let synced = {
                    let s = lock(&state);
                    observed.tick(&s, &metrics);
                    s.synced()
                };
                // No receiver (the bench) is not an error.
                let _ = ready.send(synced && *up.borrow());
                clock.sleep_on_grid(Duration::from_secs(1)).await;
            }
        }
    });
}

/// The test-only fault injection of `NODEWRIGHT_TEST_FAULTS`: the layer for the Kubernetes
/// clients and the cloud behind a faulty front, or neither and the cloud as it was.
fn faults(
    settings: &Settings,
    metrics: &Arc<Metrics>,
    cloud: Arc<dyn CloudProvider>,
) -> (Option<KubeFaults>, Arc<dyn CloudProvider>) {
    let Some(plan) = &settings.test_faults else {
        return (None, cloud);
    };
    warn!(plan = %plan, "TEST ONLY: {} fails calls on purpose", crate::faults::ENV);
    let kube = Injector::new("kube", plan, metrics.clone()).map(KubeFaults);
    let cloud = match Injector::new("cloud", plan, metrics.clone()) {
        Some(injector) => FaultyCloud::wrap(cloud, injector),
        None => cloud,
    };
    (kube, cloud)
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
    use crate::events::{MemoryEvents, ObjectRef};
    use crate::provisioner::events::nominated;

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
