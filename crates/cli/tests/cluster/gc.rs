//! Garbage collection after a crash, on moto (whose instances outlive the controller): the
//! controller exits at a test-only failpoint (`NODEWRIGHT_TEST_FAILPOINT`) between the cloud's
//! launch and the NodeClaim's status write, and again between an instance's termination and
//! the finalizer's release; a fresh process finishes each job within upstream's garbage
//! collection period (2 minutes): the claim launched with no instance left unnamed (the
//! provider takes the first instance over by its claim tag, or garbage collection terminates
//! it), then the terminated claim and its Node gone, with nothing left running.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::aws::{CLUSTER, agent, controller, manifests, wait_running};
use crate::kit::controller::Controller;
use crate::kit::inflate;
use crate::kit::moto::{Moto, World};
use crate::kit::read::{self, name};
use crate::kit::{ControlPlane, eventually};

/// Upstream's garbage collection runs every two minutes.
const GC_PERIOD: Duration = Duration::from_secs(120);

/// The process's exit status at a failpoint (`failpoint::EXIT_CODE`).
const FAILPOINT_EXIT: i32 = 86;

fn live(moto: &Moto) -> Vec<Value> {
    moto.instances(CLUSTER)
        .into_iter()
        .filter(|i| i["state"] == "running" || i["state"] == "pending")
        .collect()
}

/// A controller with a short lease, so a successor waits little for a dead one's, and
/// `failpoint` armed if given.
fn start(cp: &ControlPlane, moto: &Moto, world: &World, failpoint: Option<&str>) -> Controller {
    let mut launch = controller(cp, moto, world, "ctl").env("LEADER_ELECTION_LEASE_DURATION", "6s");
    if let Some(point) = failpoint {
        launch = launch.env("NODEWRIGHT_TEST_FAILPOINT", point);
    }
    launch.start()
}

async fn exits_at_failpoint(ctl: &mut Controller, point: &str) {
    let status = eventually(
        Duration::from_secs(180),
        &format!("exit at {point}"),
        || {
            let status = ctl.exited();
            async move { status }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
    assert_eq!(status.code(), Some(FAILPOINT_EXIT), "{}", ctl.log_text());
    assert!(
        ctl.log_text().contains("failpoint reached"),
        "{}",
        ctl.log_text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_killed_mid_launch_or_mid_termination_leaves_nothing_behind() {
    let Some(cp) = ControlPlane::start("gc-failpoints") else {
        return;
    };
    cp.install_crds();
    let moto = Moto::start(cp.dir.join("moto.log")).await;
    let world = moto.world(CLUSTER);
    let _agent = agent(&cp, &moto);
    let client = cp.client().await;

    // Dies after the launch: the instance runs, the claim does not name it.
    let mut ctl = start(&cp, &moto, &world, Some("after-launch"));
    ctl.wait_ready().await;
    cp.apply(&manifests(&world, "on-demand", 100)).unwrap();
    cp.apply(&inflate(1)).unwrap();
    exits_at_failpoint(&mut ctl, "after-launch").await;
    let leaked = live(&moto);
    assert_eq!(leaked.len(), 1, "{leaked:#?}");
    let leaked_id = leaked[0]["id"].as_str().unwrap().to_string();
    let claims = read::nodeclaims(&client).await;
    assert_eq!(claims.len(), 1, "{claims:#?}");
    assert!(claims[0]["status"]["providerID"].is_null(), "{claims:#?}");
    let claim = name(&claims[0]).to_string();

    let restarted = Instant::now();
    let mut ctl = start(&cp, &moto, &world, None);
    // The AWS provider may take the instance over for the claim (it carries the claim's tag)
    // or launch anew and leave it to garbage collection; either way no live instance is
    // left without a live claim naming it.
    eventually(
        GC_PERIOD,
        "the claim launched and every live instance named by a live claim",
        || {
            let (client, moto, claim) = (&client, &moto, &claim);
            async move {
                let claims = read::nodeclaims(client).await;
                let named: Vec<&str> = claims
                    .iter()
                    .filter_map(|c| c["status"]["providerID"].as_str())
                    .collect();
                let launched = claims
                    .iter()
                    .any(|c| name(c) == claim && c["status"]["providerID"].is_string());
                let alive = live(moto);
                let owned = alive.iter().all(|i| {
                    let id = i["id"].as_str().unwrap_or_default();
                    named.iter().any(|p| p.ends_with(id))
                });
                (launched && owned).then_some(())
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}: {:#?}\n{}", live(&moto), ctl.log_text()));
    let adopted = read::nodeclaims(&client).await.iter().any(|c| {
        c["status"]["providerID"]
            .as_str()
            .is_some_and(|p| p.ends_with(leaked_id.as_str()))
    });
    let launch_gc = restarted.elapsed();
    wait_running(&client, 1, Duration::from_secs(120), &ctl.log_text()).await;

    // Dies after the termination: the instance is going, the finalizer still on.
    ctl.terminate();
    let mut ctl = start(&cp, &moto, &world, Some("after-terminate"));
    ctl.wait_ready().await;
    cp.kubectl(&["scale", "deployment/inflate", "--replicas=0"]);
    exits_at_failpoint(&mut ctl, "after-terminate").await;
    let lingering = read::nodeclaims(&client).await.len() + read::nodes(&client).await.len();
    assert!(
        lingering > 0,
        "the claim or its Node still holds a finalizer"
    );

    let restarted = Instant::now();
    let ctl = start(&cp, &moto, &world, None);
    eventually(GC_PERIOD, "no claim, no Node, no live instance", || {
        let (client, moto) = (&client, &moto);
        async move {
            (read::nodeclaims(client).await.is_empty()
                && read::nodes(client).await.is_empty()
                && live(moto).is_empty())
            .then_some(())
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
    eprintln!(
        "gc: after a death between launch and status write, the claim was launched with \
         nothing leaked {:.1} s after the restart (the instance {}); after a death between \
         termination and finalizer release, everything was gone {:.1} s after it",
        launch_gc.as_secs_f64(),
        if adopted {
            "taken over"
        } else {
            "terminated by garbage collection"
        },
        restarted.elapsed().as_secs_f64()
    );
}
