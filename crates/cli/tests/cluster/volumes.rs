//! The volume-detach wait on the real control plane: a node whose pods are gone is not
//! terminated while a VolumeAttachment still ties a persistent volume to it (its claim says
//! `VolumesDetached: Unknown`); once the attachment is deleted, the node, its claim and its
//! instance go. The attachment is created by hand, as the CSI attacher would. The claim is
//! `Drained: True` while it waits, the node has an `AwaitingVolumeDetachment` event, and the
//! controller's `/metrics` then shows the node's termination as upstream's summary, the
//! termination loop's passes as reconciles, and every Karpenter family of
//! `docs/karpenter-metrics.txt` under its name, type and labels.

use std::time::Duration;

use crate::kit::controller::Launch;
use crate::kit::read::{self, condition};
use crate::kit::{ControlPlane, assert_clean_log, eventually, inflate, manifests, pods_running};

const POOL: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
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

fn attachment(node: &str) -> String {
    format!(
        r#"apiVersion: storage.k8s.io/v1
kind: VolumeAttachment
metadata: {{name: csi-data}}
spec:
  attacher: ebs.csi.aws.com
  nodeName: {node}
  source: {{persistentVolumeName: pv-data}}
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_node_waits_for_its_volume_attachments_to_go() {
    let Some(cp) = ControlPlane::start("volumes") else {
        return;
    };
    cp.install_crds();
    let mut ctl = Launch::sim(&cp, "nodewright").start();
    ctl.wait_ready().await;
    cp.apply(manifests::NODE_CLASS).unwrap();
    cp.apply(POOL).unwrap();
    cp.apply(&inflate(1)).unwrap();
    let client = cp.client().await;
    pods_running(&client, 1, Duration::from_secs(180))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
    let nodes = read::nodes(&client).await;
    assert_eq!(nodes.len(), 1);
    let node = nodes[0].metadata.name.clone().unwrap();
    cp.apply(&attachment(&node)).unwrap();

    // Empty: consolidation deletes it, the drain has nothing to do, the attachment holds it.
    cp.kubectl(&["scale", "deployment/inflate", "--replicas=0"]);
    let claim = eventually(
        Duration::from_secs(120),
        "the claim waiting for its volumes",
        || {
            let client = client.clone();
            async move {
                read::nodeclaims(&client)
                    .await
                    .into_iter()
                    .find(|c| condition(c, "VolumesDetached") == Some("Unknown"))
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
    assert!(
        claim["metadata"]["deletionTimestamp"].is_string(),
        "{claim}"
    );
    assert_eq!(condition(&claim, "Drained"), Some("True"), "{claim}");
    tokio::time::sleep(Duration::from_secs(10)).await;
    let still: Vec<_> = read::nodes(&client).await;
    assert_eq!(
        still.len(),
        1,
        "the node stays while its volume is attached"
    );
    assert!(still[0].metadata.deletion_timestamp.is_some());
    let waiting = read::events(&client).await.into_iter().any(|e| {
        e.reason.as_deref() == Some("AwaitingVolumeDetachment")
            && e.involved_object.kind.as_deref() == Some("Node")
            && e.involved_object.name.as_deref() == Some(node.as_str())
    });
    assert!(waiting, "no AwaitingVolumeDetachment event on {node}");

    cp.kubectl(&["delete", "volumeattachment", "csi-data"]);
    eventually(Duration::from_secs(60), "no claim and no node", || {
        let client = client.clone();
        async move {
            (read::nodeclaims(&client).await.is_empty() && read::nodes(&client).await.is_empty())
                .then_some(())
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
    let want = [
        "# TYPE karpenter_nodes_termination_duration_seconds summary",
        r#"karpenter_nodes_termination_duration_seconds_count{nodepool="default"} 1"#,
    ];
    let ctl_ref = &ctl;
    let found = eventually(
        Duration::from_secs(10),
        "the termination in /metrics",
        || async move {
            let text = ctl_ref.metrics().await;
            want.iter()
                .all(|w| text.lines().any(|l| l == *w))
                .then_some(text)
        },
    )
    .await;
    let metrics = match found {
        Ok(text) => text,
        Err(e) => panic!("{e}\n{}", ctl.metrics().await),
    };
    let passes = |result: &str| -> f64 {
        let series = format!(
            r#"controller_runtime_reconcile_total{{controller="node.termination",result="{result}"}} "#
        );
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(series.as_str()))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {series}in\n{metrics}"))
    };
    assert!(passes("success") > 0.0, "{metrics}");
    // Every Karpenter family by name and type, and the labels of all this run sampled.
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let docs = std::fs::read_to_string(repo.join("docs/OBSERVABILITY.md")).unwrap();
    let listed = crate::parity::upstream_families(&repo);
    let (problems, _) = crate::parity::check(&listed, &crate::parity::families(&metrics), &docs);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert_clean_log(&ctl.log_text());
}
