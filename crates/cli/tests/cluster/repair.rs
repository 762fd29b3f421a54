//! Node repair (`FEATURE_GATES=NodeRepair=true`) with the real durations: two nodes of one
//! NodePool, a `KernelReady=False` condition (one of the EKS node monitoring agent's, which the
//! simulated kubelet does not own) written into a Node's status with its `lastTransitionTime`
//! in the past. Twenty minutes of it are tolerated (AWS allows thirty); with both nodes past
//! thirty minutes the pool is over the 20% guard and nothing is repaired but
//! `NodeRepairBlocked` is said; once the other node is healthy again the first one's claim is
//! deleted with its termination deadline set to now, and its pod runs on a new node.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nodewright_controller::clock::rfc3339;
use nodewright_core::time::Timestamp;

use crate::kit::controller::Launch;
use crate::kit::read;
use crate::kit::{ControlPlane, assert_clean_log, eventually, manifests};

/// m5.large only: 1930m allocatable, so each one-CPU pod of `inflate` gets its own node.
const POOL: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: Never
"#;

/// Long enough for the loop (every 10 s) to have looked at least twice.
const TWO_PASSES: Duration = Duration::from_secs(25);

fn minutes_ago(minutes: i64) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970")
        .as_millis() as i64;
    rfc3339(Timestamp(now - minutes * 60_000))
}

/// Writes `KernelReady=<status>` into the Node's status, as the monitoring agent would.
fn set_kernel_ready(cp: &ControlPlane, node: &str, status: &str, since: &str) {
    let patch = serde_json::json!({"status": {"conditions": [{
        "type": "KernelReady", "status": status, "reason": "Test",
        "message": "set by the repair test", "lastTransitionTime": since,
        "lastHeartbeatTime": since,
    }]}});
    cp.kubectl(&[
        "patch",
        "node",
        node,
        "--subresource=status",
        "--type=strategic",
        "-p",
        &patch.to_string(),
    ]);
}

/// Live claims by name, sorted, and the number of Nodes.
async fn claims_and_nodes(client: &kube::Client) -> (Vec<String>, usize) {
    let mut live: Vec<String> = read::nodeclaims(client)
        .await
        .iter()
        .filter(|c| c["metadata"]["deletionTimestamp"].is_null())
        .map(|c| read::name(c).to_string())
        .collect();
    live.sort();
    (live, read::nodes(client).await.len())
}

/// The Node and claim names, by node, once two registered nodes carry the pool's label and
/// there are no other claims.
async fn two_nodes(client: &kube::Client) -> Option<Vec<(String, String)>> {
    let nodes = read::nodes(client).await;
    let claims = read::nodeclaims(client).await;
    let pairs: Vec<(String, String)> = nodes
        .iter()
        .filter(|n| read::label(n, "karpenter.sh/nodepool") == Some("default"))
        .filter_map(|n| {
            let name = n.metadata.name.clone()?;
            let claim = claims
                .iter()
                .find(|c| c["status"]["nodeName"] == name.as_str())?;
            Some((name, read::name(claim).to_string()))
        })
        .collect();
    (pairs.len() == 2 && claims.len() == 2).then_some(pairs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unhealthy_node_is_replaced_after_its_toleration_unless_the_pool_is_too_sick() {
    let Some(cp) = ControlPlane::start("repair") else {
        return;
    };
    cp.install_crds();
    let mut ctl = Launch::sim(&cp, "nodewright")
        .env("FEATURE_GATES", "NodeRepair=true")
        .start();
    ctl.wait_ready().await;
    cp.apply(manifests::NODE_CLASS).unwrap();
    cp.apply(POOL).unwrap();
    cp.apply(&manifests::inflate(2)).unwrap();
    let client = cp.client().await;
    let pairs = eventually(Duration::from_secs(120), "two nodes with claims", || {
        let client = client.clone();
        async move { two_nodes(&client).await }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
    let (sick, sick_claim) = pairs[0].clone();
    let (other, _) = pairs[1].clone();
    let before = claims_and_nodes(&client).await;

    // Unhealthy for twenty minutes: within AWS's thirty.
    set_kernel_ready(&cp, &sick, "False", &minutes_ago(20));
    tokio::time::sleep(TWO_PASSES).await;
    assert_eq!(
        claims_and_nodes(&client).await,
        before,
        "{}",
        ctl.log_text()
    );

    // Both past thirty minutes: two of two is over the 20% guard.
    set_kernel_ready(&cp, &sick, "False", &minutes_ago(31));
    set_kernel_ready(&cp, &other, "False", &minutes_ago(31));
    eventually(
        Duration::from_secs(60),
        "NodeRepairBlocked on both nodes",
        || {
            let client = client.clone();
            let names = [sick.clone(), other.clone()];
            async move {
                let events = read::events(&client).await;
                names
                    .iter()
                    .all(|n| {
                        events.iter().any(|e| {
                            e.reason.as_deref() == Some("NodeRepairBlocked")
                                && e.involved_object.kind.as_deref() == Some("Node")
                                && e.involved_object.name.as_deref() == Some(n)
                        })
                    })
                    .then_some(())
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
    tokio::time::sleep(TWO_PASSES).await;
    assert_eq!(
        claims_and_nodes(&client).await,
        before,
        "{}",
        ctl.log_text()
    );

    // The other node recovers: one of two is within the guard, and the sick one goes.
    set_kernel_ready(&cp, &other, "True", &minutes_ago(0));
    eventually(
        Duration::from_secs(60),
        "the unhealthy node's claim deleted",
        || {
            let client = client.clone();
            let gone = sick_claim.clone();
            async move {
                let (live, _) = claims_and_nodes(&client).await;
                (!live.contains(&gone)).then_some(())
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
    let claim = read::nodeclaims(&client)
        .await
        .into_iter()
        .find(|c| read::name(c) == sick_claim);
    if let Some(c) = claim {
        assert!(
            c["metadata"]["annotations"]["karpenter.sh/nodeclaim-termination-timestamp"]
                .is_string(),
            "the repair sets the termination deadline: {c}"
        );
    }
    eventually(
        Duration::from_secs(180),
        "the unhealthy node and claim gone, both pods running elsewhere",
        || {
            let client = client.clone();
            let (sick, sick_claim) = (sick.clone(), sick_claim.clone());
            async move {
                let claims = read::nodeclaims(&client).await;
                let nodes = read::nodes(&client).await;
                let pods = read::pods(&client, "default").await;
                let running = read::running(&pods);
                let gone = claims.iter().all(|c| read::name(c) != sick_claim)
                    && nodes
                        .iter()
                        .all(|n| n.metadata.name.as_deref() != Some(&sick));
                let elsewhere =
                    running.len() == 2 && running.iter().all(|p| read::node_of(p) != Some(&sick));
                (gone && elsewhere).then_some(())
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
    // The drain did not wait: the deadline was now.
    let log = ctl.log_text();
    assert!(
        log.lines()
            .any(|l| l.contains("deleted pod at the termination deadline")
                && l.contains(&format!("\"node\":\"{sick}\""))),
        "{log}"
    );
    let metrics = ctl.metrics().await;
    let counted = |family: &str, label: &str| {
        metrics.lines().any(|l| {
            l.starts_with(&format!("{family}{{")) && l.contains(label) && l.ends_with(" 1")
        })
    };
    assert!(
        counted(
            "karpenter_nodeclaims_disrupted_total",
            r#"reason="unhealthy""#
        ),
        "{metrics}"
    );
    assert!(
        counted(
            "karpenter_nodeclaims_unhealthy_disrupted_total",
            r#"condition="kernel_ready""#
        ),
        "{metrics}"
    );
    assert_clean_log(&ctl.log_text());
}
