//! High availability and restarts on moto, whose instances outlive the controller (the node
//! agent runs as its own process): two controllers where only the Lease holder writes; the
//! leader killed with SIGKILL mid scale-up and the other finishing the job; a clean shutdown
//! handing the Lease over at once; and a controller killed at random points of a 0 → 50 → 0
//! run, again and again, with every pod bound and, at the end, every instance tagged for the
//! cluster belonging to a live NodeClaim (none leaked, none launched twice).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use nodewright_core::rng::Rng;
use serde_json::Value;

use crate::aws::{CLUSTER, agent, controller, manifests, wait_running};
use crate::kit::controller::Controller;
use crate::kit::inflate;
use crate::kit::moto::{Moto, World};
use crate::kit::read::{self, condition};
use crate::kit::{ControlPlane, eventually};

async fn holder(cp: &ControlPlane) -> String {
    let out = cp.kubectl_output(
        &[
            "get",
            "lease",
            "-n",
            "default",
            "karpenter-leader-election",
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ],
        None,
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Instances per NodeClaim tag, over every instance moto ever launched for the cluster.
fn launches_per_claim(moto: &Moto) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for i in moto.instances(CLUSTER) {
        if let Some(c) = i["tags"]["karpenter.sh/nodeclaim"].as_str() {
            *out.entry(c.to_string()).or_insert(0) += 1;
        }
    }
    out
}

fn live_instances(moto: &Moto) -> Vec<Value> {
    moto.instances(CLUSTER)
        .into_iter()
        .filter(|i| i["state"] == "running" || i["state"] == "pending")
        .collect()
}

/// No claim launched twice, and every live instance belongs to a live claim whose status
/// names it (after garbage collection has had its turn).
async fn assert_no_leak_no_double(moto: &Moto, client: &kube::Client, log: &str) {
    let twice: Vec<(String, usize)> = launches_per_claim(moto)
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .collect();
    assert!(
        twice.is_empty(),
        "claims launched more than once: {twice:?}\n{log}"
    );
    eventually(
        Duration::from_secs(120),
        "every live instance owned by a live NodeClaim",
        || async move {
            let claims = read::nodeclaims(client).await;
            let owned: BTreeSet<String> = claims
                .iter()
                .filter_map(|c| c["status"]["providerID"].as_str())
                .filter_map(|p| p.rsplit('/').next())
                .map(String::from)
                .collect();
            let live = live_instances(moto);
            live.iter()
                .all(|i| owned.contains(i["id"].as_str().unwrap_or_default()))
                .then_some(())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}: {:#?}\n{log}", live_instances(moto)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standby_takes_over_a_killed_leader_and_a_clean_stop_hands_over_at_once() {
    let Some(cp) = ControlPlane::start("ha") else {
        return;
    };
    cp.install_crds();
    let moto = Moto::start(cp.dir.join("moto.log")).await;
    let world = moto.world(CLUSTER);
    let _agent = agent(&cp, &moto);
    let mut a = controller(&cp, &moto, &world, "ctl-a").start();
    a.wait_ready().await;
    eventually(Duration::from_secs(30), "ctl-a leads", || async {
        holder(&cp).await.starts_with("ctl-a").then_some(())
    })
    .await
    .unwrap();
    let mut b = controller(&cp, &moto, &world, "ctl-b").start();
    b.wait_ready().await;
    cp.apply(&manifests(&world, "on-demand", 1000)).unwrap();
    let client = cp.client().await;

    // Mid scale-up: the first claims exist, not all pods are bound yet.
    cp.apply(&inflate(20)).unwrap();
    eventually(Duration::from_secs(60), "the first NodeClaim", || {
        let client = client.clone();
        async move { (!read::nodeclaims(&client).await.is_empty()).then_some(()) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", a.log_text()));
    assert!(
        !b.log_text().contains("created nodeclaim"),
        "the standby wrote:\n{}",
        b.log_text()
    );
    a.kill();
    let took_over = Instant::now();
    eventually(Duration::from_secs(40), "ctl-b leads", || async {
        holder(&cp).await.starts_with("ctl-b").then_some(())
    })
    .await
    .unwrap();
    let waited = took_over.elapsed();
    wait_running(&client, 20, Duration::from_secs(240), &b.log_text()).await;
    assert_no_leak_no_double(&moto, &client, &b.log_text()).await;
    eprintln!("ha: the standby led {waited:?} after the leader was killed");

    // SIGTERM: the lease is released on the way out, and a new process leads at once.
    b.terminate().expect("ctl-b exits on SIGTERM");
    assert_eq!(holder(&cp).await, "", "released on SIGTERM");
    let started = Instant::now();
    let mut c = controller(&cp, &moto, &world, "ctl-c").start();
    eventually(Duration::from_secs(30), "ctl-c leads", || async {
        holder(&cp).await.starts_with("ctl-c").then_some(())
    })
    .await
    .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "a released lease is taken without waiting out its duration: {:?}",
        started.elapsed()
    );
    c.wait_ready().await;
    cp.kubectl(&["scale", "deployment/inflate", "--replicas=0"]);
    eventually(
        Duration::from_secs(240),
        "no claims and no live instances",
        || {
            let client = client.clone();
            let moto = &moto;
            async move {
                (read::nodeclaims(&client).await.is_empty() && live_instances(moto).is_empty())
                    .then_some(())
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", c.log_text()));
}

/// A fresh controller process for the restarts test. Its lease lasts 6 s instead of 15 s, so
/// each successor waits less for the lease a killed process left behind (the standby test
/// keeps the default).
fn restarted(cp: &ControlPlane, moto: &Moto, world: &World) -> Controller {
    controller(cp, moto, world, "ctl")
        .env("LEADER_ELECTION_LEASE_DURATION", "6s")
        .start()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_at_random_points_of_a_scale_up_and_down_it_leaks_nothing() {
    let Some(cp) = ControlPlane::start("restarts") else {
        return;
    };
    cp.install_crds();
    let moto = Moto::start(cp.dir.join("moto.log")).await;
    let world = moto.world(CLUSTER);
    let _agent = agent(&cp, &moto);
    cp.apply(&manifests(&world, "on-demand", 1000)).unwrap();
    let client = cp.client().await;
    let mut rng = Rng::new(0x5eed);
    let mut kills = 0;
    let mut ctl: Controller = restarted(&cp, &moto, &world);

    // Each phase kills the controller (SIGKILL) ten times, each a random 0–6 s after a fresh
    // process took the lease, then lets the last one finish the phase. A killed process does
    // not release its lease: each successor waits it out first (6 s here). Killing until the
    // goal holds would never end the scale-down: a consolidation waits 15 s before it acts.
    for (replicas, goal_claims_zero) in [(50u32, false), (0, true)] {
        cp.apply(&inflate(replicas)).unwrap();
        for _ in 0..10 {
            let identity = format!("ctl_{}", ctl.pid());
            eventually(Duration::from_secs(60), "the new process leads", || {
                let identity = identity.clone();
                let cp = &cp;
                async move { (holder(cp).await == identity).then_some(()) }
            })
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
            tokio::time::sleep(Duration::from_millis(rng.below(6000) as u64)).await;
            ctl.kill();
            kills += 1;
            ctl = restarted(&cp, &moto, &world);
        }
        let goal = format!("the phase to {replicas} done after {kills} kills");
        eventually(Duration::from_secs(600), &goal, || {
            let client = client.clone();
            let moto = &moto;
            async move {
                let done = if goal_claims_zero {
                    read::nodeclaims(&client).await.is_empty() && live_instances(moto).is_empty()
                } else {
                    let pods = read::pods(&client, "default").await;
                    read::running(&pods).len() == replicas as usize
                };
                done.then_some(())
            }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
        if !goal_claims_zero {
            // Every pod bound, on a node of a claim that launched once. A claim the last
            // process created (a consolidation's replacement, say) may still be launching.
            eventually(Duration::from_secs(120), "every claim launched", || {
                let client = client.clone();
                async move {
                    let claims = read::nodeclaims(&client).await;
                    claims
                        .iter()
                        .all(|c| {
                            condition(c, "Launched") == Some("True")
                                || c["metadata"]["deletionTimestamp"].is_string()
                        })
                        .then_some(())
                }
            })
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
            assert_no_leak_no_double(&moto, &client, &ctl.log_text()).await;
        }
    }
    assert!(kills >= 20, "only {kills} kills");
    assert_no_leak_no_double(&moto, &client, &ctl.log_text()).await;
    eprintln!(
        "restarts: {kills} kills, {} instances launched in all",
        moto.instances(CLUSTER).len()
    );
}
