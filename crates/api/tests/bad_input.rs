//! Bad input as a hostile user writes it, each case from issue 32: the error names the field
//! and says why, and nothing that Karpenter (or the API server) would refuse passes.

use nodewright_api::convert::{ConvertOptions, Item, Outcome, convert_documents};
use nodewright_api::document::parse_documents;

fn items(yaml: &str) -> Vec<Item> {
    let docs = parse_documents("in.yaml", yaml).expect("parses");
    convert_documents(docs, &ConvertOptions::default())
}

/// Every message about `yaml`'s first document: its read error or its v1 form's errors.
fn errors(yaml: &str) -> Vec<String> {
    let item = items(yaml).remove(0);
    match &item.outcome {
        Outcome::Failed(e) => vec![e.to_string()],
        Outcome::NotKarpenter => vec!["not Karpenter".to_string()],
        _ => item
            .validate()
            .map(|r| r.errors.iter().map(ToString::to_string).collect())
            .unwrap_or_default(),
    }
}

const V1BETA1_POOL: &str = "apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata: {name: a}
spec:
  template:
    spec:
      nodeClassRef: {name: default}
      requirements: []
";

const V1_POOL: &str = "apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: a}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: []
";

#[test]
fn type_errors_name_their_field() {
    let provisioner = "apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata: {name: p}
spec:
  limits: eu-north-1c
  providerRef: {name: d}
";
    assert_eq!(
        errors(provisioner),
        [r#"spec.limits: invalid type: string "eu-north-1c", expected an object"#]
    );
    for version in ["v1", "v1beta1"] {
        let class = format!(
            "apiVersion: karpenter.k8s.aws/{version}
kind: EC2NodeClass
metadata: {{name: c}}
spec:
  amiFamily: AL2
  role: r
  amiSelectorTerms: {{id: ami-123}}
  subnetSelectorTerms: [{{tags: {{a: b}}}}]
  securityGroupSelectorTerms: [{{tags: {{a: b}}}}]
"
        );
        assert_eq!(
            errors(&class),
            ["spec.amiSelectorTerms: invalid type: map, expected a list"],
            "{version}"
        );
    }
    let deep = V1_POOL.replace(
        "requirements: []",
        "requirements: [{key: a, operator: In, values: 1}]",
    );
    assert_eq!(
        errors(&deep),
        ["spec.template.spec.requirements[0].values: invalid type: integer `1`, expected a list"]
    );
}

#[test]
fn a_misspelled_api_version_of_a_karpenter_kind_is_an_error() {
    let e = errors(&V1_POOL.replace("karpenter.sh/v1", "karpenter.sh"));
    assert_eq!(
        e,
        [
            r#"apiVersion: "karpenter.sh" is not an API version of NodePool; nodewright reads NodePool as karpenter.sh/v1 or karpenter.sh/v1beta1"#
        ]
    );
    let e = errors(&V1_POOL.replace("karpenter.sh/v1", "karpenter.sh/v2"));
    assert!(
        e[0].starts_with("apiVersion: \"karpenter.sh/v2\" is not"),
        "{e:?}"
    );
    let e = errors(&V1_POOL.replace("karpenter.sh/v1", "karpeter.sh/v1"));
    assert!(
        e[0].starts_with("apiVersion: \"karpeter.sh/v1\" is not"),
        "{e:?}"
    );
    let e = errors("apiVersion: karpenter.k8s.aws\nkind: Thing\nmetadata: {name: t}\n");
    assert!(e[0].starts_with("unsupported kind \"Thing\""), "{e:?}");
    assert_eq!(
        errors("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n"),
        ["not Karpenter"]
    );
}

#[test]
fn kubelet_values_a_conversion_moves_are_checked() {
    let pool = V1BETA1_POOL.replace(
        "requirements: []",
        "requirements: []\n      kubelet: {maxPods: \"abc\", podsPerCore: -1, imageGCHighThresholdPercent: 101}",
    );
    assert_eq!(
        errors(&pool),
        [
            "spec.template.spec.kubelet.maxPods: must be of type integer, got string",
            "spec.template.spec.kubelet.podsPerCore: must be greater than or equal to 0",
            "spec.template.spec.kubelet.imageGCHighThresholdPercent: must be less than or equal to 100",
        ]
    );
    let big = V1BETA1_POOL.replace(
        "requirements: []",
        "requirements: []\n      kubelet: {maxPods: 4294967296}",
    );
    assert_eq!(errors(&big).len(), 1, "{:?}", errors(&big));
    let grace = V1BETA1_POOL.replace(
        "requirements: []",
        "requirements: []\n      kubelet: {evictionSoft: {memory.available: 5%}, evictionSoftGracePeriod: {memory.available: 99999999999h}}",
    );
    assert_eq!(
        errors(&grace),
        [
            "spec.template.spec.kubelet.evictionSoftGracePeriod[memory.available]: invalid duration \"99999999999h\": not a non-negative Go duration (such as 1m30s) of at most 2562047h47m16.854775807s"
        ]
    );
    let provisioner = "apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata: {name: p}
spec:
  providerRef: {name: d}
  kubeletConfiguration: {maxPods: abc, containerRuntime: containerd}
";
    assert_eq!(
        errors(provisioner),
        ["spec.kubeletConfiguration.maxPods: must be of type integer, got string"]
    );
    let fine = V1BETA1_POOL.replace(
        "requirements: []",
        "requirements: []\n      kubelet: {maxPods: 110, evictionHard: {memory.available: 5%}}",
    );
    assert_eq!(errors(&fine), Vec::<String>::new());
}

#[test]
fn durations_are_bounded_as_karpenter_reads_them() {
    let too_long = "spec.template.spec.expireAfter: invalid duration \"99999999999999999999s\": longer than 2562047h47m16.854775807s, the most Go's time.Duration (which Karpenter reads it into) holds";
    let v1 = V1_POOL.replace(
        "requirements: []",
        "requirements: []\n      expireAfter: 99999999999999999999s",
    );
    assert_eq!(errors(&v1), [too_long]);
    let v1beta1 = format!("{V1BETA1_POOL}  disruption: {{expireAfter: 99999999999999999999s}}\n");
    assert_eq!(errors(&v1beta1), [too_long]);
    let longest = V1_POOL.replace(
        "requirements: []",
        "requirements: []\n      expireAfter: 2562047h47m16s\n      terminationGracePeriod: 2562047h47m17s",
    );
    assert_eq!(
        errors(&longest),
        [
            "spec.template.spec.terminationGracePeriod: invalid duration \"2562047h47m17s\": longer than 2562047h47m16.854775807s, the most Go's time.Duration (which Karpenter reads it into) holds"
        ]
    );
    let budget = format!(
        "{V1_POOL}  disruption:\n    consolidateAfter: 3000000h\n    budgets: [{{nodes: '1', schedule: '@daily', duration: 9999999999h}}]\n"
    );
    assert_eq!(
        errors(&budget)
            .iter()
            .map(|e| e.split(':').next().unwrap_or_default())
            .collect::<Vec<_>>(),
        [
            "spec.disruption.consolidateAfter",
            "spec.disruption.budgets[0].duration"
        ]
    );
}

#[test]
fn a_planned_nodepool_with_a_wrong_type_is_refused_at_the_field() {
    use nodewright_api::interchange::nodepool;
    use serde_json::json;
    let pool =
        |spec: serde_json::Value| nodepool(&json!({"metadata": {"name": "a"}, "spec": spec}));
    let e = pool(json!({"weight": "heavy"})).unwrap_err();
    assert_eq!(
        e.to_string(),
        r#"spec.weight: invalid type: string "heavy", expected i32"#
    );
    let e = pool(json!({"template": {"spec": {"requirements": [
        {"key": "a", "operator": "In", "values": ["x", 1]}]}}}))
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "spec.template.spec.requirements[0].values[1]: invalid type: integer `1`, expected a string"
    );
    let e = pool(json!({"template": {"metadata": {"labels": {"team": 7}}}})).unwrap_err();
    assert_eq!(
        e.to_string(),
        "spec.template.metadata.labels.team: invalid type: integer `7`, expected a string"
    );
    let e = pool(json!({"template": {"spec": {"requirements": [
        {"key": "a", "operator": "Exists", "minValues": -1}]}}}))
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "spec.template.spec.requirements[0].minValues: -1 is out of range"
    );
    assert!(pool(json!({"weight": 5})).is_ok());
}
