//! `nodewright explain` and `nodewright plan --kubeconfig` on a real control plane: with no
//! controller running, a pod whose zone the only NodePool excludes is explained as refused by
//! that requirement and a pod that fits as taken, with the instance types that remain; then
//! the controller launches a node for the one that fits, and `explain node` says, method by
//! method, that its `karpenter.sh/do-not-disrupt` pod keeps it, then (the annotation removed,
//! `consolidateAfter` raised to an hour) that the graceful methods wait for `consolidateAfter`
//! and drift finds nothing (and the claim is not `Consolidatable`), then (`consolidateAfter:
//! 0s`) that the node is not empty and has no cheaper replacement (and the claim is
//! `Consolidatable`); `plan --kubeconfig` plans the same cluster.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;

use crate::kit::controller::Launch;
use crate::kit::read::{self, node_of, running};
use crate::kit::{ControlPlane, eventually, manifests};

/// Two instance types, one zone.
const POOL: &str = r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: zonal}
spec:
  template:
    spec:
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [c5.large, c5.xlarge]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 5s
"#;

/// A one-replica Deployment `name` of a one-CPU pod that asks for `zone`.
fn app(name: &str, zone: &str) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: default}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata:
      labels: {{app: {name}}}
      annotations: {{karpenter.sh/do-not-disrupt: "true"}}
    spec:
      terminationGracePeriodSeconds: 0
      nodeSelector: {{topology.kubernetes.io/zone: {zone}}}
      containers:
        - name: app
          image: public.ecr.aws/eks-distro/kubernetes/pause:3.7
          resources: {{requests: {{cpu: "1"}}}}
"#
    )
}

fn nodewright(kubeconfig: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env_remove("AWS_REGION")
        .output()
        .expect("nodewright runs")
}

/// Stdout of a run that must succeed.
fn ok(kubeconfig: &Path, args: &[&str]) -> String {
    let out = nodewright(kubeconfig, args);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "nodewright {} failed:\n{text}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// `default/<name>` of the pod of app `app`, once it exists.
async fn pod_key(client: &kube::Client, app: &str) -> String {
    eventually(Duration::from_secs(60), "the app's pod exists", || {
        let client = client.clone();
        async move {
            read::pods(&client, "default")
                .await
                .into_iter()
                .find_map(|p| {
                    let labels = p.metadata.labels.clone().unwrap_or_default();
                    (labels.get("app").map(String::as_str) == Some(app))
                        .then(|| format!("default/{}", p.metadata.name.clone().unwrap_or_default()))
                })
        }
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_pods_and_nodes_of_a_live_cluster() {
    let Some(cp) = ControlPlane::start("explain") else {
        return;
    };
    cp.install_crds();
    cp.apply(manifests::NODE_CLASS).unwrap();
    cp.apply(POOL).unwrap();
    cp.apply(&app("fits", "us-east-1a")).unwrap();
    cp.apply(&app("misfit", "us-east-1b")).unwrap();
    let client = cp.client().await;
    let kc = cp.kubeconfig.as_path();
    let fits = pod_key(&client, "fits").await;
    let misfit = pod_key(&client, "misfit").await;

    // No controller: both stay pending.
    let text = ok(kc, &["explain", "pod", &misfit]);
    println!("$ nodewright explain pod {misfit}\n{text}");
    assert!(text.contains("nothing can take it"), "{text}");
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("zonal"))
        .unwrap_or_else(|| panic!("no line for NodePool zonal:\n{text}"));
    assert!(line.contains("refuses: requirements"), "{line}");
    assert!(line.contains("topology.kubernetes.io/zone"), "{line}");

    let text = ok(kc, &["explain", "pod", &fits]);
    println!("$ nodewright explain pod {fits}\n{text}");
    assert!(
        text.contains("launch a NodeClaim of NodePool zonal for it, cheapest c5.large"),
        "{text}"
    );
    assert!(
        text.contains("takes it; 2 instance types remain: c5.large, c5.xlarge"),
        "{text}"
    );
    let json: Value =
        serde_json::from_str(&ok(kc, &["explain", "pod", &fits, "-o", "json"])).unwrap();
    assert_eq!(json["outcome"]["kind"], "newNodeClaim", "{json}");
    assert_eq!(json["nodePools"][0]["name"], "zonal", "{json}");
    assert_eq!(
        json["nodePools"][0]["instanceTypes"],
        serde_json::json!(["c5.large", "c5.xlarge"]),
        "{json}"
    );

    // Errors name the object.
    let out = nodewright(kc, &["explain", "pod", "default/nope"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("pod default/nope not found"), "{err}");
    let out = nodewright(kc, &["explain", "node", "nope"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("node nope not found"));

    // The controller launches a node for the pod that fits; its do-not-disrupt pod keeps it.
    let mut ctl = Launch::sim(&cp, "nodewright").start();
    ctl.wait_ready().await;
    let node = eventually(Duration::from_secs(180), "the fitting pod Running", || {
        let client = client.clone();
        async move {
            let pods = read::pods(&client, "default").await;
            running(&pods)
                .into_iter()
                .find_map(|p| node_of(p).map(String::from))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
    let text = eventually(
        Duration::from_secs(60),
        "a verdict past initialization",
        || {
            let text = ok(kc, &["explain", "node", &node]);
            async move { text.contains("(pod-do-not-disrupt)").then_some(text) }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ok(kc, &["explain", "node", &node])));
    println!("$ nodewright explain node {node}\n{text}");
    assert!(
        text.contains(&format!(
            "this round: do-not-disrupt pod {fits} (pod-do-not-disrupt)"
        )),
        "{text}"
    );
    assert!(
        text.contains(
            "NodePool zonal: consolidationPolicy WhenEmptyOrUnderutilized, consolidateAfter 5s"
        ),
        "{text}"
    );
    // Each method's own verdict: the pod keeps the graceful methods and drift (no
    // terminationGracePeriod) away; expiration is forceful and waits for expireAfter (720h by
    // default, the node seconds old).
    let method = |text: &str, m: &str| -> String {
        text.lines()
            .find(|l| l.trim_start().starts_with(&format!("{m} ")))
            .unwrap_or_else(|| panic!("no line for {m}:\n{text}"))
            .to_string()
    };
    for m in [
        "drift",
        "emptiness",
        "multi-node-consolidation",
        "single-node-consolidation",
    ] {
        assert!(
            method(&text, m).ends_with(&format!("do-not-disrupt pod {fits} (pod-do-not-disrupt)")),
            "{text}"
        );
    }
    assert!(
        method(&text, "expiration").ends_with("expires in 29d23h (expireAfter 30d) (not-expired)"),
        "{text}"
    );
    let json: Value =
        serde_json::from_str(&ok(kc, &["explain", "node", &node, "-o", "json"])).unwrap();
    assert_eq!(json["verdict"]["code"], "pod-do-not-disrupt", "{json}");
    assert_eq!(json["pods"], serde_json::json!([fits]), "{json}");
    assert_eq!(json["methods"][0]["method"], "expiration", "{json}");
    assert_eq!(json["methods"][0]["code"], "not-expired", "{json}");

    // Without the annotation and with a consolidateAfter of an hour, the graceful methods
    // wait for it, and drift finds nothing to replace.
    cp.kubectl(&[
        "patch",
        "nodepool",
        "zonal",
        "--type=merge",
        "-p",
        r#"{"spec":{"disruption":{"consolidateAfter":"1h"}}}"#,
    ]);
    let pod_name = fits.trim_start_matches("default/");
    cp.kubectl(&[
        "annotate",
        "pod",
        "-n",
        "default",
        pod_name,
        "karpenter.sh/do-not-disrupt-",
    ]);
    let text = eventually(Duration::from_secs(60), "the annotation gone", || {
        let text = ok(kc, &["explain", "node", &node]);
        async move { (!text.contains("do-not-disrupt")).then_some(text) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ok(kc, &["explain", "node", &node])));
    println!("$ nodewright explain node {node}\n{text}");
    for m in ["emptiness", "single-node-consolidation"] {
        let line = method(&text, m);
        assert!(
            line.contains("consolidateAfter not elapsed (")
                && line.ends_with("s left) (consolidate-after)"),
            "{text}"
        );
    }
    assert!(
        method(&text, "drift").ends_with("not drifted (not-drifted)"),
        "{text}"
    );
    let json: Value =
        serde_json::from_str(&ok(kc, &["explain", "node", &node, "-o", "json"])).unwrap();
    assert_eq!(json["methods"][2]["method"], "emptiness", "{json}");
    assert_eq!(json["methods"][2]["code"], "consolidate-after", "{json}");
    // The claim's Consolidatable condition is the same rule: not while consolidateAfter runs.
    let consolidatable = || {
        let client = client.clone();
        async move {
            let claims = read::nodeclaims(&client).await;
            claims
                .iter()
                .map(|c| read::condition(c, "Consolidatable").map(str::to_string))
                .collect::<Vec<_>>()
        }
    };
    eventually(
        Duration::from_secs(30),
        "the claim not Consolidatable",
        || {
            let now = consolidatable();
            async move { (now.await == vec![None]).then_some(()) }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));

    // consolidateAfter 0s: emptiness has a pod to move, and the node is already the
    // cheapest type that holds it, so consolidation has no cheaper replacement.
    cp.kubectl(&[
        "patch",
        "nodepool",
        "zonal",
        "--type=merge",
        "-p",
        r#"{"spec":{"disruption":{"consolidateAfter":"0s"}}}"#,
    ]);
    let text = eventually(Duration::from_secs(60), "consolidateAfter 0s read", || {
        let text = ok(kc, &["explain", "node", &node]);
        async move { text.contains("(not-empty)").then_some(text) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ok(kc, &["explain", "node", &node])));
    println!("$ nodewright explain node {node}\n{text}");
    eventually(Duration::from_secs(30), "the claim Consolidatable", || {
        let now = consolidatable();
        async move { (now.await == vec![Some("True".to_string())]).then_some(()) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        method(&text, "emptiness")
            .ends_with(&format!("not empty: 1 pod(s) to move ({fits}) (not-empty)")),
        "{text}"
    );
    assert!(
        method(&text, "single-node-consolidation").ends_with(
            "no cheaper replacement: now $0.0850/h, the cheapest that holds the pods is \
             c5.large at $0.0850/h (+0.0000 $/h) (no-cheaper-replacement)"
        ),
        "{text}"
    );

    // A bound pod is asked about as if it were pending again: its own node would take it.
    let text = ok(kc, &["explain", "pod", &fits]);
    assert!(text.contains(&format!("runs on node {node}")), "{text}");
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with(&node) && l.contains("takes it")),
        "{text}"
    );

    let text = ok(kc, &["explain", "pod", &misfit]);
    println!("$ nodewright explain pod {misfit}\n{text}");
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with(&node) && l.contains("refuses:")),
        "{text}"
    );

    // plan --kubeconfig: the what-if of the same cluster (exit 1: a pod cannot be placed).
    let out = nodewright(kc, &["plan"]);
    let text = String::from_utf8_lossy(&out.stdout);
    println!("$ nodewright plan --kubeconfig ...\n{text}");
    assert_eq!(
        out.status.code(),
        Some(1),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("1 unplaced"), "{text}");
    assert!(text.contains(&format!("{misfit}: ")), "{text}");
    let text = ok(kc, &["plan", "--disruption"]);
    assert!(
        text.contains(&node) && text.contains("no-cheaper-replacement"),
        "{text}"
    );
    ctl.terminate();
}

/// A NodePool that wants two instance families (`minValues: 2`) but allows only c5's types:
/// `MIN_VALUES_POLICY=Strict` refuses every pod, `BestEffort` takes them.
const MIN_VALUES_POOL: &str = r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: picky}
spec:
  template:
    spec:
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [c5.large, c5.xlarge]}
        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [c5, c5a], minValues: 2}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
"#;

/// The controller's Deployment as the chart labels it, scaled to zero: only its env is read.
const CONTROLLER_DEPLOYMENT: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: karpenter
  namespace: default
  labels: {app.kubernetes.io/name: karpenter}
spec:
  replicas: 0
  selector: {matchLabels: {app.kubernetes.io/name: karpenter}}
  template:
    metadata: {labels: {app.kubernetes.io/name: karpenter}}
    spec:
      containers:
        - name: controller
          image: public.ecr.aws/eks-distro/kubernetes/pause:3.7
          env:
            - {name: MIN_VALUES_POLICY, value: BestEffort}
            - {name: FEATURE_GATES, value: "SpotToSpotConsolidation=true"}
"#;

/// `explain` answers under the settings of the controller's Deployment, a flag overriding
/// one: the same pod is refused for `minValues` under the default `Strict` and taken under the
/// Deployment's `BestEffort`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_answers_under_the_controller_deployments_settings() {
    let Some(cp) = ControlPlane::start("explain-settings") else {
        return;
    };
    cp.install_crds();
    cp.apply(manifests::NODE_CLASS).unwrap();
    cp.apply(MIN_VALUES_POOL).unwrap();
    cp.apply(&app("wants", "us-east-1a")).unwrap();
    let client = cp.client().await;
    let kc = cp.kubeconfig.as_path();
    let pod = pod_key(&client, "wants").await;
    let picky = |text: &str| -> String {
        text.lines()
            .find(|l| l.trim_start().starts_with("picky"))
            .unwrap_or_else(|| panic!("no line for NodePool picky:\n{text}"))
            .to_string()
    };

    let text = ok(kc, &["explain", "pod", &pod]);
    println!("$ nodewright explain pod {pod}\n{text}");
    assert!(
        text.starts_with("controller settings (defaults: no controller Deployment found): SpotToSpotConsolidation=false, PREFERENCE_POLICY=Respect, MIN_VALUES_POLICY=Strict\n"),
        "{text}"
    );
    assert!(picky(&text).contains("refuses:"), "{text}");
    assert!(picky(&text).contains("minValues"), "{text}");

    cp.apply(CONTROLLER_DEPLOYMENT).unwrap();
    let text = ok(kc, &["explain", "pod", &pod]);
    println!("$ nodewright explain pod {pod}\n{text}");
    assert!(
        text.starts_with("controller settings (Deployment default/karpenter): SpotToSpotConsolidation=true, PREFERENCE_POLICY=Respect, MIN_VALUES_POLICY=BestEffort\n"),
        "{text}"
    );
    assert!(picky(&text).contains("takes it"), "{text}");
    let json: Value =
        serde_json::from_str(&ok(kc, &["explain", "pod", &pod, "-o", "json"])).unwrap();
    assert_eq!(json["controllerSettings"]["minValuesPolicy"], "BestEffort");
    assert_eq!(json["controllerSettings"]["spotToSpotConsolidation"], true);

    // A flag wins over the Deployment.
    let text = ok(
        kc,
        &["explain", "pod", &pod, "--min-values-policy", "Strict"],
    );
    assert!(text.contains("MIN_VALUES_POLICY=Strict"), "{text}");
    assert!(picky(&text).contains("refuses:"), "{text}");
}
