//! One scenario through both shells, decision by decision: the simulator on its virtual clock,
//! and the controller's own loops (`run::spawn_all`, as `nodewright controller` starts them)
//! on the in-memory API server with tokio's clock paused, the simulated cloud behind them and
//! the kubelets, kube-scheduler and ReplicaSet controller around them written to the
//! simulator's rules, so the world is the same on both sides and only the shells differ.
//!
//! Each shell's run is written down as the same kind of lines: a claim launched (its instance
//! type, zone and capacity type, at the moment it was decided), a disruption command started
//! (the command as core prints it, without node names, which differ between the shells), a
//! command rolled back (its method and why, in core's words), a disrupted node gone. The two
//! lists must hold the same lines in the same order, each at nearly the same time: what
//! `simulate` shows is what the controller does.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use nodewright_api::quantity;
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
use nodewright_controller::state::{ClusterState, Kind, Object, PodRecord, SharedState, lock};
use nodewright_controller::supervise::Supervisor;
use nodewright_core::disruption::queue::COMMAND_TIMEOUT;
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

/// `TEAM` is replaced to drift the pool's nodes; `EXPIRE` by the case's `expireAfter`.
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
      expireAfter: EXPIRE
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 30s
    budgets: [{ nodes: "2" }]
"#;

/// One pod per node (hostname anti-affinity), so which pod the ReplicaSet takes on a
/// scale-down, and which node the scheduler picks, cannot make the shells differ.
const SOLO: &str = r#"
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

/// Several pods per node: a scale-down leaves nodes part-used, for consolidation.
const PACKED: &str = r#"
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
      containers: [{ name: c, image: pause, resources: { requests: { cpu: 1500m, memory: 2Gi } } }]
"#;

/// What happens when: the Deployment's replicas, or the pool's template changed.
enum Step {
    Scale(u32),
    Relabel(&'static str),
}

/// A scenario: the Deployment `web` and the steps, each at a second from the start.
struct Case {
    deployment: &'static str,
    steps: &'static [(u64, Step)],
    until: Duration,
    /// The pool's `expireAfter`.
    expire_after: &'static str,
    /// From a running instance to its Ready Node (the simulator's `registrationDelay`).
    registration: Duration,
}

/// From the launch call to a running instance, as the simulator's cloud has it.
const LAUNCH_DELAY: Duration = Duration::from_secs(3);
/// From a running instance to a Ready Node, as the simulator's cloud defaults have it.
const REGISTRATION: Duration = Duration::from_secs(35);

/// How far apart in time the two shells may make the same decision. The simulator acts at the
/// instant something is due; the controller's loops poll: the per-object loops every second,
/// the disruption loop every 10 s, so a change the simulator acts on at once can reach the
/// controller's next disruption round one period later.
const SLACK: Duration = Duration::from_secs(11);

/// How far apart a disrupted node may go: its command's [`SLACK`], and the 6 s the
/// controller's per-object loops take (one pass each, a second apart) to see the replacement
/// initialized, drain the node, terminate its instance and, once the cloud reports it
/// terminated (30 s later on both sides), release its claim; the simulator does each at the
/// instant it is due.
const SLACK_GONE: Duration = Duration::from_secs(17);

#[derive(Clone, Debug, PartialEq)]
struct Line {
    at: Duration,
    what: String,
}

fn yaml(text: &str) -> Value {
    serde_yaml::from_str(text).unwrap()
}

fn pool(case: &Case, team: &str) -> Value {
    yaml(
        &POOL
            .replace("TEAM", team)
            .replace("EXPIRE", case.expire_after),
    )
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

fn scenario(case: &Case) -> String {
    let inline = |v: Value| format!("  - inline: {}\n", serde_json::to_string(&v).unwrap());
    let mut s = format!(
        "seed: 1\nuntil: {}s\ncloud: {{ registrationDelay: {}s }}\nmanifests:\n",
        case.until.as_secs(),
        case.registration.as_secs()
    );
    s += &inline(yaml(CLASS));
    s += &inline(pool(case, "red"));
    s += &inline(yaml(case.deployment));
    s += "steps:\n";
    for (at, step) in case.steps {
        match step {
            Step::Scale(n) => {
                s += &format!("  - {{ at: {at}s, scale: default/web, replicas: {n} }}\n")
            }
            Step::Relabel(team) => {
                s += &format!(
                    "  - at: {at}s\n    apply:\n{}",
                    inline(pool(case, team)).replace("  - ", "      - ")
                )
            }
        }
    }
    s
}

fn simulator_lines(case: &Case) -> Vec<Line> {
    let text = scenario(case);
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
            // `drift: replacements not initialized within 10 minutes; targets untainted`
            "disruption-failed" => out.push(Line {
                at: e.at,
                what: format!(
                    "rolled back {}",
                    e.message.trim_end_matches("; targets untainted")
                ),
            }),
            // `default-00002 (c6a.2xlarge us-east-1a on-demand $0.3060/h): instance terminated; ...`
            "terminated" => out.push(Line {
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
    registration: Duration,
}

impl World {
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

    /// The ReplicaSet controller: new pods up to the replicas; above them, deleted in its
    /// order (the simulator's too): unbound first, then those sharing a node with more
    /// replicas, then the newest.
    fn replicate(&mut self) {
        let pods: Vec<(String, Option<String>)> = {
            let s = lock(&self.state);
            s.pods
                .iter()
                .filter_map(|(k, p)| {
                    let node = p.node_name.clone();
                    Some((k.strip_prefix("default/")?.to_string(), node))
                })
                .collect()
        };
        for _ in pods.len()..self.replicas as usize {
            self.next += 1;
            let name = format!("web-{:05}", self.next);
            self.api.put_value(Kind::Pod, self.pod_json(&name));
        }
        let excess = pods.len().saturating_sub(self.replicas as usize);
        let mut colocated: BTreeMap<&str, usize> = BTreeMap::new();
        for n in pods.iter().filter_map(|(_, n)| n.as_deref()) {
            *colocated.entry(n).or_default() += 1;
        }
        let mut order: Vec<&(String, Option<String>)> = pods.iter().collect();
        order.sort_by_key(|(name, node)| {
            let together = node.as_deref().map_or(0, |n| colocated[n]);
            (node.is_some(), Reverse(together), Reverse(name.clone()))
        });
        for (name, _) in order.into_iter().take(excess) {
            self.api
                .delete(Kind::Pod, &format!("default/{name}"))
                .unwrap();
        }
    }

    /// The kubelets: a Node for each instance once [`LAUNCH_DELAY`] and the case's
    /// registration time have passed since its launch.
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
            LAUNCH_DELAY + self.registration,
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

    /// kube-scheduler, as the simulator has it (`nodewright_sim::kube_scheduler`): pending
    /// pods oldest first, each to the Ready, untainted node it fits with the largest share of
    /// its cpu free (then the first name), a node with a `web` pod refused when the pods keep
    /// apart (hostname anti-affinity). It does not follow the controller's nominations.
    fn schedule(&mut self) {
        let apart = !self.template["spec"]["affinity"].is_null();
        let binds: Vec<(String, String)> = {
            let s = lock(&self.state);
            let resource = |list: Option<&BTreeMap<String, Quantity>>, name: &str| {
                list.and_then(|l| l.get(name))
                    .map_or(0, |q| quantity::parse_resource(name, &q.0).unwrap())
            };
            // Free cpu and memory, allocatable cpu and whether a `web` pod runs there, per
            // Ready, untainted node.
            let mut room: BTreeMap<&str, (i64, i64, i64, bool)> = s
                .nodes
                .iter()
                .filter(|(_, n)| {
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
                    let cordoned = n.spec.as_ref().and_then(|sp| sp.unschedulable) == Some(true);
                    ready && !tainted && !cordoned
                })
                .map(|(name, n)| {
                    let alloc = n.status.as_ref().and_then(|st| st.allocatable.as_ref());
                    let cpu = resource(alloc, "cpu");
                    (name.as_str(), (cpu, resource(alloc, "memory"), cpu, false))
                })
                .collect();
            // The index keeps the engine's model of bound and provisionable pods, whose
            // requests are the containers' (the template has no init containers).
            let requests = |p: &PodRecord| -> (i64, i64) {
                let m = p.model().unwrap().as_ref().unwrap();
                (m.requests.get("cpu"), m.requests.get("memory"))
            };
            for p in s.pods.values() {
                if let Some(r) = p.node_name.as_deref().and_then(|n| room.get_mut(n)) {
                    let (c, m) = requests(p);
                    r.0 -= c;
                    r.1 -= m;
                    r.3 = true;
                }
            }
            // Pod names follow creation order.
            let mut out = Vec::new();
            for (key, p) in s.pods.iter().filter(|(_, p)| p.provisionable()) {
                let (c, m) = requests(p);
                let best = room
                    .iter()
                    .filter(|(_, r)| r.0 >= c && r.1 >= m && !(apart && r.3))
                    .min_by_key(|(name, r)| (-(r.0 * 1000 / r.2.max(1)), **name))
                    .map(|(name, _)| *name);
                if let Some(node) = best {
                    let r = room.get_mut(node).unwrap();
                    r.0 -= c;
                    r.1 -= m;
                    r.3 = true;
                    out.push((
                        key.strip_prefix("default/").unwrap().to_string(),
                        node.to_string(),
                    ));
                }
            }
            out
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

/// `drift replace of 1 node(s) with 1 replacement(s), saving $0.000/h: <why>` → the
/// simulator's `rolled back drift: <why>`; the why is core's wording on both sides.
fn rolled_back(detail: &str) -> String {
    let method = detail.split(' ').next().unwrap_or_default();
    let why = detail.split_once(": ").map_or("", |(_, why)| why);
    format!("rolled back {method}: {why}")
}

async fn controller_lines(case: &Case) -> Vec<Line> {
    let state = ClusterState::shared();
    let clock = Clock::starting_at(START);
    let api = Arc::new(MemoryApi::new(state.clone(), clock));
    let cloud = Arc::new(SimCloud::new(SimCloudConfig::default()).unwrap());
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
    api.put_value(Kind::NodePool, pool(case, "red"));
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
        template: yaml(case.deployment)["spec"]["template"].clone(),
        replicas: 0,
        next: 0,
        registered: BTreeSet::new(),
        registration: case.registration,
    };
    let mut recorder = Recorder::default();
    let mut steps = case.steps.iter().peekable();
    let tick = Duration::from_millis(100);
    loop {
        let at = clock.now().since(START);
        if at >= case.until {
            break;
        }
        while let Some((_, step)) = steps.next_if(|(t, _)| Duration::from_secs(*t) <= at) {
            match step {
                Step::Scale(n) => world.replicas = *n,
                Step::Relabel(team) => {
                    api.put_value(Kind::NodePool, pool(case, team));
                }
            }
        }
        world.replicate();
        world.kubelets();
        world.schedule();
        for e in disruptor.journal.take() {
            let what = match e.what {
                What::Started => format!("disrupt {}", without_node_names(&e.detail)),
                What::RolledBack => rolled_back(&e.detail),
                _ => continue,
            };
            recorder.lines.push(Line {
                at: e.at.since(START),
                what,
            });
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

/// Runs `case` through both shells and compares their lines; returns the simulator's.
async fn same_decisions(case: &Case) -> Vec<Line> {
    same_decisions_both(case).await.0
}

/// Runs `case` through both shells and compares their lines; returns the simulator's and the
/// controller's. The decisions (launches, commands, rollbacks) must match in order, and the
/// removals in theirs: a node goes a few seconds later in the controller, which can put a
/// removal after the launch for the pods it evicted.
async fn same_decisions_both(case: &Case) -> (Vec<Line>, Vec<Line>) {
    let sim = simulator_lines(case);
    let ctl = controller_lines(case).await;
    let both = format!(
        "simulator:\n{}\ncontroller:\n{}",
        render(&sim),
        render(&ctl)
    );
    for (removals, slack) in [(false, SLACK), (true, SLACK_GONE)] {
        let part = |ls: &[Line]| -> Vec<Line> {
            ls.iter()
                .filter(|l| l.what.starts_with("gone") == removals)
                .cloned()
                .collect()
        };
        let (s, c) = (part(&sim), part(&ctl));
        let what = |ls: &[Line]| ls.iter().map(|l| l.what.clone()).collect::<Vec<_>>();
        assert_eq!(what(&s), what(&c), "the shells differ\n{both}");
        for (s, c) in s.iter().zip(&c) {
            let apart = s.at.abs_diff(c.at);
            assert!(
                apart <= slack,
                "`{}` {:.1} s apart\n{both}",
                s.what,
                apart.as_secs_f64()
            );
        }
    }
    println!("{both}");
    (sim, ctl)
}

fn has(lines: &[Line], kind: &str) -> bool {
    lines.iter().any(|l| l.what.starts_with(kind))
}

#[tokio::test(start_paused = true)]
async fn a_scale_down_and_a_template_edit_give_the_same_emptiness_and_drift() {
    let case = Case {
        deployment: SOLO,
        steps: &[
            (0, Step::Scale(5)),
            (300, Step::Scale(2)),
            (600, Step::Relabel("blue")),
            (1200, Step::Scale(3)),
        ],
        until: Duration::from_secs(1500),
        expire_after: "Never",
        registration: REGISTRATION,
    };
    let lines = same_decisions(&case).await;
    for kind in ["launch", "disrupt emptiness", "disrupt drift", "gone"] {
        assert!(has(&lines, kind), "no `{kind}`");
    }
}

#[tokio::test(start_paused = true)]
async fn a_scale_down_of_packed_nodes_gives_the_same_consolidation() {
    let case = Case {
        deployment: PACKED,
        steps: &[
            (0, Step::Scale(14)),
            (300, Step::Scale(9)),
            (900, Step::Scale(3)),
        ],
        until: Duration::from_secs(1500),
        expire_after: "Never",
        registration: REGISTRATION,
    };
    let lines = same_decisions(&case).await;
    assert!(has(&lines, "disrupt single-node-consolidation: replace"));
    assert!(has(&lines, "disrupt emptiness"));
}

#[tokio::test(start_paused = true)]
async fn staggered_arrivals_a_scale_down_and_expiry_give_the_same_decisions() {
    let case = Case {
        deployment: PACKED,
        steps: &[
            (0, Step::Scale(4)),
            (60, Step::Scale(8)),
            (120, Step::Scale(12)),
            (400, Step::Scale(5)),
        ],
        until: Duration::from_secs(2400),
        expire_after: "30m",
        registration: REGISTRATION,
    };
    let lines = same_decisions(&case).await;
    assert!(has(&lines, "disrupt expiration"));
}

/// Four nodes of two pods each, then the Deployment cut to four a pod at a time: the
/// ReplicaSet takes one from the fullest node each time, so every node is left with one pod,
/// and two nodes' pods fit on the other two.
#[tokio::test(start_paused = true)]
async fn a_scale_down_a_pod_at_a_time_gives_the_same_multi_node_consolidation() {
    let case = Case {
        deployment: PACKED,
        steps: &[
            (0, Step::Scale(2)),
            (60, Step::Scale(4)),
            (120, Step::Scale(6)),
            (180, Step::Scale(8)),
            (400, Step::Scale(7)),
            (402, Step::Scale(6)),
            (404, Step::Scale(5)),
            (406, Step::Scale(4)),
        ],
        until: Duration::from_secs(1200),
        expire_after: "Never",
        registration: REGISTRATION,
    };
    let lines = same_decisions(&case).await;
    assert!(has(&lines, "disrupt multi-node-consolidation: delete"));
}

/// Instances that take 20 minutes to register: each claim reaches the registration timeout
/// (15 minutes after its launch), is deleted with its instance, and its pod gets a new one.
#[tokio::test(start_paused = true)]
async fn a_node_that_never_registers_times_out_the_same_way() {
    let case = Case {
        deployment: SOLO,
        steps: &[(0, Step::Scale(1))],
        until: Duration::from_secs(2000),
        expire_after: "Never",
        registration: Duration::from_secs(20 * 60),
    };
    let lines = same_decisions(&case).await;
    let count = |kind: &str| lines.iter().filter(|l| l.what.starts_with(kind)).count();
    assert_eq!((count("launch"), count("gone")), (3, 2), "{lines:?}");
}

/// Instances that take 11 minutes to register, and the pool's template changed once the
/// first node has: the drift command's replacement is not initialized 10 minutes after the
/// command started, so the queue rolls it back (upstream's command timeout) and the target is
/// untainted and kept. The replacement is kept too, as upstream keeps it; once it registers,
/// the pod fits there (a round would not move it to an uninitialized node before), and the
/// drifted node goes by a drift delete.
#[tokio::test(start_paused = true)]
async fn a_drift_replacement_not_ready_in_time_is_rolled_back_the_same_way() {
    let case = Case {
        deployment: SOLO,
        steps: &[(0, Step::Scale(1)), (720, Step::Relabel("blue"))],
        until: Duration::from_secs(1800),
        expire_after: "Never",
        registration: Duration::from_secs(11 * 60),
    };
    let (sim, ctl) = same_decisions_both(&case).await;
    for lines in [&sim, &ctl] {
        let at = |kind: &str| {
            let l = lines.iter().find(|l| l.what.starts_with(kind));
            l.unwrap_or_else(|| panic!("no `{kind}` in {lines:?}")).at
        };
        let rolled_back = at("rolled back drift: replacements not initialized");
        assert!(rolled_back - at("disrupt drift: replace") >= COMMAND_TIMEOUT);
        // The target outlived its rolled-back command, to go by the next one.
        assert!(at("disrupt drift: delete") > rolled_back);
        assert!(at("gone") > at("disrupt drift: delete"));
    }
}
