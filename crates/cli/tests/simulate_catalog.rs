//! `nodewright simulate --instance-types CATALOG.json`, run as the built binary on the
//! simulator's fixture (`crates/sim/tests/fixtures/file-catalog/`): the cloud offers the
//! catalog file's instance types, and a bad file is an error that names it.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

const FIXTURES: &str = "crates/sim/tests/fixtures/file-catalog";

fn simulate(catalog: &str) -> Output {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args([
            "simulate",
            &format!("{FIXTURES}/scenario.yaml"),
            "--instance-types",
            &format!("{FIXTURES}/{catalog}"),
            "--output",
            "json",
        ])
        .current_dir(root)
        .output()
        .expect("runs")
}

#[test]
fn the_catalog_file_replaces_the_embedded_catalog() {
    let out = simulate("types.json");
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
    assert!(
        note.contains(&format!("catalog file {FIXTURES}/types.json")),
        "{note}"
    );
}

#[test]
fn a_bad_catalog_file_is_an_error_naming_the_file_and_the_field() {
    let out = simulate("bad-types.json");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "{FIXTURES}/bad-types.json: instanceTypes[1].offerings[1].price: expected a non-negative number"
        )),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "no report for a bad catalog");
}
