//! The chart's dashboards (`charts/nodewright/dashboards/*.json`) and alerts
//! (`charts/nodewright/alerts/nodewright.rules.yaml`) read only what the controller exports.
//!
//! A family is exported when a scrape shows its samples (an empty family is not encoded at
//! all): the built binary's `/metrics` (`nodewright controller --cloud-provider sim`, with no
//! API server to reach, so only the export path runs) and the metrics the controller's loops
//! write in a short `nodewright bench controller` run (provisioning, registration,
//! consolidation) give the names, types and label names. Families neither run samples (the
//! AWS provider's, the interruption queue's) are listed in `UNSAMPLED` with their type and
//! labels, and must be registered under that name in the controller's metrics code. Every
//! expression is parsed by Prometheus's own parser: its rule-file reader (what `promtool
//! check rules` runs) on the rule file and on a rule file of the dashboards' expressions, and
//! its PromQL parser to list the series and labels each expression reads, both through our
//! `promql-selectors`, built from `tools/promtool` by `scripts/promtool`.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nodewright_testkit::port::free_port;
use serde_json::Value as Json;

mod common;
use common::parity::{self, Family, families};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn chart() -> PathBuf {
    repo().join("charts/nodewright")
}

fn tmp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nodewright-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The directory holding `promtool` and `promql-selectors`, built on first use.
fn promtool_dir() -> PathBuf {
    let out = Command::new(repo().join("scripts/promtool"))
        .stderr(Stdio::inherit())
        .output()
        .expect("scripts/promtool runs (it needs Go)");
    assert!(out.status.success(), "scripts/promtool failed");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

// ---- what the controller exports ----

/// The series names a family's samples go by: a counter's `_total`, a histogram's
/// `_bucket`, `_sum` and `_count`.
fn series_names(name: &str, kind: &str) -> Vec<String> {
    match kind {
        "counter" => vec![format!("{name}_total")],
        "histogram" => ["_bucket", "_sum", "_count"]
            .iter()
            .map(|s| format!("{name}{s}"))
            .collect(),
        "summary" => ["", "_sum", "_count"]
            .iter()
            .map(|s| format!("{name}{s}"))
            .collect(),
        _ => vec![name.to_string()],
    }
}

struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.0 200").then(|| body.to_string())
}

/// `/metrics` of the built controller, started against an API server address where nothing
/// listens: its watches keep retrying, and the metrics server answers meanwhile.
fn scrape_controller() -> String {
    let dir = tmp_dir("observability");
    let kubeconfig = dir.join("kubeconfig");
    let api = free_port();
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: none\n  cluster: {{server: 'http://127.0.0.1:{api}'}}\nusers:\n- name: none\n  user: {{}}\ncontexts:\n- name: none\n  context: {{cluster: none, user: none}}\ncurrent-context: none\n"
        ),
    )
    .unwrap();
    let (metrics, health) = (free_port(), free_port());
    let child = Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args([
            "controller",
            "--cloud-provider",
            "sim",
            "--cluster-name",
            "obs",
        ])
        .args(["--metrics-port", &metrics.to_string()])
        .args(["--health-probe-port", &health.to_string()])
        .args(["--listen-address", "127.0.0.1"])
        .arg("--disable-leader-election")
        .env("KUBECONFIG", &kubeconfig)
        .env("LOG_LEVEL", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starts the controller");
    let _running = Running(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(text) = http_get(metrics, "/metrics")
            && text.contains("leader_election_master_status{")
        {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "the controller served no /metrics within 30 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// What a running controller exports: the built binary's `/metrics` and a bench run's
/// metrics, merged.
fn exported_families() -> BTreeMap<String, Family> {
    let mut seen = families(&scrape_controller());
    for (name, f) in families(&bench_metrics()) {
        let e = seen.entry(name).or_default();
        e.kind = f.kind;
        e.sampled |= f.sampled;
        e.labels.extend(f.labels);
    }
    seen
}

/// The metrics the controller's loops wrote over a small scale-up and consolidation.
fn bench_metrics() -> String {
    let out_file = tmp_dir("observability-bench").join("metrics.txt");
    let out = Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args([
            "bench",
            "controller",
            "--pods",
            "60",
            "--arrival-rate",
            "60",
        ])
        .arg("--metrics-out")
        .arg(&out_file)
        .output()
        .expect("runs the bench");
    assert!(
        out.status.success(),
        "bench controller failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(&out_file).unwrap()
}

/// Families no run here samples (the AWS provider's, the interruption queue's, the
/// instance-type refresh's, rare failures), as (name, type, label names their code sets).
/// Each must be registered under its name in the controller's metrics code; should a run
/// sample one after all, its labels must be the ones listed.
const UNSAMPLED: &[(&str, &str, &[&str])] = &[
    (
        "karpenter_cloudprovider_instance_launch_failures",
        "counter",
        &["zone", "zone_id", "capacity_type", "reason"],
    ),
    (
        "karpenter_cloudprovider_instance_type_offering_available",
        "gauge",
        &["instance_type", "capacity_type", "zone"],
    ),
    (
        "karpenter_cloudprovider_instance_type_offering_price_estimate",
        "gauge",
        &["instance_type", "capacity_type", "zone"],
    ),
    (
        "karpenter_cloudprovider_batcher_batch_size",
        "histogram",
        &["batcher"],
    ),
    (
        "karpenter_interruption_received_messages",
        "counter",
        &["message_type"],
    ),
    (
        "karpenter_interruption_instance_status_unhealthy",
        "counter",
        &["category"],
    ),
    ("nodewright_events_dropped", "counter", &["reason"]),
    // Only NodePools with spec.limits have series; the bench's has none.
    (
        "karpenter_nodepools_limit",
        "gauge",
        &["resource_type", "nodepool"],
    ),
    (
        "karpenter_voluntary_disruption_consolidation_timeouts",
        "counter",
        &["consolidation_type"],
    ),
    (
        "karpenter_voluntary_disruption_failed_validations",
        "counter",
        &["consolidation_type"],
    ),
    (
        "karpenter_voluntary_disruption_queue_failures",
        "counter",
        &["decision", "reason", "consolidation_type"],
    ),
];

/// The controller's metrics code: `metrics.rs` and `metrics/`, every loop's `metrics.rs` (each
/// loop registers its families beside it), and `events/writer.rs` (the event writer's drop
/// counter).
fn metrics_source() -> String {
    fn walk(dir: &Path, in_metrics: bool, text: &mut String) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let metrics = path.file_stem().is_some_and(|s| s == "metrics");
            if path.is_dir() {
                walk(&path, in_metrics || metrics, text);
            } else if in_metrics || metrics {
                text.push_str(&std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    let src = repo().join("crates/controller/src");
    let mut text = std::fs::read_to_string(src.join("events/writer.rs")).unwrap();
    walk(&src, false, &mut text);
    text
}

/// Labels Prometheus adds to every scraped series.
const TARGET_LABELS: [&str; 2] = ["instance", "job"];

// ---- what the dashboards and rules read ----

/// Grafana's interval variables, given values so the expressions parse.
fn grafana_free(expr: &str) -> String {
    expr.replace("$__rate_interval", "5m")
        .replace("$__interval", "1m")
        .replace("$__range", "6h")
}

/// (where, PromQL) for every target of every panel, and the metric and label of every
/// `label_values(metric, label)` variable.
/// (where, PromQL) pairs, or (metric, label) pairs.
type Pairs = Vec<(String, String)>;

fn dashboard_queries(file: &Path) -> (Pairs, Pairs) {
    let d: Json = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    let mut exprs = Vec::new();
    let mut panels: Vec<&Json> = d["panels"].as_array().unwrap().iter().collect();
    while let Some(p) = panels.pop() {
        if let Some(inner) = p["panels"].as_array() {
            panels.extend(inner);
        }
        for t in p["targets"].as_array().into_iter().flatten() {
            let expr = t["expr"].as_str().unwrap();
            exprs.push((
                format!("{name}: panel {:?} {}", p["title"], t["refId"]),
                grafana_free(expr),
            ));
        }
    }
    let mut label_values = Vec::new();
    for v in d["templating"]["list"].as_array().unwrap() {
        if v["type"] != "query" {
            continue;
        }
        let q = v["query"]["query"].as_str().unwrap();
        let args = q
            .strip_prefix("label_values(")
            .and_then(|r| r.strip_suffix(')'))
            .unwrap_or_else(|| panic!("{name}: variable {}: {q}", v["name"]));
        let (metric, label) = args.split_once(',').unwrap();
        label_values.push((metric.trim().to_string(), label.trim().to_string()));
    }
    (exprs, label_values)
}

fn dashboards() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(chart().join("dashboards"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
}

fn rules_file() -> PathBuf {
    chart().join("alerts/nodewright.rules.yaml")
}

fn rule_queries() -> Vec<(String, String)> {
    let y: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(rules_file()).unwrap()).unwrap();
    let mut out = Vec::new();
    for g in y["groups"].as_sequence().unwrap() {
        for r in g["rules"].as_sequence().unwrap() {
            let name = r["alert"].as_str().or(r["record"].as_str()).unwrap();
            out.push((
                format!("rules: {name}"),
                r["expr"].as_str().unwrap().to_string(),
            ));
        }
    }
    out
}

/// What `promql-selectors` says each expression reads.
#[derive(Debug)]
struct Reads {
    selectors: Vec<(String, Vec<String>)>,
    grouping: Vec<String>,
}

fn inspect(tools: &Path, exprs: &[(String, String)]) -> Vec<Reads> {
    let mut child = Command::new(tools.join("promql-selectors"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = String::new();
    for (_, e) in exprs {
        input.push_str(&serde_json::to_string(e).unwrap());
        input.push('\n');
    }
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "expressions that do not parse:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let v: Json = serde_json::from_str(l).unwrap();
            let strings = |v: &Json| -> Vec<String> {
                v.as_array()
                    .unwrap()
                    .iter()
                    .map(|s| s.as_str().unwrap().to_string())
                    .collect()
            };
            Reads {
                selectors: v["selectors"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| (s["metric"].as_str().unwrap().into(), strings(&s["labels"])))
                    .collect(),
                grouping: strings(&v["grouping"]),
            }
        })
        .collect()
}

fn promtool_check(tools: &Path, rules: &Path) {
    let out = Command::new(tools.join("promql-selectors"))
        .arg("check-rules")
        .arg(rules)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "check-rules {}:\n{}{}",
        rules.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The dashboards' expressions as recording rules, so promtool checks them as it checks
/// the alerts.
fn dashboard_rules_file(exprs: &[(String, String)]) -> PathBuf {
    let rules: Vec<Json> = exprs
        .iter()
        .enumerate()
        .map(|(i, (_, e))| serde_json::json!({"record": format!("dashboard:expr_{i}"), "expr": e}))
        .collect();
    let file = tmp_dir("observability-rules").join("dashboards.rules.yaml");
    let doc = serde_json::json!({"groups": [{"name": "dashboards", "rules": rules}]});
    std::fs::write(&file, serde_yaml::to_string(&doc).unwrap()).unwrap();
    file
}

#[test]
fn dashboards_and_alerts_read_only_what_the_controller_exports() {
    let tools = promtool_dir();
    promtool_check(&tools, &rules_file());

    let mut exprs = rule_queries();
    let mut label_values = Vec::new();
    for file in dashboards() {
        let (e, v) = dashboard_queries(&file);
        assert!(!e.is_empty(), "{}: no queries", file.display());
        exprs.extend(e);
        label_values.extend(v);
    }
    promtool_check(&tools, &dashboard_rules_file(&exprs));

    let mut seen = exported_families();
    let source = metrics_source();
    for (name, kind, labels) in UNSAMPLED {
        let listed: BTreeSet<String> = labels.iter().map(|l| l.to_string()).collect();
        if let Some(f) = seen.get(*name).filter(|f| f.sampled) {
            // A run sampled it after all: the list must say what the samples say.
            assert_eq!(
                f.labels, listed,
                "{name}: UNSAMPLED's labels are not the samples'"
            );
            continue;
        }
        assert!(
            source.contains(&format!("\"{name}\"")),
            "{name} is not registered in the controller's metrics code"
        );
        seen.insert(
            name.to_string(),
            Family {
                kind: kind.to_string(),
                labels: listed,
                sampled: false,
            },
        );
    }
    // series name -> (family, its label names)
    let mut exported: BTreeMap<String, (String, BTreeSet<String>)> = BTreeMap::new();
    for (name, f) in &seen {
        for series in series_names(name, &f.kind) {
            exported.insert(series, (name.clone(), f.labels.clone()));
        }
    }

    let mut problems = Vec::new();
    let mut read_families = BTreeSet::new();
    for ((place, expr), reads) in exprs.iter().zip(inspect(&tools, &exprs)) {
        let mut known: BTreeSet<String> = TARGET_LABELS.iter().map(|l| l.to_string()).collect();
        for (metric, labels) in &reads.selectors {
            let Some((family, family_labels)) = exported.get(metric) else {
                problems.push(format!("{place}: {metric} is not exported ({expr})"));
                continue;
            };
            read_families.insert(family.clone());
            known.extend(family_labels.iter().cloned());
            if metric.ends_with("_bucket") {
                known.insert("le".into());
            }
            for l in labels {
                if !family_labels.contains(l) && !TARGET_LABELS.contains(&l.as_str()) {
                    problems.push(format!("{place}: {metric} has no label {l}"));
                }
            }
        }
        for l in &reads.grouping {
            if !known.contains(l) {
                problems.push(format!(
                    "{place}: groups by {l}, which none of its series has ({expr})"
                ));
            }
        }
    }
    for (metric, label) in &label_values {
        match exported.get(metric) {
            Some((_, labels)) if labels.contains(label) => {}
            _ => problems.push(format!(
                "variable label_values({metric}, {label}): not exported"
            )),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The families the issue names are all on some panel or alert.
    for family in [
        "karpenter_nodes_allocatable",
        "karpenter_pods_state",
        "karpenter_cloudprovider_instance_type_offering_price_estimate",
        "nodewright_consolidation_savings_dollars_per_hour",
        "karpenter_scheduler_scheduling_duration_seconds",
        "karpenter_cloudprovider_duration_seconds",
        "karpenter_cloudprovider_errors",
        "karpenter_scheduler_queue_depth",
        "karpenter_interruption_received_messages",
        "karpenter_interruption_message_queue_duration_seconds",
        "karpenter_cloudprovider_instance_launch_failures",
        "karpenter_nodeclaims_created",
        "leader_election_master_status",
    ] {
        assert!(read_families.contains(family), "nothing reads {family}");
    }
}

#[test]
fn every_karpenter_family_is_exported_with_its_type_and_labels() {
    let listed = parity::upstream_families(&repo());
    let seen = exported_families();
    let docs = std::fs::read_to_string(repo().join("docs/OBSERVABILITY.md")).unwrap();
    let (problems, unsampled) = parity::check(&listed, &seen, &docs);
    eprintln!("families with no sample in these runs (name and type checked): {unsampled:?}");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
