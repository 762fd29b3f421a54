//! The charts with the real `helm`: they lint and render with the values the seeds use, the
//! main chart installs into the real control plane (CRDs included) and names the v0.x values
//! it cannot take in its notes, the CRD-only chart takes the CRDs over and `helm upgrade`
//! changes them, and a controller given only the chart's ServiceAccount token provisions and
//! consolidates, so the chart's RBAC is enough for every loop.

use std::time::Duration;

use crate::kit::cluster::{run_tool, succeed};
use crate::kit::controller::Launch;
use crate::kit::read::{self, running};
use crate::kit::{ControlPlane, assert_clean_log, eventually, repo_root};

/// Seed 004's values, as `eksdemo install autoscaling-karpenter --dry-run` prints them.
const EKSDEMO_VALUES: &str = r#"
serviceAccount:
  name: karpenter
  annotations:
    eks.amazonaws.com/role-arn: arn:aws:iam::123456789012:role/eksdemo.blue.karpenter.karpenter
replicas: 1
controller:
  image:
    tag: 1.0.0
  resources:
    requests:
      cpu: "1"
      memory: "1Gi"
settings:
  clusterName: blue
  interruptionQueue: karpenter-blue
  featureGates:
    spotToSpotConsolidation: false
"#;

/// Seed 002's `helm upgrade --install --set` flags (Karpenter v0.26's names).
const SEED_002_SETS: [&str; 6] = [
    "--set",
    "serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn=arn:aws:iam::020213277421:role/copper-karpenter-irsa-role",
    "--set",
    "settings.aws.clusterName=copper",
    "--set",
    "settings.aws.defaultInstanceProfile=copper-karpenter-node",
];

fn chart() -> String {
    repo_root()
        .join("charts/nodewright")
        .to_string_lossy()
        .into_owned()
}

fn crd_chart() -> String {
    repo_root()
        .join("charts/nodewright-crd")
        .to_string_lossy()
        .into_owned()
}

const EC2NODECLASS_CRD: &str = "karpenter.k8s.aws_ec2nodeclasses.yaml";

/// A copy of the CRD chart whose EC2NodeClass CRD lacks `spec.detailedMonitoring`, standing
/// in for an older release of it.
fn older_crd_chart(dir: &std::path::Path) -> String {
    let old = dir.join("nodewright-crd-old");
    std::fs::create_dir_all(old.join("templates")).unwrap();
    let src = repo_root().join("charts/nodewright-crd");
    for f in ["Chart.yaml", "values.yaml"] {
        std::fs::copy(src.join(f), old.join(f)).unwrap();
    }
    for e in std::fs::read_dir(src.join("templates")).unwrap() {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_owned();
        let mut text = std::fs::read_to_string(&path).unwrap();
        if name == EC2NODECLASS_CRD {
            let mut crd: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
            let spec = &mut crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
                ["properties"];
            let removed = spec.as_mapping_mut().unwrap().remove("detailedMonitoring");
            assert!(removed.is_some(), "the CRD has spec.detailedMonitoring");
            text = serde_yaml::to_string(&crd).unwrap();
        }
        std::fs::write(old.join("templates").join(name), text).unwrap();
    }
    old.to_string_lossy().into_owned()
}

/// The EC2NodeClass CRD's schema type of `spec.detailedMonitoring`, as the API server has it.
fn detailed_monitoring_type(cp: &ControlPlane) -> String {
    cp.kubectl(&[
        "get",
        "crd",
        "ec2nodeclasses.karpenter.k8s.aws",
        "-o",
        "jsonpath={.spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.detailedMonitoring.type}",
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chart_installs_and_its_service_account_runs_every_loop() {
    let Some(cp) = ControlPlane::start("helm") else {
        return;
    };
    let values = cp.dir.join("eksdemo-values.yaml");
    std::fs::write(&values, EKSDEMO_VALUES).unwrap();
    let values = values.to_string_lossy().into_owned();
    let local = repo_root()
        .join("charts/nodewright/ci/local-values.yaml")
        .to_string_lossy()
        .into_owned();
    let main_chart = chart();
    let seed_002: Vec<&str> = ["lint", "--strict", &main_chart]
        .into_iter()
        .chain(SEED_002_SETS)
        .collect();
    for args in [
        vec!["lint", "--strict", &chart(), "-f", &values],
        vec!["lint", "--strict", &chart(), "-f", &local],
        seed_002,
        vec!["lint", "--strict", &crd_chart()],
    ] {
        succeed("helm", &args, cp.helm(&args));
    }
    let crds = succeed(
        "helm",
        &["template"],
        cp.helm(&["template", "nodewright-crd", &crd_chart()]),
    );
    assert_eq!(crds.matches("kind: CustomResourceDefinition").count(), 3);
    let rendered = succeed(
        "helm",
        &["template"],
        cp.helm(&[
            "template",
            "karpenter",
            &chart(),
            "-n",
            "karpenter",
            "-f",
            &values,
        ]),
    );
    assert!(rendered.contains("kind: Deployment"), "{rendered}");
    assert!(rendered.contains("name: INTERRUPTION_QUEUE"), "{rendered}");
    // Seed 000's `kubectl logs -l app.kubernetes.io/name=karpenter` finds the pods.
    assert!(
        rendered.contains(
            "  template:\n    metadata:\n      labels:\n        app.kubernetes.io/name: karpenter\n"
        ),
        "{rendered}"
    );
    // Seed 002's v0.26 flags install, and the notes name the value v1 has no setting for.
    let args: Vec<&str> = [
        "install",
        "karpenter",
        &main_chart,
        "-n",
        "karpenter",
        "--dry-run=client",
    ]
    .into_iter()
    .chain(SEED_002_SETS)
    .collect();
    let dry = succeed("helm", &args, cp.helm(&args));
    assert!(
        dry.contains("WARNING: settings.aws.defaultInstanceProfile is set and has no effect")
            && dry.contains("nodewright convert --default-instance-profile copper-karpenter-node")
            && dry.contains("value: \"copper\""),
        "{dry}"
    );

    succeed(
        "helm",
        &["install"],
        cp.helm(&[
            "install",
            "nodewright",
            &chart(),
            "--namespace",
            "nodewright",
            "--create-namespace",
            "-f",
            &local,
        ]),
    );
    cp.kubectl(&[
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/nodepools.karpenter.sh",
        "crd/nodeclaims.karpenter.sh",
        "crd/ec2nodeclasses.karpenter.k8s.aws",
    ]);

    // The CRD-only chart takes over the CRDs the main chart installed (the README's steps),
    // and `helm upgrade` of it changes them: here from an older copy lacking a field.
    let crd_names = [
        "crd/nodepools.karpenter.sh",
        "crd/nodeclaims.karpenter.sh",
        "crd/ec2nodeclasses.karpenter.k8s.aws",
    ];
    for meta in [
        vec!["label", "app.kubernetes.io/managed-by=Helm"],
        vec!["annotate", "meta.helm.sh/release-name=nodewright-crd"],
        vec!["annotate", "meta.helm.sh/release-namespace=nodewright"],
    ] {
        let args: Vec<&str> = meta[..1]
            .iter()
            .copied()
            .chain(crd_names)
            .chain([meta[1], "--overwrite"])
            .collect();
        cp.kubectl(&args);
    }
    assert_eq!(detailed_monitoring_type(&cp), "boolean");
    let older = older_crd_chart(&cp.dir);
    succeed(
        "helm",
        &["install"],
        cp.helm(&["install", "nodewright-crd", &older, "-n", "nodewright"]),
    );
    assert_eq!(
        detailed_monitoring_type(&cp),
        "",
        "the older CRD was applied"
    );
    succeed(
        "helm",
        &["upgrade"],
        cp.helm(&[
            "upgrade",
            "nodewright-crd",
            &crd_chart(),
            "-n",
            "nodewright",
        ]),
    );
    assert_eq!(
        detailed_monitoring_type(&cp),
        "boolean",
        "helm upgrade upgraded the CRD"
    );
    cp.kubectl(&[
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/ec2nodeclasses.karpenter.k8s.aws",
    ]);

    // The chart's ServiceAccount, as the in-cluster controller would run.
    let token = cp
        .kubectl(&[
            "create",
            "token",
            "nodewright",
            "-n",
            "nodewright",
            "--duration=2h",
        ])
        .trim()
        .to_string();
    let sa_config = cp.dir.join("service-account.kubeconfig");
    std::fs::copy(&cp.kubeconfig, &sa_config).unwrap();
    let kubectl = cp.bin.join("kubectl");
    let cfg = sa_config.to_string_lossy().into_owned();
    for args in [
        vec!["config", "set-credentials", "sa", "--token", &token],
        vec!["config", "set-context", "--current", "--user", "sa"],
    ] {
        succeed(
            "kubectl",
            &args,
            run_tool(&kubectl, &sa_config, &args, None),
        );
    }
    let whoami = succeed(
        "kubectl",
        &["auth", "whoami"],
        run_tool(&kubectl, &sa_config, &["auth", "whoami"], None),
    );
    assert!(
        whoami.contains("system:serviceaccount:nodewright:nodewright"),
        "{whoami} ({cfg})"
    );

    // With the chart's webhook settings: its certificate Secret and the CRDs' conversion are
    // written as the ServiceAccount too.
    let mut ctl = Launch::sim(&cp, "as-service-account")
        .kubeconfig(&sa_config)
        .flag("--leader-election-namespace", "nodewright")
        .env("KARPENTER_SERVICE", "nodewright")
        .env("SYSTEM_NAMESPACE", "nodewright")
        .env("WEBHOOK_PORT", &crate::kit::free_port().to_string())
        .start();
    ctl.wait_ready().await;
    let secret = cp.kubectl(&[
        "get",
        "secret",
        "-n",
        "nodewright",
        "nodewright-cert",
        "-o",
        "json",
    ]);
    let secret: serde_json::Value = serde_json::from_str(&secret).unwrap();
    let ca = secret["data"]["ca.crt"].as_str().unwrap().to_string();
    eventually(
        Duration::from_secs(30),
        "the CRDs converting through the chart's Service",
        || {
            let crd = cp.kubectl(&["get", "crd", "nodepools.karpenter.sh", "-o", "json"]);
            let crd: serde_json::Value = serde_json::from_str(&crd).unwrap();
            let cc = crd["spec"]["conversion"]["webhook"]["clientConfig"].clone();
            let ok = cc["service"]["name"] == "nodewright"
                && cc["service"]["namespace"] == "nodewright"
                && cc["caBundle"] == serde_json::json!(ca);
            async move { ok.then_some(()) }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
    cp.apply_path("fixtures/seed-manifests/04-nodepool-ec2nodeclass-v1.yaml");
    cp.kubectl(&["create", "namespace", "inflate"]);
    cp.apply_path("fixtures/seed-manifests/05-inflate.yaml");
    let client = cp.client().await;
    eventually(Duration::from_secs(180), "10 inflate pods Running", || {
        let client = client.clone();
        async move { (running(&read::pods(&client, "inflate").await).len() == 10).then_some(()) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
    let before = read::nodeclaims(&client).await.len();
    cp.kubectl(&[
        "scale",
        "-n",
        "inflate",
        "deployment/inflate",
        "--replicas=3",
    ]);
    eventually(Duration::from_secs(240), "a node consolidated away", || {
        let client = client.clone();
        async move { (read::nodeclaims(&client).await.len() < before).then_some(()) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
    // The NodePool and EC2NodeClass status writers, the lease and the events all went
    // through: nothing was refused.
    let log = ctl.log_text();
    assert!(
        !log.contains("forbidden") && !log.contains("Forbidden"),
        "the chart's RBAC refused a call:\n{log}"
    );
    let pools = read::nodepools(&client).await;
    assert_eq!(
        read::condition(&pools[0], "Ready"),
        Some("True"),
        "{}",
        pools[0]
    );
    let lease = cp.kubectl(&[
        "get",
        "lease",
        "-n",
        "nodewright",
        "karpenter-leader-election",
        "-o",
        "jsonpath={.spec.holderIdentity}",
    ]);
    assert!(lease.starts_with("as-service-account"), "{lease}");
    assert_clean_log(&log);

    // A clean shutdown hands the lease over at once.
    ctl.terminate().expect("the controller exits on SIGTERM");
    let holder = cp.kubectl(&[
        "get",
        "lease",
        "-n",
        "nodewright",
        "karpenter-leader-election",
        "-o",
        "jsonpath={.spec.holderIdentity}",
    ]);
    assert_eq!(holder, "", "the lease is released on SIGTERM");
}
