//! Disruption on the real API server: drift after a NodePool template change replaces nodes,
//! one at a time under a budget of one, except the node of a `karpenter.sh/do-not-disrupt`
//! pod and the node of a pod whose PDB allows no eviction; a NodeClaim deleted by hand waits
//! on the Eviction API's 429 until the PDB goes, and on a `do-not-disrupt` pod (never evicted)
//! until it loses the annotation; `expireAfter` replaces a node.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;

use crate::kit::controller::{Controller, Launch};
use crate::kit::read::{self, label, name, node_of, running};
use crate::kit::{ControlPlane, assert_clean_log, eventually, manifests, pods_running};

/// One small on-demand type, so each one-CPU pod needs a node of its own.
fn nodepool(team: &str, expire_after: &str, budget: &str) -> String {
    format!(
        r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: default}}
spec:
  template:
    metadata: {{labels: {{example.com/team: {team}}}}}
    spec:
      requirements:
        - {{key: node.kubernetes.io/instance-type, operator: In, values: [c5.large]}}
        - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      expireAfter: {expire_after}
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 5s
    budgets: [{{nodes: "{budget}"}}]
"#
    )
}

/// A one-replica Deployment `name` of a one-CPU pod, with `annotations` on the pod.
fn app(name: &str, annotations: &str) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: default}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata:
      labels: {{app: {name}, group: e2e}}
      annotations: {{{annotations}}}
    spec:
      terminationGracePeriodSeconds: 0
      containers:
        - name: app
          image: public.ecr.aws/eks-distro/kubernetes/pause:3.7
          resources: {{requests: {{cpu: "1"}}}}
"#
    )
}

const GUARD: &str = r#"apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: guarded, namespace: default}
spec:
  maxUnavailable: 0
  selector: {matchLabels: {app: guarded}}
"#;

struct Setup {
    cp: ControlPlane,
    ctl: Controller,
    client: kube::Client,
}

async fn setup(test: &str, pool: &str, apps: &[String]) -> Option<Setup> {
    let cp = ControlPlane::start(test)?;
    cp.install_crds();
    let mut ctl = Launch::sim(&cp, "nodewright").start();
    ctl.wait_ready().await;
    cp.apply(manifests::NODE_CLASS).unwrap();
    cp.apply(pool).unwrap();
    for a in apps {
        cp.apply(a).unwrap();
    }
    let client = cp.client().await;
    let n = apps.len();
    pods_running(&client, n, Duration::from_secs(180))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
    Some(Setup { cp, ctl, client })
}

fn pod_of<'a>(pods: &'a [Pod], app: &str) -> Option<&'a Pod> {
    running(pods).into_iter().find(|p| {
        p.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("app"))
            .map(String::as_str)
            == Some(app)
    })
}

/// app → the node its pod runs on.
async fn placement(client: &kube::Client, apps: &[&str]) -> Vec<Option<String>> {
    let pods = read::pods(client, "default").await;
    apps.iter()
        .map(|a| pod_of(&pods, a).and_then(node_of).map(String::from))
        .collect()
}

async fn node_team(client: &kube::Client, node: &str) -> Option<String> {
    read::nodes(client)
        .await
        .into_iter()
        .find(|n| n.metadata.name.as_deref() == Some(node))
        .and_then(|n| label(&n, "example.com/team").map(String::from))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_replaces_nodes_one_at_a_time_but_not_protected_ones() {
    let apps = [
        app("free-a", ""),
        app("free-b", ""),
        app("pinned", "karpenter.sh/do-not-disrupt: \"true\""),
        app("guarded", ""),
    ];
    let Some(Setup { cp, ctl, client }) =
        setup("disruption-drift", &nodepool("a", "720h", "1"), &apps).await
    else {
        return;
    };
    cp.apply(GUARD).unwrap();
    let names = ["free-a", "free-b", "pinned", "guarded"];
    let before = placement(&client, &names).await;
    let distinct: BTreeSet<_> = before.iter().flatten().collect();
    assert_eq!(distinct.len(), 4, "one node per pod: {before:?}");

    // A template change drifts every node; the free ones are replaced, one at a time.
    cp.apply(&nodepool("b", "720h", "1")).unwrap();
    let start = Instant::now();
    let mut most_deleting = 0;
    loop {
        let claims = read::nodeclaims(&client).await;
        // As upstream counts against a budget: deleting, and not yet drained (a claim whose
        // instance is terminating no longer counts).
        let deleting = claims
            .iter()
            .filter(|c| c["metadata"]["deletionTimestamp"].is_string())
            .filter(|c| read::condition(c, "InstanceTerminating") != Some("True"))
            .count();
        most_deleting = most_deleting.max(deleting);
        let now = placement(&client, &names).await;
        let mut moved = true;
        for i in [0, 1] {
            match &now[i] {
                Some(n) => moved &= node_team(&client, n).await.as_deref() == Some("b"),
                None => moved = false,
            }
        }
        if moved && deleting == 0 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "free pods not on replaced nodes: {now:?}\n{}",
            ctl.log_text()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(
        most_deleting <= 1,
        "the budget of one node was exceeded: {most_deleting}"
    );
    // The protected pods have not moved, and their nodes are still drifted.
    let now = placement(&client, &names).await;
    assert_eq!(now[2], before[2], "the do-not-disrupt pod stays");
    assert_eq!(now[3], before[3], "the PDB-guarded pod stays");
    let claims = read::nodeclaims(&client).await;
    // Claims still going away (their instance terminating) are drifted too; the live ones
    // left drifted are the protected two.
    let drifted: Vec<&serde_json::Value> = claims
        .iter()
        .filter(|c| c["metadata"]["deletionTimestamp"].is_null())
        .filter(|c| read::condition(c, "Drifted") == Some("True"))
        .collect();
    let summary: Vec<String> = claims
        .iter()
        .map(|c| {
            format!(
                "{} team={} node={} drifted={:?} deleting={}",
                name(c),
                c["metadata"]["labels"]["example.com/team"],
                c["status"]["nodeName"],
                read::condition(c, "Drifted"),
                c["metadata"]["deletionTimestamp"]
            )
        })
        .collect();
    assert_eq!(
        drifted.len(),
        2,
        "only the two protected nodes stay drifted: {summary:#?}\npods: {now:?}"
    );

    // A guarded node's claim deleted by hand: the drain meets the Eviction API's 429 and
    // waits; once the PDB is gone the pod is evicted and the node goes.
    let guarded_node = before[3].clone().unwrap();
    let guarded_claim = claims
        .iter()
        .find(|c| c["status"]["nodeName"] == guarded_node.as_str())
        .map(|c| name(c).to_string())
        .unwrap();
    cp.kubectl(&["delete", "nodeclaim", &guarded_claim, "--wait=false"]);
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert_eq!(
        placement(&client, &["guarded"]).await[0].as_deref(),
        Some(guarded_node.as_str()),
        "the PDB holds the pod on its node"
    );
    let metrics = ctl.metrics().await;
    assert!(
        read::nodes(&client)
            .await
            .iter()
            .any(|n| n.metadata.name.as_deref() == Some(guarded_node.as_str())),
        "the node waits for its pod\n{metrics}"
    );
    cp.kubectl(&["delete", "pdb", "guarded"]);
    eventually(
        Duration::from_secs(120),
        "the guarded pod evicted and running on another node",
        || {
            let client = client.clone();
            let guarded_node = guarded_node.clone();
            async move {
                let nodes = read::nodes(&client).await;
                let at = placement(&client, &["guarded"]).await[0].clone();
                (at.is_some_and(|n| n != guarded_node)
                    && !nodes
                        .iter()
                        .any(|n| n.metadata.name.as_deref() == Some(guarded_node.as_str())))
                .then_some(())
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));

    // The pinned node's claim deleted by hand: the drain never evicts a `do-not-disrupt` pod
    // but waits for it (this pool sets no terminationGracePeriod to force it). Once the pod
    // loses the annotation, it is evicted and the node goes.
    let pinned_node = before[2].clone().unwrap();
    let pinned_claim = read::nodeclaims(&client)
        .await
        .iter()
        .find(|c| c["status"]["nodeName"] == pinned_node.as_str())
        .map(|c| name(c).to_string())
        .unwrap();
    let pinned_pod = read::pods(&client, "default").await;
    let pinned_pod = pod_of(&pinned_pod, "pinned")
        .and_then(|p| p.metadata.name.clone())
        .unwrap();
    cp.kubectl(&["delete", "nodeclaim", &pinned_claim, "--wait=false"]);
    tokio::time::sleep(Duration::from_secs(20)).await;
    let pods = read::pods(&client, "default").await;
    let still = pod_of(&pods, "pinned").unwrap();
    assert_eq!(still.metadata.name.as_deref(), Some(pinned_pod.as_str()));
    assert!(
        still.metadata.deletion_timestamp.is_none(),
        "the do-not-disrupt pod was not evicted"
    );
    assert_eq!(node_of(still), Some(pinned_node.as_str()));
    cp.kubectl(&[
        "annotate",
        "pod",
        &pinned_pod,
        "karpenter.sh/do-not-disrupt-",
    ]);
    eventually(
        Duration::from_secs(120),
        "the pinned pod evicted once unprotected, and its node gone",
        || {
            let client = client.clone();
            let pinned_node = pinned_node.clone();
            async move {
                let nodes = read::nodes(&client).await;
                let at = placement(&client, &["pinned"]).await[0].clone();
                (at.is_some_and(|n| n != pinned_node)
                    && !nodes
                        .iter()
                        .any(|n| n.metadata.name.as_deref() == Some(pinned_node.as_str())))
                .then_some(())
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
    assert_clean_log(&ctl.log_text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expire_after_replaces_the_node() {
    let apps = [app("short-lived", "")];
    let Some(Setup { cp, ctl, client }) =
        setup("disruption-expire", &nodepool("a", "45s", "10%"), &apps).await
    else {
        return;
    };
    let first = read::nodeclaims(&client).await;
    assert_eq!(first.len(), 1);
    let first = name(&first[0]).to_string();
    eventually(
        Duration::from_secs(180),
        "the expired claim replaced and the pod running on the new node",
        || {
            let client = client.clone();
            let first = first.clone();
            async move {
                let claims = read::nodeclaims(&client).await;
                let pods = read::pods(&client, "default").await;
                (!claims.iter().any(|c| name(c) == first) && running(&pods).len() == 1)
                    .then_some(())
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
    assert_clean_log(&ctl.log_text());
    drop(cp);
}
