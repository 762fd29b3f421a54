//! The built-in demo: `scenarios/eksdemo.yaml` and the seed manifests it reads, compiled in so
//! `nodewright simulate` runs with no files around.

use std::collections::BTreeMap;

use crate::scenario::{Scenario, ScenarioError, parse_scenario};

pub const DEMO_FILE: &str = "scenarios/eksdemo.yaml";
const DEMO: &str = include_str!("../../../scenarios/eksdemo.yaml");

fn embedded() -> BTreeMap<&'static str, &'static str> {
    BTreeMap::from([
        (
            "../fixtures/seed-manifests/04-nodepool-ec2nodeclass-v1.yaml",
            include_str!("../../../fixtures/seed-manifests/04-nodepool-ec2nodeclass-v1.yaml"),
        ),
        (
            "../fixtures/seed-manifests/05-inflate.yaml",
            include_str!("../../../fixtures/seed-manifests/05-inflate.yaml"),
        ),
    ])
}

/// The demo scenario, parsed.
pub fn demo() -> Result<Scenario, ScenarioError> {
    parse_scenario(DEMO_FILE, DEMO, &embedded())
}
