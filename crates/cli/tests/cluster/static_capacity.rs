//! Static capacity (`FEATURE_GATES=StaticCapacity=true`): a NodePool with `spec.replicas: 2`
//! gets two nodes with no pods asking for them, consolidation leaves them (the pool allows
//! emptiness at once), `kubectl scale nodepool --replicas=1` through the CRD's scale
//! subresource takes one away, and a template change replaces the drifted claim one for one.

use std::time::Duration;

use crate::kit::controller::Launch;
use crate::kit::read;
use crate::kit::{ControlPlane, assert_clean_log, eventually, manifests};

const POOL: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: fixed}
spec:
  replicas: 2
  limits: {nodes: "3"}
  template:
    spec:
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 0s
"#;

/// Live claims and Ready nodes of the cluster.
async fn counts(client: &kube::Client) -> (usize, usize) {
    let claims = read::nodeclaims(client).await;
    let live = claims
        .iter()
        .filter(|c| c["metadata"]["deletionTimestamp"].is_null())
        .count();
    (live, read::nodes(client).await.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_nodepool_keeps_its_replicas_and_scales_with_kubectl() {
    let Some(cp) = ControlPlane::start("static-capacity") else {
        return;
    };
    cp.install_crds();
    let mut ctl = Launch::sim(&cp, "nodewright")
        .env("FEATURE_GATES", "StaticCapacity=true")
        .start();
    ctl.wait_ready().await;
    cp.apply(manifests::NODE_CLASS).unwrap();
    cp.apply(POOL).unwrap();
    let client = cp.client().await;
    eventually(
        Duration::from_secs(120),
        "two claims with two nodes",
        || {
            let client = client.clone();
            async move { (counts(&client).await == (2, 2)).then_some(()) }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
    let names = |claims: Vec<serde_json::Value>| -> Vec<String> {
        let mut v: Vec<String> = claims.iter().map(|c| read::name(c).to_string()).collect();
        v.sort();
        v
    };
    let first = names(read::nodeclaims(&client).await);
    for c in read::nodeclaims(&client).await {
        let types = c["spec"]["requirements"].to_string();
        assert!(
            types.contains("m5."),
            "{} may be an m5: {types}",
            read::name(&c)
        );
        assert!(!types.contains("c5."), "{types}");
    }
    // Empty, and the pool would consolidate at once were it not static: they stay.
    tokio::time::sleep(Duration::from_secs(40)).await;
    assert_eq!(counts(&client).await, (2, 2), "{}", ctl.log_text());
    assert_eq!(
        names(read::nodeclaims(&client).await),
        first,
        "the same two claims"
    );
    // Both registered, well within the 40 s: the pool's registration health says so (the
    // status writer runs every 5 s).
    let pools = read::nodepools(&client).await;
    assert_eq!(
        read::condition(&pools[0], "NodeRegistrationHealthy"),
        Some("True"),
        "{}",
        pools[0]
    );
    let metrics = ctl.metrics().await;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("karpenter_nodeclaims_created_total{")
                && l.contains(r#"reason="static""#)
                && l.ends_with(" 2")),
        "{metrics}"
    );

    cp.kubectl(&["scale", "nodepool", "fixed", "--replicas=1"]);
    eventually(Duration::from_secs(120), "one claim with one node", || {
        let client = client.clone();
        async move { (counts(&client).await == (1, 1)).then_some(()) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));

    // A template change drifts the claim: a replacement comes first, then the drifted claim
    // goes (never more than one extra claim), and the pool is back to one claim.
    let before = names(
        read::nodeclaims(&client)
            .await
            .into_iter()
            .filter(|c| c["metadata"]["deletionTimestamp"].is_null())
            .collect(),
    );
    assert_eq!(before.len(), 1, "{before:?}");
    cp.kubectl(&[
        "patch",
        "nodepool",
        "fixed",
        "--type=merge",
        "-p",
        r#"{"spec":{"template":{"metadata":{"labels":{"team":"b"}}}}}"#,
    ]);
    let most = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let after = eventually(
        Duration::from_secs(180),
        "the drifted claim replaced",
        || {
            let client = client.clone();
            let before = before.clone();
            let most = most.clone();
            async move {
                let claims = read::nodeclaims(&client).await;
                most.fetch_max(claims.len(), std::sync::atomic::Ordering::Relaxed);
                let live: Vec<&serde_json::Value> = claims
                    .iter()
                    .filter(|c| c["metadata"]["deletionTimestamp"].is_null())
                    .collect();
                (live.len() == 1
                    && claims.len() == 1
                    && !before.contains(&read::name(live[0]).to_string())
                    && live[0]["metadata"]["labels"]["team"] == "b")
                    .then(|| live[0].clone())
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
    let most = most.load(std::sync::atomic::Ordering::Relaxed);
    assert!(most <= 2, "{most} claims at once");
    assert_eq!(
        after["metadata"]["annotations"]["nodewright.io/replaces"],
        before[0].as_str(),
        "{after}"
    );
    let metrics = ctl.metrics().await;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("karpenter_nodeclaims_disrupted_total{")
                && l.contains(r#"reason="drifted""#)
                && l.ends_with(" 1")),
        "{metrics}"
    );
    assert_clean_log(&ctl.log_text());
}
