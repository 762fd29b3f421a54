//! Fuzzing every reader of user input in this crate with generated and mutated input:
//! quantities, durations, label selectors, manifests (the seed manifests with one value
//! replaced by anything JSON can hold) and the interchange format. Nothing panics, and every
//! refusal says where. Part of `scripts/test`; raise `NODEWRIGHT_FUZZ_CASES` to search longer.

use std::path::PathBuf;

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use nodewright_api::convert::{ConvertOptions, Outcome, convert_documents};
use nodewright_api::document::{Document, parse_documents, read_documents};
use nodewright_api::error::Path;
use nodewright_api::interchange::{InterchangeError, read_input};
use nodewright_api::quantity::parse_resource;
use nodewright_api::v1::shared::{DurationError, read_duration};
use nodewright_api::workload::label_selector;
use nodewright_core::time::parse_go_duration;
use nodewright_testkit::fuzz::{self, config, mutate};
use proptest::prelude::*;
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Any JSON value, with the durations and quantities a manifest's readers parse.
fn any_json() -> impl Strategy<Value = Value> {
    fuzz::any_json(prop_oneof![
        "[0-9]{1,25}(s|m|h|Gi|Mi|m|k)?",
        Just("Never".to_string()),
        Just("99999999999999999999s".to_string()),
    ])
}

fn seed_documents() -> Vec<Document> {
    read_documents(&root().join("fixtures/seed-manifests")).expect("seed manifests read")
}

/// Every message about one document after converting and validating it with the others.
fn messages(docs: Vec<Document>, index: usize) -> Vec<(String, String)> {
    let items = convert_documents(docs, &ConvertOptions::default());
    let item = &items[index];
    let mut out = Vec::new();
    if let Outcome::Failed(e) = &item.outcome {
        out.push((e.path.clone(), e.reason.clone()));
    }
    if let Some(report) = item.validate() {
        out.extend(report.errors.into_iter().map(|e| (e.path, e.reason)));
    }
    out
}

proptest! {
    #![proptest_config(config(2000))]

    #[test]
    fn quantities(
        name in prop_oneof![Just("cpu"), Just("memory"), Just("pods"), Just("nvidia.com/gpu")],
        text in prop_oneof![
            "[+-]?[0-9]{0,25}(\\.[0-9]{0,25})?([eE][+-]?[0-9]{0,4}|[numkMGTPE]|[KMGTPE]i)?",
            "\\PC{0,30}",
        ],
    ) {
        if let Err(e) = parse_resource(name, &text) {
            prop_assert!(!e.to_string().is_empty());
        }
    }

    /// The CRD form (digits and s, m, h) is read as Go reads it, with the same bound.
    #[test]
    fn durations(text in prop_oneof!["([0-9]{1,22}(s|m|h)){1,3}", "[0-9smh.]{0,12}", "\\PC{0,16}"]) {
        let ours = read_duration(&text);
        let go = parse_go_duration(&text);
        if let Ok(d) = &ours {
            prop_assert!(d.as_nanos() <= i64::MAX as u128);
            prop_assert_eq!(Some(*d), go, "{}", text);
        }
        if let Err(DurationError::TooLong(_)) = &ours {
            prop_assert_eq!(go, None, "{}", text);
        }
        if let Some(d) = go {
            prop_assert!(d.as_nanos() <= i64::MAX as u128);
        }
    }

    #[test]
    fn label_selectors(
        labels in prop::option::of(prop::collection::btree_map("\\PC{0,10}", "\\PC{0,10}", 0..3)),
        exprs in prop::collection::vec(
            ("\\PC{0,10}", prop_oneof![Just("In"), Just("NotIn"), Just("Exists"), Just("DoesNotExist"), Just("Gt"), Just("")],
             prop::option::of(prop::collection::vec("\\PC{0,6}", 0..3))),
            0..4,
        ),
    ) {
        let s = meta::LabelSelector {
            match_labels: labels,
            match_expressions: Some(exprs.into_iter().map(|(key, op, values)| meta::LabelSelectorRequirement {
                key,
                operator: op.to_string(),
                values,
            }).collect()),
        };
        let at = Path::root("spec").field("selector");
        if let Err(e) = label_selector(&s, &at) {
            prop_assert!(e.path.starts_with("spec.selector.matchExpressions["), "{}", e);
        }
    }

    #[test]
    fn documents(text in "\\PC{0,120}|([a-z]{1,4}: (\\[|\\{|'|\"|-|&|\\*|!)?[a-z0-9]{0,4}\n){1,6}") {
        if let Err(e) = parse_documents("in.yaml", &text) {
            let m = e.to_string();
            prop_assert!(m.starts_with("in.yaml["), "{}", m);
        }
    }
}

proptest! {
    #![proptest_config(config(600))]

    /// A seed manifest with one value changed or removed: converting and validating it never
    /// panics, and an error about a change inside `spec` names a field.
    #[test]
    fn manifests(
        doc in 0..12usize,
        pick in any::<usize>(),
        with in any_json(),
        remove in prop::bool::weighted(0.2),
    ) {
        let mut docs = seed_documents();
        let index = doc % docs.len();
        let (value, at) = mutate(&docs[index].value, pick, with, remove);
        docs[index].value = value;
        for (path, reason) in messages(docs, index) {
            prop_assert!(!reason.is_empty());
            if at.starts_with("/spec/") {
                prop_assert!(!path.is_empty(), "no path for {:?} after changing {}", reason, at);
            }
        }
    }

    /// The interchange sample with one value changed: read or refused with the field's path.
    #[test]
    fn interchange(pick in any::<usize>(), with in any_json(), remove in prop::bool::weighted(0.2)) {
        let mut sample: Value = serde_json::from_str(INTERCHANGE).unwrap();
        let (value, _) = mutate(&sample.take(), pick, with, remove);
        match read_input("in.json", &value.to_string()) {
            Ok(_) | Err(InterchangeError::NoInstanceTypes { .. }) => {}
            Err(InterchangeError::Field { error, .. }) => {
                prop_assert!(!error.path.is_empty(), "no path: {}", error);
            }
            Err(InterchangeError::Workload(e)) => prop_assert!(!e.to_string().is_empty()),
            Err(e @ InterchangeError::Json { .. }) => prop_assert!(false, "{}", e),
        }
    }
}

/// A small interchange input: two instance types, pods with spreads and affinities, a node.
const INTERCHANGE: &str = r#"{
  "instanceTypes": [
    {"name": "m.large", "cpu": 1.9, "memoryMiB": 7000, "pods": 29,
     "offerings": [{"zone": "z1", "capacityType": "on-demand", "price": 0.1, "available": true},
                   {"zone": "z2", "capacityType": "spot", "price": 0.03}]},
    {"name": "c.xlarge", "cpu": 3.9, "memoryMiB": 7000,
     "offerings": [{"zone": "z1", "capacityType": "on-demand", "price": 0.17}]}
  ],
  "nodePool": {"metadata": {"name": "default"}, "spec": {"weight": 10, "limits": {"cpu": "100"},
    "template": {"spec": {"requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"], "minValues": 1}],
      "taints": [{"key": "a", "value": "b", "effect": "NoSchedule"}]}}}},
  "pods": [
    {"metadata": {"name": "p1", "namespace": "default", "labels": {"app": "a"}},
     "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}],
       "tolerations": [{"key": "a", "operator": "Equal", "value": "b", "effect": "NoSchedule"}],
       "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
         "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "a"}}}],
       "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
         {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["a"]}]}}]}}}}
  ],
  "nodes": [
    {"metadata": {"name": "n1", "labels": {"topology.kubernetes.io/zone": "z1"}},
     "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"}, "capacity": {"cpu": "2", "memory": "4Gi", "pods": "10"}}}
  ]
}"#;
