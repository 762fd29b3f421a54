//! One scenario through both shells, decision by decision: the simulator on its virtual clock,
//! and the controller's own loops (`run::spawn_all`, as `nodewright controller` starts them)
//! on the in-memory API server with tokio's clock paused, the simulated cloud behind them and
//! stand-ins for the kubelets, kube-scheduler and the ReplicaSet controller around them.
//!
//! Each shell's run is written down as the same kind of lines: a claim launched (its instance
//! type, zone and capacity type, at the moment it was decided), a disruption command started
//! (the command as core prints it, without node names, which differ between the shells), a
//! disrupted node gone. The two lists must hold the same lines in the same order, each at
//! nearly the same time: what `simulate` shows is what the controller does.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use nodewright_cloud::CloudProvider;
use nodewright_cloud_sim::kwok::{self, Action};
use nodewright_cloud_sim::{SimCloud, SimCloudConfig};
use nodewright_controller::clock::Clock;
use nodewright_controller::context::Context;
use nodewright_controller::disruption::journal::What;
use nodewright_controller::events::MemoryEvents;
use nodewright_controller::memory::MemoryApi;
use nodewright_controller::metrics::Metrics;
use nodewright_controller::run::spawn_all;
use nodewright_controller::settings::Settings;
use nodewright_controller::state::{ClusterState, Kind, Object, SharedState, lock, provisionable};
use nodewright_controller::supervise::Supervisor;
use nodewright_core::time::Timestamp;
use serde_json::{Value, json};

/// The simulator's epoch, so both shells print the same clock.
const START: Timestamp = Timestamp(1_717_200_000_000);

const CLASS: &str = r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: { name: default }
spec:
  amiSelectorTerms: [{ alias: al2023@latest }]
  role: node-role
  subnetSelectorTerms: [{ tags: { demo: "true" } }]
  securityGroupSelectorTerms: [{ tags: { demo: "true" } }]
"#;

/// `TEAM` is replaced to drift the pool's nodes.
const POOL: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: { name: default }
spec:
  template:
    metadata: { labels: { team: TEAM } }
    spec:
      nodeClassRef: { group: karpenter.k8s.aws, kind: EC2NodeClass, name: default }
      requirements:
        - { key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m] }
        - { key: karpenter.sh/capacity-type, operator: In, values: [on-demand] }
        - { key: kubernetes.io/arch, operator: In, values: [amd64] }
        - { key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a] }
      expireAfter: Never
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 30s
    budgets: [{ nodes: "2" }]
"#;

/// One pod per node (hostname anti-affinity), so which pod the ReplicaSet takes on a
/// scale-down, and which node the scheduler picks, cannot make the shells differ.
const DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: { name: web, namespace: default }
spec:
  replicas: 0
  selector: { matchLabels: { app: web } }
  template:
    metadata: { labels: { app: web } }
    spec:
      terminationGracePeriodSeconds: 0
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - labelSelector: { matchLabels: { app: web } }
              topologyKey: kubernetes.io/hostname
      containers: [{ name: c, image: pause, resources: { requests: { cpu: "1", memory: 1Gi } } }]
"#;

/// What happens when: the Deployment's replicas, then the pool's template changed.
enum Step {
    Scale(u32),
    Relabel(&'static str),
}

const STEPS: [(u64, Step); 4] = [
    (0, Step::Scale(5)),
    (300, Step::Scale(2)),
    (600, Step::Relabel("blue")),
    (1200, Step::Scale(3)),
];

const UNTIL: Duration = Duration::from_secs(1500);

/// From the launch call to a Ready node, as the simulator's cloud defaults have it (3 s to a
/// running instance, 35 s more to register).
const READY_AFTER: Duration = Duration::from_secs(38);

/// How far apart in time the two shells may make the same decision. The simulator acts at the
/// instant something is due; the controller's loops poll: the per-object loops every second,
/// the disruption loop every 10 s, so a change the simulator acts on at once can reach the
/// controller's next disruption round one period later.
const SLACK: Duration = Duration::from_secs(11);

/// How far apart a disrupted node may go: its command's [`SLACK`], and the few passes of the
/// per-object loops the controller takes to drain it, terminate its instance and let its
/// claim go, which the simulator does at once.
const SLACK_GONE: Duration = Duration::from_secs(15);

#[derive(Clone, Debug, PartialEq)]
struct Line {
    at: Duration,
    what: String,
}

fn yaml(text: &str) -> Value {
    serde_yaml::from_str(text).unwrap()
}

fn pool(team: &str) -> Value {
    yaml(&POOL.replace("TEAM", team))
}

/// `name/type/capacity` → `type/capacity`: node names differ between the shells.
fn without_node_names(command: &str) -> String {
    command
        .split(' ')
        .map(|w| match w.split_once('/') {
            Some((name, rest)) if rest.contains('/') => {
                let bracket = if name.starts_with('[') { "[" } else { "" };
                format!("{bracket}{rest}")
            }
            _ => w.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

// ---- the simulator ----

fn scenario() -> String {
    let inline = |v: Value| format!("  - inline: {}\n", serde_json::to_string(&v).unwrap());
    let mut s = format!("seed: 1\nuntil: {}s\nmanifests:\n", UNTIL.as_secs());
    s += &inline(yaml(CLASS));
    s += &inline(pool("red"));
    s += &inline(yaml(DEPLOYMENT));
    s += "steps:\n";
    for (at, step) in &STEPS {
        match step {
            Step::Scale(n) => {
                s += &format!("  - {{ at: {at}s, scale: default/web, replicas: {n} }}\n")
            }
            Step::Relabel(team) => {
                s += &format!(
                    "  - at: {at}s\n    apply:\n{}",
                    inline(pool(team)).replace("  - ", "      - ")
                )
            }
        }
    }
    s
}

fn simulator_lines() -> Vec<Line> {
    let text = scenario();
    let s = nodewright_sim::scenario::parse_scenario(
        "shells.yaml",
        &text,
        &BTreeMap::<&'static str, &'static str>::new(),
    )
    .unwrap_or_else(|e| panic!("{e}\n{text}"));
    let catalog = nodewright_aws_model::catalog::embedded().unwrap();
    let report = nodewright_sim::run(&s, &catalog, &mut |_| {}).unwrap();
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    let mut decided: BTreeMap<String, Duration> = BTreeMap::new();
    let mut out = Vec::new();
    for e in &report.timeline {
        let word = |i: usize| e.message.split(' ').nth(i).unwrap_or_default().to_string();
        match e.kind.as_str() {
            // `NodeClaim default-00001 (NodePool default): ...`
            "launch" => {
                decided.insert(word(1), e.at);
            }
            // `default-00001 launched as c6a.large in us-east-1a (on-demand) at ...`
            "launched" => out.push(Line {
                at: decided[&word(0)],
                what: format!(
                    "launch {} {} {}",
                    word(3),
                    word(5),
                    word(6).trim_matches(['(', ')'])
                ),
            }),
            "disruption-started" => out.push(Line {
                at: e.at,
                what: format!("disrupt {}", without_node_names(&e.message)),
            }),
            // `default-00002 (c6a.2xlarge us-east-1a on-demand $0.3060/h) drained and removed ...`
            "disrupted" => out.push(Line {
                at: e.at,
                what: format!("gone {}", word(1).trim_start_matches('(')),
            }),
            _ => {}
        }
    }
    out.sort_by(|a, b| a.at.cmp(&b.at).then(a.what.cmp(&b.what)));
    out
}

// ---- the controller ----

/// The kubelets, kube-scheduler and the ReplicaSet controller around the controller.
struct World {
    api: Arc<MemoryApi>,
    state: SharedState,
    cloud: Arc<SimCloud>,
    clock: Clock,
    template: Value,
    replicas: u32,
    next: u32,
    registered: BTreeSet<String>,
}

impl World {
    fn pods(&self) -> Vec<String> {
        let s = lock(&self.state);
        s.pods
            .keys()
            .filter_map(|k| k.strip_prefix("default/"))
            .map(str::to_string)
            .collect()
    }

    fn pod_json(&self, name: &str) -> Value {
        let mut spec = self.template["spec"].clone();
        spec["schedulerName"] = json!("default-scheduler");
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": format!("pod-{name}"),
                "labels": self.template["metadata"]["labels"].clone(),
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                    "uid": "rs-web", "controller": true}]},
            "spec": spec,
            "status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
        })
    }

    /// The ReplicaSet controller: new pods up to the replicas, the newest deleted above them.
    fn replicate(&mut self) {
        let mut pods = self.pods();
        while pods.len() < self.replicas as usize {
            self.next += 1;
            let name = format!("web-{:05}", self.next);
            self.api.put_value(Kind::Pod, self.pod_json(&name));
            pods.push(name);
        }
        pods.sort();
        while pods.len() > self.replicas as usize {
            let name = pods.pop().unwrap();
            self.api
                .delete(Kind::Pod, &format!("default/{name}"))
                .unwrap();
        }
    }

    /// The kubelets: a Node for each instance running for [`READY_AFTER`] since its launch.
    fn kubelets(&mut self) {
        let instances = self.cloud.instances();
        let claims: BTreeMap<String, _> = {
            let s = lock(&self.state);
            instances
                .iter()
                .filter_map(|i| i.instance.nodeclaim())
                .filter_map(|c| s.nodeclaims.get(c).map(|o| (c.to_string(), o.clone())))
                .collect()
        };
        let now = tokio::time::Instant::now();
        let wall = self.clock.now_time().0;
        for a in kwok::plan(
            &instances,
            &claims,
            &self.registered,
            now,
            READY_AFTER,
            wall,
        ) {
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

    /// kube-scheduler, following the controller's nominations: a pending pod nominated to a
    /// claim whose Node is Ready and untainted is bound there.
    fn schedule(&mut self) {
        let now = self.clock.now();
        let binds: Vec<(String, String)> = {
            let s = lock(&self.state);
            s.pods
                .iter()
                .filter(|(_, p)| provisionable(p))
                .filter_map(|(key, _)| {
                    let node = s
                        .nominated_claim(key, now)?
                        .status
                        .as_ref()?
                        .node_name
                        .clone()?;
                    let n = s.nodes.get(&node)?;
                    let ready = n
                        .status
                        .as_ref()?
                        .conditions
                        .as_ref()?
                        .iter()
                        .any(|c| c.type_ == "Ready" && c.status == "True");
                    let tainted = n.spec.as_ref()?.taints.as_ref().is_some_and(|ts| {
                        ts.iter()
                            .any(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
                    });
                    let name = key.strip_prefix("default/")?.to_string();
                    (ready && !tainted).then_some((name, node))
                })
                .collect()
        };
        for (name, node) in binds {
            let mut p = self.pod_json(&name);
            p["spec"]["nodeName"] = json!(node);
            p["status"] = json!({"phase": "Running", "conditions": [
                {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]});
            self.api.put_value(Kind::Pod, p);
        }
    }
}

/// What the controller did, written down as the simulator's lines are.
#[derive(Default)]
struct Recorder {
    /// Claims seen, with when they were first seen (decided) and their instance once launched.
    claims: BTreeMap<String, (Duration, Option<String>)>,
    lines: Vec<Line>,
}

impl Recorder {
    fn observe(&mut self, state: &ClusterState, at: Duration) {
        for (name, c) in &state.nodeclaims {
            let (_, launched) = self.claims.entry(name.clone()).or_insert((at, None));
            let labels = c.metadata.labels.clone().unwrap_or_default();
            let has_instance = c
                .status
                .as_ref()
                .and_then(|s| s.provider_id.as_ref())
                .is_some();
            if launched.is_none() && has_instance {
                let l = |k: &str| labels.get(k).cloned().unwrap_or_default();
                *launched = Some(l("node.kubernetes.io/instance-type"));
                let decided = self.claims[name].0;
                self.lines.push(Line {
                    at: decided,
                    what: format!(
                        "launch {} {} {}",
                        l("node.kubernetes.io/instance-type"),
                        l("topology.kubernetes.io/zone"),
                        l("karpenter.sh/capacity-type")
                    ),
                });
            }
        }
        let gone: Vec<String> = self
            .claims
            .iter()
            .filter(|(n, (_, l))| l.is_some() && !state.nodeclaims.contains_key(*n))
            .map(|(n, _)| n.clone())
            .collect();
        for n in gone {
            let (_, launched) = self.claims.remove(&n).unwrap();
            self.lines.push(Line {
                at,
                what: format!("gone {}", launched.unwrap()),
            });
        }
    }
}

async fn controller_lines() -> Vec<Line> {
    let state = ClusterState::shared();
    let clock = Clock::starting_at(START);
    let api = Arc::new(MemoryApi::new(state.clone(), clock));
    // The simulator's cloud takes no time to terminate an instance; this one is set alike.
    let config = SimCloudConfig {
        termination_delay: Duration::ZERO,
        ..SimCloudConfig::default()
    };
    let cloud = Arc::new(SimCloud::new(config).unwrap());
    let provider: Arc<dyn CloudProvider> = cloud.clone();
    let ctx = Context {
        state: state.clone(),
        writer: api.clone(),
        cloud: provider,
        clock,
        metrics: Arc::new(Metrics::new()),
        events: Arc::new(MemoryEvents::new()),
    };
    api.put_value(Kind::NodeClass, yaml(CLASS));
    api.put_value(Kind::NodePool, pool("red"));
    api.mark_synced();
    let mut loops = Supervisor::new();
    let (_leading, leader) = tokio::sync::watch::channel(true);
    let disruptor = spawn_all(&mut loops, &ctx, &Settings::default(), leader, None);
    disruptor.journal.enable();
    let mut world = World {
        api: api.clone(),
        state: state.clone(),
        cloud,
        clock,
        template: yaml(DEPLOYMENT)["spec"]["template"].clone(),
        replicas: 0,
        next: 0,
        registered: BTreeSet::new(),
    };
    let mut recorder = Recorder::default();
    let mut steps = STEPS.iter().peekable();
    let tick = Duration::from_millis(100);
    loop {
        let at = clock.now().since(START);
        if at >= UNTIL {
            break;
        }
        while let Some((_, step)) = steps.next_if(|(t, _)| Duration::from_secs(*t) <= at) {
            match step {
                Step::Scale(n) => world.replicas = *n,
                Step::Relabel(team) => {
                    api.put_value(Kind::NodePool, pool(team));
                }
            }
        }
        world.replicate();
        world.kubelets();
        world.schedule();
        for e in disruptor.journal.take() {
            if e.what == What::Started {
                recorder.lines.push(Line {
                    at: e.at.since(START),
                    what: format!("disrupt {}", without_node_names(&e.detail)),
                });
            }
        }
        recorder.observe(&lock(&state), at);
        tokio::time::sleep(tick).await;
    }
    let mut out = recorder.lines;
    out.sort_by(|a, b| a.at.cmp(&b.at).then(a.what.cmp(&b.what)));
    out
}

fn render(lines: &[Line]) -> String {
    lines
        .iter()
        .map(|l| format!("{:>7.1}s  {}", l.at.as_secs_f64(), l.what))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(start_paused = true)]
async fn the_simulator_and_the_controller_make_the_same_decisions_at_the_same_times() {
    let sim = simulator_lines();
    let ctl = controller_lines().await;
    let both = format!(
        "simulator:\n{}\ncontroller:\n{}",
        render(&sim),
        render(&ctl)
    );
    let what = |ls: &[Line]| ls.iter().map(|l| l.what.clone()).collect::<Vec<_>>();
    assert_eq!(what(&sim), what(&ctl), "the decisions differ\n{both}");
    for (s, c) in sim.iter().zip(&ctl) {
        let apart = if s.at > c.at {
            s.at - c.at
        } else {
            c.at - s.at
        };
        let slack = if s.what.starts_with("gone") {
            SLACK_GONE
        } else {
            SLACK
        };
        assert!(
            apart <= slack,
            "`{}` {:.1} s apart\n{both}",
            s.what,
            apart.as_secs_f64()
        );
    }
    // The scenario's steps each led to decisions: launches, the scale-down's removals and
    // the drift's replacements.
    for kind in ["launch", "disrupt emptiness", "disrupt drift", "gone"] {
        assert!(
            sim.iter().any(|l| l.what.starts_with(kind)),
            "no `{kind}`\n{both}"
        );
    }
}
