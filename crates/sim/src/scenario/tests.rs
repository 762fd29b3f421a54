use std::collections::BTreeMap;
use std::time::Duration;

use nodewright_core::model::CapacityType;

use super::*;

const NODEPOOL: &str =
    "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: default\nspec: {}\n";

/// A catalog file of two instance types in the interchange format.
const TYPES: &str = r#"{"instanceTypes": [
  {"name": "small-2", "cpu": 1.9, "memoryMiB": 3800,
   "offerings": [{"zone": "zone-a", "capacityType": "on-demand", "price": 0.1}]},
  {"name": "large-8", "cpu": 7.9, "memoryMiB": 15800,
   "offerings": [{"zone": "zone-b", "capacityType": "spot", "price": 0.12}]}
]}"#;
/// One whose offering's price is not a number.
const BAD_TYPES: &str = r#"{"instanceTypes": [
  {"name": "small-2", "cpu": 1.9, "memoryMiB": 3800,
   "offerings": [{"zone": "zone-a", "capacityType": "on-demand", "price": "cheap"}]}
]}"#;

fn files() -> BTreeMap<&'static str, &'static str> {
    BTreeMap::from([
        ("pool.yaml", NODEPOOL),
        ("types.json", TYPES),
        ("bad-types.json", BAD_TYPES),
        ("types.yaml", "instanceTypes: []\n"),
    ])
}

fn parse(text: &str) -> Result<Scenario, ScenarioError> {
    parse_scenario("demo.yaml", text, &files())
}

fn err(text: &str) -> String {
    parse(text).unwrap_err().to_string()
}

#[test]
fn a_full_scenario_parses() {
    let s = parse(
        r#"
name: demo
seed: 7
until: 20m
cloud:
  zones: [us-east-1a, us-east-1b]
  launchDelay: 2s
  registrationDelay: 40s
  terminationDelay: 2m
  apiErrorRate: 0.1
  spotInterruptionsPerHour: 0.5
  insufficientCapacity:
    - { instanceType: c5.large, capacityType: spot }
manifests:
  - file: pool.yaml
  - inline:
      apiVersion: apps/v1
      kind: Deployment
      metadata: { name: inflate, namespace: inflate }
steps:
  - { at: 10s, scale: inflate/inflate, replicas: 10 }
  - { advance: 5m }
  - { scale: inflate/inflate, replicas: 5 }
  - { at: 12m, interrupt: spot, zone: us-east-1a, count: 2 }
  - { at: 13m, interrupt: default-00001 }
  - { at: 14m, delete: Deployment/inflate/inflate }
  - { apply: { file: pool.yaml } }
"#,
    )
    .unwrap();
    assert_eq!(s.name, "demo");
    assert_eq!(s.seed, 7);
    assert_eq!(s.until, Some(Duration::from_secs(1200)));
    assert_eq!(s.cloud.zones, vec!["us-east-1a", "us-east-1b"]);
    assert_eq!(s.cloud.launch_delay, Duration::from_secs(2));
    assert_eq!(s.cloud.registration_delay, Duration::from_secs(40));
    assert_eq!(s.cloud.fleet.termination_delay, Duration::from_secs(120));
    assert_eq!(
        s.cloud.fleet.insufficient_capacity[0].capacity_type,
        Some(CapacityType::Spot)
    );
    assert_eq!(s.manifests.len(), 2);
    assert_eq!(s.manifests[0].kind(), "NodePool");
    assert_eq!(s.manifests[1].name(), "inflate");
    let at: Vec<u64> = s.steps.iter().map(|s| s.at.as_secs()).collect();
    assert_eq!(at, vec![10, 310, 310, 720, 780, 840, 840]);
    assert!(matches!(
        &s.steps[0].action,
        Action::Scale { namespace, name, replicas: 10 } if namespace == "inflate" && name == "inflate"
    ));
    assert!(matches!(
        &s.steps[3].action,
        Action::Interrupt(InterruptTarget::Matching { capacity_type: Some(CapacityType::Spot), zone: Some(z), count: 2, .. }) if z == "us-east-1a"
    ));
    assert!(
        matches!(&s.steps[4].action, Action::Interrupt(InterruptTarget::Node(n)) if n == "default-00001")
    );
    assert!(matches!(
        &s.steps[5].action,
        Action::Delete(ObjectRef { kind, namespace: Some(ns), name }) if kind == "Deployment" && ns == "inflate" && name == "inflate"
    ));
    assert!(matches!(&s.steps[6].action, Action::Apply(d) if d.len() == 1));
}

#[test]
fn cloud_delays_that_are_negative_or_absurd_name_the_field() {
    assert_eq!(
        err("cloud: { terminationDelay: -30s }\n"),
        "demo.yaml: cloud.terminationDelay: \"-30s\" is negative: a delay is 0s or more"
    );
    assert_eq!(
        err("cloud: { terminationDelay: -5 }\n"),
        "demo.yaml: cloud.terminationDelay: -5 is negative: a delay is 0s or more"
    );
    assert_eq!(
        err("cloud: { terminationDelay: 25h }\n"),
        "demo.yaml: cloud.terminationDelay: \"25h\" is longer than the simulated cloud takes: at most 24h"
    );
    assert_eq!(
        err("cloud: { terminationDelay: soon }\n"),
        "demo.yaml: cloud.terminationDelay: \"soon\" is not a duration (use forms like 500ms, 30s, 5m, 1h30m)"
    );
    // The launch and registration delays are held to the same rules.
    assert_eq!(
        err("cloud: { launchDelay: -1s }\n"),
        "demo.yaml: cloud.launchDelay: \"-1s\" is negative: a delay is 0s or more"
    );
    assert_eq!(
        err("cloud: { registrationDelay: 1000h }\n"),
        "demo.yaml: cloud.registrationDelay: \"1000h\" is longer than the simulated cloud takes: at most 24h"
    );
    let s = parse("cloud: { terminationDelay: 24h }\n").unwrap();
    assert_eq!(
        s.cloud.fleet.termination_delay,
        Duration::from_secs(24 * 3600)
    );
}

#[test]
fn errors_name_the_file_the_step_and_the_field() {
    assert_eq!(
        err("steps:\n  - { at: 1m, scale: inflate, replicas: -1 }\n"),
        "demo.yaml: steps[0].replicas: expected a non-negative integer, found -1"
    );
    assert_eq!(
        err("steps:\n  - { at: 1m, scale: inflate }\n"),
        "demo.yaml: steps[0].replicas: required with scale"
    );
    assert_eq!(
        err("steps:\n  - { at: soon, advance: 1m }\n"),
        "demo.yaml: steps[0].at: \"soon\" is not a duration (use forms like 500ms, 30s, 5m, 1h30m)"
    );
    assert_eq!(
        err("steps:\n  - { at: 5m, advance: 1m }\n"),
        "demo.yaml: steps[0].at: advance is relative to the previous step; do not combine it with at"
    );
    assert_eq!(
        err(
            "steps:\n  - { at: 5m, scale: a, replicas: 1 }\n  - { at: 1m, scale: a, replicas: 2 }\n"
        ),
        "demo.yaml: steps[1].at: steps must be in time order: 01:00 is before the previous step at 05:00"
    );
    assert_eq!(
        err("steps:\n  - { at: 1m }\n"),
        "demo.yaml: steps[0]: a step needs one action: apply, delete, scale, interrupt, advance"
    );
    assert_eq!(
        err("steps:\n  - { at: 1m, scale: a, replicas: 1, delete: Pod/x }\n"),
        "demo.yaml: steps[0]: a step has exactly one action, found delete and scale"
    );
    assert_eq!(
        err("steps:\n  - { at: 1m, scale: a, replica: 1 }\n"),
        "demo.yaml: steps[0].replica: unknown field (expected one of: at, scale, replicas)"
    );
    assert_eq!(
        err("steps:\n  - { delete: Service/x }\n"),
        "demo.yaml: steps[0].delete: kind \"Service\" is not supported (supported: NodePool, EC2NodeClass, Provisioner, AWSNodeTemplate, Deployment, StatefulSet, Job, Pod, DaemonSet, PodDisruptionBudget, StorageClass)"
    );
    assert_eq!(
        err("steps:\n  - { interrupt: node-1, zone: us-east-1a }\n"),
        "demo.yaml: steps[0].zone: only with interrupt: spot or interrupt: any"
    );
    assert_eq!(
        err("until: 1m\nsteps:\n  - { at: 2m, advance: 0s }\n"),
        "demo.yaml: steps[0].at: advance is relative to the previous step; do not combine it with at"
    );
    assert_eq!(
        err("until: 1m\nsteps:\n  - { at: 2m, scale: a, replicas: 1 }\n"),
        "demo.yaml: steps[0]: step at 02:00 is after the end of the run (until: 01:00)"
    );
}

#[test]
fn cloud_and_manifest_errors_point_at_the_field() {
    assert_eq!(
        err("cloud:\n  apiErrorRate: 2\n"),
        "demo.yaml: cloud.apiErrorRate: expected a number from 0 to 1, found 2"
    );
    assert_eq!(
        err("cloud:\n  insufficientCapacity:\n    - { capacityType: cheap }\n"),
        "demo.yaml: cloud.insufficientCapacity[0].capacityType: \"cheap\" is not one of on-demand, spot, reserved"
    );
    assert_eq!(
        err("cloud:\n  zones: []\n"),
        "demo.yaml: cloud.zones: at least one zone is needed"
    );
    assert_eq!(
        err("manifests:\n  - file: missing.yaml\n"),
        "demo.yaml: manifests[0].file: no embedded file named missing.yaml"
    );
    assert_eq!(
        err("manifests:\n  - inline: { apiVersion: v1, kind: Service, metadata: { name: s } }\n"),
        "demo.yaml: manifests[0]: demo.yaml:manifests[0].inline[0] Service/s: kind \"Service\" is not supported in scenarios (supported: NodePool, EC2NodeClass, Provisioner, AWSNodeTemplate, Deployment, StatefulSet, Job, Pod, DaemonSet, PodDisruptionBudget, StorageClass)"
    );
    assert_eq!(
        err("manifests:\n  - inline: { kind: Pod, metadata: {} }\n"),
        "demo.yaml: manifests[0]: demo.yaml:manifests[0].inline[0] Pod/<no name>: metadata.name is required"
    );
    assert_eq!(
        err("manifests:\n  - { file: pool.yaml, inline: {} }\n"),
        "demo.yaml: manifests[0]: give either file or inline, not both"
    );
    assert_eq!(
        err("colud: {}\n"),
        "demo.yaml: colud: unknown field (expected one of: name, description, seed, until, cloud, manifests, steps)"
    );
    assert!(err("steps: [").starts_with("demo.yaml: not valid YAML: "));
    assert_eq!(err("- 1\n"), "demo.yaml: expected a mapping, found a list");
}

#[test]
fn a_catalog_file_gives_the_cloud_its_instance_types() {
    let s = parse("cloud:\n  instanceTypes: types.json\n").unwrap();
    let file = s.cloud.instance_types.expect("the catalog file is read");
    assert_eq!(file.name, "types.json");
    let names: Vec<&str> = file.types.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["small-2", "large-8"]);
    let spot = &file.types[1].offerings[0];
    assert_eq!(
        (spot.zone.as_str(), spot.capacity_type, spot.price),
        ("zone-b", CapacityType::Spot, 0.12)
    );
    assert_eq!(
        file.types[0]
            .allocatable()
            .get(nodewright_core::resources::CPU),
        1900
    );
}

#[test]
fn catalog_file_errors_name_the_scenario_field_and_the_catalog_field() {
    assert_eq!(
        err("cloud:\n  instanceTypes: bad-types.json\n"),
        "demo.yaml: cloud.instanceTypes: bad-types.json: instanceTypes[0].offerings[0].price: expected a non-negative number"
    );
    assert_eq!(
        err("cloud:\n  instanceTypes: missing.json\n"),
        "demo.yaml: cloud.instanceTypes: no embedded file named missing.json"
    );
    assert_eq!(
        err("cloud:\n  instanceTypes: [types.json]\n"),
        "demo.yaml: cloud.instanceTypes: expected the name of a catalog file, found a list"
    );
    assert!(
        err("cloud:\n  instanceTypes: types.yaml\n")
            .starts_with("demo.yaml: cloud.instanceTypes: types.yaml: not valid JSON: "),
        "{}",
        err("cloud:\n  instanceTypes: types.yaml\n")
    );
}

#[test]
fn defaults_apply_when_fields_are_absent() {
    let s = parse("{}").unwrap();
    assert_eq!(s.name, "demo");
    assert_eq!(s.seed, 1);
    assert_eq!(s.until, None);
    assert_eq!(s.cloud.launch_delay, Duration::from_secs(3));
    assert_eq!(s.cloud.registration_delay, Duration::from_secs(35));
    assert_eq!(s.cloud.fleet.termination_delay, Duration::from_secs(30));
    assert_eq!(s.cloud.zones.len(), 3);
    assert_eq!(s.cloud.instance_types, None, "the embedded catalog");
    assert!(s.steps.is_empty());
}
