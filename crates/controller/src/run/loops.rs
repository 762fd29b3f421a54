//! The controller's loops, started under one supervisor from what they share ([`Context`]):
//! provisioner, NodeClaim lifecycle, termination, disruption, pod events, status, garbage
//! collection, consistency, tagging, instance health, capacity-reservation upkeep, cloud
//! metrics; zonal shifts (`ENABLE_ZONAL_SHIFT`), static capacity and node repair behind their
//! settings; interruption notices when a source is given. The same set and cadence run
//! whether the context writes to a real API server (`run`) or to the in-memory one (the test
//! that runs one scenario through the controller and the simulator, `tests/shells.rs`).

use std::sync::{Arc, Mutex};

use nodewright_cloud::InterruptionSource;
use nodewright_core::cadence::BatchWindow;
use nodewright_core::scheduling::NodeCache;
use tokio::sync::watch;
use tracing::warn;

use super::{RECONCILE_EVERY, Supervisor};
use crate::cloud_metrics::CloudMetrics;
use crate::consistency::Consistency;
use crate::context::Context;
use crate::disruption::Disruptor;
use crate::gc::GarbageCollector;
use crate::interruption::InterruptionController;
use crate::interruption::health::InstanceHealthController;
use crate::interruption::reservations::ReservationController;
use crate::lifecycle::Lifecycle;
use crate::metered::MeteredCloud;
use crate::metrics::Reconciler;
use crate::podevents::PodEvents;
use crate::provisioner::Provisioner;
use crate::repair::NodeRepair;
use crate::settings::Settings;
use crate::static_capacity::StaticCapacity;
use crate::status::{STATUS_EVERY, StatusController};
use crate::tagging::TaggingController;
use crate::termination::Termination;
use crate::zonalshift::ZonalShiftController;

/// Starts every loop of the controller under `loops`, writing through `ctx` while `leader`
/// says this replica leads; with an `interruption` source the leader also handles its
/// notices. Returns the disruption loop, whose journal a caller may read.
pub fn spawn_all(
    loops: &mut Supervisor,
    ctx: &Context,
    settings: &Settings,
    leader: watch::Receiver<bool>,
    interruption: Option<Arc<dyn InterruptionSource>>,
) -> Arc<Disruptor> {
    if let Some(source) = interruption {
        let handler = InterruptionController::new(ctx, source).with_leader(leader.clone());
        let handler = Arc::new(handler);
        let r = reconciler(ctx, "interruption");
        loops.spawn("interruption", move || handler.clone().run(r.clone()));
    }
    ctx.cloud.observe_with(ctx.metrics.clone());
    spawn_cloud_loops(loops, ctx, settings, &leader);
    spawn_gated_loops(loops, ctx, settings, &leader);
    spawn_claim_loops(loops, ctx, settings, leader)
}

/// `ctx` with its cloud calls counted under `controller`, as upstream labels them.
fn metered(ctx: &Context, controller: &'static str) -> Context {
    ctx.with_cloud(MeteredCloud::wrap(
        ctx.cloud.clone(),
        ctx.metrics.clone(),
        controller,
    ))
}

fn reconciler(ctx: &Context, controller: &'static str) -> Reconciler {
    Reconciler::new(ctx.metrics.clone(), controller)
}

/// The loops that watch the cloud rather than the cluster: its metrics, instance health,
/// capacity reservations, zonal shifts (`ENABLE_ZONAL_SHIFT`) and instance tags.
fn spawn_cloud_loops(
    loops: &mut Supervisor,
    ctx: &Context,
    settings: &Settings,
    leader: &watch::Receiver<bool>,
) {
    const METRICS: &str = "cloudprovider.metrics";
    let cloud_metrics =
        Arc::new(CloudMetrics::new(&metered(ctx, METRICS)).with_leader(leader.clone()));
    let r = reconciler(ctx, METRICS);
    loops.spawn("cloud metrics", move || {
        cloud_metrics.clone().run(r.clone())
    });
    const HEALTH: &str = "interruption.instancestatus";
    let health =
        Arc::new(InstanceHealthController::new(&metered(ctx, HEALTH)).with_leader(leader.clone()));
    let r = reconciler(ctx, HEALTH);
    loops.spawn("instance health", move || health.clone().run(r.clone()));
    const RESERVATIONS: &str = "capacityreservation.capacitytype";
    let reservations = Arc::new(
        ReservationController::new(&metered(ctx, RESERVATIONS)).with_leader(leader.clone()),
    );
    let r = reconciler(ctx, RESERVATIONS);
    loops.spawn("capacity reservations", move || {
        reservations.clone().run(r.clone())
    });
    if settings.enable_zonal_shift {
        const SHIFTS: &str = "zonalshift";
        let shifts =
            Arc::new(ZonalShiftController::new(&metered(ctx, SHIFTS)).with_leader(leader.clone()));
        let r = reconciler(ctx, SHIFTS);
        loops.spawn("zonal shifts", move || shifts.clone().run(r.clone()));
    }
    const TAGGING: &str = "nodeclaim.tagging";
    let tagging =
        Arc::new(TaggingController::new(&metered(ctx, TAGGING)).with_leader(leader.clone()));
    let r = reconciler(ctx, TAGGING);
    loops.spawn("tagging", move || {
        tagging.clone().run(crate::tagging::CHECK_EVERY, r.clone())
    });
}

/// The loops behind feature gates: static capacity and node repair.
fn spawn_gated_loops(
    loops: &mut Supervisor,
    ctx: &Context,
    settings: &Settings,
    leader: &watch::Receiver<bool>,
) {
    if settings.feature_gates.static_capacity {
        let statics = Arc::new(StaticCapacity::new(ctx).with_leader(leader.clone()));
        let r = reconciler(ctx, "static.provisioning");
        loops.spawn("static capacity", move || statics.clone().run(r.clone()));
    }
    if settings.feature_gates.node_repair {
        match NodeRepair::new(ctx) {
            Some(repair) => {
                let repair = Arc::new(repair.with_leader(leader.clone()));
                let r = reconciler(ctx, "node.health");
                loops.spawn("node repair", move || repair.clone().run(r.clone()));
            }
            None => warn!("NodeRepair=true, but the cloud provider has no repair policies"),
        }
    }
}

/// The loops of a NodeClaim's life: consistency, provisioning, the lifecycle, termination,
/// pod events, disruption (returned), status and garbage collection.
fn spawn_claim_loops(
    loops: &mut Supervisor,
    ctx: &Context,
    settings: &Settings,
    leader: watch::Receiver<bool>,
) -> Arc<Disruptor> {
    let consistency = Arc::new(Consistency::new(ctx).with_leader(leader.clone()));
    let r = reconciler(ctx, "nodeclaim.consistency");
    loops.spawn("nodeclaim consistency", move || {
        consistency.clone().run(r.clone())
    });
    // The provisioner and disruption solve the same cluster: one keeps what the other compiled.
    let compiles = Arc::new(Mutex::new(NodeCache::default()));
    let provisioner = Arc::new(
        Provisioner::new(ctx)
            .with_options(settings.scheduling_options())
            .with_compiles(compiles.clone())
            .with_cpus(settings.cpus())
            .with_leader(leader.clone()),
    );
    let window = BatchWindow {
        idle: settings.batch_idle_duration,
        max: settings.batch_max_duration,
    };
    let r = reconciler(ctx, "provisioner");
    loops.spawn("provisioner", move || {
        provisioner.clone().run(window, r.clone())
    });
    let lifecycle = Arc::new(
        Lifecycle::new(ctx)
            .with_cpus(settings.cpus())
            .with_leader(leader.clone()),
    );
    let r = reconciler(ctx, "nodeclaim.lifecycle");
    loops.spawn("nodeclaim lifecycle", move || {
        lifecycle.clone().run(RECONCILE_EVERY, r.clone())
    });
    let termination = Arc::new(Termination::new(ctx).with_leader(leader.clone()));
    let r = reconciler(ctx, "node.termination");
    loops.spawn("termination", move || {
        termination.clone().run(RECONCILE_EVERY, r.clone())
    });
    let pod_events = Arc::new(PodEvents::new(ctx).with_leader(leader.clone()));
    let r = reconciler(ctx, "pod.events");
    loops.spawn("pod events", move || {
        pod_events.clone().run(RECONCILE_EVERY, r.clone())
    });
    let status = Arc::new(StatusController::new(ctx).with_leader(leader.clone()));
    let gc = Arc::new(GarbageCollector::new(ctx).with_leader(leader.clone()));
    let disruptor = Arc::new(
        Disruptor::new(ctx)
            .with_policies(
                settings.consolidation_features(),
                settings.scheduling_options(),
            )
            .with_compiles(compiles)
            .with_leader(leader),
    );
    let r = reconciler(ctx, "disruption");
    let running = disruptor.clone();
    loops.spawn("disruption", move || running.clone().run(r.clone()));
    let r = reconciler(ctx, "status");
    loops.spawn("status", move || {
        status.clone().run(STATUS_EVERY, r.clone())
    });
    let r = reconciler(ctx, "nodeclaim.garbagecollection");
    loops.spawn("garbage collection", move || gc.clone().run(r.clone()));
    disruptor
}
