//! The controller's loops, started under one supervisor from what they share ([`Context`]):
//! provisioner, NodeClaim lifecycle, termination, disruption, pod events, status, garbage
//! collection, consistency, tagging, instance health, capacity-reservation upkeep, cloud
//! metrics; zonal shifts (`ENABLE_ZONAL_SHIFT`), static capacity and node repair behind their
//! settings; interruption notices when a source is given. The same set and cadence run
//! whether the context writes to a real API server (`run`) or to the in-memory one (the test
//! that runs one scenario through the controller and the simulator, `tests/shells.rs`).

use std::sync::Arc;

use nodewright_cloud::InterruptionSource;
use nodewright_core::cadence::BatchWindow;
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
    let (cloud, metrics) = (&ctx.cloud, &ctx.metrics);
    let provisioner = Arc::new(
        Provisioner::new(ctx)
            .with_options(settings.scheduling_options())
            .with_cpus(settings.cpus())
            .with_leader(leader.clone()),
    );
    let lifecycle = Arc::new(
        Lifecycle::new(ctx)
            .with_cpus(settings.cpus())
            .with_leader(leader.clone()),
    );
    let termination = Arc::new(Termination::new(ctx).with_leader(leader.clone()));
    let status = Arc::new(StatusController::new(ctx).with_leader(leader.clone()));
    let gc = Arc::new(GarbageCollector::new(ctx).with_leader(leader.clone()));
    if let Some(source) = interruption {
        let handler = InterruptionController::new(ctx, source).with_leader(leader.clone());
        let handler = Arc::new(handler);
        let r = Reconciler::new(metrics.clone(), "interruption");
        loops.spawn("interruption", move || handler.clone().run(r.clone()));
    }
    cloud.observe_with(metrics.clone());
    let cloud_metrics = CloudMetrics::new(&ctx.with_cloud(MeteredCloud::wrap(
        cloud.clone(),
        metrics.clone(),
        "cloudprovider.metrics",
    )))
    .with_leader(leader.clone());
    let cloud_metrics = Arc::new(cloud_metrics);
    let r = Reconciler::new(metrics.clone(), "cloudprovider.metrics");
    loops.spawn("cloud metrics", move || {
        cloud_metrics.clone().run(r.clone())
    });
    let health = InstanceHealthController::new(&ctx.with_cloud(MeteredCloud::wrap(
        cloud.clone(),
        metrics.clone(),
        "interruption.instancestatus",
    )))
    .with_leader(leader.clone());
    let health = Arc::new(health);
    let r = Reconciler::new(metrics.clone(), "interruption.instancestatus");
    loops.spawn("instance health", move || health.clone().run(r.clone()));
    let reservations = ReservationController::new(&ctx.with_cloud(MeteredCloud::wrap(
        cloud.clone(),
        metrics.clone(),
        "capacityreservation.capacitytype",
    )))
    .with_leader(leader.clone());
    let reservations = Arc::new(reservations);
    let r = Reconciler::new(metrics.clone(), "capacityreservation.capacitytype");
    loops.spawn("capacity reservations", move || {
        reservations.clone().run(r.clone())
    });
    if settings.enable_zonal_shift {
        let shifts = ZonalShiftController::new(&ctx.with_cloud(MeteredCloud::wrap(
            cloud.clone(),
            metrics.clone(),
            "zonalshift",
        )))
        .with_leader(leader.clone());
        let shifts = Arc::new(shifts);
        let r = Reconciler::new(metrics.clone(), "zonalshift");
        loops.spawn("zonal shifts", move || shifts.clone().run(r.clone()));
    }
    let tagging = TaggingController::new(&ctx.with_cloud(MeteredCloud::wrap(
        cloud.clone(),
        metrics.clone(),
        "nodeclaim.tagging",
    )))
    .with_leader(leader.clone());
    let tagging = Arc::new(tagging);
    let r = Reconciler::new(metrics.clone(), "nodeclaim.tagging");
    loops.spawn("tagging", move || {
        tagging.clone().run(crate::tagging::CHECK_EVERY, r.clone())
    });
    let pod_events = Arc::new(PodEvents::new(ctx).with_leader(leader.clone()));
    if settings.feature_gates.static_capacity {
        let statics = Arc::new(StaticCapacity::new(ctx).with_leader(leader.clone()));
        let r = Reconciler::new(metrics.clone(), "static.provisioning");
        loops.spawn("static capacity", move || statics.clone().run(r.clone()));
    }
    if settings.feature_gates.node_repair {
        match NodeRepair::new(ctx) {
            Some(repair) => {
                let repair = Arc::new(repair.with_leader(leader.clone()));
                let r = Reconciler::new(metrics.clone(), "node.health");
                loops.spawn("node repair", move || repair.clone().run(r.clone()));
            }
            None => warn!("NodeRepair=true, but the cloud provider has no repair policies"),
        }
    }
    let consistency = Arc::new(Consistency::new(ctx).with_leader(leader.clone()));
    let r = Reconciler::new(metrics.clone(), "nodeclaim.consistency");
    loops.spawn("nodeclaim consistency", move || {
        consistency.clone().run(r.clone())
    });
    let disruptor = Arc::new(
        Disruptor::new(ctx)
            .with_policies(
                settings.consolidation_features(),
                settings.scheduling_options(),
            )
            .with_leader(leader),
    );
    let window = BatchWindow {
        idle: settings.batch_idle_duration,
        max: settings.batch_max_duration,
    };
    let r = Reconciler::new(metrics.clone(), "provisioner");
    loops.spawn("provisioner", move || {
        provisioner.clone().run(window, r.clone())
    });
    let r = Reconciler::new(metrics.clone(), "nodeclaim.lifecycle");
    loops.spawn("nodeclaim lifecycle", move || {
        lifecycle.clone().run(RECONCILE_EVERY, r.clone())
    });
    let r = Reconciler::new(metrics.clone(), "node.termination");
    loops.spawn("termination", move || {
        termination.clone().run(RECONCILE_EVERY, r.clone())
    });
    let r = Reconciler::new(metrics.clone(), "pod.events");
    loops.spawn("pod events", move || {
        pod_events.clone().run(RECONCILE_EVERY, r.clone())
    });
    let r = Reconciler::new(metrics.clone(), "disruption");
    let running = disruptor.clone();
    loops.spawn("disruption", move || running.clone().run(r.clone()));
    let r = Reconciler::new(metrics.clone(), "status");
    loops.spawn("status", move || {
        status.clone().run(STATUS_EVERY, r.clone())
    });
    let r = Reconciler::new(metrics.clone(), "nodeclaim.garbagecollection");
    loops.spawn("garbage collection", move || gc.clone().run(r.clone()));
    disruptor
}
