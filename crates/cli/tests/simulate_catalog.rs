//! `nodewright simulate --instance-types CATALOG.json`, run as the built binary: the cloud
//! offers the catalog file's instance types, and a bad file is an error that names it.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

const TYPES: &str = r#"{"instanceTypes": [
  {"name": "small-2", "cpu": 1.9, "memoryMiB": 3800,
   "offerings": [{"zone": "zone-a", "capacityType": "on-demand", "price": 0.10}]},
  {"name": "large-8", "cpu": 7.9, "memoryMiB": 15800,
   "offerings": [{"zone": "zone-b", "capacityType": "spot", "price": 0.12}]}
]}"#;

const SCENARIO: &str = r#"
name: file-catalog
until: 10m
manifests:
  - inline:
      apiVersion: karpenter.k8s.aws/v1
      kind: EC2NodeClass
      metadata: { name: default }
      spec:
        amiSelectorTerms: [{ alias: al2023@latest }]
        role: node-role
        subnetSelectorTerms: [{ tags: { demo: "true" } }]
        securityGroupSelectorTerms: [{ tags: { demo: "true" } }]
  - inline:
      apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: { name: default }
      spec:
        template:
          spec:
            nodeClassRef: { group: karpenter.k8s.aws, kind: EC2NodeClass, name: default }
            requirements:
              - { key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand] }
  - inline:
      apiVersion: apps/v1
      kind: Deployment
      metadata: { name: web, namespace: default }
      spec:
        replicas: 6
        selector: { matchLabels: { app: web } }
        template:
          metadata: { labels: { app: web } }
          spec:
            containers:
              - name: app
                image: pause
                resources: { requests: { cpu: "1", memory: 1Gi } }
"#;

/// A directory of its own for this test's files.
fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("nodewright-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn simulate(dir: &PathBuf, catalog: &str) -> Output {
    std::fs::write(dir.join("scenario.yaml"), SCENARIO).unwrap();
    Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args([
            "simulate",
            "scenario.yaml",
            "--instance-types",
            catalog,
            "--output",
            "json",
        ])
        .current_dir(dir)
        .output()
        .expect("runs")
}

#[test]
fn the_catalog_file_replaces_the_embedded_catalog() {
    let d = dir("catalog-ok");
    std::fs::write(d.join("types.json"), TYPES).unwrap();
    let out = simulate(&d, "types.json");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("json");
    let launched: Vec<&str> = report["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "launched")
        .map(|e| e["message"].as_str().unwrap())
        .collect();
    assert_eq!(launched.len(), 1, "{launched:#?}");
    assert!(
        launched[0].contains("launched as large-8 in zone-b (spot) at $0.1200/h"),
        "{}",
        launched[0]
    );
    let note = report["priceNote"].as_str().unwrap();
    assert!(note.contains("catalog file types.json"), "{note}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_bad_catalog_file_is_an_error_naming_the_file_and_the_field() {
    let d = dir("catalog-bad");
    std::fs::write(d.join("bad.json"), TYPES.replace("0.12", "\"cheap\"")).unwrap();
    let out = simulate(&d, "bad.json");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "bad.json: instanceTypes[1].offerings[0].price: expected a non-negative number"
        ),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "no report for a bad catalog");
    let _ = std::fs::remove_dir_all(&d);
}
