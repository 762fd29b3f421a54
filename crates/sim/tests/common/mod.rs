//! Shared by the inline-scenario tests: parse a scenario text and run it on the embedded
//! catalog.

use std::collections::BTreeMap;

use nodewright_sim::RunReport;
use nodewright_sim::scenario::parse_scenario;

/// Runs `text` (a whole scenario named `test.yaml`); parse and run errors as text.
pub fn run(text: &str) -> Result<RunReport, String> {
    let s = parse_scenario(
        "test.yaml",
        text,
        &BTreeMap::<&'static str, &'static str>::new(),
    )
    .map_err(|e| e.to_string())?;
    let catalog = nodewright_aws_model::catalog::embedded().unwrap();
    nodewright_sim::run(&s, &catalog, &mut |_| {}).map_err(|e| e.to_string())
}
