//! `nodewright bench cluster`: the controller with its simulated cloud on a real control
//! plane, at a scale no test runs. Given the kubeconfig of a fresh control plane (e.g.
//! `scripts/cluster up`), it installs the CRDs, starts `nodewright controller --cloud-provider
//! sim` as a child process (its node agent in a second one, `node-agent --cloud-provider sim`,
//! unless `--agent-in-controller`), and applies a NodePool of 8-vCPU nodes and a Deployment whose
//! pods fill such a node `--pods-per-node` at a time. Phases:
//!
//! 1. scale-up: `--pods` pods at once, until every one is bound;
//! 2. churn (`--churn-minutes`): every two minutes the Deployment is resized to a seeded
//!    share between half and all of `--pods`, so pods and nodes come and go;
//! 3. scale-down: to zero, until no NodeClaim is left.
//!
//! Every second it samples the controller's resident memory (and the agent's); every phase
//! reports its time, the pods, Nodes and NodeClaims at its end, and the controller's peak
//! memory and CPU; the run reports the agent's too. The
//! churn's memory is compared between its first and last thirds, to show whether it grows.
//! The table goes to stdout, each sample to `--out`/samples.csv, the figures to
//! `--out`/result.json.

mod world;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use nodewright_core::rng::Rng;
use serde::Serialize;

use super::procstat::{cpu_time, huge_pages, memory, mib};
use world::{Controller, Counts, Watches};

#[derive(Args, Debug)]
pub struct ClusterArgs {
    /// The control plane's admin kubeconfig.
    #[arg(long)]
    pub kubeconfig: PathBuf,
    /// Pods at the peak.
    #[arg(long, default_value_t = 20_000)]
    pub pods: u32,
    /// Pods that fill one node (1 to 16); with the default 10, 20,000 pods need 2,000 nodes.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=16))]
    pub pods_per_node: u32,
    /// Minutes of churn after the scale-up (0: none).
    #[arg(long, default_value_t = 0)]
    pub churn_minutes: u64,
    /// Skip the scale-down to zero.
    #[arg(long)]
    pub no_scale_down: bool,
    /// Give up on a phase after this many minutes.
    #[arg(long, default_value_t = 30)]
    pub timeout_minutes: u64,
    /// Seed of the churn's sizes.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Where the controller's log, the samples and the figures go.
    #[arg(long, default_value = "target/bench-cluster")]
    pub out: PathBuf,
    /// Run the node agent inside the controller's process, as `controller --cloud-provider
    /// sim` does by default, so the controller's figures include the kubelet's part.
    #[arg(long)]
    pub agent_in_controller: bool,
    /// `KEY=VALUE` set in the controller's environment only (not the node agent's or the
    /// bench's), e.g. `LD_PRELOAD` of a heap profiler; repeat for more. The figures stay the
    /// controller's own, since it remains the bench's child.
    #[arg(long = "controller-env", value_name = "KEY=VALUE", value_parser = key_value)]
    pub controller_env: Vec<(String, String)>,
}

/// `KEY=VALUE`, split at the first `=`.
fn key_value(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("expected KEY=VALUE, got {s:?}")),
    }
}

/// The controller's state at one moment of the run.
#[derive(Clone, Copy, Debug, Serialize)]
struct Sample {
    seconds: f64,
    replicas: u32,
    pods: usize,
    bound: usize,
    nodes: usize,
    claims: usize,
    rss_mib: f64,
    /// The node agent's, when it runs apart.
    agent_rss_mib: Option<f64>,
}

/// One phase's figures.
#[derive(Debug, Serialize)]
struct Phase {
    name: String,
    seconds: f64,
    finished: bool,
    end: Sample,
    peak_rss_mib: f64,
    cpu_seconds: f64,
}

#[derive(Debug, Serialize)]
struct Report {
    pods: u32,
    pods_per_node: u32,
    phases: Vec<Phase>,
    /// The churn's highest RSS in its first and its last third, in MiB.
    churn_first_third_peak_mib: Option<f64>,
    churn_last_third_peak_mib: Option<f64>,
    /// `VmHWM` of the controller at the end: its peak over the whole run.
    peak_rss_mib: f64,
    cpu_seconds: f64,
    /// The same of the node agent, when it runs apart from the controller.
    agent_peak_rss_mib: Option<f64>,
    agent_cpu_seconds: Option<f64>,
    /// Whether the controller's memory could be in transparent huge pages (it turns them off,
    /// `huge_pages.rs`); `None` when the kernel does not say.
    huge_pages: Option<bool>,
}

pub fn run(args: ClusterArgs) -> anyhow::Result<ExitCode> {
    if args.pods == 0 {
        bail!("--pods must be at least 1");
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    // On a signal the bench is dropped, and with it the controller it started.
    let report = runtime.block_on(async {
        tokio::select! {
            report = bench(&args) => report,
            _ = stopped() => bail!("stopped by a signal"),
        }
    })?;
    let json = serde_json::to_string_pretty(&report)?;
    let path = args.out.join("result.json");
    std::fs::write(&path, json).with_context(|| format!("writing {}", path.display()))?;
    print!("{}", table(&report));
    let finished = report.phases.iter().all(|p| p.finished);
    Ok(if finished {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The first SIGINT or SIGTERM.
async fn stopped() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

async fn bench(args: &ClusterArgs) -> anyhow::Result<Report> {
    let raw = kube::config::Kubeconfig::read_from(&args.kubeconfig)
        .with_context(|| format!("reading {}", args.kubeconfig.display()))?;
    let config = kube::Config::from_custom_kubeconfig(raw, &Default::default()).await?;
    let client = kube::Client::try_from(config)?;
    world::install_crds(&client).await?;
    let log = args.out.join("controller.log");
    let mut controller = Controller::start(
        &args.kubeconfig,
        &log,
        args.agent_in_controller,
        &args.controller_env,
    )?;
    let started = Instant::now();
    while !controller.ready() {
        controller.check_alive(&log)?;
        if started.elapsed() > Duration::from_secs(120) {
            bail!(
                "the controller was not ready after 120 s; see {}",
                log.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Room for every pod and more: the limit is not what this measures.
    world::apply_nodepool(&client, 2 * u64::from(args.pods) + 64).await?;
    let watches = Watches::start(&client);
    let mut run = Run {
        controller,
        log,
        watches,
        client,
        pods_per_node: args.pods_per_node,
        timeout: Duration::from_secs(args.timeout_minutes * 60),
        start: Instant::now(),
        samples: Vec::new(),
        csv: String::from("seconds,replicas,pods,bound,nodes,claims,rss_mib,agent_rss_mib\n"),
    };
    let mut phases = vec![run.scale_up(args.pods).await?];
    let mut thirds = (None, None);
    if args.churn_minutes > 0 {
        let (phase, first, last) = run.churn(args.pods, args.churn_minutes, args.seed).await?;
        phases.push(phase);
        thirds = (Some(first), Some(last));
    }
    if !args.no_scale_down {
        phases.push(run.scale_down().await?);
    }
    let path = args.out.join("samples.csv");
    std::fs::write(&path, &run.csv).with_context(|| format!("writing {}", path.display()))?;
    let pid = run.controller.pid();
    let agent = run.controller.agent_pid();
    Ok(Report {
        pods: args.pods,
        pods_per_node: args.pods_per_node,
        phases,
        churn_first_third_peak_mib: thirds.0,
        churn_last_third_peak_mib: thirds.1,
        peak_rss_mib: mib(memory(&pid).1),
        cpu_seconds: cpu_time(&pid).as_secs_f64(),
        agent_peak_rss_mib: agent.as_deref().map(|a| mib(memory(a).1)),
        agent_cpu_seconds: agent.as_deref().map(|a| cpu_time(a).as_secs_f64()),
        huge_pages: huge_pages(&pid),
    })
}

/// The run in progress: the controller, the watches, and every sample taken.
struct Run {
    controller: Controller,
    log: PathBuf,
    watches: Watches,
    client: kube::Client,
    pods_per_node: u32,
    timeout: Duration,
    start: Instant,
    samples: Vec<Sample>,
    csv: String,
}

impl Run {
    async fn scale_up(&mut self, pods: u32) -> anyhow::Result<Phase> {
        let want = pods as usize;
        self.phase("scale-up", pods, self.timeout, |c| {
            c.pods == want && c.bound == want
        })
        .await
    }

    async fn scale_down(&mut self) -> anyhow::Result<Phase> {
        self.phase("scale-down", 0, self.timeout, |c| {
            c.pods == 0 && c.claims == 0 && c.nodes == 0
        })
        .await
    }

    /// Resizes every two minutes for `minutes`, then waits for the last size to be bound.
    async fn churn(
        &mut self,
        pods: u32,
        minutes: u64,
        seed: u64,
    ) -> anyhow::Result<(Phase, f64, f64)> {
        let mut rng = Rng::new(seed);
        let began = Instant::now();
        let first_sample = self.samples.len();
        let cpu = cpu_time(&self.controller.pid());
        let end = began + Duration::from_secs(minutes * 60);
        let mut replicas = pods;
        while Instant::now() < end {
            replicas = pods / 2 + (rng.next_u64() % u64::from(pods / 2 + 1)) as u32;
            let left = end.saturating_duration_since(Instant::now());
            let step = left.min(Duration::from_secs(120));
            self.phase("churn step", replicas, step, |_| false).await?;
        }
        let want = replicas as usize;
        let settle = self
            .phase("churn settle", replicas, self.timeout, |c| {
                c.pods == want && c.bound == want
            })
            .await?;
        let churn = &self.samples[first_sample..];
        let third = (churn.len() / 3).max(1);
        let peak = |s: &[Sample]| s.iter().map(|s| s.rss_mib).fold(0.0, f64::max);
        let first = peak(&churn[..third.min(churn.len())]);
        let last = peak(&churn[churn.len().saturating_sub(third)..]);
        let phase = Phase {
            name: "churn".into(),
            seconds: began.elapsed().as_secs_f64(),
            finished: settle.finished,
            end: settle.end,
            peak_rss_mib: peak(churn),
            cpu_seconds: cpu_time(&self.controller.pid())
                .saturating_sub(cpu)
                .as_secs_f64(),
        };
        Ok((phase, first, last))
    }

    /// Sets the Deployment to `replicas` and samples every second until `done` holds or
    /// `limit` passes.
    async fn phase(
        &mut self,
        name: &str,
        replicas: u32,
        limit: Duration,
        done: impl Fn(&Counts) -> bool,
    ) -> anyhow::Result<Phase> {
        world::scale(&self.client, replicas, self.pods_per_node).await?;
        let pid = self.controller.pid();
        let began = Instant::now();
        let cpu = cpu_time(&pid);
        let mut peak: f64 = 0.0;
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            self.controller.check_alive(&self.log)?;
            let counts = self.watches.counts();
            let sample = self.sample(replicas, counts);
            peak = peak.max(sample.rss_mib);
            let finished = done(&counts);
            if finished || began.elapsed() >= limit {
                if !finished && !name.starts_with("churn step") {
                    eprintln!("bench cluster: {name} did not finish in {limit:?}: {counts:?}");
                }
                return Ok(Phase {
                    name: name.into(),
                    seconds: began.elapsed().as_secs_f64(),
                    finished,
                    end: sample,
                    peak_rss_mib: peak,
                    cpu_seconds: cpu_time(&pid).saturating_sub(cpu).as_secs_f64(),
                });
            }
        }
    }

    fn sample(&mut self, replicas: u32, c: Counts) -> Sample {
        let s = Sample {
            seconds: self.start.elapsed().as_secs_f64(),
            replicas,
            pods: c.pods,
            bound: c.bound,
            nodes: c.nodes,
            claims: c.claims,
            rss_mib: mib(memory(&self.controller.pid()).0),
            agent_rss_mib: self.controller.agent_pid().map(|a| mib(memory(&a).0)),
        };
        let agent = s
            .agent_rss_mib
            .map(|m| format!("{m:.1}"))
            .unwrap_or_default();
        let _ = writeln!(
            self.csv,
            "{:.1},{},{},{},{},{},{:.1},{agent}",
            s.seconds, s.replicas, s.pods, s.bound, s.nodes, s.claims, s.rss_mib
        );
        // A line every ten seconds, so a long run shows it is moving.
        if self.samples.len().is_multiple_of(10) {
            eprintln!(
                "bench cluster: {:>6.0} s  replicas {:>6}  pods {:>6}  bound {:>6}  nodes {:>5}  claims {:>5}  rss {:>6.1} MiB",
                s.seconds, s.replicas, s.pods, s.bound, s.nodes, s.claims, s.rss_mib
            );
        }
        self.samples.push(s);
        s
    }
}

fn table(r: &Report) -> String {
    let mut t = format!(
        "bench cluster: {} pods, {} a node\n\n| phase | seconds | done | pods bound | nodes | claims | peak RSS MiB | CPU s |\n|---|---:|---|---:|---:|---:|---:|---:|\n",
        r.pods, r.pods_per_node
    );
    for p in &r.phases {
        let _ = writeln!(
            t,
            "| {} | {:.1} | {} | {} of {} | {} | {} | {:.1} | {:.1} |",
            p.name,
            p.seconds,
            if p.finished { "yes" } else { "NO" },
            p.end.bound,
            p.end.pods,
            p.end.nodes,
            p.end.claims,
            p.peak_rss_mib,
            p.cpu_seconds
        );
    }
    if let (Some(first), Some(last)) = (r.churn_first_third_peak_mib, r.churn_last_third_peak_mib) {
        let _ = writeln!(
            t,
            "\nchurn peak RSS, first third {first:.1} MiB, last third {last:.1} MiB"
        );
    }
    let _ = writeln!(
        t,
        "\ncontroller peak RSS (VmHWM) {:.1} MiB, CPU {:.1} s",
        r.peak_rss_mib, r.cpu_seconds
    );
    match (r.agent_peak_rss_mib, r.agent_cpu_seconds) {
        (Some(rss), Some(cpu)) => {
            let _ = writeln!(
                t,
                "node agent (a process of its own) peak RSS {rss:.1} MiB, CPU {cpu:.1} s"
            );
        }
        _ => {
            let _ = writeln!(t, "node agent: in the controller's process");
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::key_value;

    #[test]
    fn controller_env_splits_at_the_first_equals_sign() {
        assert_eq!(
            key_value("LD_PRELOAD=/a=b.so"),
            Ok(("LD_PRELOAD".into(), "/a=b.so".into()))
        );
        assert_eq!(key_value("EMPTY="), Ok(("EMPTY".into(), String::new())));
        assert!(key_value("NOVALUE").is_err());
        assert!(key_value("=x").is_err());
    }
}
