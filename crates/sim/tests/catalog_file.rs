//! A scenario whose cloud offers the instance types of a catalog file (the interchange format)
//! instead of the embedded AWS catalog's: `tests/fixtures/file-catalog/`.

use std::path::{Path, PathBuf};

use nodewright_sim::RunReport;
use nodewright_sim::scenario::{FileSource, Scenario, ScenarioError, parse_scenario};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/file-catalog")
}

/// The fixture scenario with `cloud` as its `cloud` section, parsed.
fn parse(cloud: &str) -> Result<Scenario, ScenarioError> {
    let dir = fixtures();
    let text = std::fs::read_to_string(dir.join("scenario.yaml")).unwrap();
    let text = format!("cloud: {cloud}\n{text}");
    parse_scenario("scenario.yaml", &text, &FileSource { base: dir })
}

/// Runs the fixture scenario with `cloud` as its `cloud` section.
fn run(cloud: &str) -> RunReport {
    let s = parse(cloud).unwrap_or_else(|e| panic!("{e}"));
    let catalog = nodewright_aws_model::catalog::embedded().unwrap();
    nodewright_sim::run(&s, &catalog, &mut |_| {}).unwrap_or_else(|e| panic!("{e}"))
}

fn launched(r: &RunReport) -> Vec<&str> {
    r.timeline
        .iter()
        .filter(|e| e.kind == "launched")
        .map(|e| e.message.as_str())
        .collect()
}

#[test]
fn launches_come_from_the_catalog_file_at_its_prices() {
    let r = run("{ instanceTypes: types.json }");
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    assert_eq!(r.summary.pending_at_end, 0);
    let launched = launched(&r);
    // Six 1-cpu pods: one large-8 as spot in zone-b ($0.12/h) is cheaper than three small-2.
    assert_eq!(launched.len(), 1, "{launched:#?}");
    assert!(
        launched[0].contains("launched as large-8 in zone-b (spot) at $0.1200/h"),
        "{}",
        launched[0]
    );
    assert!((r.summary.final_per_hour - 0.12).abs() < 1e-9);
    assert!(
        r.spot_price_note.contains("catalog file types.json"),
        "{}",
        r.spot_price_note
    );
}

#[test]
fn without_the_file_the_embedded_catalog_is_used() {
    let r = run("{}");
    assert_eq!(r.summary.pending_at_end, 0);
    let launched = launched(&r);
    assert!(!launched.is_empty());
    assert!(
        launched
            .iter()
            .all(|m| !m.contains("small-2") && !m.contains("large-8") && m.contains("us-east-1")),
        "{launched:#?}"
    );
    assert!(
        r.spot_price_note.contains("synthetic"),
        "{}",
        r.spot_price_note
    );
}

#[test]
fn a_bad_catalog_file_names_the_scenario_field_and_the_catalog_field() {
    let e = parse("{ instanceTypes: bad-types.json }").unwrap_err();
    assert_eq!(
        e.to_string(),
        "scenario.yaml: cloud.instanceTypes: bad-types.json: instanceTypes[1].offerings[1].price: expected a non-negative number"
    );
}
