//! A scenario whose cloud offers the instance types of a catalog file (the interchange format)
//! instead of the embedded AWS catalog's.

use std::collections::BTreeMap;

use nodewright_sim::RunReport;
use nodewright_sim::scenario::parse_scenario;

/// Two made-up instance types: the larger one is cheaper as spot than the smaller on-demand.
const TYPES: &str = r#"{"instanceTypes": [
  {"name": "small-2", "cpu": 1.9, "memoryMiB": 3800, "pods": 20,
   "offerings": [{"zone": "zone-a", "capacityType": "on-demand", "price": 0.10},
                 {"zone": "zone-b", "capacityType": "on-demand", "price": 0.11}]},
  {"name": "large-8", "cpu": 7.9, "memoryMiB": 15800, "pods": 60,
   "offerings": [{"zone": "zone-a", "capacityType": "on-demand", "price": 0.30},
                 {"zone": "zone-b", "capacityType": "spot", "price": 0.12}]}
]}"#;

/// `CLOUD` is replaced by the scenario's `cloud` section.
const SCENARIO: &str = r#"
name: file-catalog
until: 10m
cloud: CLOUD
manifests:
  - inline:
      apiVersion: karpenter.k8s.aws/v1
      kind: EC2NodeClass
      metadata: { name: default }
      spec:
        amiSelectorTerms: [{ alias: al2023@latest }]
        role: node-role
        subnetSelectorTerms: [{ tags: { demo: "true" } }]
        securityGroupSelectorTerms: [{ tags: { demo: "true" } }]
  - inline:
      apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: { name: default }
      spec:
        template:
          spec:
            nodeClassRef: { group: karpenter.k8s.aws, kind: EC2NodeClass, name: default }
            requirements:
              - { key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand] }
  - inline:
      apiVersion: apps/v1
      kind: Deployment
      metadata: { name: web, namespace: default }
      spec:
        replicas: 6
        selector: { matchLabels: { app: web } }
        template:
          metadata: { labels: { app: web } }
          spec:
            containers:
              - name: app
                image: pause
                resources: { requests: { cpu: "1", memory: 1Gi } }
"#;

fn run(cloud: &str) -> RunReport {
    let files = BTreeMap::from([("types.json", TYPES)]);
    let text = SCENARIO.replace("CLOUD", cloud);
    let s = parse_scenario("file-catalog.yaml", &text, &files).unwrap_or_else(|e| panic!("{e}"));
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
