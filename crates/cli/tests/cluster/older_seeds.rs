//! The older seeds' objects (`karpenter.sh/v1beta1` NodePool with a `karpenter.k8s.aws/v1beta1`
//! EC2NodeClass; a `v1alpha5` Provisioner with its `v1alpha1` AWSNodeTemplate), converted with
//! `nodewright convert` and applied to the real API server: the controller provisions for
//! pods that fit them, and the kube-scheduler binds every pod.

use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;

use crate::kit::controller::Launch;
use crate::kit::read::{self, label, node_of, running};
use crate::kit::{ControlPlane, assert_clean_log, eventually, manifests, repo_root};

/// `nodewright convert` of `files`, with the instance profile v1alpha1 took from the old
/// global setting, as convert's warning asks.
fn convert(files: &[&str]) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nodewright"));
    cmd.args([
        "convert",
        "--default-instance-profile",
        "KarpenterNodeInstanceProfile",
    ]);
    for f in files {
        cmd.arg("-f").arg(repo_root().join(f));
    }
    let out = cmd.output().expect("nodewright convert runs");
    assert!(
        out.status.success(),
        "convert failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `replicas` pods of `cpu` that tolerate and select what `extra` says.
fn workload(replicas: u32, cpu: &str, pod_spec_extra: &str) -> String {
    deployment("workload", replicas, cpu, pod_spec_extra)
}

/// Deployment `name` (its pods labelled `app: <name>`).
fn deployment(name: &str, replicas: u32, cpu: &str, pod_spec_extra: &str) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: default}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      terminationGracePeriodSeconds: 0
{pod_spec_extra}      containers:
        - name: app
          image: public.ecr.aws/eks-distro/kubernetes/pause:3.7
          resources: {{requests: {{cpu: "{cpu}"}}}}
"#
    )
}

/// The instance type of each of the `n` Running pods' nodes.
async fn provisions_for(
    test: &str,
    region: &str,
    files: &[&str],
    pods: &str,
    n: usize,
) -> Vec<String> {
    placements(test, region, files, pods, n)
        .await
        .0
        .iter()
        .map(|(_, node)| {
            label(node, "node.kubernetes.io/instance-type")
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// `files` converted and applied, then `pods`: each of the `n` Running pods' `app` label and
/// its Node, and the NodeClaims.
async fn placements(
    test: &str,
    region: &str,
    files: &[&str],
    pods: &str,
    n: usize,
) -> (Vec<(String, Node)>, Vec<serde_json::Value>) {
    let Some(cp) = ControlPlane::start(test) else {
        return (Vec::new(), Vec::new());
    };
    cp.install_crds();
    let mut ctl = Launch::sim(&cp, "nodewright")
        .env("AWS_REGION", region)
        .start();
    ctl.wait_ready().await;
    cp.apply(&convert(files))
        .unwrap_or_else(|e| panic!("the converted objects are refused: {e}"));
    cp.apply(pods).unwrap();
    let client = cp.client().await;
    let bound = eventually(Duration::from_secs(180), "every pod Running", || {
        let client = client.clone();
        async move {
            let pods = read::pods(&client, "default").await;
            (running(&pods).len() == n).then_some(pods)
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
    let nodes = read::nodes(&client).await;
    let placed = running(&bound)
        .into_iter()
        .map(|p| {
            let node = nodes
                .iter()
                .find(|x| x.metadata.name.as_deref() == node_of(p))
                .expect("the pod's node");
            let app = p.metadata.labels.as_ref().and_then(|l| l.get("app"));
            (app.cloned().unwrap_or_default(), node.clone())
        })
        .collect();
    assert_clean_log(&ctl.log_text());
    (placed, read::nodeclaims(&client).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1beta1_seed_converted_provisions_its_instance_types() {
    let types = provisions_for(
        "older-v1beta1",
        "us-east-1",
        &[
            "fixtures/seed-manifests/01-nodepool-v1beta1.yaml",
            "fixtures/seed-manifests/02-ec2nodeclass-v1beta1.yaml",
        ],
        &workload(4, "500m", ""),
        4,
    )
    .await;
    for t in &types {
        assert!(
            t == "t3.medium" || t == "t3a.medium",
            "{t}: the seed allows t3(a).medium only"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1alpha5_seed_converted_provisions_for_its_pods() {
    let (placed, claims) = placements(
        "older-v1alpha5",
        "eu-north-1",
        &["fixtures/seed-manifests/03-provisioner-v1alpha5.yaml"],
        // As seed 003's pods do: they select their Provisioner by its old label.
        &workload(
            3,
            "1",
            "      nodeSelector: {karpenter.sh/provisioner-name: default}\n",
        ),
        3,
    )
    .await;
    // Seed 001's Provisioner: spot m-types of 4 or 8 cpu on nitro, each node expiring after
    // its `ttlSecondsUntilExpired` of an hour.
    for (_, node) in &placed {
        assert_eq!(label(node, "karpenter.sh/capacity-type"), Some("spot"));
        assert_eq!(
            label(node, "karpenter.k8s.aws/instance-category"),
            Some("m")
        );
        let cpu = label(node, "karpenter.k8s.aws/instance-cpu");
        assert!(matches!(cpu, Some("4" | "8")), "{cpu:?}");
    }
    for c in &claims {
        assert_eq!(c["spec"]["expireAfter"], "1h", "{c}");
    }
}

/// Seed 003's two Provisioners, one per capacity type, each chosen by the pods of its own
/// Deployment with `nodeSelector: {karpenter.sh/provisioner-name: <name>}`: converted, they
/// launch spot nodes for the one and on-demand nodes for the other, labelled with the
/// Provisioner's name so the kube-scheduler binds each pod to its own kind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_003_provisioners_by_capacity_type_each_get_their_own_pods() {
    let select = |p: &str| format!("      nodeSelector: {{karpenter.sh/provisioner-name: {p}}}\n");
    let pods = [
        manifests::NODE_CLASS.to_string(),
        deployment("spot-app", 2, "1", &select("default")),
        deployment("steady-app", 2, "1", &select("on-demand")),
    ]
    .join("---\n");
    let (placed, _) = placements(
        "older-by-capacity",
        "us-east-1",
        &["fixtures/seed-manifests/06-provisioners-by-capacity-v1alpha5.yaml"],
        &pods,
        4,
    )
    .await;
    for (app, node) in &placed {
        let (capacity, provisioner) = match app.as_str() {
            "spot-app" => ("spot", "default"),
            _ => ("on-demand", "on-demand"),
        };
        assert_eq!(
            label(node, "karpenter.sh/capacity-type"),
            Some(capacity),
            "{app}"
        );
        assert_eq!(
            label(node, "karpenter.sh/provisioner-name"),
            Some(provisioner),
            "{app}"
        );
        assert_eq!(
            label(node, "karpenter.sh/nodepool"),
            Some(provisioner),
            "{app}"
        );
    }
}
