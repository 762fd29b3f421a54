//! The controller on the real control plane with `NODEWRIGHT_TEST_FAULTS` failing a tenth of
//! its Kubernetes calls and a tenth of its cloud calls (429s, 500s, timeouts and dropped
//! connections whose call went through): `inflate` 0 → 200 → 20 → 0 one-CPU pods over two
//! NodePools, the preferred one with a CPU limit that binds, and a PDB on the pods. Sampled
//! every half second and at the end of each step: every pod bound and Running once a step
//! is done and none ever Failed, the limited NodePool's launched CPU never above its limit
//! (counting claims not being deleted, as the limit is defined),
//! the PDB never short of its healthy minimum while the controller moves pods, no claim
//! created that the peak did not need, every instance (a Node of the sim cloud's agent)
//! named by one live claim once garbage collection has had its turn, and `/readyz` 200 at
//! the end. It prints the calls made and faults injected per edge, and what it checked.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use serde_json::Value;

use crate::kit::cluster::Options;
use crate::kit::controller::{Controller, Launch, http_get};
use crate::kit::inflate;
use crate::kit::read::{self, label, name, running};
use crate::kit::{ControlPlane, assert_clean_log, eventually, manifests};

/// The preferred NodePool's CPU limit: well below what 200 one-CPU pods need.
const LIMIT_CPU: f64 = 48.0;

/// The two NodePools (the kit's EC2NodeClass is applied beside them).
const MANIFESTS: &str = r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: preferred}
spec:
  weight: 10
  limits: {cpu: "48"}
  template:
    spec:
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m]}
        - {key: karpenter.k8s.aws/instance-size, operator: In, values: [2xlarge, 4xlarge]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 5s
    budgets: [{nodes: "100%"}]
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: overflow}
spec:
  weight: 1
  template:
    spec:
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m]}
        - {key: karpenter.k8s.aws/instance-size, operator: In, values: [2xlarge, 4xlarge]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 5s
    budgets: [{nodes: "100%"}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: inflate, namespace: default}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: inflate}}
"#;

/// `8`, `7910m`: cores.
fn cpu(q: &Value) -> f64 {
    let s = q.as_str().unwrap_or("0");
    match s.strip_suffix('m') {
        Some(milli) => milli.parse::<f64>().unwrap_or(0.0) / 1000.0,
        None => s.parse().unwrap_or(0.0),
    }
}

/// What the samples saw, across the whole run.
#[derive(Default)]
struct Watch {
    samples: usize,
    claims_seen: BTreeSet<String>,
    /// The most CPU the preferred NodePool's launched claims held at once, not counting
    /// claims being deleted: as upstream's NodePool usage, what a limit bounds. An instance
    /// whose claim is being deleted still runs until its termination finishes (longer when
    /// faults fail it), so room it frees may be taken before it is gone.
    peak_limited_cpu: f64,
    /// The same with the claims being deleted counted: reported, not bounded.
    peak_limited_cpu_with_deleting: f64,
    /// Provider ids of instances seen without a live claim naming them, and of those some
    /// claim named: the difference leaked (a launch whose answer was lost, garbage
    /// collection's to terminate).
    unclaimed_seen: BTreeSet<String>,
    claimed_seen: BTreeSet<String>,
    /// Whether the PDB is checked now: only while the controller alone moves pods.
    check_pdb: bool,
    pdb_samples: usize,
    violations: Vec<String>,
    readyz_not_200: usize,
    bound_max: usize,
}

impl Watch {
    fn leaked(&self) -> usize {
        self.unclaimed_seen.difference(&self.claimed_seen).count()
    }

    async fn sample(&mut self, client: &kube::Client, ctl: &Controller) -> (Vec<Value>, usize) {
        self.samples += 1;
        let claims = read::nodeclaims(client).await;
        let pods = read::pods(client, "default").await;
        let nodes = read::nodes(client).await;
        for c in &claims {
            self.claims_seen.insert(name(c).to_string());
        }
        let preferred = || {
            claims
                .iter()
                .filter(|c| c["metadata"]["labels"]["karpenter.sh/nodepool"] == "preferred")
        };
        let limited: f64 = preferred()
            .filter(|c| c["metadata"]["deletionTimestamp"].is_null())
            .map(|c| cpu(&c["status"]["capacity"]["cpu"]))
            .sum();
        let with_deleting: f64 = preferred()
            .map(|c| cpu(&c["status"]["capacity"]["cpu"]))
            .sum();
        self.peak_limited_cpu = self.peak_limited_cpu.max(limited);
        self.peak_limited_cpu_with_deleting =
            self.peak_limited_cpu_with_deleting.max(with_deleting);
        if limited > LIMIT_CPU {
            self.violations.push(format!(
                "preferred NodePool at {limited} CPU, limit {LIMIT_CPU}"
            ));
        }
        for p in &pods {
            if p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed") {
                self.violations
                    .push(format!("pod {:?} Failed", p.metadata.name));
            }
        }
        let claimed: BTreeSet<&str> = claims
            .iter()
            .filter_map(|c| c["status"]["providerID"].as_str())
            .collect();
        self.claimed_seen
            .extend(claimed.iter().map(|id| id.to_string()));
        for n in &nodes {
            let Some(id) = n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) else {
                continue;
            };
            if label(n, "sim.nodewright/agent").is_some() && !claimed.contains(id) {
                self.unclaimed_seen.insert(id.to_string());
            }
        }
        if self.check_pdb {
            self.pdb_samples += 1;
            let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
            if let Ok(pdb) = pdbs.get("inflate").await {
                let s = pdb.status.unwrap_or_default();
                // Until the disruption controller has seen the scale, its minimum is the
                // old one.
                if s.expected_pods == 20 && s.current_healthy < s.desired_healthy {
                    self.violations.push(format!(
                        "PDB: {} healthy, {} required",
                        s.current_healthy, s.desired_healthy
                    ));
                }
            }
        }
        let url = format!("http://127.0.0.1:{}/readyz", ctl.health_port);
        if http_get(&url).await.map(|(s, _)| s) != Some(200) {
            self.readyz_not_200 += 1;
        }
        let bound = running(&pods).len();
        self.bound_max = self.bound_max.max(bound);
        (claims, bound)
    }

    /// Samples every half second until `goal` holds for a sample, or fails after `within`.
    async fn until(
        &mut self,
        client: &kube::Client,
        ctl: &Controller,
        within: Duration,
        what: &str,
        goal: impl Fn(&[Value], usize) -> bool,
    ) -> Vec<Value> {
        let start = Instant::now();
        loop {
            let (claims, bound) = self.sample(client, ctl).await;
            assert!(
                self.violations.is_empty(),
                "{:?}\n{}",
                self.violations,
                ctl.log_text()
            );
            if goal(&claims, bound) {
                return claims;
            }
            assert!(
                start.elapsed() < within,
                "timed out after {within:?} waiting for {what}: {bound} pods running, {} claims\n{}",
                claims.len(),
                ctl.log_text()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// Every agent Node's instance named by exactly one live claim, and every launched claim's
/// instance a Node (nothing leaked, nothing launched twice), once garbage collection (every
/// 10 s at first, for instances older than 30 s) has had its turn.
async fn settle_leaks(client: &kube::Client, ctl: &Controller) {
    eventually(Duration::from_secs(120), "no leaked instance", || async {
        let claims = read::nodeclaims(client).await;
        let nodes = read::nodes(client).await;
        let mut named: BTreeMap<&str, usize> = BTreeMap::new();
        for c in &claims {
            if let Some(id) = c["status"]["providerID"].as_str() {
                *named.entry(id).or_insert(0) += 1;
            }
        }
        let instances: Vec<&str> = nodes
            .iter()
            .filter(|n| label(n, "sim.nodewright/agent").is_some())
            .filter_map(|n| n.spec.as_ref()?.provider_id.as_deref())
            .collect();
        (named.values().all(|n| *n == 1) && instances.iter().all(|i| named.contains_key(i)))
            .then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
}

/// `name{labels} value` lines of a metric family, summed per label set it names.
fn counters(metrics: &str, family: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for line in metrics.lines() {
        let Some(rest) = line.strip_prefix(family) else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once(' ') else {
            continue;
        };
        if let Ok(v) = value.parse::<f64>() {
            *out.entry(labels.to_string()).or_insert(0.0) += v;
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenth_of_every_call_failing_breaks_no_promise() {
    let Some(cp) = ControlPlane::start_with(
        "faults",
        Options {
            kcm_qps: Some((100, 200)),
        },
    ) else {
        return;
    };
    let started = Instant::now();
    cp.install_crds();
    let mut ctl = Launch::sim(&cp, "nodewright")
        .env(
            "NODEWRIGHT_TEST_FAULTS",
            "kube=0.1,cloud=0.1,seed=32,timeout=1s",
        )
        .start();
    ctl.wait_ready().await;
    cp.apply(manifests::NODE_CLASS)
        .unwrap_or_else(|e| panic!("{e}"));
    cp.apply(MANIFESTS).unwrap_or_else(|e| panic!("{e}"));
    let client = cp.client().await;
    let mut watch = Watch::default();

    // 0 → 200: every pod bound; no claim created beyond the ones the peak holds.
    cp.apply(&inflate(200)).unwrap();
    let up = Instant::now();
    let peak = watch
        .until(
            &client,
            &ctl,
            Duration::from_secs(150),
            "200 pods running",
            |_, b| b == 200,
        )
        .await;
    let up_took = up.elapsed();
    let peak_claims: BTreeSet<String> = peak.iter().map(|c| name(c).to_string()).collect();
    let extra: Vec<&String> = watch.claims_seen.difference(&peak_claims).collect();
    assert!(
        extra.is_empty(),
        "claims created that the peak does not hold: {extra:?}\n{}",
        ctl.log_text()
    );
    let created_up = watch.claims_seen.len();
    let limited_at_peak = watch.peak_limited_cpu;
    assert!(
        limited_at_peak > LIMIT_CPU / 2.0,
        "the preferred NodePool was barely used ({limited_at_peak} CPU): the limit did not bind"
    );
    settle_leaks(&client, &ctl).await;

    // 200 → 20: the pods left are consolidated onto fewer nodes through the Eviction API.
    cp.kubectl(&["scale", "deployment/inflate", "--replicas=20"]);
    let down = Instant::now();
    watch
        .until(&client, &ctl, Duration::from_secs(60), "20 pods", |_, b| {
            b == 20
        })
        .await;
    watch.check_pdb = true;
    // Done: twenty pods on no more nodes than twenty CPUs need, nothing deleting.
    watch
        .until(
            &client,
            &ctl,
            Duration::from_secs(240),
            "consolidation to 20 pods",
            |c, b| {
                let deleting = c
                    .iter()
                    .any(|c| c["metadata"]["deletionTimestamp"].is_string());
                b == 20 && !deleting && c.len() <= 4
            },
        )
        .await;
    let down_took = down.elapsed();
    watch.check_pdb = false;
    settle_leaks(&client, &ctl).await;

    // 20 → 0: every claim and every instance gone.
    cp.kubectl(&["scale", "deployment/inflate", "--replicas=0"]);
    let zero = Instant::now();
    watch
        .until(
            &client,
            &ctl,
            Duration::from_secs(180),
            "no claims and no nodes",
            |c, _| c.is_empty(),
        )
        .await;
    eventually(Duration::from_secs(90), "every sim Node gone", || async {
        read::nodes(&client).await.is_empty().then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
    let zero_took = zero.elapsed();

    let ready = http_get(&format!("http://127.0.0.1:{}/readyz", ctl.health_port)).await;
    assert_eq!(ready.map(|(s, _)| s), Some(200), "/readyz after the run");
    assert!(ctl.alive(), "the controller is still running");
    let metrics = ctl.metrics().await;
    let calls = counters(&metrics, "nodewright_fault_injection_calls_total");
    let faults = counters(&metrics, "nodewright_fault_injection_faults_total");
    let total = |m: &BTreeMap<String, f64>, edge: &str| -> f64 {
        m.iter()
            .filter(|(k, _)| k.contains(&format!("edge=\"{edge}\"")))
            .map(|(_, v)| v)
            .sum()
    };
    for edge in ["kube", "cloud"] {
        assert!(
            total(&faults, edge) > 0.0,
            "no {edge} faults injected: {faults:?}"
        );
    }
    assert_clean_log(&ctl.log_text());
    eprintln!(
        "faults: kube {} of {} calls failed, cloud {} of {}; by kind {faults:?}",
        total(&faults, "kube"),
        total(&calls, "kube"),
        total(&faults, "cloud"),
        total(&calls, "cloud"),
    );
    eprintln!(
        "faults: 0→200 bound in {:.1} s ({created_up} claims, preferred NodePool peak {limited_at_peak} of {LIMIT_CPU} CPU, {} with claims being deleted); \
         200→20 consolidated in {:.1} s; 20→0 in {:.1} s; run {:.1} s",
        up_took.as_secs_f64(),
        watch.peak_limited_cpu_with_deleting,
        down_took.as_secs_f64(),
        zero_took.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    eprintln!(
        "faults: {} samples ({} with the PDB checked), {} pods bound at most, {} claims in all, \
         {} instances leaked by lost answers and collected, /readyz not 200 in {} samples",
        watch.samples,
        watch.pdb_samples,
        watch.bound_max,
        watch.claims_seen.len(),
        watch.leaked(),
        watch.readyz_not_200
    );
}
