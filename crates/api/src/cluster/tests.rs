use serde_json::json;

use super::*;
use crate::document::parse_documents;

const NOW: Timestamp = Timestamp(1_767_312_000_000);

fn read(yaml: &str) -> Result<Snapshot, ClusterError> {
    read_cluster(parse_documents("c.yaml", yaml).unwrap(), vec![], NOW)
}

#[test]
fn nodeclaim_status_becomes_lifecycle_fields() {
    let s = read(
        r#"
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: default-x
  labels: {karpenter.sh/nodepool: default}
  creationTimestamp: "2026-01-01T00:00:00Z"
spec:
  requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}]
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  expireAfter: 24h
  terminationGracePeriod: 1h
status:
  nodeName: n1
  providerID: aws:///us-east-1a/i-1
  allocatable: {cpu: 1930m}
  lastPodEventTime: "2026-01-01T02:00:00Z"
  conditions:
  - {type: Initialized, status: "True", lastTransitionTime: "2026-01-01T00:01:00Z"}
  - {type: Drifted, status: "True", reason: NodePoolDrifted, lastTransitionTime: "2026-01-01T03:00:00Z"}
  - {type: Launched, status: "True"}
"#,
    )
    .unwrap();
    let c = &s.node_claims[0];
    assert_eq!(c.nodepool, "default");
    assert_eq!(c.node_name.as_deref(), Some("n1"));
    assert!(c.initialized && c.launched && !c.registered);
    assert_eq!(
        c.initialized_at,
        Some(parse_time("2026-01-01T00:01:00Z").unwrap())
    );
    assert_eq!(c.drifted.as_deref(), Some("NodePoolDrifted"));
    assert_eq!(
        c.drifted_at,
        Some(parse_time("2026-01-01T03:00:00Z").unwrap())
    );
    assert_eq!(
        c.last_pod_event_time,
        Some(parse_time("2026-01-01T02:00:00Z").unwrap())
    );
    assert_eq!(c.expire_after, Some(std::time::Duration::from_secs(86_400)));
    assert_eq!(c.allocatable.get("cpu"), 1930);
    assert_eq!(s.now, NOW);
}

#[test]
fn nodeclaim_without_a_nodepool_is_an_error_with_a_path() {
    let err = read(
        r#"
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {name: orphan}
spec:
  requirements: []
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
"#,
    )
    .unwrap_err();
    assert_eq!(err.object, "c.yaml[0] NodeClaim/orphan");
    assert!(
        err.to_string()
            .contains("metadata.labels[karpenter.sh/nodepool]"),
        "{err}"
    );
}

#[test]
fn older_nodepools_are_converted_and_disruption_settings_kept() {
    let s = read(
        r#"
apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata: {name: old}
spec:
  template:
    spec:
      nodeClassRef: {name: default}
      requirements: []
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 5m
"#,
    )
    .unwrap();
    assert_eq!(s.nodepools[0].name, "old");
    assert_eq!(
        s.nodepools[0].disruption.consolidate_after,
        Some(std::time::Duration::from_secs(300))
    );
}

#[test]
fn pdb_without_status_is_computed_from_ready_pods() {
    let pod = |name: &str, ready: &str| {
        format!(
            r#"
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, labels: {{app: db}}, ownerReferences: [{{apiVersion: apps/v1, kind: StatefulSet, name: db, uid: u, controller: true}}]}}
spec: {{nodeName: n1, containers: [{{name: c, image: i}}]}}
status: {{phase: Running, conditions: [{{type: Ready, status: "{ready}"}}]}}
"#
        )
    };
    let docs = format!(
        "{}{}{}---\napiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {{name: db}}\nspec: {{minAvailable: \"50%\", selector: {{matchLabels: {{app: db}}}}}}\n---\napiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {{name: none, namespace: other}}\nspec: {{maxUnavailable: 0}}\n",
        pod("a", "True"),
        pod("b", "True"),
        pod("c", "False")
    );
    let s = read(&docs).unwrap();
    // Three pods, two healthy, at least two (50% rounded up) must stay: none may go.
    assert_eq!(s.pdbs[0].disruptions_allowed, 0);
    assert!(!s.pdbs[0].fully_blocking);
    assert!(s.pdbs[1].fully_blocking);
    assert_eq!(s.pdbs[1].namespace, "other");
}

#[test]
fn non_controller_owner_references_are_counted() {
    let s = read(
        r#"
apiVersion: v1
kind: Pod
metadata:
  name: p
  ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: cm, uid: u}]
spec: {nodeName: n1, containers: [{name: c, image: i}]}
"#,
    )
    .unwrap();
    assert!(s.pods[0].owner.is_none());
    assert_eq!(s.pods[0].other_owner_references, 1);
    assert!(!s.pods[0].is_ownerless());
}

#[test]
fn controllers_are_not_expanded_and_duplicates_are_refused() {
    let s = read(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 3, selector: {}, template: {spec: {containers: [{name: c, image: i}]}}}\n",
    )
    .unwrap();
    assert!(s.pods.is_empty());
    let node = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n";
    let err = read(&format!("{node}---\n{node}")).unwrap_err();
    assert_eq!(err.object, "Node/n1");
}

#[test]
fn interchange_arrays_become_named_documents() {
    let docs = interchange_documents(
        "in.json",
        &json!({"nodes": [{"metadata": {"name": "n1"}}], "pods": [], "instanceTypes": []}),
    );
    assert_eq!(docs.len(), 1);
    assert_eq!(docs[0].describe(), "in.json:nodes[0] Node/n1");
    assert_eq!(docs[0].api_version(), "v1");
}

#[test]
fn times_round_trip() {
    let t = parse_time("2026-01-02T00:00:00Z").unwrap();
    assert_eq!(t, NOW);
    assert_eq!(format_time(t), "2026-01-02T00:00:00Z");
    assert!(parse_time("soon").is_err());
}
