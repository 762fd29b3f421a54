//! The scheduler's cases as data. Each `fixtures/scheduling/*.yaml` is one case: an input in
//! the interchange format (instance types, or a `catalog` from `fixtures/scheduling/catalogs/`,
//! plus NodePools, pods, nodes, NodeClaims, DaemonSets and volumes, read as
//! `nodewright plan --disruption --input` reads them), the scheduler `options` it changes, and
//! what core's solve must make of it (`expect`): how many new NodeClaims, each one's pods,
//! NodePool, instance types, zone, capacity type, requirements and requests, where named pods
//! go (an existing node, an in-flight NodeClaim or a new claim), which pods share one place
//! (`together`) and which each have their own (`apart`), and which pods stay pending and why. The schema is in `case.rs`; a field left out is not checked.
//!
//! One test runs every file and reports each failing case by name with its differences and
//! the plan it got; a file that cannot be read fails with its name and the field path.

mod case;
mod check;

use std::path::{Path, PathBuf};

use nodewright_core::scheduling::solve;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/scheduling")
}

fn cases() -> Vec<PathBuf> {
    let dir = dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
}

/// What is wrong with one case file, or nothing.
fn run(text: &str) -> Result<(), String> {
    let case = case::load(text, &dir().join("catalogs"))?;
    let plan = solve(&case.snapshot, &case.options);
    let diffs = check::differences(&plan, &case.snapshot, &case.expect);
    if diffs.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{}\n  the plan:\n{}",
        diffs.join("\n"),
        check::render(&plan)
    ))
}

#[test]
fn every_scheduling_case_solves_as_written() {
    let files = cases();
    assert!(files.len() >= 30, "only {} cases", files.len());
    let mut failures = Vec::new();
    for file in &files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let outcome = std::fs::read_to_string(file)
            .map_err(|e| e.to_string())
            .and_then(|text| run(&text));
        if let Err(e) = outcome {
            failures.push(format!("{name}: {e}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} scheduling cases failed:\n\n{}",
        failures.len(),
        files.len(),
        failures.join("\n\n")
    );
}

/// A small valid case to break in the tests below.
const CASE: &str = "
catalog: sizes
input:
  nodePools:
  - metadata: {name: default}
    spec:
      template:
        spec:
          requirements: []
          nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  pods:
  - metadata: {name: p}
    spec:
      containers:
      - {name: c, image: app, resources: {requests: {cpu: '1'}}}
expect:
  newClaims: 1
  placed:
    p: {instanceType: it-0}
";

fn error_of(edit: (&str, &str)) -> String {
    assert!(CASE.contains(edit.0), "{}", edit.0);
    match run(&CASE.replacen(edit.0, edit.1, 1)) {
        Ok(()) => panic!("{edit:?} was not found wrong"),
        Err(e) => e,
    }
}

#[test]
fn the_small_case_holds_and_each_expectation_can_fail() {
    assert_eq!(run(CASE), Ok(()));
    let e = error_of(("newClaims: 1", "newClaims: 2"));
    assert!(e.starts_with("expect.newClaims: expected 2, got 1"), "{e}");
    let e = error_of(("{instanceType: it-0}", "{instanceType: it-1}"));
    assert!(
        e.contains(
            "expect.placed.p.instanceType: expected \"it-1\", got \"it-0\" (on new claim 0)"
        ),
        "{e}"
    );
    assert!(e.contains("new claim 0 (default): it-0"), "{e}");
}

#[test]
fn a_malformed_case_names_the_field() {
    for (edit, want) in [
        (
            ("newClaims: 1", "newClaim: 1"),
            "expect.newClaim: unknown field `newClaim`",
        ),
        (
            ("{instanceType: it-0}", "{instanceTyp: it-0}"),
            "expect.placed",
        ),
        (
            ("{instanceType: it-0}", "{node: n, zone: a}"),
            "expect.placed.p: node",
        ),
        (
            ("    p: {", "    q: {"),
            "expect.placed.q: the input has no pod default/q",
        ),
        (("catalog: sizes", "catalog: none"), "catalog: none"),
        (
            (
                "  newClaims: 1\n  placed:\n    p: {instanceType: it-0}\n",
                "  placed: {}\n",
            ),
            "expect: states nothing",
        ),
        (("  pods:\n", "  pod:\n"), "input.pod: unknown field"),
        (
            ("image: app,", "image: app, nodeSelectr: {a: b},"),
            "input.pods[0].spec.containers[0].nodeSelectr: unknown field of a Pod",
        ),
        (
            ("{name: default}", "{name: default, labelz: {}}"),
            "input.nodePools[0].metadata.labelz: unknown field",
        ),
        (
            (
                "requirements: []\n",
                "requirements: []\n          taintz: []\n",
            ),
            "input.nodePools[0].spec.template.spec.taintz: unknown field",
        ),
        (("cpu: '1'", "cpu: 'lots'"), "input:pods[0] Pod/p"),
    ] {
        let e = error_of(edit);
        assert!(e.contains(want), "{edit:?}: {e}");
    }
}

#[test]
fn together_and_apart_can_each_fail() {
    let two = CASE
        .replace(
            "  pods:\n",
            "  pods:\n  - metadata: {name: q}\n    spec:\n      containers:\n      - {name: c, image: app, resources: {requests: {cpu: '1'}}}\n",
        )
        .replace("    p: {instanceType: it-0}\n", "    p: {newClaim: true}\n");
    let with = |extra: &str| run(&format!("{two}  {extra}\n"));
    assert_eq!(with("together: [[p, q]]"), Ok(()));
    let e = with("apart: [[p, q]]").unwrap_err();
    assert!(
        e.contains("expect.apart[0]: expected 2 places for [\"p\", \"q\"], got {\"on new claim 0\": [\"p\", \"q\"]}"),
        "{e}"
    );
    let e = with("together: [[p]]").unwrap_err();
    assert!(
        e.contains("expect.together[0]: a group needs two pods or more"),
        "{e}"
    );
    let e = with("together: [[p, r]]").unwrap_err();
    assert!(
        e.contains("expect.together[0][1]: the input has no pod default/r"),
        "{e}"
    );
}
