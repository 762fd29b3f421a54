//! The controller's benchmark on the real control plane (`scripts/bench-cluster`; ignored in
//! the suite): the sim cloud, the kube-controller-manager at 200 QPS / 400 burst so the
//! ReplicaSet creates pods fast, seed 004's NodePool with its CPU limit lifted to 2N,
//! `inflate` 0 → N pods of one CPU, then N → N/2. It prints
//! seconds from the last pod created to all bound, nodes and $/h at the peak, seconds until
//! scale-down consolidation is done and $/h after, and the controller's CPU seconds and peak
//! RSS for the whole run.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::aws::inflate;
use crate::kit::cluster::Options;
use crate::kit::controller::Launch;
use crate::kit::read::{self, label};
use crate::kit::{ControlPlane, eventually};

fn pods_wanted() -> u32 {
    std::env::var("NODEWRIGHT_BENCH_PODS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000)
}

/// The controller's own price of each offering, from its
/// `karpenter_cloudprovider_instance_type_offering_price_estimate` gauge:
/// (instance type, zone, capacity type) → $/h.
fn prices(metrics: &str) -> BTreeMap<(String, String, String), f64> {
    let mut out = BTreeMap::new();
    for line in metrics.lines() {
        let Some(rest) =
            line.strip_prefix("karpenter_cloudprovider_instance_type_offering_price_estimate{")
        else {
            continue;
        };
        let Some((labels, value)) = rest.split_once("} ") else {
            continue;
        };
        let labels: BTreeMap<&str, &str> = labels
            .split(',')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k, v.trim_matches('"')))
            .collect();
        if let (Some(t), Some(z), Some(c), Ok(v)) = (
            labels.get("instance_type"),
            labels.get("zone"),
            labels.get("capacity_type"),
            value.trim().parse::<f64>(),
        ) {
            out.insert((t.to_string(), z.to_string(), c.to_string()), v);
        }
    }
    out
}

/// The cluster's nodes and their $/h at the controller's prices.
async fn cost(client: &kube::Client, metrics: &str) -> (usize, f64) {
    let prices = prices(metrics);
    let nodes = read::nodes(client).await;
    let mut total = 0.0;
    for n in &nodes {
        let (Some(t), Some(z), Some(ct)) = (
            label(n, "node.kubernetes.io/instance-type"),
            label(n, "topology.kubernetes.io/zone"),
            label(n, "karpenter.sh/capacity-type"),
        ) else {
            continue;
        };
        total += prices
            .get(&(t.to_string(), z.to_string(), ct.to_string()))
            .copied()
            .unwrap_or(0.0);
    }
    (nodes.len(), total)
}

/// utime + stime of `pid` in seconds, and its peak RSS in MiB.
fn usage(pid: u32) -> (f64, f64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|i| fields.get(*i)?.parse::<f64>().ok())
        .sum();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let hwm_kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0);
    // USER_HZ is 100 on Linux.
    (ticks / 100.0, hwm_kib / 1024.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: scripts/bench-cluster runs it"]
async fn bench_inflate_and_consolidate() {
    let Some(cp) = ControlPlane::start_with(
        "bench",
        Options {
            kcm_qps: Some((200, 400)),
        },
    ) else {
        return;
    };
    let n = pods_wanted();
    cp.install_crds();
    let mut ctl = Launch::sim(&cp, "nodewright").start();
    ctl.wait_ready().await;
    cp.apply_path("fixtures/seed-manifests/04-nodepool-ec2nodeclass-v1.yaml");
    // The seed's NodePool stops at 1000 CPUs, less than 1000 one-CPU pods need with the
    // nodes' overhead: the benchmark lifts it to twice the pods.
    cp.kubectl(&[
        "patch",
        "nodepool",
        "default",
        "--type=merge",
        "-p",
        &format!(r#"{{"spec":{{"limits":{{"cpu":"{}"}}}}}}"#, 2 * n),
    ]);
    let client = cp.client().await;

    cp.apply(&inflate(n)).unwrap();
    let start = Instant::now();
    // Local times: the API's timestamps have a one-second grain.
    let mut last_created: Option<Duration> = None;
    let mut seen = 0usize;
    let bound_at = loop {
        let pods = read::pods(&client, "default").await;
        if pods.len() > seen {
            seen = pods.len();
            last_created = Some(start.elapsed());
        }
        let bound = pods.iter().filter(|p| read::node_of(p).is_some()).count();
        if pods.len() == n as usize && bound == n as usize {
            break start.elapsed();
        }
        assert!(
            start.elapsed() < Duration::from_secs(900),
            "{bound} of {n} bound after 15 min\n{}",
            ctl.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let last_created = last_created.unwrap_or_default();
    // The offering prices are exported once a minute, the first time a minute after start.
    let priced = eventually(Duration::from_secs(120), "offering prices exported", || {
        let ctl = &ctl;
        async move {
            let m = ctl.metrics().await;
            (!prices(&m).is_empty()).then_some(m)
        }
    })
    .await
    .unwrap();
    let (peak_nodes, peak_cost) = cost(&client, &priced).await;

    cp.kubectl(&[
        "scale",
        "deployment/inflate",
        &format!("--replicas={}", n / 2),
    ]);
    let scaled = Instant::now();
    // Done: no claim left deleting and no claim created or deleted for three minutes, longer
    // than the seed's consolidateAfter (1m) and a command's 15 s validation together.
    let mut last_change = Instant::now();
    let mut shape = BTreeMap::new();
    let done_after = loop {
        let claims = read::nodeclaims(&client).await;
        let now_shape: BTreeMap<String, bool> = claims
            .iter()
            .map(|c| {
                (
                    read::name(c).to_string(),
                    c["metadata"]["deletionTimestamp"].is_string(),
                )
            })
            .collect();
        if now_shape != shape {
            shape = now_shape;
            last_change = Instant::now();
        }
        let deleting = shape.values().any(|d| *d);
        if !deleting && last_change.elapsed() >= Duration::from_secs(180) {
            break last_change.duration_since(scaled);
        }
        assert!(
            scaled.elapsed() < Duration::from_secs(1800),
            "consolidation still changing after 30 min"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let (after_nodes, after_cost) = cost(&client, &ctl.metrics().await).await;
    let (cpu, rss) = usage(ctl.pid());
    println!(
        "bench cluster: {n} pods of 1 cpu, sim cloud, kube-controller-manager 200 QPS / 400 burst"
    );
    println!(
        "  all bound {:.2} s after the last pod was created (last created at {:.2} s, all bound at {:.2} s)",
        bound_at.saturating_sub(last_created).as_secs_f64(),
        last_created.as_secs_f64(),
        bound_at.as_secs_f64()
    );
    println!("  peak: {peak_nodes} nodes, ${peak_cost:.3}/h");
    println!(
        "  scale to {}: consolidation done {:.1} s after the scale; {after_nodes} nodes, ${after_cost:.3}/h",
        n / 2,
        done_after.as_secs_f64()
    );
    println!("  controller: {cpu:.1} CPU seconds, peak RSS {rss:.0} MiB");
}
