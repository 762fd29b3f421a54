//! The Helm chart in `charts/nodewright`, rendered without Helm (see `render.rs` for
//! the template subset) under several sets of values: every file is well-formed, the RBAC
//! grants exactly what `nodewright_controller::permissions` says the process calls, the
//! Deployment starts the real binary with flags and environment it accepts, on the ports and
//! probe paths it serves, and Karpenter's values (current and v0.x) land where Karpenter's
//! chart puts them or are named in the notes. The CRD-only chart `charts/nodewright-crd`
//! holds exactly the CRDs `nodewright crds` prints.

mod render;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;

use clap::{CommandFactory, Parser};
use nodewright_controller::permissions::{self, Permission, Scope};
use nodewright_controller::settings::Settings;
use render::{Chart, Context};
use serde_yaml::Value;

const NS: &str = "karpenter";

fn chart_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../charts/nodewright")
}

fn yaml(text: &str) -> Value {
    serde_yaml::from_str(text).unwrap()
}

fn context(overrides: &[&str], release: &str) -> Context {
    let dir = chart_dir();
    let mut values = yaml(&std::fs::read_to_string(dir.join("values.yaml")).unwrap());
    for o in overrides {
        render::merge(&mut values, &yaml(o));
    }
    Context {
        values,
        release_name: release.into(),
        release_namespace: NS.into(),
        chart: yaml(&std::fs::read_to_string(dir.join("Chart.yaml")).unwrap()),
    }
}

fn local_values() -> String {
    std::fs::read_to_string(chart_dir().join("ci/local-values.yaml")).unwrap()
}

const AWS: &str = "settings: {clusterName: prod}";
const AWS_FULL: &str = r#"
settings:
  clusterName: prod
  clusterEndpoint: https://ABC.gr7.us-west-2.eks.amazonaws.com
  interruptionQueue: prod-interruptions
  featureGates: {spotToSpotConsolidation: true}
serviceAccount:
  annotations:
    eks.amazonaws.com/role-arn: arn:aws:iam::111122223333:role/KarpenterController
controller:
  env:
    - name: AWS_REGION
      value: us-west-2
podAnnotations: {prometheus.io/scrape: "true"}
logLevel: debug
"#;
/// A v0.x values file: the names moved since, and are still read.
const LEGACY: &str = r#"
settings:
  aws: {clusterName: old, clusterEndpoint: "https://old.example.com", interruptionQueueName: q}
"#;

/// Seed 000's Terraform values: v1 names beside v0.x ones (`interruptionQueueName`,
/// `aws.defaultInstanceProfile`), and its own affinity.
const SEED_000: &str = r#"
settings:
  clusterName: blue
  clusterEndpoint: https://ABC.gr7.us-east-1.eks.amazonaws.com
  interruptionQueueName: blue-karpenter
  aws:
    defaultInstanceProfile: KarpenterNodeInstanceProfile-blue
serviceAccount:
  annotations:
    eks.amazonaws.com/role-arn: arn:aws:iam::111122223333:role/karpenter-irsa
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
      - matchExpressions:
        - key: role
          operator: In
          values:
          - core
"#;
/// Seed 002's `--set` flags, as a values file (Karpenter v0.26 names).
const SEED_002: &str = r#"
serviceAccount: {annotations: {eks.amazonaws.com/role-arn: "arn:aws:iam::020213277421:role/copper-karpenter-irsa-role"}}
settings: {aws: {clusterName: copper, defaultInstanceProfile: copper-karpenter-node}}
"#;
/// Every other value of Karpenter's chart that means something here, set as a user would.
const UPSTREAM: &str = r#"
settings: {clusterName: prod}
additionalLabels: {team: platform}
additionalAnnotations: {owner: infra}
imagePullPolicy: Always
imagePullSecrets: [{name: registry}]
podLabels: {sidecar.istio.io/inject: "false"}
terminationGracePeriodSeconds: 120
hostNetwork: true
dnsPolicy: ClusterFirstWithHostNet
dnsConfig: {options: [{name: ndots, value: "1"}]}
podDisruptionBudget: {name: karpenter-pdb}
topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}
  - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: other}}}
extraVolumes:
  - name: aws-iam-token
    projected: {defaultMode: 420, sources: [{serviceAccountToken: {audience: sts.amazonaws.com, expirationSeconds: 86400, path: token}}]}
serviceAccount: {annotations: {eks.amazonaws.com/role-arn: "arn:aws:iam::111122223333:role/k"}}
controller:
  image: {digest: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}
  envFrom: [{configMapRef: {name: karpenter-env}}]
  extraVolumeMounts: [{name: aws-iam-token, mountPath: /var/run/secrets/eks.amazonaws.com/serviceaccount, readOnly: true}]
  sidecarContainer: [{name: log-shipper, image: busybox}]
  sidecarVolumeMounts: [{name: aws-iam-token, mountPath: /token}]
serviceMonitor: {enabled: true}
webhook: {enabled: true, port: 8443}
"#;

/// Prometheus Operator and Grafana objects on, as a kube-prometheus-stack user sets them.
const MONITORING: &str = r#"
settings: {clusterName: prod}
serviceMonitor: {enabled: true, additionalLabels: {release: kube-prometheus-stack}, endpointConfig: {interval: 30s}}
dashboards: {enabled: true, namespace: monitoring, annotations: {grafana_folder: nodewright}}
prometheusRule: {enabled: true, additionalLabels: {release: kube-prometheus-stack}}
"#;

/// The variants every test looks at: (label, overrides, release name).
fn variants() -> Vec<(&'static str, Vec<String>, &'static str)> {
    vec![
        ("aws", vec![AWS.into()], "karpenter"),
        ("aws-full", vec![AWS_FULL.into()], "karpenter"),
        ("legacy", vec![LEGACY.into()], "nodewright"),
        ("local", vec![local_values()], "nodewright"),
        ("monitoring", vec![MONITORING.into()], "karpenter"),
        ("seed-000", vec![SEED_000.into()], "karpenter"),
        ("seed-002", vec![SEED_002.into()], "karpenter"),
        ("upstream", vec![UPSTREAM.into()], "karpenter"),
    ]
}

/// Every object the chart renders to, for one set of values.
fn objects(ctx: &Context) -> Result<Vec<Value>, String> {
    let chart = Chart::load(&chart_dir())?;
    let mut out = Vec::new();
    for file in chart.file_names() {
        let text = chart.render(&file, ctx)?;
        if file == "NOTES.txt" {
            continue;
        }
        for doc in documents(&text) {
            let v: Value = serde_yaml::from_str(&doc).map_err(|e| format!("{file}: {e}\n{doc}"))?;
            if !v.is_null() {
                out.push(v);
            }
        }
    }
    Ok(out)
}

/// Splits a YAML stream at its `---` separator lines.
fn documents(text: &str) -> Vec<String> {
    let mut docs = vec![String::new()];
    for line in text.lines() {
        if line.trim_end() == "---" {
            docs.push(String::new());
        } else {
            let doc = docs.last_mut().unwrap();
            doc.push_str(line);
            doc.push('\n');
        }
    }
    docs
}

fn objects_for(overrides: &[String], release: &str) -> Vec<Value> {
    let refs: Vec<&str> = overrides.iter().map(String::as_str).collect();
    objects(&context(&refs, release)).unwrap_or_else(|e| panic!("{e}"))
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    at(v, path)?.as_str()
}

fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, k| cur.get(*k))
}

fn the<'a>(objs: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<&Value> = objs
        .iter()
        .filter(|o| str_at(o, &["kind"]) == Some(kind))
        .collect();
    assert_eq!(found.len(), 1, "expected one {kind}");
    found[0]
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_sequence)
        .map(|s| {
            s.iter()
                .map(|x| x.as_str().expect("a string").to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn every_template_renders_to_well_formed_objects() {
    const NAMESPACED: [&str; 9] = [
        "ConfigMap",
        "ServiceMonitor",
        "PrometheusRule",
        "Deployment",
        "Service",
        "ServiceAccount",
        "PodDisruptionBudget",
        "Role",
        "RoleBinding",
    ];
    for (label, overrides, release) in variants() {
        let objs = objects_for(&overrides, release);
        let kinds: BTreeSet<&str> = objs.iter().filter_map(|o| str_at(o, &["kind"])).collect();
        for k in [
            "Deployment",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "Service",
            "PodDisruptionBudget",
        ] {
            assert!(kinds.contains(k), "{label}: no {k}");
        }
        for o in &objs {
            let kind = str_at(o, &["kind"]).unwrap_or_else(|| panic!("{label}: no kind: {o:?}"));
            assert!(str_at(o, &["apiVersion"]).is_some(), "{label}: {kind}");
            let name = str_at(o, &["metadata", "name"]).expect("name");
            assert!(name.starts_with(release), "{label}: {kind} {name}");
            if NAMESPACED.contains(&kind) {
                assert!(
                    str_at(o, &["metadata", "namespace"]).is_some(),
                    "{label}: {kind} {name}"
                );
            }
            let labels = at(o, &["metadata", "labels"])
                .and_then(Value::as_mapping)
                .unwrap();
            assert!(
                labels.values().all(Value::is_string),
                "{label}: {kind} labels"
            );
            assert_eq!(
                str_at(o, &["metadata", "labels", "app.kubernetes.io/instance"]),
                Some(release)
            );
        }
        let selector = at(
            the(&objs, "Deployment"),
            &["spec", "selector", "matchLabels"],
        )
        .unwrap();
        let pod_labels = at(
            the(&objs, "Deployment"),
            &["spec", "template", "metadata", "labels"],
        )
        .and_then(Value::as_mapping)
        .unwrap();
        for (k, v) in selector.as_mapping().unwrap() {
            assert_eq!(
                pod_labels.get(k),
                Some(v),
                "{label}: the pods match the selector"
            );
        }
        assert_eq!(
            at(the(&objs, "Service"), &["spec", "selector"]),
            Some(selector)
        );
        assert_eq!(
            at(
                the(&objs, "PodDisruptionBudget"),
                &["spec", "selector", "matchLabels"]
            ),
            Some(selector)
        );
    }
}

/// The ServiceMonitor scrapes the metrics Service's port; the dashboards' ConfigMap and the
/// PrometheusRule carry exactly the files `crates/cli/tests/observability.rs` checks.
#[test]
fn monitoring_objects_ship_the_checked_files_and_scrape_the_metrics_port() {
    let objs = objects_for(&[MONITORING.into()], "karpenter");
    let service = the(&objs, "Service");
    let monitor = the(&objs, "ServiceMonitor");
    assert_eq!(
        at(monitor, &["spec", "selector", "matchLabels"]),
        at(service, &["spec", "selector"])
    );
    let endpoint = &at(monitor, &["spec", "endpoints"]).unwrap()[0];
    let port = str_at(endpoint, &["port"]).unwrap();
    assert_eq!(
        str_at(&at(service, &["spec", "ports"]).unwrap()[0], &["name"]),
        Some(port)
    );
    assert_eq!(str_at(endpoint, &["interval"]), Some("30s"));
    assert_eq!(
        str_at(monitor, &["metadata", "labels", "release"]),
        Some("kube-prometheus-stack")
    );

    let dashboards = the(&objs, "ConfigMap");
    assert_eq!(
        str_at(dashboards, &["metadata", "namespace"]),
        Some("monitoring")
    );
    assert_eq!(
        str_at(dashboards, &["metadata", "labels", "grafana_dashboard"]),
        Some("1")
    );
    let data = at(dashboards, &["data"])
        .and_then(Value::as_mapping)
        .unwrap();
    let mut shipped = BTreeSet::new();
    for entry in std::fs::read_dir(chart_dir().join("dashboards")).unwrap() {
        let path = entry.unwrap().path();
        let key = format!("nodewright-{}", path.file_name().unwrap().to_string_lossy());
        let text = data
            .get(Value::String(key.clone()))
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("{key} not in the ConfigMap"));
        let file: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(text).unwrap(),
            file,
            "{key}"
        );
        shipped.insert(key);
    }
    assert_eq!(shipped.len(), data.len(), "every key is a dashboard file");

    let rule = the(&objs, "PrometheusRule");
    let file: Value =
        yaml(&std::fs::read_to_string(chart_dir().join("alerts/nodewright.rules.yaml")).unwrap());
    assert_eq!(at(rule, &["spec"]), Some(&file));

    // Off by default.
    let plain = objects_for(&[AWS.into()], "karpenter");
    for kind in ["ConfigMap", "ServiceMonitor", "PrometheusRule"] {
        assert!(
            !plain.iter().any(|o| str_at(o, &["kind"]) == Some(kind)),
            "{kind}"
        );
    }
}

#[test]
fn notes_render_for_every_variant() {
    let chart = Chart::load(&chart_dir()).unwrap();
    for (label, overrides, release) in variants() {
        let refs: Vec<&str> = overrides.iter().map(String::as_str).collect();
        let notes = chart.render("NOTES.txt", &context(&refs, release)).unwrap();
        assert!(
            notes.contains(&format!("namespace {NS}")),
            "{label}: {notes}"
        );
    }
}

#[test]
fn a_missing_cluster_name_fails_at_install() {
    let e = objects(&context(&[], "karpenter")).unwrap_err();
    assert!(e.contains("settings.clusterName is required"), "{e}");
}

/// Every `.Values` path a template reads is in values.yaml, so a typo in an `if` cannot
/// silently read as false. The legacy names are read only as fallbacks.
#[test]
fn templates_read_only_values_the_chart_defines() {
    const LEGACY_KEYS: [&str; 16] = [
        "settings.aws.clusterName",
        "settings.aws.clusterEndpoint",
        "settings.aws.clusterCABundle",
        "settings.aws.interruptionQueueName",
        "settings.aws.isolatedVPC",
        "settings.aws.vmMemoryOverheadPercent",
        "settings.aws.reservedENIs",
        "settings.interruptionQueueName",
        // Named in NOTES.txt when set: no v1 setting takes them.
        "settings.aws.defaultInstanceProfile",
        "settings.defaultInstanceProfile",
        "settings.aws.tags",
        "settings.aws.enableENILimitedPodDensity",
        "settings.aws.enablePodENI",
        "settings.assumeRoleARN",
        "settings.aws.assumeRoleARN",
        "settings.featureGates.drift",
    ];
    let values = context(&[], "x").values;
    for entry in std::fs::read_dir(chart_dir().join("templates")).unwrap() {
        let path = entry.unwrap().path();
        let src = std::fs::read_to_string(&path).unwrap();
        for p in render::value_paths(&src) {
            let keys: Vec<&str> = p.split('.').collect();
            let found = at(&values, &keys).is_some();
            assert!(
                found || LEGACY_KEYS.contains(&p.as_str()),
                "{}: .Values.{p} is not in values.yaml",
                path.display()
            );
        }
    }
}

// ---- RBAC ----

#[derive(Debug)]
struct Rule {
    groups: Vec<String>,
    resources: Vec<String>,
    verbs: Vec<String>,
}

impl Rule {
    fn allows(&self, group: &str, resource: &str, verb: &str) -> bool {
        let has = |list: &[String], x: &str| list.iter().any(|v| v == x || v == "*");
        has(&self.groups, group) && has(&self.resources, resource) && has(&self.verbs, verb)
    }
}

/// The rules bound to the controller's service account: cluster-wide, and per namespace.
fn grants(objs: &[Value]) -> (Vec<Rule>, BTreeMap<String, Vec<Rule>>) {
    let deploy = the(objs, "Deployment");
    let sa = str_at(deploy, &["spec", "template", "spec", "serviceAccountName"]).unwrap();
    let sa_ns = str_at(deploy, &["metadata", "namespace"]).unwrap();
    let role_rules = |kind: &str, name: &str, ns: Option<&str>| -> Vec<Rule> {
        let role = objs
            .iter()
            .find(|o| {
                str_at(o, &["kind"]) == Some(kind)
                    && str_at(o, &["metadata", "name"]) == Some(name)
                    && (kind == "ClusterRole" || str_at(o, &["metadata", "namespace"]) == ns)
            })
            .unwrap_or_else(|| panic!("binding refers to a missing {kind} {name}"));
        at(role, &["rules"])
            .and_then(Value::as_sequence)
            .unwrap()
            .iter()
            .map(|r| Rule {
                groups: strings(r.get("apiGroups")),
                resources: strings(r.get("resources")),
                verbs: strings(r.get("verbs")),
            })
            .collect()
    };
    let mut cluster = Vec::new();
    let mut namespaced: BTreeMap<String, Vec<Rule>> = BTreeMap::new();
    for b in objs {
        let kind = str_at(b, &["kind"]).unwrap();
        if kind != "ClusterRoleBinding" && kind != "RoleBinding" {
            continue;
        }
        let bound = at(b, &["subjects"])
            .and_then(Value::as_sequence)
            .unwrap()
            .iter()
            .any(|s| {
                str_at(s, &["kind"]) == Some("ServiceAccount")
                    && str_at(s, &["name"]) == Some(sa)
                    && str_at(s, &["namespace"]) == Some(sa_ns)
            });
        if !bound {
            continue;
        }
        let ref_kind = str_at(b, &["roleRef", "kind"]).unwrap();
        let ref_name = str_at(b, &["roleRef", "name"]).unwrap();
        let ns = str_at(b, &["metadata", "namespace"]);
        let rules = role_rules(ref_kind, ref_name, ns);
        match kind {
            "ClusterRoleBinding" => cluster.extend(rules),
            _ => namespaced
                .entry(ns.unwrap().to_string())
                .or_default()
                .extend(rules),
        }
    }
    (cluster, namespaced)
}

fn granted(
    cluster: &[Rule],
    namespaced: &BTreeMap<String, Vec<Rule>>,
    p: &Permission,
    verb: &str,
) -> bool {
    let in_cluster = cluster.iter().any(|r| r.allows(p.group, p.resource, verb));
    let in_ns = |ns: &str| {
        namespaced
            .get(ns)
            .is_some_and(|rules| rules.iter().any(|r| r.allows(p.group, p.resource, verb)))
    };
    match p.scope {
        Scope::Cluster => in_cluster,
        Scope::Own => in_cluster || in_ns(NS),
        Scope::Namespace(ns) => in_cluster || in_ns(ns),
    }
}

#[test]
fn rbac_grants_every_permission_the_process_uses_and_no_more() {
    for (label, overrides, release) in variants() {
        let objs = objects_for(&overrides, release);
        let sim = label == "local";
        let required = permissions::required(sim);
        let (cluster, namespaced) = grants(&objs);
        for p in &required {
            for verb in p.verbs {
                assert!(
                    granted(&cluster, &namespaced, p, verb),
                    "{label}: {}/{} {verb} ({:?}) is not granted",
                    p.group,
                    p.resource,
                    p.scope
                );
            }
        }
        // Least privilege: nothing beyond the lists (no additionalClusterRoleRules here).
        let all_rules = cluster.iter().map(|r| (r, None)).chain(
            namespaced
                .iter()
                .flat_map(|(ns, rules)| rules.iter().map(move |r| (r, Some(ns.as_str())))),
        );
        for (rule, ns) in all_rules {
            for g in &rule.groups {
                for res in &rule.resources {
                    for v in &rule.verbs {
                        let needed = permissions::allows(&required, g, res, v, ns, NS);
                        assert!(
                            needed,
                            "{label}: {g}/{res} {v} in {ns:?} is granted but never used"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn the_lease_role_is_in_the_namespace_the_controller_uses() {
    let objs = objects_for(&[AWS.into()], "karpenter");
    let deploy = the(&objs, "Deployment");
    let env = container(deploy)["env"].as_sequence().unwrap().clone();
    let lease_ns = env
        .iter()
        .find(|e| str_at(e, &["name"]) == Some("LEADER_ELECTION_NAMESPACE"))
        .expect("LEADER_ELECTION_NAMESPACE is set");
    assert_eq!(
        str_at(lease_ns, &["valueFrom", "fieldRef", "fieldPath"]),
        Some("metadata.namespace")
    );
    assert_eq!(str_at(deploy, &["metadata", "namespace"]), Some(NS));
    let (cluster, namespaced) = grants(&objs);
    assert!(
        namespaced[NS]
            .iter()
            .any(|r| r.allows("coordination.k8s.io", "leases", "update"))
    );
    assert!(
        !cluster
            .iter()
            .any(|r| r.allows("coordination.k8s.io", "leases", "update")),
        "leases are not granted cluster-wide"
    );
}

#[test]
fn the_aws_chart_grants_nothing_to_the_sim_agent() {
    let objs = objects_for(&[AWS.into()], "karpenter");
    let (cluster, namespaced) = grants(&objs);
    assert!(!cluster.iter().any(|r| r.allows("", "nodes", "create")));
    assert!(!namespaced.contains_key("kube-node-lease"));
}

// ---- the Deployment against the binary ----

/// The controller's container (sidecars may follow it).
fn container(deploy: &Value) -> &Value {
    let containers = at(deploy, &["spec", "template", "spec", "containers"])
        .and_then(Value::as_sequence)
        .unwrap();
    assert_eq!(str_at(&containers[0], &["name"]), Some("controller"));
    &containers[0]
}

#[derive(Parser)]
struct SettingsCli {
    #[command(flatten)]
    settings: Settings,
}

/// The flag for each environment variable the settings read.
fn flag_for_env() -> BTreeMap<String, String> {
    SettingsCli::command()
        .get_arguments()
        .filter_map(|a| {
            let env = a.get_env()?.to_str()?.to_string();
            Some((env, a.get_long()?.to_string()))
        })
        .collect()
}

fn env_of(c: &Value) -> Vec<(String, Option<String>)> {
    c["env"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|e| {
            let name = str_at(e, &["name"]).unwrap().to_string();
            let value = e.get("value").map(|v| {
                v.as_str()
                    .unwrap_or_else(|| panic!("{name}: env values must be strings, got {v:?}"))
                    .to_string()
            });
            assert!(
                value.is_some() || e.get("valueFrom").is_some(),
                "{name} has no value"
            );
            (name, value)
        })
        .collect()
}

/// `nodewright controller --help`: the environment variables it names.
fn binary_envs() -> BTreeSet<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args(["controller", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    help.split("[env: ")
        .skip(1)
        .map(|s| s.split('=').next().unwrap().to_string())
        .collect()
}

#[test]
fn the_deployment_passes_only_settings_the_binary_reads_and_they_parse() {
    let accepted = binary_envs();
    assert!(
        accepted.contains("CLUSTER_NAME") && accepted.contains("AWS_REGION"),
        "{accepted:?}"
    );
    let flags = flag_for_env();
    for (label, overrides, release) in variants() {
        let objs = objects_for(&overrides, release);
        let c = container(the(&objs, "Deployment"));
        // The args start the controller with a provider the binary accepts.
        let mut args = strings(c.get("args"));
        assert_eq!(args[..2], ["controller", "--cloud-provider"], "{label}");
        args.push("--help".into());
        let out = Command::new(env!("CARGO_BIN_EXE_nodewright"))
            .args(&args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{label}: {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );

        let mut argv = vec!["nodewright".to_string()];
        for (name, value) in env_of(c) {
            assert!(
                accepted.contains(&name),
                "{label}: the binary does not read {name}"
            );
            if let Some(flag) = flags.get(&name) {
                // valueFrom (the pod's namespace) stands in as a plain name.
                argv.push(format!("--{flag}={}", value.unwrap_or_else(|| NS.into())));
            }
        }
        let settings = SettingsCli::try_parse_from(&argv)
            .unwrap_or_else(|e| panic!("{label}: {argv:?}: {e}"))
            .settings;
        settings
            .validate()
            .unwrap_or_else(|e| panic!("{label}: {e}"));
        assert_eq!(settings.leader_election_namespace, NS, "{label}");

        // Ports: the container serves where the settings say, and the probes and Service
        // point at those ports.
        let ports: BTreeMap<String, u64> = c["ports"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    str_at(p, &["name"]).unwrap().to_string(),
                    p["containerPort"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            ports["http-metrics"],
            u64::from(settings.metrics_port),
            "{label}"
        );
        assert_eq!(
            ports["http"],
            u64::from(settings.health_probe_port),
            "{label}"
        );
        assert_eq!(
            str_at(c, &["livenessProbe", "httpGet", "port"]),
            Some("http")
        );
        assert_eq!(
            str_at(c, &["readinessProbe", "httpGet", "port"]),
            Some("http")
        );
        let svc = the(&objs, "Service");
        let svc_port = &at(svc, &["spec", "ports"]).unwrap()[0];
        assert_eq!(str_at(svc_port, &["targetPort"]), Some("http-metrics"));
    }
}

#[test]
fn the_legacy_and_current_settings_names_reach_the_same_variables() {
    let objs = objects_for(&[LEGACY.into()], "nodewright");
    let env: BTreeMap<String, Option<String>> = env_of(container(the(&objs, "Deployment")))
        .into_iter()
        .collect();
    assert_eq!(env["CLUSTER_NAME"].as_deref(), Some("old"));
    assert_eq!(
        env["CLUSTER_ENDPOINT"].as_deref(),
        Some("https://old.example.com")
    );
    assert_eq!(env["INTERRUPTION_QUEUE"].as_deref(), Some("q"));
    let objs = objects_for(&[AWS_FULL.into()], "karpenter");
    let env: BTreeMap<String, Option<String>> = env_of(container(the(&objs, "Deployment")))
        .into_iter()
        .collect();
    assert_eq!(
        env["INTERRUPTION_QUEUE"].as_deref(),
        Some("prod-interruptions")
    );
    assert_eq!(env["AWS_REGION"].as_deref(), Some("us-west-2"));
    assert!(
        env["FEATURE_GATES"]
            .as_deref()
            .unwrap()
            .contains("SpotToSpotConsolidation=true")
    );
    // The defaults leave optional settings out rather than passing empty strings.
    let objs = objects_for(&[AWS.into()], "karpenter");
    let env: BTreeMap<String, Option<String>> = env_of(container(the(&objs, "Deployment")))
        .into_iter()
        .collect();
    assert!(!env.contains_key("INTERRUPTION_QUEUE") && !env.contains_key("CLUSTER_ENDPOINT"));
}

#[test]
fn the_probes_hit_routes_the_health_server_serves() {
    let objs = objects_for(&[AWS.into()], "karpenter");
    let c = container(the(&objs, "Deployment")).clone();
    let live = str_at(&c, &["livenessProbe", "httpGet", "path"])
        .unwrap()
        .to_string();
    let ready = str_at(&c, &["readinessProbe", "httpGet", "path"])
        .unwrap()
        .to_string();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let (tx, rx) = tokio::sync::watch::channel(false);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(nodewright_controller::health::serve_health_on(listener, rx));
        let get = |path: String| {
            tokio::task::spawn_blocking(move || {
                use std::io::{Read, Write};
                let mut s = std::net::TcpStream::connect(addr).unwrap();
                write!(
                    s,
                    "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                )
                .unwrap();
                let mut text = String::new();
                s.read_to_string(&mut text).unwrap();
                text.split_whitespace().nth(1).unwrap().to_string()
            })
        };
        assert_eq!(get(live.clone()).await.unwrap(), "200");
        assert_eq!(
            get(ready.clone()).await.unwrap(),
            "503",
            "not ready before the watches list"
        );
        tx.send(true).unwrap();
        assert_eq!(get(ready).await.unwrap(), "200");
        assert_eq!(
            get("/nope".into()).await.unwrap(),
            "404",
            "a wrong path would be caught"
        );
    });
}

#[test]
fn the_controller_runs_locked_down() {
    for (label, overrides, release) in variants() {
        let objs = objects_for(&overrides, release);
        let deploy = the(&objs, "Deployment");
        let pod = at(deploy, &["spec", "template", "spec"]).unwrap();
        assert_eq!(
            at(pod, &["securityContext", "runAsNonRoot"]),
            Some(&Value::Bool(true)),
            "{label}"
        );
        let sc = &container(deploy)["securityContext"];
        assert_eq!(sc["readOnlyRootFilesystem"], Value::Bool(true), "{label}");
        assert_eq!(
            sc["allowPrivilegeEscalation"],
            Value::Bool(false),
            "{label}"
        );
        assert_eq!(
            strings(at(sc, &["capabilities", "drop"])),
            ["ALL"],
            "{label}"
        );
        let sa = str_at(pod, &["serviceAccountName"]).unwrap();
        assert_eq!(
            str_at(the(&objs, "ServiceAccount"), &["metadata", "name"]),
            Some(sa)
        );
    }
}

#[test]
fn replicas_and_rollout_fit_the_provider() {
    let objs = objects_for(&[AWS.into()], "karpenter");
    let d = the(&objs, "Deployment");
    assert_eq!(
        at(d, &["spec", "replicas"]).and_then(Value::as_u64),
        Some(2)
    );
    assert!(
        at(
            d,
            &["spec", "template", "spec", "topologySpreadConstraints"]
        )
        .is_some()
    );
    assert_eq!(
        at(
            the(&objs, "PodDisruptionBudget"),
            &["spec", "maxUnavailable"]
        )
        .and_then(Value::as_u64),
        Some(1)
    );
    // The simulated cloud is process memory: one replica, never two at once.
    let sim = objects_for(
        &[AWS.into(), "{cloudProvider: sim, replicas: 3}".into()],
        "karpenter",
    );
    let d = the(&sim, "Deployment");
    assert_eq!(
        at(d, &["spec", "replicas"]).and_then(Value::as_u64),
        Some(1)
    );
    assert_eq!(str_at(d, &["spec", "strategy", "type"]), Some("Recreate"));
    assert!(
        at(
            d,
            &["spec", "template", "spec", "topologySpreadConstraints"]
        )
        .is_none()
    );
}

#[test]
fn irsa_keeps_the_service_account_name_an_existing_trust_policy_expects() {
    let objs = objects_for(&[AWS_FULL.into()], "karpenter");
    let sa = the(&objs, "ServiceAccount");
    assert_eq!(str_at(sa, &["metadata", "name"]), Some("karpenter"));
    assert_eq!(
        str_at(
            sa,
            &["metadata", "annotations", "eks.amazonaws.com/role-arn"]
        ),
        Some("arn:aws:iam::111122223333:role/KarpenterController")
    );
    let objs = objects_for(
        &[
            AWS.into(),
            "{serviceAccount: {create: false, name: existing}}".into(),
        ],
        "karpenter",
    );
    assert!(
        !objs
            .iter()
            .any(|o| str_at(o, &["kind"]) == Some("ServiceAccount"))
    );
    let deploy = the(&objs, "Deployment");
    assert_eq!(
        str_at(deploy, &["spec", "template", "spec", "serviceAccountName"]),
        Some("existing")
    );
    let (cluster, _) = grants(&objs);
    assert!(
        !cluster.is_empty(),
        "bindings follow the named service account"
    );
}

// ---- values.schema.json ----

fn schema() -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(chart_dir().join("values.schema.json")).unwrap())
        .unwrap()
}

fn schema_enum(path: &[&str]) -> BTreeSet<String> {
    let schema = schema();
    let node = path
        .iter()
        .fold(&schema, |node, key| &node["properties"][*key]);
    node["enum"]
        .as_array()
        .unwrap_or_else(|| panic!("no enum at {path:?}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

/// The values a flag of the settings accepts, from its clap definition.
fn possible_values(long: &str) -> BTreeSet<String> {
    SettingsCli::command()
        .get_arguments()
        .find(|a| a.get_long() == Some(long))
        .unwrap_or_else(|| panic!("no --{long}"))
        .get_possible_values()
        .iter()
        .map(|v| v.get_name().to_string())
        .collect()
}

/// `--cloud-provider`'s values, as `nodewright controller --help` lists them.
fn binary_providers() -> BTreeSet<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args(["controller", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    let section = help
        .split("--cloud-provider <CLOUD_PROVIDER>")
        .nth(1)
        .unwrap()
        .split("[default")
        .next()
        .unwrap();
    section
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- "))
        .map(|l| l.split(':').next().unwrap().to_string())
        .collect()
}

#[test]
fn the_values_schema_allows_exactly_what_the_binary_accepts() {
    assert_eq!(schema_enum(&["cloudProvider"]), binary_providers());
    assert_eq!(schema_enum(&["logLevel"]), possible_values("log-level"));
    assert_eq!(
        schema_enum(&["settings", "preferencePolicy"]),
        possible_values("preference-policy")
    );
    assert_eq!(
        schema_enum(&["settings", "minValuesPolicy"]),
        possible_values("min-values-policy")
    );
    // The chart's own values and the local ones are inside the schema's enums.
    for overrides in [vec![], vec![local_values()]] {
        let refs: Vec<&str> = overrides.iter().map(String::as_str).collect();
        let v = context(&refs, "x").values;
        for (path, value) in [
            (vec!["cloudProvider"], at(&v, &["cloudProvider"])),
            (vec!["logLevel"], at(&v, &["logLevel"])),
            (
                vec!["settings", "preferencePolicy"],
                at(&v, &["settings", "preferencePolicy"]),
            ),
            (
                vec!["settings", "minValuesPolicy"],
                at(&v, &["settings", "minValuesPolicy"]),
            ),
        ] {
            let value = value.and_then(Value::as_str).unwrap().to_string();
            assert!(schema_enum(&path).contains(&value), "{path:?} = {value}");
        }
    }
}

// ---- Karpenter's values ----

fn labels_of<'a>(o: &'a Value, path: &[&str]) -> &'a serde_yaml::Mapping {
    at(o, path)
        .and_then(Value::as_mapping)
        .unwrap_or_else(|| panic!("no {path:?} in {o:?}"))
}

fn pod_spec(objs: &[Value]) -> &Value {
    at(the(objs, "Deployment"), &["spec", "template", "spec"]).unwrap()
}

/// Seed 000 reads the controller's logs with `-l app.kubernetes.io/name=karpenter`: the pods
/// carry Karpenter's name label, and every selector the chart writes is built from it.
#[test]
fn the_pods_carry_karpenters_name_label_and_every_selector_matches_them() {
    for (overrides, name) in [
        (vec![AWS.to_string()], "karpenter"),
        (vec![AWS.to_string(), "nameOverride: nw".to_string()], "nw"),
    ] {
        let objs = objects_for(&overrides, "nodewright");
        let deploy = the(&objs, "Deployment");
        let pods = labels_of(deploy, &["spec", "template", "metadata", "labels"]);
        assert_eq!(
            pods.get("app.kubernetes.io/name").and_then(Value::as_str),
            Some(name)
        );
        assert_eq!(
            pods.get("app.kubernetes.io/instance")
                .and_then(Value::as_str),
            Some("nodewright")
        );
        let selector = labels_of(deploy, &["spec", "selector", "matchLabels"]);
        assert_eq!(selector.len(), 2, "{selector:?}");
        let pod = pod_spec(&objs);
        let anti = &at(
            pod,
            &[
                "affinity",
                "podAntiAffinity",
                "requiredDuringSchedulingIgnoredDuringExecution",
            ],
        )
        .unwrap()[0];
        let spread = &at(pod, &["topologySpreadConstraints"]).unwrap()[0];
        for (what, labels) in [
            (
                "service",
                labels_of(the(&objs, "Service"), &["spec", "selector"]),
            ),
            (
                "pdb",
                labels_of(
                    the(&objs, "PodDisruptionBudget"),
                    &["spec", "selector", "matchLabels"],
                ),
            ),
            (
                "anti-affinity",
                labels_of(anti, &["labelSelector", "matchLabels"]),
            ),
            (
                "spread",
                labels_of(spread, &["labelSelector", "matchLabels"]),
            ),
        ] {
            assert_eq!(labels, selector, "{what}");
        }
    }
}

#[test]
fn karpenters_pod_values_land_where_karpenters_chart_puts_them() {
    let objs = objects_for(&[UPSTREAM.into()], "karpenter");
    for o in &objs {
        let kind = str_at(o, &["kind"]).unwrap();
        assert_eq!(
            str_at(o, &["metadata", "labels", "team"]),
            Some("platform"),
            "{kind}: additionalLabels"
        );
        assert_eq!(
            str_at(o, &["metadata", "annotations", "owner"]),
            Some("infra"),
            "{kind}: additionalAnnotations"
        );
    }
    let sa = the(&objs, "ServiceAccount");
    assert_eq!(
        str_at(
            sa,
            &["metadata", "annotations", "eks.amazonaws.com/role-arn"]
        ),
        Some("arn:aws:iam::111122223333:role/k"),
        "the IRSA annotation stays beside additionalAnnotations"
    );
    let deploy = the(&objs, "Deployment");
    assert_eq!(
        str_at(
            deploy,
            &[
                "spec",
                "template",
                "metadata",
                "labels",
                "sidecar.istio.io/inject"
            ]
        ),
        Some("false")
    );
    assert_eq!(
        labels_of(deploy, &["spec", "selector", "matchLabels"]).len(),
        2,
        "podLabels stay out of the selector"
    );
    assert_eq!(
        str_at(the(&objs, "PodDisruptionBudget"), &["metadata", "name"]),
        Some("karpenter-pdb")
    );
    let pod = pod_spec(&objs);
    assert_eq!(
        str_at(&at(pod, &["imagePullSecrets"]).unwrap()[0], &["name"]),
        Some("registry")
    );
    assert_eq!(
        at(pod, &["terminationGracePeriodSeconds"]).and_then(Value::as_u64),
        Some(120)
    );
    assert_eq!(at(pod, &["hostNetwork"]), Some(&Value::Bool(true)));
    assert_eq!(str_at(pod, &["dnsPolicy"]), Some("ClusterFirstWithHostNet"));
    assert_eq!(
        str_at(&at(pod, &["dnsConfig", "options"]).unwrap()[0], &["value"]),
        Some("1")
    );
    assert_eq!(
        str_at(&at(pod, &["volumes"]).unwrap()[0], &["name"]),
        Some("aws-iam-token")
    );
    // The constraint without a labelSelector gets the pods' selector; the other keeps its own.
    let spread = at(pod, &["topologySpreadConstraints"])
        .and_then(Value::as_sequence)
        .unwrap();
    assert_eq!(spread.len(), 2);
    assert_eq!(
        str_at(&spread[0], &["whenUnsatisfiable"]),
        Some("ScheduleAnyway")
    );
    assert_eq!(
        labels_of(&spread[0], &["labelSelector", "matchLabels"]),
        labels_of(deploy, &["spec", "selector", "matchLabels"])
    );
    assert_eq!(
        str_at(&spread[1], &["labelSelector", "matchLabels", "app"]),
        Some("other")
    );

    let c = container(deploy);
    assert_eq!(
        str_at(c, &["image"]),
        Some(
            "nodewright:0.1.0@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
        )
    );
    assert_eq!(str_at(c, &["imagePullPolicy"]), Some("Always"));
    assert_eq!(
        str_at(&c["envFrom"][0], &["configMapRef", "name"]),
        Some("karpenter-env")
    );
    let mounts = |c: &Value| -> Vec<String> {
        c["volumeMounts"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|m| str_at(m, &["mountPath"]).unwrap().to_string())
            .collect()
    };
    assert_eq!(
        mounts(c),
        ["/var/run/secrets/eks.amazonaws.com/serviceaccount"]
    );
    let containers = at(pod, &["containers"])
        .and_then(Value::as_sequence)
        .unwrap();
    assert_eq!(containers.len(), 2);
    assert_eq!(str_at(&containers[1], &["name"]), Some("log-shipper"));
    assert_eq!(
        mounts(&containers[1]),
        [
            "/var/run/secrets/eks.amazonaws.com/serviceaccount",
            "/token"
        ]
    );

    // Without them, none of it is rendered.
    let plain = objects_for(&[AWS.into()], "karpenter");
    let pod = pod_spec(&plain);
    for key in [
        "imagePullSecrets",
        "terminationGracePeriodSeconds",
        "hostNetwork",
        "dnsConfig",
        "volumes",
    ] {
        assert!(at(pod, &[key]).is_none(), "{key}");
    }
    let c = container(the(&plain, "Deployment"));
    assert!(c.get("envFrom").is_none() && c.get("volumeMounts").is_none());
    assert_eq!(str_at(c, &["image"]), Some("nodewright:0.1.0"));
    assert!(
        plain
            .iter()
            .all(|o| at(o, &["metadata", "annotations"]).is_none()
                || str_at(o, &["kind"]) == Some("ServiceAccount")),
        "no empty annotations"
    );
}

fn env_map(objs: &[Value]) -> BTreeMap<String, Option<String>> {
    env_of(container(the(objs, "Deployment")))
        .into_iter()
        .collect()
}

/// Each v0.x name Karpenter's v0.32 upgrade guide maps to a current one reaches the same
/// variable; the seeds' own mixes of old and new names work as written.
#[test]
fn the_v0_settings_names_of_the_seeds_and_the_upgrade_guide_reach_their_variables() {
    let env = env_map(&objects_for(&[SEED_000.into()], "karpenter"));
    assert_eq!(env["CLUSTER_NAME"].as_deref(), Some("blue"));
    assert_eq!(
        env["INTERRUPTION_QUEUE"].as_deref(),
        Some("blue-karpenter"),
        "seed 000's settings.interruptionQueueName"
    );
    let env = env_map(&objects_for(&[SEED_002.into()], "karpenter"));
    assert_eq!(env["CLUSTER_NAME"].as_deref(), Some("copper"));

    let old = r#"
settings:
  aws:
    clusterName: old
    clusterCABundle: Q0E=
    interruptionQueueName: q-aws
    isolatedVPC: true
    vmMemoryOverheadPercent: 0.1
    reservedENIs: "1"
"#;
    let env = env_map(&objects_for(&[old.into()], "karpenter"));
    for (name, value) in [
        ("CLUSTER_CA_BUNDLE", "Q0E="),
        ("INTERRUPTION_QUEUE", "q-aws"),
        ("ISOLATED_VPC", "true"),
        ("VM_MEMORY_OVERHEAD_PERCENT", "0.1"),
        ("RESERVED_ENIS", "1"),
    ] {
        assert_eq!(env[name].as_deref(), Some(value), "{name}");
    }
    // The current names win over the v0.x ones whose current names default to empty.
    let both = r#"
settings:
  clusterCABundle: bmV3
  interruptionQueue: q-new
  interruptionQueueName: q-mid
"#;
    let env = env_map(&objects_for(&[old.into(), both.into()], "karpenter"));
    assert_eq!(env["CLUSTER_CA_BUNDLE"].as_deref(), Some("bmV3"));
    assert_eq!(env["INTERRUPTION_QUEUE"].as_deref(), Some("q-new"));
    let env = env_map(&objects_for(
        &[
            old.into(),
            "settings: {interruptionQueueName: q-mid}".into(),
        ],
        "karpenter",
    ));
    assert_eq!(env["INTERRUPTION_QUEUE"].as_deref(), Some("q-mid"));
    // A string "false", as some values files give it, stays false.
    let env = env_map(&objects_for(
        &[
            AWS.into(),
            "settings: {aws: {isolatedVPC: \"false\"}}".into(),
        ],
        "karpenter",
    ));
    assert_eq!(env["ISOLATED_VPC"].as_deref(), Some("false"));
}

fn notes(overrides: &[&str]) -> String {
    Chart::load(&chart_dir())
        .unwrap()
        .render("NOTES.txt", &context(overrides, "karpenter"))
        .unwrap()
}

/// What no v1 setting takes is not dropped silently: the install's notes name the value and
/// what to do instead, and say nothing of it when it is not set.
#[test]
fn values_with_no_v1_setting_are_named_in_the_notes() {
    for (values, profile) in [
        (SEED_000, "KarpenterNodeInstanceProfile-blue"),
        (SEED_002, "copper-karpenter-node"),
    ] {
        let text = notes(&[values]);
        assert!(
            text.contains("WARNING: settings.aws.defaultInstanceProfile is set and has no effect")
                && text.contains(&format!(
                    "`nodewright convert --default-instance-profile {profile}`"
                ))
                && text.contains("spec.role or spec.instanceProfile"),
            "{text}"
        );
    }
    let plain = notes(&[AWS]);
    assert!(
        !plain.contains("WARNING") && !plain.contains("webhook"),
        "{plain}"
    );
    assert!(
        plain.contains("logs -l app.kubernetes.io/name=karpenter -c controller"),
        "{plain}"
    );
    for (values, named) in [
        (
            "settings: {clusterName: x, defaultInstanceProfile: p}",
            "settings.defaultInstanceProfile",
        ),
        (
            "settings: {clusterName: x, aws: {tags: {a: b}}}",
            "settings.aws.tags",
        ),
        (
            "settings: {clusterName: x, aws: {enableENILimitedPodDensity: false}}",
            "settings.aws.enableENILimitedPodDensity",
        ),
        (
            "settings: {clusterName: x, aws: {enablePodENI: true}}",
            "settings.aws.enablePodENI",
        ),
        (
            "settings: {clusterName: x, assumeRoleARN: arn}",
            "settings.assumeRoleARN",
        ),
        (
            "settings: {clusterName: x, aws: {assumeRoleARN: arn}}",
            "settings.aws.assumeRoleARN",
        ),
        (
            "settings: {clusterName: x, featureGates: {drift: false}}",
            "settings.featureGates.drift",
        ),
    ] {
        let text = notes(&[values]);
        assert!(text.contains(&format!("{named} ")), "{values}: {text}");
    }
    // The default of each (drift on, ENI-limited density on) says nothing.
    let text = notes(&[
        "settings: {clusterName: x, featureGates: {drift: true}, aws: {enableENILimitedPodDensity: true}}",
    ]);
    assert!(!text.contains("WARNING"), "{text}");
}

/// `webhook.enabled` and `webhook.port`: the settings that start the webhook behind the
/// chart's Service, its ports, and the rights to point the CRDs at it and keep its Secret.
#[test]
fn the_webhook_values_reach_the_deployment_the_service_and_rbac() {
    let port_named = |ports: Option<&Value>, name: &str| {
        ports
            .and_then(Value::as_sequence)
            .into_iter()
            .flatten()
            .find(|p| str_at(p, &["name"]) == Some(name))
            .cloned()
    };
    let objs = objects_for(&[AWS.into(), "webhook: {port: 9443}".into()], "karpenter");
    let service = str_at(the(&objs, "Service"), &["metadata", "name"])
        .unwrap()
        .to_string();
    let c = container(the(&objs, "Deployment"));
    let env: BTreeMap<String, Option<String>> = env_of(c).into_iter().collect();
    assert_eq!(env["KARPENTER_SERVICE"].as_deref(), Some(service.as_str()));
    assert_eq!(env["WEBHOOK_PORT"].as_deref(), Some("9443"));
    assert!(env.contains_key("SYSTEM_NAMESPACE") && !env.contains_key("DISABLE_WEBHOOK"));
    let container_port = port_named(c.get("ports"), "https-webhook").expect("a webhook port");
    assert_eq!(container_port["containerPort"].as_u64(), Some(9443));
    let svc_port = port_named(
        at(the(&objs, "Service"), &["spec", "ports"]),
        "https-webhook",
    )
    .expect("the Service forwards the webhook");
    assert_eq!(svc_port["port"].as_u64(), Some(9443));
    assert_eq!(str_at(&svc_port, &["targetPort"]), Some("https-webhook"));
    let role = the(&objs, "Role");
    let secret_names: Vec<String> = at(role, &["rules"])
        .and_then(Value::as_sequence)
        .unwrap()
        .iter()
        .flat_map(|r| strings(r.get("resourceNames")))
        .collect();
    assert_eq!(
        secret_names,
        [format!("{service}-cert")],
        "the Secret the process names"
    );

    let off = objects_for(
        &[AWS.into(), "webhook: {enabled: false}".into()],
        "karpenter",
    );
    let c = container(the(&off, "Deployment"));
    let env: BTreeMap<String, Option<String>> = env_of(c).into_iter().collect();
    assert_eq!(env["DISABLE_WEBHOOK"].as_deref(), Some("true"));
    assert!(!env.contains_key("KARPENTER_SERVICE"));
    assert!(port_named(c.get("ports"), "https-webhook").is_none());
    let (cluster, namespaced) = grants(&off);
    assert!(!cluster.iter().any(|r| r.allows(
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        "patch"
    )));
    assert!(
        !namespaced[NS]
            .iter()
            .any(|r| r.allows("", "secrets", "get"))
    );
}

// ---- the CRD-only chart ----

fn crd_chart_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../charts/nodewright-crd")
}

/// `charts/nodewright-crd` holds, as templates (which `helm upgrade` applies), exactly the
/// CRDs `nodewright crds` prints, byte for byte, and renders them unchanged.
#[test]
fn the_crd_chart_holds_exactly_the_crds_nodewright_prints() {
    let dir = crd_chart_dir().join("templates");
    let expected = nodewright_api::crd::all();
    for (name, value) in &expected {
        let on_disk = std::fs::read_to_string(dir.join(name)).unwrap_or_default();
        assert!(
            on_disk == nodewright_api::crd::to_yaml(value),
            "{name} is stale; regenerate with `cargo run -p nodewright-cli -- crds --output-dir charts/nodewright-crd/templates`"
        );
    }
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        expected.len(),
        "unexpected files in {}",
        dir.display()
    );
    let chart = Chart::load(&crd_chart_dir()).unwrap();
    let ctx = Context {
        values: Value::Mapping(Default::default()),
        release_name: "nodewright-crd".into(),
        release_namespace: NS.into(),
        chart: yaml(&std::fs::read_to_string(crd_chart_dir().join("Chart.yaml")).unwrap()),
    };
    for (name, value) in &expected {
        assert_eq!(
            chart.render(name, &ctx).unwrap(),
            nodewright_api::crd::to_yaml(value),
            "{name}"
        );
    }
    let main: BTreeSet<String> = std::fs::read_dir(chart_dir().join("crds"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(main, chart.file_names().into_iter().collect());
}
