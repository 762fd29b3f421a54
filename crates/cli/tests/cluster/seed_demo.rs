//! Seed 004's demo as its guide runs it: the eksdemo NodePool and EC2NodeClass, `inflate`
//! scaled 0 → 10 (bound by the real kube-scheduler to nodes nodewright launched, spread over
//! the zones), then 10 → 5 (a node consolidated away).

use std::collections::BTreeSet;
use std::time::Duration;

use crate::kit::controller::Launch;
use crate::kit::read::{self, condition, label, name, node_of, running};
use crate::kit::{ControlPlane, assert_clean_log, eventually};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inflate_scales_up_across_zones_then_consolidates_down() {
    let Some(cp) = ControlPlane::start("seed-004-demo") else {
        return;
    };
    cp.install_crds();
    let mut ctl = Launch::sim(&cp, "nodewright").start();
    ctl.wait_ready().await;
    cp.apply_path("fixtures/seed-manifests/04-nodepool-ec2nodeclass-v1.yaml");
    cp.kubectl(&["create", "namespace", "inflate"]);
    cp.apply_path("fixtures/seed-manifests/05-inflate.yaml");
    let client = cp.client().await;

    let bound = eventually(Duration::from_secs(180), "10 inflate pods Running", || {
        let client = client.clone();
        async move {
            let pods = read::pods(&client, "inflate").await;
            (running(&pods).len() == 10).then_some(pods)
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));

    // Every pod is on a Node that one of our NodeClaims launched and registered.
    let claims = read::nodeclaims(&client).await;
    let nodes = read::nodes(&client).await;
    let mut zones = BTreeSet::new();
    for pod in running(&bound) {
        let node_name = node_of(pod).unwrap();
        let node = nodes
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(node_name))
            .expect("the pod's node exists");
        assert_eq!(label(node, "karpenter.sh/nodepool"), Some("default"));
        assert_eq!(label(node, "karpenter.sh/registered"), Some("true"));
        assert_eq!(label(node, "karpenter.sh/initialized"), Some("true"));
        zones.insert(
            label(node, "topology.kubernetes.io/zone")
                .unwrap()
                .to_string(),
        );
        let claim = claims
            .iter()
            .find(|c| c["status"]["nodeName"] == node_name)
            .unwrap_or_else(|| panic!("a NodeClaim for node {node_name}"));
        for c in ["Launched", "Registered", "Initialized", "Ready"] {
            assert_eq!(condition(claim, c), Some("True"), "{} {c}", name(claim));
        }
        let finalizers = claim["metadata"]["finalizers"].to_string();
        assert!(
            finalizers.contains("karpenter.sh/termination"),
            "{}: {finalizers}",
            name(claim)
        );
        assert!(
            node.metadata
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == "karpenter.sh/termination"),
            "node {node_name} carries the termination finalizer"
        );
    }
    assert_eq!(zones.len(), 3, "spread over the three zones: {zones:?}");

    // Upstream's events: each pod nominated for a NodeClaim, each claim's conditions narrated.
    let events = read::events(&client).await;
    let nominated = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("Nominated"))
        .count();
    assert!(
        nominated >= 10,
        "a Nominated event per pod, got {nominated}"
    );
    let launched = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("Launched"))
        .filter(|e| e.involved_object.kind.as_deref() == Some("NodeClaim"))
        .count();
    assert_eq!(launched, claims.len(), "a Launched event per NodeClaim");

    let before = claims.len();
    cp.kubectl(&[
        "scale",
        "-n",
        "inflate",
        "deployment/inflate",
        "--replicas=5",
    ]);
    // consolidateAfter is 1m; then the command waits 15 s and is re-checked.
    eventually(
        Duration::from_secs(240),
        "a node consolidated away with 5 pods running",
        || {
            let client = client.clone();
            async move {
                let claims = read::nodeclaims(&client).await;
                let nodes = read::nodes(&client).await;
                let pods = read::pods(&client, "inflate").await;
                (claims.len() < before && nodes.len() == claims.len() && running(&pods).len() == 5)
                    .then_some(())
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
    let events = read::events(&client).await;
    assert!(
        events
            .iter()
            .any(|e| e.reason.as_deref() == Some("DisruptionTerminating")),
        "the consolidated node's DisruptionTerminating event"
    );
    assert_clean_log(&ctl.log_text());
}
