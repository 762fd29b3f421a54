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
        let served: Vec<(&str, bool, bool)> = versions
            .iter()
            .map(|v| {
                (
                    v["name"].as_str().unwrap(),
                    v["served"].as_bool().unwrap(),
                    v["storage"].as_bool().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            served,
            [("v1", true, true), ("v1beta1", true, false)],
            "v1 stored, v1beta1 served beside it"
        );
        let conversion = &d.value["spec"]["conversion"];
        assert_eq!(conversion["strategy"], "Webhook");
        assert_eq!(
            conversion["webhook"]["conversionReviewVersions"],
            serde_json::json!(["v1"])
        );
        assert_eq!(
            conversion["webhook"]["clientConfig"]["service"]["port"],
            crd::WEBHOOK_PORT
        );
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

/// The v1beta1 schemas differ from v1 exactly where the versions do.
#[test]
fn v1beta1_schemas_have_the_v1beta1_fields() {
    let docs = nodewright_api::document::parse_documents("crds", &crd::all_yaml()).unwrap();
    let beta = |i: usize| docs[i].value["spec"]["versions"][1]["schema"]["openAPIV3Schema"].clone();
    let props = |v: &serde_json::Value, path: &[&str]| {
        let mut here = v.clone();
        for p in path {
            here = here["properties"][*p].clone();
            if here["type"] == "array" {
                here = here["items"].clone();
            }
        }
        let mut keys: Vec<String> = here["properties"]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        keys.sort();
        keys
    };
    let np = beta(0);
    let tmpl = props(&np, &["spec", "template", "spec"]);
    for k in ["kubelet", "resources", "nodeClassRef"] {
        assert!(tmpl.contains(&k.to_string()), "{k}: {tmpl:?}");
    }
    assert!(!tmpl.contains(&"expireAfter".to_string()));
    assert!(!tmpl.contains(&"terminationGracePeriod".to_string()));
    assert_eq!(
        props(&np, &["spec", "template", "spec", "nodeClassRef"]),
        ["apiVersion", "kind", "name"]
    );
    assert!(props(&np, &["spec", "disruption"]).contains(&"expireAfter".to_string()));
    assert!(!props(&np, &["spec", "disruption", "budgets"]).contains(&"reasons".to_string()));
    assert!(!props(&np, &["spec"]).contains(&"replicas".to_string()));
    let nc = beta(1);
    assert!(props(&nc, &["spec"]).contains(&"kubelet".to_string()));
    assert!(!props(&nc, &["spec"]).contains(&"expireAfter".to_string()));
    let ec2 = beta(2);
    assert!(!props(&ec2, &["spec"]).contains(&"kubelet".to_string()));
    assert!(!props(&ec2, &["spec", "amiSelectorTerms"]).contains(&"alias".to_string()));
    assert!(
        ec2["properties"]["spec"]["properties"]["amiFamily"]["enum"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!("Ubuntu"))
    );
    assert_eq!(
        ec2["properties"]["spec"]["properties"]["metadataOptions"]["default"]["httpPutResponseHopLimit"],
        2
    );
    let text = serde_json::to_string(&ec2).unwrap();
    assert!(
        !text.contains("x.alias"),
        "no rule names a field v1beta1 lacks"
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
