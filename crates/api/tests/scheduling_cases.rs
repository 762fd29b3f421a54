//! The scheduler's cases as data: each `fixtures/scheduling/*.yaml` holds an input in the
//! interchange format `nodewright plan --input` reads (instance types, NodePools, pods,
//! existing nodes) and what core's solve must make of it: how many new NodeClaims and in which
//! zones (their cheapest options', sorted), where each
//! named pod goes (an existing node, or a new claim of a NodePool whose cheapest option is a
//! given instance type, zone and capacity type) and why the others cannot go anywhere. A
//! case states only what it is about; what it leaves out is not checked.

use std::path::{Path, PathBuf};

use nodewright_core::scheduling::{Options, Plan, Target, solve};
use serde_yaml::Value;

fn cases() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/scheduling");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
}

/// Every difference between `plan` and `expect`, one line each.
fn differences(plan: &Plan, expect: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(n) = expect.get("newNodeClaims").and_then(Value::as_u64)
        && plan.new_claims.len() as u64 != n
    {
        out.push(format!(
            "{} new NodeClaims, expected {n}",
            plan.new_claims.len()
        ));
    }
    if let Some(want) = expect.get("newClaimZones").and_then(Value::as_sequence) {
        let want: Vec<&str> = want.iter().filter_map(Value::as_str).collect();
        let mut have: Vec<&str> = plan
            .new_claims
            .iter()
            .filter_map(|c| c.cheapest().map(|o| plan.zone_of(o)))
            .collect();
        have.sort();
        if have != want {
            out.push(format!("new claims in zones {have:?}, expected {want:?}"));
        }
    }
    for (pod, want) in expect
        .get("placed")
        .and_then(Value::as_mapping)
        .into_iter()
        .flatten()
    {
        let pod = pod.as_str().unwrap_or_default();
        let key = if pod.contains('/') {
            pod.to_string()
        } else {
            format!("default/{pod}")
        };
        let Some(p) = plan.placements.iter().find(|p| p.pod == key) else {
            let why = plan
                .unplaced
                .iter()
                .find(|u| u.pod == key)
                .map(|u| u.reason.clone());
            out.push(format!(
                "{key}: not placed ({})",
                why.unwrap_or("not considered".into())
            ));
            continue;
        };
        let got = match &p.target {
            Target::Node(n) | Target::InFlight(n) => {
                [("node", Some(n.clone()))].into_iter().collect::<Vec<_>>()
            }
            Target::NewClaim(i) => {
                let c = &plan.new_claims[*i];
                let o = c.cheapest();
                vec![
                    ("nodePool", Some(c.nodepool.clone())),
                    ("instanceType", o.map(|o| plan.name_of(o).to_string())),
                    ("zone", o.map(|o| plan.zone_of(o).to_string())),
                    ("capacityType", o.map(|o| o.capacity_type.to_string())),
                    ("claim", Some(i.to_string())),
                ]
            }
        };
        for (field, want_value) in want.as_mapping().into_iter().flatten() {
            let field = field.as_str().unwrap_or_default();
            let want_value = match want_value {
                Value::Number(n) => n.to_string(),
                v => v.as_str().unwrap_or_default().to_string(),
            };
            let have = got
                .iter()
                .find(|(f, _)| *f == field)
                .and_then(|(_, v)| v.clone());
            if have.as_deref() != Some(want_value.as_str()) {
                out.push(format!(
                    "{key}: {field} is {have:?}, expected {want_value:?}"
                ));
            }
        }
    }
    for (pod, reason) in expect
        .get("unplaced")
        .and_then(Value::as_mapping)
        .into_iter()
        .flatten()
    {
        let key = format!("default/{}", pod.as_str().unwrap_or_default());
        let want = reason.as_str().unwrap_or_default();
        match plan.unplaced.iter().find(|u| u.pod == key) {
            Some(u) if u.reason.contains(want) => {}
            Some(u) => out.push(format!(
                "{key}: unplaced because {:?}, expected {want:?}",
                u.reason
            )),
            None => out.push(format!("{key}: placed, expected unplaced ({want})")),
        }
    }
    out
}

#[test]
fn every_scheduling_case_solves_as_written() {
    let files = cases();
    assert!(files.len() >= 6, "only {} cases", files.len());
    let mut failures = Vec::new();
    for file in &files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(file).unwrap();
        let case: Value = serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let input = serde_json::to_string(&case["input"]).unwrap();
        let snapshot = nodewright_api::interchange::read_input(&name, &input)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let plan = solve(&snapshot, &Options::default());
        for d in differences(&plan, &case["expect"]) {
            failures.push(format!("{name}: {d}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
