//! The CRDs serving `v1beta1` beside `v1` through the controller's conversion webhook, on the
//! real API server: seed 000's `karpenter.sh/v1beta1` NodePool and `karpenter.k8s.aws/v1beta1`
//! EC2NodeClass applied as written, read back in both versions and provisioned for; and a
//! cluster coming from Karpenter v0.37, whose CRDs stored v1beta1 objects, upgraded in place.

use std::time::Duration;

use serde_json::{Value, json};

use crate::kit::controller::{Controller, Launch};
use crate::kit::read::{self, label, node_of, running};
use crate::kit::{ControlPlane, assert_clean_log, eventually, free_port, repo_root};

const SEED_NODEPOOL: &str = "fixtures/seed-manifests/01-nodepool-v1beta1.yaml";
const SEED_NODECLASS: &str = "fixtures/seed-manifests/02-ec2nodeclass-v1beta1.yaml";

/// The sim controller out of the cluster, with its webhook on a free port of 127.0.0.1 and the
/// CRDs' conversion pointed at that URL.
async fn controller(cp: &ControlPlane) -> Controller {
    let port = free_port();
    let mut ctl = Launch::sim(cp, "nodewright")
        .env("WEBHOOK_PORT", &port.to_string())
        .env("WEBHOOK_URL", &format!("https://127.0.0.1:{port}/convert"))
        .start();
    ctl.wait_ready().await;
    ctl
}

/// `kubectl apply -f FILE`, retried until the API server takes it (the webhook's CA reaches
/// the CRDs moments after the controller starts).
async fn apply_file(cp: &ControlPlane, file: &str, ctl: &Controller) {
    let yaml = std::fs::read_to_string(repo_root().join(file)).unwrap();
    eventually(Duration::from_secs(60), &format!("{file} applied"), || {
        let r = cp.apply(&yaml);
        async move { r.ok() }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
}

fn get(cp: &ControlPlane, resource: &str) -> Value {
    serde_json::from_str(&cp.kubectl(&["get", resource, "-o", "json"])).unwrap()
}

fn seed(file: &str) -> Value {
    let text = std::fs::read_to_string(repo_root().join(file)).unwrap();
    serde_yaml::from_str(&text).unwrap()
}

/// `n` pods of 500m CPU in `default`, and the instance types of the nodes they run on once
/// every one runs.
async fn provisioned_types(cp: &ControlPlane, ctl: &Controller, n: usize) -> Vec<String> {
    cp.apply(&format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: workload, namespace: default}}
spec:
  replicas: {n}
  selector: {{matchLabels: {{app: workload}}}}
  template:
    metadata: {{labels: {{app: workload}}}}
    spec:
      terminationGracePeriodSeconds: 0
      containers:
        - name: app
          image: public.ecr.aws/eks-distro/kubernetes/pause:3.7
          resources: {{requests: {{cpu: 500m}}}}
"#
    ))
    .unwrap();
    let client = cp.client().await;
    let pods = eventually(Duration::from_secs(180), "every pod Running", || {
        let client = client.clone();
        async move {
            let pods = read::pods(&client, "default").await;
            (running(&pods).len() == n).then_some(pods)
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log_text()));
    let nodes = read::nodes(&client).await;
    running(&pods)
        .into_iter()
        .filter_map(|p| {
            nodes
                .iter()
                .find(|x| x.metadata.name.as_deref() == node_of(p))
        })
        .map(|node| {
            label(node, "node.kubernetes.io/instance-type")
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

fn assert_seed_types(types: &[String]) {
    assert!(!types.is_empty());
    for t in types {
        assert!(
            t == "t3.medium" || t == "t3a.medium",
            "{t}: the seed allows t3(a).medium only"
        );
    }
}

/// The seed NodePool as v1: each v1beta1 field in its v1 place.
fn assert_nodepool_v1(v1: &Value) {
    let tmpl = &v1["spec"]["template"]["spec"];
    assert_eq!(v1["apiVersion"], "karpenter.sh/v1");
    assert_eq!(tmpl["expireAfter"], "720h", "{v1}");
    assert_eq!(
        tmpl["nodeClassRef"],
        json!({"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"})
    );
    assert_eq!(tmpl.get("kubelet"), None);
    assert_eq!(
        v1["spec"]["disruption"]["consolidationPolicy"],
        "WhenEmptyOrUnderutilized"
    );
    assert_eq!(v1["spec"]["disruption"].get("expireAfter"), None);
    assert_eq!(
        v1["metadata"]["annotations"]["compatibility.karpenter.sh/v1beta1-kubelet-conversion"],
        r#"{"maxPods":110}"#
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_000_v1beta1_objects_applied_as_written_are_served_both_ways_and_provisioned() {
    let Some(cp) = ControlPlane::start("webhook-v1beta1") else {
        return;
    };
    cp.install_crds();
    let mut ctl = controller(&cp).await;
    apply_file(&cp, SEED_NODECLASS, &ctl).await;
    apply_file(&cp, SEED_NODEPOOL, &ctl).await;

    assert_nodepool_v1(&get(&cp, "nodepools.v1.karpenter.sh/default"));
    let class = get(&cp, "ec2nodeclasses.v1.karpenter.k8s.aws/default");
    assert_eq!(
        class["spec"]["amiSelectorTerms"],
        json!([{"alias": "bottlerocket@latest"}])
    );
    assert_eq!(
        class["spec"]["metadataOptions"]["httpPutResponseHopLimit"],
        2
    );

    // Read back as written: the seed's spec, plus the budget the v1beta1 schema defaults.
    let old = get(&cp, "nodepools.v1beta1.karpenter.sh/default");
    let mut want = seed(SEED_NODEPOOL)["spec"].clone();
    want["disruption"]["budgets"] = json!([{"nodes": "10%"}]);
    assert_eq!(old["apiVersion"], "karpenter.sh/v1beta1");
    assert_eq!(old["spec"], want);
    let old_class = get(&cp, "ec2nodeclasses.v1beta1.karpenter.k8s.aws/default");
    assert_eq!(old_class["spec"], seed(SEED_NODECLASS)["spec"]);

    // The controller acts on them: the seed's pods get nodes of the seed's instance types,
    // and their NodeClaims read as v1beta1 too.
    assert_seed_types(&provisioned_types(&cp, &ctl, 4).await);
    // The seed's `kubelet.maxPods: 110`, kept on the v1 NodePool by the conversion, is what
    // its nodes hold (a t3.medium holds 17 pods otherwise).
    let nodes = get(&cp, "nodes");
    for n in nodes["items"].as_array().unwrap() {
        assert_eq!(
            n["status"]["capacity"]["pods"], "110",
            "{}",
            n["metadata"]["name"]
        );
    }
    let claims = get(&cp, "nodeclaims.v1beta1.karpenter.sh");
    let claims = claims["items"].as_array().unwrap();
    assert!(!claims.is_empty());
    for c in claims {
        assert_eq!(c["apiVersion"], "karpenter.sh/v1beta1");
        assert_eq!(
            c["spec"]["nodeClassRef"]["apiVersion"], "karpenter.k8s.aws/v1beta1",
            "{c}"
        );
        assert_eq!(c["spec"].get("expireAfter"), None, "{c}");
        assert_eq!(
            c["metadata"]["annotations"]["compatibility.nodewright.io/v1-expire-after"], "720h",
            "{c}"
        );
    }
    // A v1beta1 edit lands in the v1 object.
    cp.kubectl(&[
        "patch",
        "nodepools.v1beta1.karpenter.sh/default",
        "--type=merge",
        "-p",
        r#"{"spec":{"disruption":{"expireAfter":"24h"}}}"#,
    ]);
    let v1 = get(&cp, "nodepools.v1.karpenter.sh/default");
    assert_eq!(v1["spec"]["template"]["spec"]["expireAfter"], "24h");
    assert!(ctl.alive());
    assert_clean_log(&ctl.log_text());
}

/// The CRDs as Karpenter v0.32–v0.37 installed them: v1beta1 only, stored, no conversion.
fn v1beta1_only_crds() -> String {
    let mut out = String::new();
    for (_, mut crd) in nodewright_api::crd::all() {
        let spec = crd["spec"].as_object_mut().unwrap();
        spec.remove("conversion");
        let versions = spec["versions"].as_array().unwrap();
        let mut beta = versions
            .iter()
            .find(|v| v["name"] == "v1beta1")
            .unwrap()
            .clone();
        beta["storage"] = json!(true);
        spec.insert("versions".into(), json!([beta]));
        out.push_str(&nodewright_api::crd::to_yaml(&crd));
    }
    out
}

fn stored_versions(cp: &ControlPlane) -> Value {
    get(cp, "crd/nodepools.karpenter.sh")["status"]["storedVersions"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crds_that_stored_v1beta1_are_upgraded_in_place_and_keep_working() {
    let Some(cp) = ControlPlane::start("webhook-stored-v1beta1") else {
        return;
    };
    // A cluster on Karpenter v0.37: v1beta1 CRDs, seed 000's objects stored as v1beta1.
    cp.apply(&v1beta1_only_crds()).unwrap();
    cp.kubectl(&[
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/nodepools.karpenter.sh",
        "crd/ec2nodeclasses.karpenter.k8s.aws",
    ]);
    cp.apply_path(SEED_NODECLASS);
    cp.apply_path(SEED_NODEPOOL);
    assert_eq!(stored_versions(&cp), json!(["v1beta1"]));

    // nodewright's CRDs over them: v1beta1 stays served, so the update is allowed.
    cp.install_crds();
    assert_eq!(stored_versions(&cp), json!(["v1beta1", "v1"]));

    // The objects still stored as v1beta1 are read as v1 through the webhook, and acted on.
    let mut ctl = controller(&cp).await;
    assert_nodepool_v1(&get(&cp, "nodepools.v1.karpenter.sh/default"));
    assert_seed_types(&provisioned_types(&cp, &ctl, 2).await);
    assert_eq!(
        get(&cp, "nodepools.v1beta1.karpenter.sh/default")["spec"]["template"]["spec"]["kubelet"],
        json!({"maxPods": 110})
    );
    assert!(ctl.alive());
    assert_clean_log(&ctl.log_text());
}
