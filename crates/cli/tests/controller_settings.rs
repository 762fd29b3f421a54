//! `nodewright controller` checks its settings before it reads a kubeconfig, so a missing or
//! contradictory setting is reported by name instead of surfacing later as a stuck controller.

use std::process::{Command, Output};

fn controller(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .arg("controller")
        .args(args)
        .env_remove("CLUSTER_NAME")
        .env_remove("BATCH_IDLE_DURATION")
        .env_remove("BATCH_MAX_DURATION")
        .env_remove("FEATURE_GATES")
        // A kubeconfig that cannot exist: reaching it would give a different error.
        .env("KUBECONFIG", "/nonexistent/nodewright-test-kubeconfig")
        .output()
        .expect("runs")
}

#[test]
fn a_missing_cluster_name_is_named_before_connecting() {
    let out = controller(&["--cloud-provider", "sim"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("CLUSTER_NAME"), "{err}");
    assert!(
        !err.contains("kubeconfig"),
        "checked before connecting: {err}"
    );
}

#[test]
fn an_idle_window_longer_than_the_max_is_refused() {
    let out = controller(&[
        "--cloud-provider",
        "sim",
        "--cluster-name",
        "c",
        "--batch-idle-duration",
        "20s",
        "--batch-max-duration",
        "10s",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("BATCH_IDLE_DURATION"), "{err}");
}

#[test]
fn a_feature_nodewright_lacks_is_refused_by_name() {
    let out = controller(&[
        "--cloud-provider",
        "sim",
        "--cluster-name",
        "c",
        "--feature-gates",
        "SpotToSpotConsolidation=true,NodeRepair=true,NodeOverlay=true",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("FEATURE_GATES: NodeOverlay=true"), "{err}");
    assert!(err.contains("not implemented"), "{err}");
    assert!(
        !err.contains("kubeconfig"),
        "checked before connecting: {err}"
    );
}
