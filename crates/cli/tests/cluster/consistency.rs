//! NodeClaim consistency on a real API server. A claim is first checked once initialized; its
//! NodePool's startup taint holds that back while the test raises the claim's expected cpu
//! past what its Node has (as when an instance comes up smaller than its catalog entry). Once
//! the taint is lifted, the check reports a `FailedConsistencyCheck` event and sets
//! `ConsistentStateFound=False`; a second claim, left alone, is `True`.

use std::time::Duration;

use crate::kit::controller::Launch;
use crate::kit::read;
use crate::kit::{ControlPlane, assert_clean_log, eventually, manifests};

const POOL: &str = r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: small}
spec:
  template:
    spec:
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [c5.large]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      startupTaints:
        - {key: example.com/agent-not-ready, effect: NoSchedule}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
"#;

/// Claim `name`'s `ConsistentStateFound` status and reason, once it has the condition.
async fn consistent(client: &kube::Client, name: &str) -> Option<(String, String)> {
    let claims = read::nodeclaims(client).await;
    let claim = claims.iter().find(|c| read::name(c) == name)?;
    let c = claim["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "ConsistentStateFound")?;
    Some((
        c["status"].as_str()?.to_string(),
        c["reason"].as_str().unwrap_or_default().to_string(),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_smaller_than_its_claim_fails_the_consistency_check() {
    let Some(cp) = ControlPlane::start("consistency") else {
        return;
    };
    cp.install_crds();
    cp.apply(manifests::NODE_CLASS).unwrap();
    cp.apply(POOL).unwrap();
    // One 1-cpu pod per c5.large: two claims.
    cp.apply(&manifests::inflate(2)).unwrap();
    let client = cp.client().await;
    let mut ctl = Launch::sim(&cp, "nodewright").start();
    ctl.wait_ready().await;
    let registered: Vec<(String, String)> =
        eventually(Duration::from_secs(180), "two registered claims", || {
            let client = client.clone();
            async move {
                let claims: Vec<(String, String)> = read::nodeclaims(&client)
                    .await
                    .iter()
                    .filter_map(|c| {
                        let node = c["status"]["nodeName"].as_str()?;
                        Some((read::name(c).to_string(), node.to_string()))
                    })
                    .collect();
                (claims.len() == 2).then_some(claims)
            }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
    let (smaller, fine) = (&registered[0].0, &registered[1].0);
    assert_eq!(
        consistent(&client, smaller).await,
        None,
        "checked before initialized"
    );

    // The first claim now expects four times the cpu its c5.large has.
    cp.kubectl(&[
        "patch",
        "nodeclaim",
        smaller,
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"capacity":{"cpu":"8"}}}"#,
    ]);
    for (_, node) in &registered {
        cp.kubectl(&[
            "taint",
            "nodes",
            node,
            "example.com/agent-not-ready:NoSchedule-",
        ]);
    }
    let found = |name: String, want: &'static str| {
        let client = client.clone();
        async move {
            eventually(Duration::from_secs(60), want, || {
                let client = client.clone();
                let name = name.clone();
                async move { consistent(&client, &name).await.filter(|(s, _)| s == want) }
            })
            .await
        }
    };
    let (_, reason) = found(smaller.clone(), "False")
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
    assert_eq!(reason, "ConsistencyCheckFailed");
    found(fine.clone(), "True")
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
    let event = eventually(Duration::from_secs(30), "the event", || {
        let client = client.clone();
        let name = smaller.clone();
        async move {
            read::events(&client).await.into_iter().find(|e| {
                e.reason.as_deref() == Some("FailedConsistencyCheck")
                    && e.involved_object.name.as_deref() == Some(&name)
            })
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
    assert_eq!(
        event.message.as_deref(),
        Some("expected 8 of resource cpu, but found 2 (25.0% of expected)"),
        "{event:?}"
    );
    ctl.terminate();
    assert_clean_log(&ctl.log_text());
}
