//! Scenarios the simulator could not finish in bounded memory and time are refused before the
//! run, each with the limit and the field that crossed it (issue 32's cases: a billion
//! replicas, a Deployment near i64::MAX, `until: 10000h` and `2562047h`, `/dev/zero`).

use std::collections::BTreeMap;

use nodewright_sim::scenario::{FileSource, ScenarioError, parse_scenario};

const HEAD: &str = "manifests:
  - inline:
      apiVersion: karpenter.sh/v1
      kind: NodePool
      metadata: {name: default}
      spec:
        template:
          spec:
            requirements: []
            nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  - inline:
      apiVersion: karpenter.k8s.aws/v1
      kind: EC2NodeClass
      metadata: {name: default}
      spec:
        role: r
        amiSelectorTerms: [{alias: al2023@latest}]
        subnetSelectorTerms: [{tags: {a: b}}]
        securityGroupSelectorTerms: [{tags: {a: b}}]
";

fn deployment(name: &str, replicas: &str) -> String {
    format!(
        "  - inline:
      apiVersion: apps/v1
      kind: Deployment
      metadata: {{name: {name}}}
      spec:
        replicas: {replicas}
        selector: {{matchLabels: {{app: {name}}}}}
        template:
          metadata: {{labels: {{app: {name}}}}}
          spec: {{containers: [{{name: c, image: i, resources: {{requests: {{cpu: 100m}}}}}}]}}
"
    )
}

/// The error loading `text` gives (parsing, then turning it into the engine's input).
fn refusal(text: &str) -> String {
    let files: BTreeMap<&'static str, &'static str> = BTreeMap::new();
    let scenario = match parse_scenario("s.yaml", text, &files) {
        Ok(s) => s,
        Err(e) => return e.to_string(),
    };
    let catalog = nodewright_aws_model::catalog::embedded().unwrap();
    let err: ScenarioError =
        nodewright_sim::load::engine_input(&scenario, &catalog).expect_err("refused");
    err.to_string()
}

const TOO_MANY: &str = "is more than the simulator runs: at most 150000 pods at once (Kubernetes' tested maximum for a cluster)";

#[test]
fn replica_counts_past_the_pod_limit_are_refused() {
    let text = format!("{HEAD}{}", deployment("big", "1000000000"));
    assert_eq!(
        refusal(&text),
        format!(
            "s.yaml: manifests: s.yaml:manifests[2].inline[0] Deployment/big: spec.replicas: 1000000000 {TOO_MANY}"
        )
    );
    let text = format!("{HEAD}{}", deployment("huge", "9223372036854775807"));
    assert!(refusal(&text).ends_with(&format!("spec.replicas: 9223372036854775807 {TOO_MANY}")));
    let text = format!("{HEAD}{}", deployment("typo", "\"3\""));
    assert!(
        refusal(&text).ends_with("spec.replicas: expected a non-negative integer, found \"3\""),
        "{}",
        refusal(&text)
    );
    let text = format!(
        "{HEAD}{}steps:\n  - {{ at: 1m, scale: web, replicas: 1000000000 }}\n",
        deployment("web", "1")
    );
    assert_eq!(
        refusal(&text),
        format!("s.yaml: steps[0].replicas: 1000000000 {TOO_MANY}")
    );
    let text = format!(
        "{HEAD}{}steps:\n  - {{ at: 1m, scale: web, replicas: 9223372036854775807 }}\n",
        deployment("web", "1")
    );
    assert_eq!(
        refusal(&text),
        format!("s.yaml: steps[0].replicas: 9223372036854775807 {TOO_MANY}")
    );
}

#[test]
fn pods_wanted_at_once_past_the_limit_are_refused() {
    let text = format!(
        "{HEAD}{}{}steps:\n  - {{ at: 1m, scale: b, replicas: 70001 }}\n",
        deployment("a", "80000"),
        deployment("b", "1")
    );
    assert_eq!(
        refusal(&text),
        "s.yaml: steps[0]: the Deployments, StatefulSets, Jobs and Pods applied by now want 150001 pods at once, more than the simulator runs: at most 150000 (Kubernetes' tested maximum for a cluster)"
    );
    // At the limit, and scaled down before the next one grows: accepted.
    let text = format!(
        "{HEAD}{}{}steps:\n  - {{ at: 1m, scale: a, replicas: 0 }}\n  - {{ at: 2m, scale: b, replicas: 150000 }}\n",
        deployment("a", "150000"),
        deployment("b", "0")
    );
    let files: BTreeMap<&'static str, &'static str> = BTreeMap::new();
    let scenario = parse_scenario("s.yaml", &text, &files).unwrap();
    let catalog = nodewright_aws_model::catalog::embedded().unwrap();
    assert!(nodewright_sim::load::engine_input(&scenario, &catalog).is_ok());
}

#[test]
fn runs_past_a_month_are_refused() {
    for until in ["10000h", "2562047h"] {
        let e = refusal(&format!("until: {until}\n"));
        assert!(
            e.starts_with("s.yaml: until: ")
                && e.ends_with(
                    "is past the longest run the simulator does: 744h (31 days) of virtual time"
                ),
            "{e}"
        );
    }
    assert_eq!(
        refusal("steps:\n  - { advance: 744h }\n  - { advance: 1s }\n"),
        "s.yaml: steps[1].advance: 744:00:01 is past the longest run the simulator does: 744h (31 days) of virtual time"
    );
    assert!(refusal("steps:\n  - { at: 2562047h, advance: 0s }\n").contains("steps[0].at"));
    assert!(parse_scenario("s.yaml", "until: 744h\n", &BTreeMap::<&str, &str>::new()).is_ok());
}

#[test]
fn files_are_read_up_to_a_limit() {
    let source = FileSource {
        base: std::path::PathBuf::from("/"),
    };
    let e = parse_scenario("s.yaml", "manifests:\n  - file: /dev/zero\n", &source).unwrap_err();
    assert_eq!(
        e.to_string(),
        "s.yaml: manifests[0].file: /dev/zero: larger than 128 MiB, the most nodewright reads from one input"
    );
}
