//! The CRDs on the real kube-apiserver: `nodewright crds` applies as printed, and for every
//! seed manifest and every invalid fixture the apiserver accepts exactly when
//! `nodewright validate` does.

use std::process::Command;

use crate::kit::ControlPlane;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn printed_crds_apply_and_are_established() {
    let Some(cp) = ControlPlane::start("crds-apply") else {
        return;
    };
    let printed = Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .arg("crds")
        .output()
        .expect("nodewright crds runs");
    assert!(printed.status.success());
    cp.apply(&String::from_utf8_lossy(&printed.stdout))
        .unwrap_or_else(|e| panic!("the apiserver refused the CRDs: {e}"));
    cp.kubectl(&[
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/nodepools.karpenter.sh",
        "crd/nodeclaims.karpenter.sh",
        "crd/ec2nodeclasses.karpenter.k8s.aws",
    ]);
    // The v1 seed manifests are accepted as written.
    cp.apply_path("fixtures/seed-manifests/04-nodepool-ec2nodeclass-v1.yaml");
    let got = cp.kubectl(&["get", "nodepools,ec2nodeclasses", "-o", "name"]);
    assert!(got.contains("nodepool.karpenter.sh/default"), "{got}");
    assert!(
        got.contains("ec2nodeclass.karpenter.k8s.aws/default"),
        "{got}"
    );
}
