//! The chart with the real `helm`: it lints and renders with the values the seeds use, it
//! installs into the real control plane (CRDs included), and a controller given only the
//! chart's ServiceAccount token provisions and consolidates, so the chart's RBAC is enough for
//! every loop.

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

fn chart() -> String {
    repo_root()
        .join("charts/nodewright")
        .to_string_lossy()
        .into_owned()
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
    for args in [
        vec!["lint", "--strict", &chart(), "-f", &values],
        vec!["lint", "--strict", &chart(), "-f", &local],
    ] {
        succeed("helm", &args, cp.helm(&args));
    }
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

    let mut ctl = Launch::sim(&cp, "as-service-account")
        .kubeconfig(&sa_config)
        .flag("--leader-election-namespace", "nodewright")
        .start();
    ctl.wait_ready().await;
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
