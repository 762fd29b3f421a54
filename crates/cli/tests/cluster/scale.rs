//! `nodewright bench cluster` on a real control plane, small: the benchmark that measures the
//! controller at 20,000 pods (`scripts/bench-cluster-scale`, figures in docs/RELIABILITY.md)
//! runs here at 120 pods, so it keeps working. It must bind every pod on nodes filled ten at
//! a time, resize through one churn step and bind again, and report the controller's memory.
//! The simulated cloud's node agent runs in a process of its own there, as kwok beside
//! upstream's controller: every Node comes from it, none from the controller. The controller
//! runs without transparent huge pages. `--controller-env` (the way to put a heap profiler in
//! front of the controller alone) reaches the controller, over the bench's own settings.

use std::process::Command;

use serde_json::Value;

use crate::kit::ControlPlane;

#[test]
fn the_scale_benchmark_binds_every_pod_and_reports_the_controllers_memory() {
    let Some(cp) = ControlPlane::start("scale") else {
        return;
    };
    let out = cp.dir.join("bench");
    let run = Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args(["bench", "cluster", "--pods", "120", "--churn-minutes", "1"])
        .args(["--no-scale-down", "--timeout-minutes", "5"])
        .args(["--controller-env", "HOSTNAME=nw-profiled"])
        .arg("--kubeconfig")
        .arg(&cp.kubeconfig)
        .arg("--out")
        .arg(&out)
        .output()
        .expect("nodewright bench cluster runs");
    let stdout = String::from_utf8_lossy(&run.stdout);
    eprintln!("{stdout}");
    assert!(
        run.status.success(),
        "bench cluster failed:\n{stdout}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let result: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("result.json")).unwrap()).unwrap();
    let phases = result["phases"].as_array().unwrap();
    let names: Vec<&str> = phases.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["scale-up", "churn"]);
    let up = &phases[0]["end"];
    assert_eq!(
        (up["pods"].as_u64(), up["bound"].as_u64()),
        (Some(120), Some(120))
    );
    // Ten pods fill a node: at least twelve nodes, and every node has a claim.
    assert!(up["nodes"].as_u64().unwrap() >= 12, "{up}");
    assert_eq!(up["nodes"], up["claims"], "{up}");
    let churn = &phases[1]["end"];
    assert_eq!(churn["pods"], churn["bound"], "{churn}");
    assert!(churn["pods"].as_u64().unwrap() >= 60, "{churn}");
    let peak = result["peak_rss_mib"].as_f64().unwrap();
    assert!(peak > 10.0, "the controller's memory was not read: {peak}");
    assert!(result["churn_last_third_peak_mib"].as_f64().unwrap() > 10.0);
    let agent = result["agent_peak_rss_mib"].as_f64().unwrap();
    assert!(agent > 5.0, "the node agent's memory was not read: {agent}");
    assert!(result["agent_cpu_seconds"].as_f64().unwrap() > 0.0);
    // The controller turns transparent huge pages off for itself (`huge_pages.rs`).
    assert_eq!(result["huge_pages"], Value::Bool(false), "{result}");
    let read = |f: &str| std::fs::read_to_string(out.join(f)).unwrap();
    let (controller, node_agent) = (read("controller.log"), read("node-agent.log"));
    let registration = r#""message":"registered node""#;
    assert!(
        !controller.contains(registration),
        "the controller registered Nodes itself:\n{controller}"
    );
    // The leader-election identity is HOSTNAME's, which the bench sets to its own name.
    assert!(
        controller.contains(r#""identity":"nw-profiled_"#),
        "--controller-env HOSTNAME=nw-profiled did not reach the controller:\n{controller}"
    );
    let registered = node_agent.matches(registration).count();
    assert!(
        registered >= 12,
        "the node agent registered {registered} Nodes:\n{node_agent}"
    );
}
