//! `nodewright bench controller`: the controller's loops, started by `run::spawn_all` as
//! `nodewright controller` starts them and running on their own cadences, against the
//! in-memory API server and the simulated cloud on a paused clock. Only the world around them
//! is stepped, every 100 ms of virtual time: a node agent registers instances as the simulated
//! cloud's agent does in a cluster, a stand-in for kube-scheduler binds each pending pod to
//! the node of the claim it was nominated to, and stand-in ReplicaSets replace evicted pods.
//! Pods of four Deployments arrive at a steady rate; the bench reports how long until every
//! pod had a claim and a node, what the controller wrote, and what it cost in wall time, CPU
//! time and memory. Then half the pods go, and it reports how long consolidation took to
//! settle.

mod spent;
mod trace;
mod world;

use spent::*;
use world::*;

use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use k8s_openapi::api::core::v1::Node;
use nodewright_api::v1::nodeclaim::NodeClaim;
use nodewright_cloud_sim::kwok::{self, Action};
use nodewright_cloud_sim::{SimCloud, SimCloudConfig};
use nodewright_controller::clock::Clock;
use nodewright_controller::context;
use nodewright_controller::disruption::Disruptor;
use nodewright_controller::events::{Event, EventSink, Recorded};
use nodewright_controller::memory::MemoryApi;
use nodewright_controller::metrics::Metrics;
use nodewright_controller::run::{spawn_all, spawn_state_metrics};
use nodewright_controller::settings::Settings;
use nodewright_controller::state::{ClusterState, Kind, Object, SharedState, WatchEvent, lock};
use nodewright_controller::supervise::Supervisor;
use nodewright_controller::write::counting::CountingWriter;
use nodewright_core::time::Timestamp;
use serde_json::{Value, json};
use tokio::sync::watch;

use super::procstat::{cpu_time, memory, mib, reset_own_peak_after};

#[derive(Args, Debug)]
pub struct ControllerArgs {
    /// Pending pods to create.
    #[arg(long, default_value_t = 5000)]
    pub pods: usize,
    /// Pods the ReplicaSet controllers create per second of virtual time.
    #[arg(long, default_value_t = 500)]
    pub arrival_rate: usize,
    /// Percent of the pods that belong to a Deployment with a zone topology spread.
    #[arg(long, default_value_t = 20)]
    pub spread_percent: usize,
    /// Stop after the scale-up.
    #[arg(long)]
    pub no_scale_down: bool,
    /// Round trip of every controller write to the API server, in virtual milliseconds.
    #[arg(long, default_value_t = 5)]
    pub api_latency_ms: u64,
    /// Give up on a phase after this many minutes of virtual time.
    #[arg(long, default_value_t = 60)]
    pub max_minutes: u64,
    /// Print the disruption loop's journal during the scale-down: every round (skipped or
    /// planned, its cost, the budgets it saw), every command re-checked, started and finished,
    /// with the cluster's nodes at that moment.
    #[arg(long)]
    pub trace_disruption: bool,
    /// Write the controller's metrics, as `/metrics` would serve them, to this file at the
    /// end (the dashboards' test reads the label sets the loops really produce).
    #[arg(long, value_name = "FILE")]
    pub metrics_out: Option<std::path::PathBuf>,
}

/// The NodeClass the pool names, as a cluster has it (the status loop reconciles it).
fn nodeclass_json() -> Value {
    json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
        "metadata": {"name": "default", "uid": "nc-default"},
        "spec": {
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "role": "node-role",
            "subnetSelectorTerms": [{"tags": {"demo": "true"}}],
            "securityGroupSelectorTerms": [{"tags": {"demo": "true"}}]
        }
    })
}

fn nodepool_json() -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "default", "uid": "np-default"},
        "spec": {
            "template": {"spec": {
                "requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                    {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]},
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                    {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Lt", "values": ["17"]}
                ],
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "expireAfter": "Never"
            }},
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "30s"}
        }
    })
}

/// Events by reason; in a cluster each is an API write.
#[derive(Default)]
struct CountingEvents {
    by_reason: Mutex<BTreeMap<String, u64>>,
}

impl EventSink for CountingEvents {
    fn publish(&self, event: Event) {
        *self
            .by_reason
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(event.reason)
            .or_default() += 1;
    }
}

/// How often the world moves: pods arrive, kubelets register, kube-scheduler binds.
const TICK: Duration = Duration::from_millis(100);

pub fn run(args: ControllerArgs) -> anyhow::Result<ExitCode> {
    // As the controller runs (`controller.rs`), so the memory measured is the one it has.
    super::huge_pages::turn_off();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .context("starting the runtime")?;
    rt.block_on(bench(args))
}

/// What the phases share: the world, what the report reads of the controller, the clock.
struct Bench {
    world: World,
    counting: Arc<CountingWriter>,
    metrics: Arc<Metrics>,
    events: Arc<CountingEvents>,
    disruptor: Arc<Disruptor>,
    clock: Clock,
    max: Duration,
}

/// The controller as `nodewright controller` starts it (`spawn_all`, leading) against the
/// in-memory API server, through a writer that counts and delays each request, with the
/// simulated cloud behind it; the world around it holds only the NodeClass and NodePool.
/// The loops run while the supervisor and the leader's sender returned are held.
fn start(args: &ControllerArgs) -> anyhow::Result<(Bench, Supervisor, watch::Sender<bool>)> {
    let state = ClusterState::shared();
    let clock = Clock::starting_at(Timestamp(1_717_200_000_000));
    let api = Arc::new(MemoryApi::new(state.clone(), clock));
    let sim =
        Arc::new(SimCloud::new(SimCloudConfig::default()).context("starting the simulated cloud")?);
    let counting = Arc::new(
        CountingWriter::new(api.clone()).with_latency(Duration::from_millis(args.api_latency_ms)),
    );
    let metrics = Arc::new(Metrics::new());
    let events = Arc::new(CountingEvents::default());
    let ctx = context::Context {
        state: state.clone(),
        writer: counting.clone(),
        cloud: sim.clone(),
        clock,
        metrics: metrics.clone(),
        // Counted behind upstream's dedupe and rate limit: what a cluster's API would receive.
        events: Arc::new(Recorded::new(events.clone())),
    };
    api.put_value(Kind::NodeClass, nodeclass_json());
    api.put_value(Kind::NodePool, nodepool_json());
    api.mark_synced();
    let mut loops = Supervisor::new();
    let (leading, leader) = watch::channel(true);
    let disruptor = spawn_all(&mut loops, &ctx, &Settings::default(), leader, None);
    // The controller's own state-metrics loop, on the virtual clock; nothing reads readiness.
    let observe = !Settings::default().disable_cluster_state_observability;
    spawn_state_metrics(
        &mut loops,
        &state,
        &metrics,
        clock,
        observe,
        watch::channel(false).0,
    );
    let world = World {
        api,
        state,
        sim,
        clock,
        spread_percent: args.spread_percent,
        pods: BTreeMap::new(),
        bound: BTreeSet::new(),
        next: 0,
        registered: BTreeSet::new(),
    };
    let bench = Bench {
        world,
        counting,
        metrics,
        events,
        disruptor,
        clock,
        max: Duration::from_secs(args.max_minutes * 60),
    };
    Ok((bench, loops, leading))
}

/// How the scale-up went, in virtual time from its start.
struct Up {
    started: Timestamp,
    last_pod: Timestamp,
    last_claim: Timestamp,
    claims: u64,
    spent: Spent,
}

impl Bench {
    fn claims_created(&self) -> u64 {
        self.counting
            .counts()
            .get("create nodeclaims")
            .copied()
            .unwrap_or(0)
    }

    /// `n` pods arrive at `rate` a second while the world moves every tick and the loops run
    /// between ticks, until every pod is bound or `max` of virtual time has passed.
    async fn scale_up(&mut self, n: usize, rate: usize) -> Up {
        let per_tick = (rate / 10).max(1);
        let started = self.clock.now();
        let cost = Cost::start(&self.metrics);
        let (mut last_pod, mut last_claim, mut claims) = (started, started, 0);
        loop {
            for _ in 0..per_tick {
                if self.world.next < n {
                    self.world.create_next();
                    last_pod = self.clock.now();
                }
            }
            self.world.agent();
            self.world.schedule();
            let created = self.claims_created();
            if created != claims {
                claims = created;
                last_claim = self.clock.now();
            }
            let done = self.world.next == n && self.world.unbound() == 0;
            if done || self.clock.now().since(started) > self.max {
                break;
            }
            tokio::time::sleep(TICK).await;
        }
        Up {
            started,
            last_pod,
            last_claim,
            claims,
            spent: cost.stop(&self.metrics),
        }
    }

    /// Every other pod goes; the world moves every tick (the ReplicaSets replace evicted pods
    /// every second) until the controller has not written for two minutes, every pod is
    /// bound and no disruption command runs, or `max` of virtual time has passed.
    /// `peaks`: the scale-up's, read before the benchmark's per-Node probe, and the probes'.
    async fn scale_down(&mut self, print_trace: bool, nodes: usize, peaks: Peaks) {
        let victims = self.world.delete_every_other();
        let started = self.clock.now();
        let cost = Cost::start(&self.metrics);
        let writes_before = self.counting.counts();
        let (mut last_write, mut last_total) = (started, self.counting.total());
        let mut replaced = 0;
        self.disruptor.journal.enable();
        let mut trace = trace::Trace::new(print_trace, started);
        for tick in 0u64.. {
            self.world.agent();
            self.world.schedule();
            if tick.is_multiple_of(10) {
                replaced += self.world.replace_evicted();
            }
            {
                let s = lock(&self.world.state);
                trace.observe(self.disruptor.journal.take(), &s);
                trace.watch_claims(&s, self.clock.now());
            }
            let total = self.counting.total();
            if total != last_total {
                (last_total, last_write) = (total, self.clock.now());
            }
            let quiet = self.clock.now().since(last_write) >= Duration::from_secs(120);
            let settled = quiet && self.world.unbound() == 0 && self.disruptor.running().is_empty();
            if settled || self.clock.now().since(started) > self.max {
                break;
            }
            tokio::time::sleep(TICK).await;
        }
        let spent = cost.stop(&self.metrics);
        let nodes_after = lock(&self.world.state).nodes.len();
        println!("scale-down ({victims} pods deleted)");
        println!(
            "  settled              {:.1} s virtual after the delete (last write), {nodes} -> {nodes_after} nodes, {replaced} pods evicted and recreated",
            last_write.since(started).as_secs_f64()
        );
        spent.print();
        trace.print_summary();
        let delta: BTreeMap<&str, u64> = self
            .counting
            .counts()
            .iter()
            .map(|(k, v)| (*k, v - writes_before.get(k).copied().unwrap_or(0)))
            .filter(|(_, v)| *v > 0)
            .collect();
        print_counts("  API writes", &delta);
        // The per-object probes reset the peak after them (`reset_own_peak_after`), so what is
        // left is the controller's and its world's.
        let run = peaks.run.max(memory("self").1);
        println!(
            "peak RSS {:.0} MiB ({:.0} MiB with the benchmark's own probes)",
            mib(run),
            mib(run.max(peaks.probes))
        );
    }
}

/// Per node, the index's growth for a Node and its NodeClaim: the cluster's pairs copied
/// under new names up to a thousand, so the growth (15 to 20 MiB) shows above the
/// allocator's noise; four thousand made this probe the run's peak, 80 MiB above the rest.
fn node_bytes(state: &SharedState) -> f64 {
    let s = lock(state);
    let pairs: Vec<_> = s
        .nodeclaims
        .values()
        .filter_map(|c| {
            let node = c.status.as_ref()?.node_name.as_ref()?;
            Some((s.node_object(node)?, c))
        })
        .collect();
    let copies = if pairs.is_empty() {
        0
    } else {
        1000usize.div_ceil(pairs.len())
    };
    let copy = |k: usize, (n, c): &(Node, &Arc<NodeClaim>)| {
        let mut n = n.clone();
        let mut c = NodeClaim::clone(c);
        n.metadata.name = n.metadata.name.map(|x| format!("{x}-{k}"));
        c.metadata.name = c.metadata.name.map(|x| format!("{x}-{k}"));
        [Object::Node(Box::new(n)), Object::NodeClaim(Box::new(c))]
    };
    let objects = (0..copies).flat_map(|k| pairs.iter().flat_map(move |p| copy(k, p)));
    state_bytes_per_object(objects) * 2.0
}

/// Nodes no pod is bound to.
fn empty_nodes(state: &SharedState) -> usize {
    let s = lock(state);
    let used: BTreeSet<&str> = s
        .pods
        .values()
        .filter_map(|p| p.node_name.as_deref())
        .collect();
    s.nodes
        .keys()
        .filter(|k| !used.contains(k.as_str()))
        .count()
}

impl Bench {
    /// The scale-up's report; returns the nodes, how many of them have no pods, and the
    /// peaks so far. The run's is read before the per-Node probe, which copies the cluster's
    /// pairs to a thousand and could otherwise be the run's peak.
    fn print_scale_up(
        &self,
        args: &ControllerArgs,
        up: &Up,
        pod_bytes: f64,
        probe_peak: u64,
    ) -> (usize, usize, Peaks) {
        let state = &self.world.state;
        let (rss_up, peak_up) = memory("self");
        let (nodes, node_claims) = {
            let s = lock(state);
            (s.nodes.len(), s.nodeclaims.len())
        };
        let node_bytes = node_bytes(state);
        let peaks = Peaks {
            run: peak_up,
            probes: probe_peak.max(memory("self").1),
        };
        reset_own_peak_after(rss_up, Duration::from_secs(3));
        let empty_nodes = empty_nodes(state);
        let secs = |t: Timestamp| t.since(up.started).as_secs_f64();
        println!(
            "bench controller: {} pods at {} per second, {}% with a zone spread, {} ms per API write",
            args.pods, args.arrival_rate, args.spread_percent, args.api_latency_ms
        );
        println!("scale-up");
        println!("  pods created in      {:.1} s virtual", secs(up.last_pod));
        println!(
            "  all claims created   {:.1} s virtual after the first pod ({} claims)",
            secs(up.last_claim),
            up.claims
        );
        println!(
            "  all pods bound       {:.1} s virtual ({} of {} bound)",
            secs(self.clock.now()),
            self.world.bound.len(),
            args.pods
        );
        println!(
            "  nodes                {nodes} ({node_claims} claims, {empty_nodes} without pods)"
        );
        up.spent.print();
        print_counts("  API writes", &self.counting.counts());
        let events = self
            .events
            .by_reason
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        print_counts("  events", &events);
        print_cloud_calls(&self.metrics);
        println!(
            "  memory: RSS {:.0} MiB; index {:.1} KiB per pod, {:.1} KiB per node (Node + NodeClaim)",
            mib(rss_up),
            pod_bytes / 1024.0,
            node_bytes / 1024.0
        );
        (nodes, empty_nodes, peaks)
    }
}

/// Peak resident memory of the run itself, and of the benchmark's own probes (the per-pod and
/// per-Node byte counts build indexes of their own); `/proc/self/clear_refs` resets the
/// peak after each probe so the two are told apart.
#[derive(Clone, Copy)]
struct Peaks {
    run: u64,
    probes: u64,
}

async fn bench(args: ControllerArgs) -> anyhow::Result<ExitCode> {
    let rss_before = memory("self").0;
    let mut bad = None;
    let pods = (0..args.pods).map_while(|i| {
        let d = &DEPLOYS[deploy_of(i, args.spread_percent)];
        let name = format!("{}-{i:06}", d.name);
        Object::from_value(Kind::Pod, pod_json(&name, d, Some("ip-10-0-0-1")))
            .map_err(|e| bad = Some(e))
            .ok()
    });
    let pod_bytes = state_bytes_per_object(pods);
    if let Some(e) = bad {
        anyhow::bail!(e);
    }
    let probe_peak = memory("self").1;
    reset_own_peak_after(rss_before, Duration::from_secs(3));
    let (mut bench, _loops, _leading) = start(&args)?;
    let up = bench.scale_up(args.pods, args.arrival_rate).await;
    let (nodes, empty_nodes, peaks) = bench.print_scale_up(&args, &up, pod_bytes, probe_peak);
    let mut failed = bench.world.unbound() > 0 || empty_nodes > 0;
    if !args.no_scale_down {
        bench.scale_down(args.trace_disruption, nodes, peaks).await;
        failed |= bench.world.unbound() > 0;
    }
    if let Some(path) = &args.metrics_out {
        std::fs::write(path, bench.metrics.encode())
            .with_context(|| format!("writing the metrics to {}", path.display()))?;
    }
    if failed {
        for line in bench.world.describe_unbound(5) {
            eprintln!("  unbound: {line}");
        }
        eprintln!("not every pod was bound, or a node was left without pods after the scale-up");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn print_counts<K: AsRef<str> + Ord>(title: &str, counts: &BTreeMap<K, u64>) {
    let total: u64 = counts.values().sum();
    println!("{title} ({total}):");
    for (k, v) in counts {
        println!("    {:<28} {v}", k.as_ref());
    }
}

/// Cloud calls by controller and method, from `karpenter_cloudprovider_duration_seconds`.
fn print_cloud_calls(metrics: &Metrics) {
    let text = metrics.encode();
    let mut calls: BTreeMap<String, u64> = BTreeMap::new();
    for (labels, value) in samples(&text, "karpenter_cloudprovider_duration_seconds_count") {
        let key = format!(
            "{} {}",
            label(labels, "controller"),
            label(labels, "method")
        );
        *calls.entry(key).or_default() += value.parse::<u64>().unwrap_or(0);
    }
    print_counts("  cloud calls", &calls);
}
