//! Bad input given to the built binary, each case from issue 32: one clear message with file,
//! place and reason, said once, and an exit code that is not success.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn nodewright(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A fresh directory under the target dir with `files` written into it.
fn dir_with(name: &str, files: &[(&str, &[u8])]) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (file, bytes) in files {
        std::fs::write(dir.join(file), bytes).unwrap();
    }
    dir
}

const CATALOG: &[u8] = br#"{"instanceTypes": [{"name": "m", "cpu": 2, "memoryMiB": 4096,
  "offerings": [{"zone": "z", "capacityType": "on-demand", "price": 0.1}]}]}"#;

#[test]
fn invalid_utf8_is_located_once() {
    let dir = dir_with(
        "utf8",
        &[
            (
                "bad.yaml",
                b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: \"\xff\"\n",
            ),
            ("cat.json", CATALOG),
        ],
    );
    let located = "bad.yaml: not valid UTF-8 at line 4, column 10 (byte 44)";
    let out = nodewright(&["validate", "-f", "bad.yaml"], &dir);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stdout), format!("{located}\n"));
    let out = nodewright(
        &[
            "plan",
            "--input",
            "bad.yaml",
            "--instance-types",
            "cat.json",
        ],
        &dir,
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(text(&out.stderr), format!("error: {located}\n"));
}

#[test]
fn plan_says_a_read_error_once() {
    let dir = dir_with("plan-io", &[("cat.json", CATALOG)]);
    let out = nodewright(
        &[
            "plan",
            "--input",
            "missing.yaml",
            "--instance-types",
            "cat.json",
        ],
        &dir,
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        "error: missing.yaml: No such file or directory (os error 2)\n"
    );
}

#[test]
fn plan_says_a_workload_error_once() {
    let deployment = b"apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, resources: {requests: {cpu: lots}}}]}
";
    let dir = dir_with(
        "plan-workload",
        &[("web.yaml", deployment), ("cat.json", CATALOG)],
    );
    let out = nodewright(
        &[
            "plan",
            "--input",
            "web.yaml",
            "--instance-types",
            "cat.json",
        ],
        &dir,
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("error: web.yaml[0] Deployment/web: spec.template.spec.containers[0].resources.requests[cpu]: "),
        "{stderr}"
    );
    assert_eq!(stderr.matches("Deployment/web").count(), 1, "{stderr}");
}

#[test]
fn a_type_error_in_a_plan_input_names_its_field() {
    let pod = br#"{"instanceTypes": [{"name": "m", "cpu": 2, "memoryMiB": 4096,
      "offerings": [{"zone": "z", "capacityType": "on-demand", "price": 0.1}]}],
      "pods": [{"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "ports": 80}]}}]}"#;
    let dir = dir_with("plan-type", &[("in.json", pod)]);
    let out = nodewright(&["plan", "--input", "in.json"], &dir);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        "error: in.json: pods[0].spec.containers[0].ports: invalid type: integer `80`, expected a list\n"
    );
}

#[test]
fn reads_stop_at_the_input_limit() {
    let dir = dir_with("zero", &[("cat.json", CATALOG)]);
    let out = nodewright(
        &[
            "plan",
            "--input",
            "/dev/zero",
            "--instance-types",
            "cat.json",
        ],
        &dir,
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        "error: /dev/zero: larger than 128 MiB, the most nodewright reads from one input\n"
    );
    let out = nodewright(&["validate", "-f", "/dev/zero"], &dir);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn validate_fails_when_no_karpenter_object_was_checked() {
    let dir = dir_with(
        "typo",
        &[(
            "pool.yaml",
            b"apiVersion: karpenter.sh\nkind: NodePool\nmetadata: {name: a}\nspec: {}\n",
        )],
    );
    let out = nodewright(&["validate", "-f", "pool.yaml"], &dir);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stdout),
        "pool.yaml[0] NodePool/a: apiVersion: \"karpenter.sh\" is not an API version of NodePool; nodewright reads NodePool as karpenter.sh/v1 or karpenter.sh/v1beta1\n"
    );
    let dir = dir_with(
        "none",
        &[(
            "d.yaml",
            b"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n",
        )],
    );
    let out = nodewright(&["validate", "-f", "d.yaml"], &dir);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).ends_with("error: no Karpenter objects in the input\n"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn simulate_refuses_what_it_could_not_finish() {
    let dir = dir_with(
        "sim",
        &[
            ("long.yaml", b"until: 2562047h\n"),
            ("zero.yaml", b"manifests:\n  - file: /dev/zero\n"),
        ],
    );
    let out = nodewright(&["simulate", "long.yaml"], &dir);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        "error: long.yaml: until: 2562047:00:00 is past the longest run the simulator does: 744h (31 days) of virtual time\n"
    );
    let out = nodewright(&["simulate", "zero.yaml"], &dir);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        "error: zero.yaml: manifests[0].file: /dev/zero: larger than 128 MiB, the most nodewright reads from one input\n"
    );
}
