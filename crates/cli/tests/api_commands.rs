//! `nodewright validate`, `convert` and `crds`, run as the built binary.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn nodewright(args: &[&str], dir: &PathBuf, stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs");
    if let Some(text) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    drop(child.stdin.take());
    child.wait_with_output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn validate_accepts_every_seed_manifest() {
    let out = nodewright(
        &["validate", "-f", "fixtures/seed-manifests"],
        &root(),
        None,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(
        text(&out.stderr).contains("8 of 8 Karpenter objects valid"),
        "{}",
        text(&out.stderr)
    );
    assert!(text(&out.stdout).is_empty());
}

#[test]
fn validate_names_file_index_object_path_and_reason() {
    let dir = root().join("fixtures/invalid");
    let out = nodewright(&["validate", "-q", "-f", "nodepool.yaml"], &dir, None);
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines[0],
        "nodepool.yaml[0] NodePool/default: spec.template.spec.requirements[2].key: label domain \"karpenter.sh\" is restricted"
    );
    assert!(lines.contains(
        &"nodepool.yaml[1] NodePool/old (as karpenter.sh/v1 NodePool): spec.template.spec.requirements[0].key: label \"kubernetes.io/hostname\" is restricted"
    ));
    assert!(lines.contains(
        &"nodepool.yaml[1] NodePool/old (as karpenter.sh/v1 NodePool): spec.template.spec.expireAfter: invalid value \"30d\": must match '^(([0-9]+(s|m|h))+|Never)$'"
    ));
    assert!(lines.iter().any(|l| l.starts_with("nodepool.yaml[2] Machine/legacy: unsupported kind \"Machine\"")));
    assert_eq!(lines.len(), 5, "{stdout}");
}

#[test]
fn validate_reads_stdin_and_json() {
    let np = r#"{"apiVersion":"karpenter.sh/v1","kind":"NodePool","metadata":{"name":"a"},
        "spec":{"weight":500,"template":{"spec":{"requirements":[],
        "nodeClassRef":{"group":"karpenter.k8s.aws","kind":"EC2NodeClass","name":"d"}}}}}"#;
    let out = nodewright(&["validate", "-f", "-"], &root(), Some(np));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stdout),
        "-[0] NodePool/a: spec.weight: must be less than or equal to 100\n"
    );
    let ok = np.replace("500", "50");
    let out = nodewright(&["validate", "-f", "-"], &root(), Some(&ok));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
}

#[test]
fn validate_reports_unparsable_input() {
    let out = nodewright(&["validate", "-f", "-"], &root(), Some("a: [1,\n"));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stdout).starts_with("-[0]: not valid YAML or JSON"),
        "{}",
        text(&out.stdout)
    );
    let out = nodewright(&["validate", "-f", "no-such-file.yaml"], &root(), None);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn convert_prints_v1_objects_and_warns_on_stderr() {
    let out = nodewright(
        &[
            "convert",
            "-f",
            "fixtures/seed-manifests/03-provisioner-v1alpha5.yaml",
            "--default-instance-profile",
            "KarpenterNodeInstanceProfile",
        ],
        &root(),
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let docs = nodewright_api_docs(&text(&out.stdout));
    assert_eq!(docs.len(), 2);
    assert_eq!(docs[0]["apiVersion"], "karpenter.sh/v1");
    assert_eq!(docs[0]["kind"], "NodePool");
    assert_eq!(docs[0]["spec"]["template"]["spec"]["expireAfter"], "1h");
    assert_eq!(
        docs[0]["spec"]["template"]["spec"]["nodeClassRef"]["group"],
        "karpenter.k8s.aws"
    );
    assert_eq!(docs[1]["apiVersion"], "karpenter.k8s.aws/v1");
    assert_eq!(docs[1]["kind"], "EC2NodeClass");
    assert_eq!(
        docs[1]["spec"]["instanceProfile"],
        "KarpenterNodeInstanceProfile"
    );
    let stderr = text(&out.stderr);
    assert!(stderr.contains("warning: fixtures/seed-manifests/03-provisioner-v1alpha5.yaml[0] Provisioner/default: v1alpha5 added these requirements implicitly"), "{stderr}");

    // The converted output validates as it is.
    let again = nodewright(
        &["validate", "-q", "-f", "-"],
        &root(),
        Some(&text(&out.stdout)),
    );
    assert_eq!(again.status.code(), Some(0), "{}", text(&again.stdout));
}

#[test]
fn convert_passes_other_objects_through_and_fails_on_unknown_kinds() {
    let out = nodewright(
        &["convert", "-f", "fixtures/seed-manifests/05-inflate.yaml"],
        &root(),
        None,
    );
    assert_eq!(out.status.code(), Some(0));
    let docs = nodewright_api_docs(&text(&out.stdout));
    assert_eq!(docs[0]["kind"], "Deployment");
    let out = nodewright(
        &["convert", "-f", "-"],
        &root(),
        Some("apiVersion: karpenter.sh/v1alpha5\nkind: Machine\n"),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("unsupported kind \"Machine\""));
}

#[test]
fn crds_prints_the_committed_chart_files() {
    let out = nodewright(&["crds"], &root(), None);
    assert_eq!(out.status.code(), Some(0));
    let mut expected = String::new();
    for name in [
        "karpenter.sh_nodepools.yaml",
        "karpenter.sh_nodeclaims.yaml",
        "karpenter.k8s.aws_ec2nodeclasses.yaml",
    ] {
        expected.push_str(
            &std::fs::read_to_string(root().join("charts/nodewright/crds").join(name)).unwrap(),
        );
    }
    assert_eq!(text(&out.stdout), expected);
}

fn nodewright_api_docs(yaml: &str) -> Vec<serde_json::Value> {
    nodewright_api::document::parse_documents("out", yaml)
        .unwrap()
        .into_iter()
        .map(|d| d.value)
        .collect()
}

#[test]
fn strict_makes_unknown_fields_errors() {
    let f = "fixtures/roundtrip/nodepool-v1-unknown-fields.yaml";
    let out = nodewright(&["validate", "-f", f], &root(), None);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stderr).contains("warning: fixtures/roundtrip/nodepool-v1-unknown-fields.yaml[0] NodePool/extra: futureTopLevel: unknown field, the API server drops it"));
    let out = nodewright(&["validate", "--strict", "-q", "-f", f], &root(), None);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stdout).lines().count(),
        4,
        "{}",
        text(&out.stdout)
    );
}
