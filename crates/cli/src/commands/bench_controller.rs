//! `nodewright bench controller`: the controller's own loops (provisioner, NodeClaim
//! lifecycle, termination, pod events, disruption) against the in-memory API server and the
//! simulated cloud on a paused clock. A node agent registers instances as the simulated
//! cloud's agent does in a cluster, and a stand-in for kube-scheduler binds each pending pod
//! to the node of the claim it was nominated to. Pods of four Deployments arrive at a steady
//! rate; the bench reports how long until every pod had a claim and a node, what the
//! controller wrote, and what it cost in wall time, CPU time and memory. Then half the pods
//! go, and it reports how long consolidation took to settle.

mod trace;

use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use nodewright_cloud::CloudProvider;
use nodewright_cloud_sim::kwok::{self, Action};
use nodewright_cloud_sim::{SimCloud, SimCloudConfig};
use nodewright_controller::clock::Clock;
use nodewright_controller::context;
use nodewright_controller::disruption::Disruptor;
use nodewright_controller::events::{Event, EventSink, Recorded};
use nodewright_controller::lifecycle::Lifecycle;
use nodewright_controller::memory::MemoryApi;
use nodewright_controller::metrics::Metrics;
use nodewright_controller::podevents::PodEvents;
use nodewright_controller::provisioner::{Provisioner, Trigger};
use nodewright_controller::state::conditions::ConditionObserver;
use nodewright_controller::state::gauges::{self, PodStartup};
use nodewright_controller::state::{ClusterState, Kind, Object, SharedState, WatchEvent, lock};
use nodewright_controller::termination::Termination;
use nodewright_controller::write::KubeWriter;
use nodewright_controller::write::counting::CountingWriter;
use nodewright_core::cadence::{BatchWindow, DisruptionCadence, DisruptionTimings};
use nodewright_core::time::Timestamp;
use serde_json::{Value, json};

use super::procstat::{cpu_time, memory, mib};

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

struct Deploy {
    name: &'static str,
    cpu: &'static str,
    memory: &'static str,
    spread: bool,
}

const DEPLOYS: [Deploy; 4] = [
    Deploy {
        name: "inflate",
        cpu: "1",
        memory: "1536Mi",
        spread: false,
    },
    Deploy {
        name: "small",
        cpu: "250m",
        memory: "256Mi",
        spread: false,
    },
    Deploy {
        name: "large",
        cpu: "3",
        memory: "8Gi",
        spread: false,
    },
    Deploy {
        name: "spread",
        cpu: "500m",
        memory: "1Gi",
        spread: true,
    },
];

/// The Deployment of the `i`th pod: `spread_percent` in the spread one, the rest half
/// `inflate`, three tenths `small`, a fifth `large`.
fn deploy_of(i: usize, spread_percent: usize) -> usize {
    if i % 100 < spread_percent {
        return 3;
    }
    match i % 10 {
        0..=4 => 0,
        5..=7 => 1,
        _ => 2,
    }
}

fn pod_json(name: &str, d: &Deploy, node: Option<&str>) -> Value {
    let mut p = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": format!("pod-{name}"),
            "labels": {"app": d.name},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": d.name,
                "uid": format!("rs-{}", d.name), "controller": true}]},
        "spec": {"containers": [{"name": "c", "image": "pause",
            "resources": {"requests": {"cpu": d.cpu, "memory": d.memory}}}]},
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    });
    if d.spread {
        p["spec"]["topologySpreadConstraints"] = json!([{
            "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": d.name}}}]);
    }
    if let Some(n) = node {
        p["spec"]["nodeName"] = json!(n);
        p["status"] = json!({"phase": "Running", "conditions": [
            {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]});
    }
    p
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

/// Wall time spent inside each controller loop.
#[derive(Default)]
struct Meter {
    wall: BTreeMap<&'static str, (Duration, u64)>,
}

impl Meter {
    fn add(&mut self, name: &'static str, started: Instant) {
        let e = self.wall.entry(name).or_default();
        e.0 += started.elapsed();
        e.1 += 1;
    }

    fn total(&self) -> Duration {
        self.wall.values().map(|(d, _)| *d).sum()
    }

    fn print(&self) {
        for (name, (d, n)) in &self.wall {
            println!("    {name:<12} {:>9.3} s over {n} call(s)", d.as_secs_f64());
        }
    }
}

/// The world around the controller: the API server's store, the cloud, the kubelets (node
/// agent) and kube-scheduler.
struct World {
    api: Arc<MemoryApi>,
    state: SharedState,
    sim: Arc<SimCloud>,
    clock: Clock,
    spread_percent: usize,
    /// Live pods by name, with their Deployment.
    pods: BTreeMap<String, usize>,
    bound: BTreeSet<String>,
    next: usize,
    registered: BTreeSet<String>,
}

impl World {
    fn create_pod(&mut self, deploy: usize) {
        let name = format!("{}-{:06}", DEPLOYS[deploy].name, self.next);
        self.next += 1;
        self.api
            .put_value(Kind::Pod, pod_json(&name, &DEPLOYS[deploy], None));
        self.pods.insert(name, deploy);
    }

    fn create_next(&mut self) {
        let d = deploy_of(self.next, self.spread_percent);
        self.create_pod(d);
    }

    /// The kubelets: a Node for every instance that has been running for the registration
    /// delay, and none for instances that are gone.
    fn agent(&mut self) {
        let instances = self.sim.instances();
        let claims: BTreeMap<String, _> = {
            let s = lock(&self.state);
            instances
                .iter()
                .filter(|i| {
                    !self
                        .registered
                        .contains(&kwok::node_name(&i.instance.provider_id))
                })
                .filter_map(|i| i.instance.nodeclaim())
                .filter_map(|c| {
                    s.nodeclaims
                        .get(c)
                        .map(|o| (c.to_string(), Arc::new(o.clone())))
                })
                .collect()
        };
        let actions = kwok::plan(
            &instances,
            &claims,
            &self.registered,
            tokio::time::Instant::now(),
            kwok_registration_delay(),
            self.clock.now_time().0,
        );
        for a in actions {
            match a {
                Action::Register(node) => {
                    let name = node.metadata.name.clone().unwrap_or_default();
                    self.api.put(Object::Node(node));
                    self.registered.insert(name);
                }
                Action::Delete(name) => {
                    let _ = self.api.delete(Kind::Node, &name);
                    self.registered.remove(&name);
                }
                Action::Heartbeat(_) => {}
            }
        }
    }

    /// kube-scheduler following the nominations: a pending pod nominated to a claim whose
    /// Node is Ready and untainted is bound there.
    fn schedule(&mut self) {
        let now = self.clock.now();
        let binds: Vec<(String, String)> = {
            let s = lock(&self.state);
            s.pods
                .iter()
                .filter(|(_, p)| p.provisionable())
                .filter_map(|(key, _)| {
                    let c = s.nominated_claim(key, now)?;
                    let node = c.status.as_ref()?.node_name.clone()?;
                    let n = s.nodes.get(&node)?;
                    let ready = n
                        .status
                        .as_ref()
                        .and_then(|st| st.conditions.as_ref())
                        .is_some_and(|cs| {
                            cs.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                        });
                    let tainted = n
                        .spec
                        .as_ref()
                        .and_then(|sp| sp.taints.as_ref())
                        .is_some_and(|ts| {
                            ts.iter()
                                .any(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
                        });
                    let name = key.split_once('/').map_or(key.as_str(), |(_, n)| n);
                    (ready && !tainted).then(|| (name.to_string(), node))
                })
                .collect()
        };
        for (name, node) in binds {
            let Some(&d) = self.pods.get(&name) else {
                continue;
            };
            self.api
                .put_value(Kind::Pod, pod_json(&name, &DEPLOYS[d], Some(&node)));
            self.bound.insert(name);
        }
    }

    /// The ReplicaSet controllers: every pod evicted or deleted by the controller comes back
    /// as a new pending pod.
    fn replace_evicted(&mut self) -> usize {
        let gone: Vec<String> = {
            let s = lock(&self.state);
            self.pods
                .keys()
                .filter(|n| !s.pods.contains_key(&format!("default/{n}")))
                .cloned()
                .collect()
        };
        for n in &gone {
            if let Some(d) = self.pods.remove(n) {
                self.bound.remove(n);
                self.create_pod(d);
            }
        }
        gone.len()
    }

    fn unbound(&self) -> usize {
        self.pods.len() - self.bound.len()
    }
}

fn kwok_registration_delay() -> Duration {
    kwok::AgentConfig::default().registration_delay
}

const TICK: Duration = Duration::from_millis(100);

struct Loops {
    provisioner: Provisioner,
    trigger: Trigger,
    lifecycle: Lifecycle,
    termination: Termination,
    pod_events: PodEvents,
    disruptor: Disruptor,
    cadence: DisruptionCadence,
    metrics: Arc<Metrics>,
    startup: PodStartup,
    conditions: ConditionObserver,
}

impl Loops {
    /// One tick: the provisioner's trigger every tick, the per-object loops every second;
    /// `disrupt` adds the disruption loop. Returns the claims created.
    async fn tick(
        &mut self,
        world: &mut World,
        meter: &mut Meter,
        tick: u64,
        disrupt: bool,
    ) -> usize {
        let mut created = 0;
        let t = Instant::now();
        let due = self.trigger.due(&world.state, world.clock.now());
        meter.add("trigger", t);
        if due {
            let t = Instant::now();
            if let Some(p) = self.provisioner.pass(&mut self.trigger).await {
                created = p.created.len();
            }
            meter.add("provisioner", t);
        }
        if tick.is_multiple_of(10) {
            let t = Instant::now();
            self.lifecycle.reconcile_all().await;
            meter.add("lifecycle", t);
            let t = Instant::now();
            self.termination.reconcile_all().await;
            meter.add("termination", t);
            let t = Instant::now();
            self.pod_events.pass().await;
            meter.add("pod events", t);
            if disrupt {
                let t = Instant::now();
                self.disruptor.step(&mut self.cadence).await;
                meter.add("disruption", t);
            }
            // The state loop of `run`: pod startup and status conditions every second, the
            // gauges every five.
            let t = Instant::now();
            {
                let s = lock(&world.state);
                let now = world.clock.now();
                self.startup.observe(&s, &self.metrics);
                self.conditions.observe(&s, &self.metrics, now);
                if tick.is_multiple_of(50) {
                    gauges::set_all(&s, &self.metrics);
                    self.conditions.refresh(&self.metrics, now);
                }
            }
            meter.add("gauges", t);
            world.agent();
            world.schedule();
        }
        created
    }
}

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

/// RSS growth per object when `objects` are applied to an empty index; a rough figure (the
/// allocator may reuse freed memory), so it is measured first, on a fresh heap.
fn state_bytes_per_object(objects: Vec<Object>) -> f64 {
    let n = objects.len().max(1);
    let before = memory("self").0;
    let mut s = ClusterState::default();
    for o in objects {
        s.apply(WatchEvent::Apply(o));
    }
    let after = memory("self").0;
    drop(s);
    after.saturating_sub(before) as f64 / n as f64
}

async fn bench(args: ControllerArgs) -> anyhow::Result<ExitCode> {
    let n = args.pods;
    let pod_bytes = state_bytes_per_object(
        (0..n)
            .map(|i| {
                let d = &DEPLOYS[deploy_of(i, args.spread_percent)];
                let name = format!("{}-{i:06}", d.name);
                Object::from_value(Kind::Pod, pod_json(&name, d, Some("ip-10-0-0-1")))
                    .map_err(|e| anyhow::anyhow!(e))
            })
            .collect::<anyhow::Result<Vec<_>>>()?,
    );

    let state = ClusterState::shared();
    let clock = Clock::starting_at(Timestamp(1_717_200_000_000));
    let api = Arc::new(MemoryApi::new(state.clone(), clock));
    let sim =
        Arc::new(SimCloud::new(SimCloudConfig::default()).context("starting the simulated cloud")?);
    let counting = Arc::new(
        CountingWriter::new(api.clone()).with_latency(Duration::from_millis(args.api_latency_ms)),
    );
    let writer: Arc<dyn KubeWriter> = counting.clone();
    let cloud: Arc<dyn CloudProvider> = sim.clone();
    let metrics = Arc::new(Metrics::new());
    let events = Arc::new(CountingEvents::default());
    // Counted behind upstream's dedupe and rate limit: what a cluster's API would receive.
    let sink: Arc<dyn EventSink> = Arc::new(Recorded::new(events.clone()));
    let ctx = context::Context {
        state: state.clone(),
        writer: writer.clone(),
        cloud: cloud.clone(),
        clock,
        metrics: metrics.clone(),
        events: sink.clone(),
    };
    let mut loops = Loops {
        provisioner: Provisioner::new(&ctx),
        trigger: Trigger::new(BatchWindow::default()),
        lifecycle: Lifecycle::new(&ctx),
        termination: Termination::new(&ctx),
        pod_events: PodEvents::new(&ctx),
        disruptor: Disruptor::new(&ctx),
        cadence: DisruptionCadence::new(DisruptionTimings::default(), clock.now()),
        metrics: metrics.clone(),
        startup: PodStartup::default(),
        conditions: ConditionObserver::default(),
    };
    api.put_value(Kind::NodePool, nodepool_json());
    api.mark_synced();
    let mut world = World {
        api: api.clone(),
        state: state.clone(),
        sim,
        clock,
        spread_percent: args.spread_percent,
        pods: BTreeMap::new(),
        bound: BTreeSet::new(),
        next: 0,
        registered: BTreeSet::new(),
    };
    let max = Duration::from_secs(args.max_minutes * 60);

    // Scale-up.
    let per_tick = (args.arrival_rate / 10).max(1);
    let started = clock.now();
    let wall = Instant::now();
    let cpu = cpu_time("self");
    let mut meter = Meter::default();
    let mut claims = 0;
    let mut last_claim = started;
    let mut last_pod = started;
    let mut tick = 0u64;
    loop {
        for _ in 0..per_tick {
            if world.next < n {
                world.create_next();
                last_pod = clock.now();
            }
        }
        let c = loops.tick(&mut world, &mut meter, tick, false).await;
        if c > 0 {
            claims += c;
            last_claim = clock.now();
        }
        if world.next == n && world.unbound() == 0 {
            break;
        }
        if clock.now().since(started) > max {
            break;
        }
        tokio::time::advance(TICK).await;
        tick += 1;
    }
    let up_virtual = clock.now().since(started);
    let up_wall = wall.elapsed();
    let up_cpu = cpu_time("self").saturating_sub(cpu);
    let (rss_up, _) = memory("self");
    let (nodes, node_claims) = {
        let s = lock(&state);
        (s.nodes.len(), s.nodeclaims.len())
    };
    // Per node: the Node and its NodeClaim, copied under new names up to a few thousand so
    // the growth shows above the allocator's noise.
    let node_bytes = {
        let objects: Vec<Object> = {
            let s = lock(&state);
            let pairs: Vec<_> = s
                .nodeclaims
                .values()
                .filter_map(|c| {
                    let node = c.status.as_ref()?.node_name.as_ref()?;
                    Some((s.nodes.get(node)?, c))
                })
                .collect();
            let copies = if pairs.is_empty() {
                0
            } else {
                4000usize.div_ceil(pairs.len())
            };
            let mut out = Vec::new();
            for k in 0..copies {
                for (n, c) in &pairs {
                    let mut n = (*n).clone();
                    let mut c = (*c).clone();
                    n.metadata.name = n.metadata.name.map(|x| format!("{x}-{k}"));
                    c.metadata.name = c.metadata.name.map(|x| format!("{x}-{k}"));
                    out.push(Object::Node(Box::new(n)));
                    out.push(Object::NodeClaim(Box::new(c)));
                }
            }
            out
        };
        state_bytes_per_object(objects) * 2.0
    };
    let empty_nodes = {
        let s = lock(&state);
        let used: BTreeSet<&str> = s
            .pods
            .values()
            .filter_map(|p| p.node_name.as_deref())
            .collect();
        s.nodes
            .keys()
            .filter(|k| !used.contains(k.as_str()))
            .count()
    };

    println!(
        "bench controller: {n} pods at {} per second, {}% with a zone spread, {} ms per API write",
        args.arrival_rate, args.spread_percent, args.api_latency_ms
    );
    println!("scale-up");
    println!(
        "  pods created in      {:.1} s virtual",
        last_pod.since(started).as_secs_f64()
    );
    println!(
        "  all claims created   {:.1} s virtual after the first pod ({claims} claims)",
        last_claim.since(started).as_secs_f64()
    );
    println!(
        "  all pods bound       {:.1} s virtual ({} of {n} bound)",
        up_virtual.as_secs_f64(),
        world.bound.len()
    );
    println!("  nodes                {nodes} ({node_claims} claims, {empty_nodes} without pods)");
    println!(
        "  wall {:.2} s, cpu {:.2} s, controller loops {:.2} s:",
        up_wall.as_secs_f64(),
        up_cpu.as_secs_f64(),
        meter.total().as_secs_f64()
    );
    meter.print();
    let writes_up = counting.counts();
    print_counts("  API writes", &writes_up);
    let events_up = events
        .by_reason
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    print_counts("  events", &events_up);
    print_cloud_calls(&metrics);
    println!(
        "  memory: RSS {:.0} MiB; index {:.1} KiB per pod, {:.1} KiB per node (Node + NodeClaim)",
        mib(rss_up),
        pod_bytes / 1024.0,
        node_bytes / 1024.0
    );

    let mut failed = world.unbound() > 0 || empty_nodes > 0;
    if !args.no_scale_down {
        // Scale-down: every other pod goes.
        let victims: Vec<String> = world.pods.keys().step_by(2).cloned().collect();
        for v in &victims {
            let _ = api.delete(Kind::Pod, &format!("default/{v}"));
            world.pods.remove(v);
            world.bound.remove(v);
        }
        let started = clock.now();
        let wall = Instant::now();
        let cpu = cpu_time("self");
        let mut meter = Meter::default();
        let writes_before = counting.total();
        let mut last_write = started;
        let mut last_total = writes_before;
        let mut replaced = 0;
        let mut tick = 0u64;
        loops.disruptor.journal.enable();
        let mut trace = trace::Trace::new(args.trace_disruption, started);
        loop {
            loops.tick(&mut world, &mut meter, tick, true).await;
            if tick.is_multiple_of(10) {
                replaced += world.replace_evicted();
                let s = lock(&state);
                trace.observe(loops.disruptor.journal.take(), &s);
                trace.watch_claims(&s, clock.now());
            }
            let total = counting.total();
            if total != last_total {
                last_total = total;
                last_write = clock.now();
            }
            let quiet = clock.now().since(last_write) >= Duration::from_secs(120);
            if quiet && world.unbound() == 0 && loops.disruptor.running().is_empty() {
                break;
            }
            if clock.now().since(started) > max {
                break;
            }
            tokio::time::advance(TICK).await;
            tick += 1;
        }
        let nodes_after = lock(&state).nodes.len();
        let (_, hwm) = memory("self");
        println!("scale-down ({} pods deleted)", victims.len());
        println!(
            "  settled              {:.1} s virtual after the delete (last write), {nodes} -> {nodes_after} nodes, {replaced} pods evicted and recreated",
            last_write.since(started).as_secs_f64()
        );
        println!(
            "  wall {:.2} s, cpu {:.2} s, controller loops {:.2} s:",
            wall.elapsed().as_secs_f64(),
            cpu_time("self").saturating_sub(cpu).as_secs_f64(),
            meter.total().as_secs_f64()
        );
        meter.print();
        trace.print_summary();
        let after = counting.counts();
        let delta: BTreeMap<&str, u64> = after
            .iter()
            .map(|(k, v)| (*k, v - writes_up.get(k).copied().unwrap_or(0)))
            .filter(|(_, v)| *v > 0)
            .collect();
        print_counts("  API writes", &delta);
        println!("peak RSS {:.0} MiB", mib(hwm));
        failed |= world.unbound() > 0;
    }
    if let Some(path) = &args.metrics_out {
        std::fs::write(path, metrics.encode())
            .with_context(|| format!("writing the metrics to {}", path.display()))?;
    }
    if failed {
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
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("karpenter_cloudprovider_duration_seconds_count{")
        else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let label = |k: &str| {
            labels
                .split(',')
                .find_map(|kv| kv.strip_prefix(&format!("{k}=\"")))
                .map(|v| v.trim_end_matches('"').to_string())
                .unwrap_or_default()
        };
        *calls
            .entry(format!("{} {}", label("controller"), label("method")))
            .or_default() += value.parse::<u64>().unwrap_or(0);
    }
    print_counts("  cloud calls", &calls);
}
