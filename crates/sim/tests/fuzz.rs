//! Fuzzing scenarios: a scenario with NodePools, node classes, workloads of every kind, a
//! PodDisruptionBudget and steps of every action has one value replaced by anything JSON can
//! hold (or removed), and is read and loaded as `nodewright simulate` does. Nothing panics, and
//! every refusal names the field, or the step and object it is about. Part of `scripts/test`;
//! raise `NODEWRIGHT_FUZZ_CASES` to search longer.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use nodewright_sim::scenario::parse_scenario;
use nodewright_testkit::fuzz::{self, config, mutate};
use proptest::prelude::*;
use serde_json::Value;

/// Any JSON value, with the durations and names a scenario's readers parse.
fn any_json() -> impl Strategy<Value = Value> {
    fuzz::any_json(prop_oneof![
        "[0-9]{1,22}(ns|ms|s|m|h)",
        Just("2562047h".to_string()),
        Just("default/web".to_string()),
    ])
}

/// A small catalog file, so a case costs the reading and not the embedded catalog's types.
const TYPES: &str = r#"{"instanceTypes": [
  {"name": "c5.large", "cpu": 1.9, "memoryMiB": 3800,
   "offerings": [{"zone": "us-east-1a", "capacityType": "spot", "price": 0.03},
                 {"zone": "us-east-1b", "capacityType": "on-demand", "price": 0.085}]}
]}"#;

/// Loaded once: reading the embedded catalog costs more than a case.
static CATALOG: LazyLock<nodewright_aws_model::Catalog> =
    LazyLock::new(|| nodewright_aws_model::catalog::embedded().unwrap());

const SCENARIO: &str = r#"
name: fuzz
seed: 3
until: 30m
cloud:
  instanceTypes: types.json
  zones: [us-east-1a, us-east-1b]
  launchDelay: 3s
  registrationDelay: 35s
  terminationDelay: 30s
  apiErrorRate: 0.1
  spotInterruptionsPerHour: 1
  insufficientCapacity: [{ instanceType: c5.large, zone: us-east-1a, capacityType: spot }]
manifests:
  - inline:
      apiVersion: karpenter.sh/v1beta1
      kind: NodePool
      metadata: { name: default }
      spec:
        template:
          spec:
            nodeClassRef: { name: default }
            requirements: [{ key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m] }]
            kubelet: { maxPods: 50 }
        disruption: { consolidationPolicy: WhenUnderutilized, expireAfter: 720h }
        limits: { cpu: "100" }
  - inline:
      apiVersion: karpenter.k8s.aws/v1beta1
      kind: EC2NodeClass
      metadata: { name: default }
      spec:
        amiFamily: AL2
        role: r
        subnetSelectorTerms: [{ tags: { a: b } }]
        securityGroupSelectorTerms: [{ tags: { a: b } }]
  - inline:
      apiVersion: apps/v1
      kind: Deployment
      metadata: { name: web }
      spec:
        replicas: 3
        selector: { matchLabels: { app: web } }
        template:
          metadata: { labels: { app: web } }
          spec:
            containers: [{ name: c, image: i, resources: { requests: { cpu: 500m, memory: 1Gi } } }]
            topologySpreadConstraints:
              - { maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: { matchLabels: { app: web } } }
  - inline:
      apiVersion: apps/v1
      kind: StatefulSet
      metadata: { name: db }
      spec:
        replicas: 2
        selector: { matchLabels: { app: db } }
        template:
          metadata: { labels: { app: db } }
          spec: { containers: [{ name: c, image: i, resources: { requests: { cpu: "1" } } }] }
        volumeClaimTemplates: [{ metadata: { name: data }, spec: { storageClassName: gp3 } }]
  - inline:
      apiVersion: storage.k8s.io/v1
      kind: StorageClass
      metadata: { name: gp3 }
      provisioner: ebs.csi.aws.com
      volumeBindingMode: WaitForFirstConsumer
  - inline:
      apiVersion: batch/v1
      kind: Job
      metadata: { name: batch, annotations: { sim.nodewright.io/run-for: 5m } }
      spec:
        parallelism: 2
        completions: 4
        template:
          spec: { restartPolicy: Never, containers: [{ name: c, image: i, resources: { requests: { cpu: 250m } } }] }
  - inline:
      apiVersion: policy/v1
      kind: PodDisruptionBudget
      metadata: { name: web }
      spec: { maxUnavailable: 1, selector: { matchLabels: { app: web } } }
steps:
  - { at: 1m, scale: web, replicas: 6 }
  - { advance: 5m }
  - { at: 10m, interrupt: spot, zone: us-east-1a, count: 1 }
  - { at: 12m, delete: Deployment/web }
  - { at: 15m, apply: { inline: { apiVersion: v1, kind: Pod, metadata: { name: solo }, spec: { containers: [{ name: c, image: i }] } } } }
"#;

proptest! {
    #![proptest_config(config(400))]

    #[test]
    fn scenarios_with_one_value_changed(
        pick in any::<usize>(),
        with in any_json(),
        remove in prop::bool::weighted(0.2),
    ) {
        let base: Value = serde_yaml::from_str(SCENARIO).unwrap();
        let (value, at) = mutate(&base, pick, with, remove);
        let text = serde_yaml::to_string(&value).unwrap();
        let files = BTreeMap::from([("types.json", TYPES)]);
        let refused = match parse_scenario("s.yaml", &text, &files) {
            Err(e) => Some(e),
            Ok(scenario) => {
                nodewright_sim::load::engine_input(&scenario, &CATALOG).err()
            }
        };
        if let Some(e) = refused {
            prop_assert!(!e.reason.is_empty());
            prop_assert!(
                at.is_empty() || !e.path.is_empty(),
                "{} after changing {}", e, at
            );
        }
    }
}
