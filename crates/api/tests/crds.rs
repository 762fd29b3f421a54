//! The CRDs as files: the committed chart files are current, the printed stream has every CRD
//! with its versions, names and subresources, and the CEL messages are the Rust rules' own.
//! Whether a real API server accepts them, and judges objects as `validate` does, is the
//! cluster suite's to show (`crates/cli/tests/cluster/crds.rs`).

mod common;

use nodewright_api::crd;

#[test]
fn committed_chart_crds_are_current() {
    let dir = common::repo_root().join("charts/nodewright/crds");
    for (name, value) in crd::all() {
        let path = dir.join(name);
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            on_disk == crd::to_yaml(&value),
            "{} is stale; regenerate with `cargo run -p nodewright-cli -- crds --output-dir charts/nodewright/crds`",
            path.display()
        );
    }
    let files = std::fs::read_dir(&dir).unwrap().count();
    assert_eq!(
        files,
        crd::all().len(),
        "unexpected files in {}",
        dir.display()
    );
}

#[test]
fn printed_stream_has_every_crd() {
    let docs = nodewright_api::document::parse_documents("crds", &crd::all_yaml()).unwrap();
    let names: Vec<&str> = docs.iter().map(|d| d.name()).collect();
    assert_eq!(
        names,
        [
            "nodepools.karpenter.sh",
            "nodeclaims.karpenter.sh",
            "ec2nodeclasses.karpenter.k8s.aws"
        ]
    );
    for d in &docs {
        assert_eq!(d.api_version(), "apiextensions.k8s.io/v1");
        let versions = d.value["spec"]["versions"].as_array().unwrap();
        assert_eq!(versions.len(), 1, "only v1 is served");
        assert_eq!(versions[0]["name"], "v1");
        assert_eq!(versions[0]["storage"], true);
        assert_eq!(d.value["spec"]["scope"], "Cluster");
        assert_eq!(
            d.value["spec"]["names"]["categories"],
            serde_json::json!(["karpenter"])
        );
    }
    let np = &docs[0].value["spec"];
    assert_eq!(
        np["versions"][0]["subresources"]["scale"]["specReplicasPath"],
        ".spec.replicas"
    );
    assert_eq!(
        np["versions"][0]["subresources"]["scale"]["statusReplicasPath"],
        ".status.nodes"
    );
    assert_eq!(
        docs[2].value["spec"]["names"]["shortNames"],
        serde_json::json!(["ec2nc", "ec2ncs"])
    );
}

#[test]
fn cel_messages_match_the_rust_rules() {
    use nodewright_api::crd::shared::{MSG_IN_NEEDS_VALUES, MSG_MIN_VALUES, MSG_NUMERIC_OPERATOR};
    let text = crd::all_yaml();
    for m in [MSG_IN_NEEDS_VALUES, MSG_MIN_VALUES, MSG_NUMERIC_OPERATOR] {
        assert!(text.contains(m), "{m}");
    }
    assert!(
        text.contains("label domain \\\"karpenter.sh\\\" is restricted")
            || text.contains("label domain \"karpenter.sh\" is restricted")
    );
}
