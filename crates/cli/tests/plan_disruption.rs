//! `nodewright plan --disruption` on the fixture cluster, run as the built binary.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

const NOW: &str = "2026-01-02T00:00:00Z";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn nodewright(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("runs")
}

fn plan_json(input: &str) -> Value {
    let out = nodewright(&[
        "plan",
        "--disruption",
        "--input",
        input,
        "--now",
        NOW,
        "--output",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

fn verdict<'a>(plan: &'a Value, node: &str) -> (&'a str, &'a str) {
    let v = plan["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["node"] == node)
        .unwrap_or_else(|| panic!("no verdict for {node}"));
    (v["code"].as_str().unwrap(), v["message"].as_str().unwrap())
}

fn targets(command: &Value) -> Vec<&str> {
    let mut t: Vec<&str> = command["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["node"].as_str().unwrap())
        .collect();
    t.sort();
    t
}

fn check_fixture_plan(plan: &Value) {
    let commands = plan["commands"].as_array().unwrap();
    assert_eq!(commands.len(), 2, "{plan:#}");
    assert_eq!(commands[0]["method"], "emptiness");
    assert_eq!(targets(&commands[0]), ["node-c", "node-d"]);
    assert_eq!(commands[0]["savingsPerHour"], 0.384);
    // The busy nodes' pods fit on the nodes that stay (the blocked and unmanaged ones).
    assert_eq!(commands[1]["method"], "multi-node-consolidation");
    assert_eq!(commands[1]["decision"], "delete");
    assert_eq!(targets(&commands[1]), ["node-a", "node-b", "node-e"]);
    assert_eq!(commands[1]["savingsPerHour"], 0.768);
    assert_eq!(plan["savingsPerHour"], 1.152);
    assert_eq!(
        verdict(plan, "node-f"),
        ("pod-do-not-disrupt", "do-not-disrupt pod default/batch-f0")
    );
    assert_eq!(
        verdict(plan, "node-g"),
        (
            "pdb-blocked",
            "PDB default/db allows 0 evictions (pod default/db-g0)"
        )
    );
    assert_eq!(
        verdict(plan, "node-h"),
        (
            "pod-has-no-controller",
            "pod default/debug has no controller"
        )
    );
    assert_eq!(verdict(plan, "node-i").0, "not-managed");
    assert_eq!(plan["verdicts"].as_array().unwrap().len(), 9);
}

#[test]
fn manifests_with_the_embedded_catalog() {
    check_fixture_plan(&plan_json("fixtures/cluster/cluster.yaml"));
}

#[test]
fn kubectl_list_and_interchange_give_the_same_plan() {
    let yaml = plan_json("fixtures/cluster/cluster.yaml");
    assert_eq!(plan_json("fixtures/cluster/cluster-list.json"), yaml);
    check_fixture_plan(&plan_json("fixtures/cluster/interchange.json"));
}

#[test]
fn table_lists_commands_and_reasons_and_is_deterministic() {
    let args = [
        "plan",
        "--disruption",
        "--input",
        "fixtures/cluster/cluster.yaml",
        "--now",
        NOW,
    ];
    let a = nodewright(&args);
    let b = nodewright(&args);
    assert!(a.status.success());
    assert_eq!(a.stdout, b.stdout);
    let text = String::from_utf8_lossy(&a.stdout);
    assert!(
        text.starts_with(
            "disruption plan at 2026-01-02T00:00:00Z: 9 nodes, 2 commands, saves $1.1520/h"
        ),
        "{text}"
    );
    assert!(text.contains("emptiness"), "{text}");
    assert!(text.contains("node-c,node-d"), "{text}");
    assert!(
        text.contains("pod default/debug has no controller"),
        "{text}"
    );
}

#[test]
fn consolidate_after_counts_from_now() {
    // One minute after the last pod event, consolidateAfter: 10m has not elapsed anywhere.
    let dir = std::env::temp_dir().join(format!("nodewright-dplan-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = std::fs::read_to_string(root().join("fixtures/cluster/cluster.yaml")).unwrap();
    let changed = text.replace("consolidateAfter: 0s", "consolidateAfter: 10m");
    assert_ne!(changed, text);
    let path = dir.join("cluster.yaml");
    std::fs::write(&path, changed).unwrap();
    let out = nodewright(&[
        "plan",
        "--disruption",
        "--input",
        path.to_str().unwrap(),
        "--now",
        "2026-01-01T01:01:00Z",
        "--output",
        "json",
    ]);
    assert!(out.status.success());
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(plan["commands"].as_array().unwrap().len(), 0);
    assert_eq!(verdict(&plan, "node-c").0, "consolidate-after");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_objects_are_named_with_file_index_kind_field_and_reason() {
    let dir = std::env::temp_dir().join(format!("nodewright-dplan-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = std::fs::read_to_string(root().join("fixtures/cluster/cluster.yaml")).unwrap();
    let path = dir.join("bad.yaml");
    std::fs::write(&path, text.replacen("cpu: 3920m", "cpu: lots", 1)).unwrap();
    let out = nodewright(&[
        "plan",
        "--disruption",
        "--input",
        path.to_str().unwrap(),
        "--now",
        NOW,
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.yaml[3] Node/node-b: status.allocatable[cpu]: invalid quantity \"lots\""),
        "{err}"
    );
    let out = nodewright(&[
        "plan",
        "--disruption",
        "--input",
        "fixtures/cluster/cluster.yaml",
        "--now",
        "tomorrow",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--now: invalid RFC 3339 time"));
    std::fs::remove_dir_all(&dir).ok();
}
