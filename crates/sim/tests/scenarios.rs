//! Every scenario under `scenarios/` runs deterministically: its timeline and summary match the
//! golden file (`UPDATE_GOLDEN=1` rewrites them), no invariant is violated at any step, and no
//! pod is left pending at the end (each scenario leaves capacity for all its pods).

use std::path::{Path, PathBuf};

use nodewright_sim::report::{summary_text, timeline_text, to_json};
use nodewright_sim::scenario::{FileSource, parse_scenario};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The seed scenarios under `scenarios/` and the simulator's own under `crates/sim/scenarios/`.
fn scenario_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = ["scenarios", "crates/sim/scenarios"]
        .iter()
        .flat_map(|dir| std::fs::read_dir(root().join(dir)).expect("scenario dir exists"))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort_by_key(|p| p.file_name().map(|n| n.to_os_string()));
    files
}

fn run(path: &Path, seed: Option<u64>) -> nodewright_sim::RunReport {
    let text = std::fs::read_to_string(path).unwrap();
    let name = format!("scenarios/{}", path.file_name().unwrap().to_string_lossy());
    let mut s = parse_scenario(
        &name,
        &text,
        &FileSource {
            base: path.parent().unwrap().to_path_buf(),
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    if let Some(seed) = seed {
        s.seed = seed;
    }
    let catalog = nodewright_aws_model::catalog::embedded().unwrap();
    nodewright_sim::run(&s, &catalog, &mut |_| {}).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn every_seed_scenario_matches_its_golden_file_and_keeps_the_invariants() {
    let files = scenario_files();
    assert!(files.len() >= 4, "one scenario per seed: {files:?}");
    let mut failures = Vec::new();
    for path in files {
        let report = run(&path, None);
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        assert!(
            report.violations.is_empty(),
            "{name}: invariant violations: {:#?}",
            report.violations
        );
        assert_eq!(
            report.summary.pending_at_end, 0,
            "{name}: pods left pending"
        );
        assert_eq!(
            report.summary.consolidation_churn, 0,
            "{name}: a consolidation moved pods that then needed a new node"
        );
        assert!(
            report.summary.nodes_launched > 0,
            "{name}: nothing launched"
        );
        assert!(
            report.summary.final_per_hour > 0.0 && report.spot_price_note.contains("synthetic"),
            "{name}"
        );
        let text = format!("{}\n{}", timeline_text(&report), summary_text(&report));
        let golden = root().join(format!("crates/sim/tests/golden/{name}.txt"));
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::write(&golden, &text).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&golden).unwrap_or_default();
        if want != text {
            failures.push(format!(
                "{name}: output differs from {} (UPDATE_GOLDEN=1 to accept)\n--- got ---\n{text}",
                golden.display()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_same_seed_gives_the_same_report() {
    let path = root().join("scenarios/by-capacity-v1alpha5.yaml");
    let a = to_json(&run(&path, Some(42)));
    let b = to_json(&run(&path, Some(42)));
    assert_eq!(a, b);
}

#[test]
fn the_built_in_demo_provisions_across_zones_then_consolidates() {
    let s = nodewright_sim::demo::demo().unwrap();
    let catalog = nodewright_aws_model::catalog::embedded().unwrap();
    let r = nodewright_sim::run(&s, &catalog, &mut |_| {}).unwrap();
    let zones: std::collections::BTreeSet<&str> = r
        .timeline
        .iter()
        .filter(|e| e.kind == "launched")
        .filter_map(|e| e.message.split(" in ").nth(1))
        .filter_map(|rest| rest.split(' ').next())
        .collect();
    assert!(zones.len() >= 2, "launches in {zones:?}");
    assert!(r.summary.nodes_disrupted >= 1, "no consolidation");
    assert!(r.summary.savings_per_hour > 0.0);
    assert!(
        r.summary.final_per_hour
            < r.samples
                .iter()
                .map(|s| s.price_per_hour)
                .fold(0.0, f64::max)
    );
    // The first launch waits for the batch window to close: 30 s scale-up + 1 s idle.
    let first = r.timeline.iter().find(|e| e.kind == "launch").unwrap();
    assert_eq!(first.at.as_secs(), 31);
    // Nothing is consolidated before the scale-down at 5m, and every command waits the 15 s
    // re-check after it is planned.
    let removed = r.timeline.iter().find(|e| e.kind == "disrupted").unwrap();
    assert!(removed.at.as_secs() >= 5 * 60 + 15, "{:?}", removed.at);
    let planned = r
        .timeline
        .iter()
        .find(|e| e.kind == "disruption-planned")
        .unwrap();
    assert_eq!(removed.at - planned.at, std::time::Duration::from_secs(15));
    assert!(nodewright_sim::report::svg(&r).starts_with("<svg"));
}

#[test]
fn json_and_chart_carry_the_series_and_the_price_note() {
    let r = run(&root().join("scenarios/eksdemo.yaml"), None);
    let j = to_json(&r);
    let samples = j["samples"].as_array().unwrap();
    assert!(samples.len() >= 3);
    let times: Vec<f64> = samples
        .iter()
        .map(|s| s["atSeconds"].as_f64().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] < w[1]), "{times:?}");
    assert_eq!(times.last().copied(), Some(r.duration.as_secs_f64()));
    assert!(
        samples
            .iter()
            .any(|s| s["pendingPods"].as_u64() == Some(10))
    );
    assert!(j["priceNote"].as_str().unwrap().contains("synthetic"));
    assert_eq!(
        j["summary"]["nodesLaunched"].as_u64(),
        Some(r.summary.nodes_launched as u64)
    );
    let svg = nodewright_sim::report::svg(&r);
    assert_eq!(svg.matches("<path ").count(), 3);
    assert!(svg.contains(">nodes<") && svg.contains(">pending pods<") && svg.contains(">$/h<"));
    assert!(svg.contains("synthetic"));
}
