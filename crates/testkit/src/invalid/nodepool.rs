//! Invalid NodePools: one per validation rule, each the valid base with one thing broken.

use serde_json::{Value, json};

use super::{Case, req, taint};
use crate::json::set;
use crate::valid::nodepool as np;

const REQ: &str = "/spec/template/spec/requirements/0";

/// Every NodePool case.
pub fn nodepool_cases() -> Vec<Case> {
    let long_key = format!("example.com/{}", "a".repeat(320));
    let many_reqs: Vec<Value> = (0..101)
        .map(|i| req(&format!("example.com/k{i}"), "Exists", &[]))
        .collect();
    let many_labels: serde_json::Map<String, Value> = (0..101)
        .map(|i| (format!("example.com/l{i}"), json!("v")))
        .collect();
    let many_budgets: Vec<Value> = (0..51).map(|_| json!({"nodes": "1"})).collect();
    vec![
        // Requirement keys: restricted domains and labels.
        case(
            "karpenter.sh domain",
            set(np(), REQ, req("karpenter.sh/foo", "Exists", &[])),
            &[
                r#"spec.template.spec.requirements[0].key: label domain "karpenter.sh" is restricted"#,
            ],
        ),
        case(
            "nodepool label",
            set(np(), REQ, req("karpenter.sh/nodepool", "In", &["a"])),
            &[
                r#"spec.template.spec.requirements[0].key: label "karpenter.sh/nodepool" is restricted"#,
            ],
        ),
        case(
            "hostname",
            set(np(), REQ, req("kubernetes.io/hostname", "In", &["a"])),
            &[
                r#"spec.template.spec.requirements[0].key: label domain "kubernetes.io" is restricted"#,
                r#"spec.template.spec.requirements[0].key: label "kubernetes.io/hostname" is restricted"#,
            ],
        ),
        case(
            "kubernetes.io domain",
            set(np(), REQ, req("kubernetes.io/foo", "Exists", &[])),
            &[
                r#"spec.template.spec.requirements[0].key: label domain "kubernetes.io" is restricted"#,
            ],
        ),
        case(
            "k8s.io domain",
            set(np(), REQ, req("foo.k8s.io/bar", "Exists", &[])),
            &[r#"spec.template.spec.requirements[0].key: label domain "k8s.io" is restricted"#],
        ),
        case(
            "karpenter.k8s.aws domain",
            set(np(), REQ, req("karpenter.k8s.aws/made-up", "Exists", &[])),
            &[
                r#"spec.template.spec.requirements[0].key: label domain "karpenter.k8s.aws" is restricted"#,
            ],
        ),
        case(
            "key pattern",
            set(np(), REQ, req("Bad Key", "Exists", &[])),
            &[
                r#"spec.template.spec.requirements[0].key: invalid value "Bad Key": must match '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$'"#,
            ],
        ),
        case(
            "key length",
            set(np(), REQ, req(&long_key, "Exists", &[])),
            &["spec.template.spec.requirements[0].key: may not be longer than 316 characters"],
        ),
        // Operators and values.
        case(
            "operator enum",
            set(np(), REQ, req("example.com/a", "Like", &["x"])),
            &[
                r#"spec.template.spec.requirements[0].operator: unsupported value "Like": supported values: "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte""#,
            ],
        ),
        case(
            "In needs values",
            set(np(), REQ, req("example.com/a", "In", &[])),
            &[
                "spec.template.spec.requirements[0]: requirements with operator 'In' must have a value defined",
            ],
        ),
        case(
            "Gt one value",
            set(np(), REQ, req("example.com/a", "Gt", &["1", "2"])),
            &[
                "spec.template.spec.requirements[0]: requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",
            ],
        ),
        case(
            "Lt integer",
            set(np(), REQ, req("example.com/a", "Lt", &["abc"])),
            &[
                "spec.template.spec.requirements[0]: requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",
            ],
        ),
        case(
            "Gte non-negative",
            set(np(), REQ, req("example.com/a", "Gte", &["-1"])),
            &[
                r#"spec.template.spec.requirements[0].values[0]: invalid value "-1": must match '^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$'"#,
                "spec.template.spec.requirements[0]: requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",
            ],
        ),
        case(
            "Lte needs a value",
            set(np(), REQ, req("example.com/a", "Lte", &[])),
            &[
                "spec.template.spec.requirements[0]: requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",
            ],
        ),
        case(
            "minValues needs values",
            set(
                set(np(), REQ, req("example.com/a", "In", &["x"])),
                &format!("{REQ}/minValues"),
                json!(2),
            ),
            &[
                "spec.template.spec.requirements[0]: requirements with 'minValues' must have at least that many values specified in the 'values' field",
            ],
        ),
        case(
            "minValues minimum",
            set(np(), &format!("{REQ}/minValues"), json!(0)),
            &["spec.template.spec.requirements[0].minValues: must be greater than or equal to 1"],
        ),
        case(
            "minValues maximum",
            set(np(), &format!("{REQ}/minValues"), json!(51)),
            &[
                "spec.template.spec.requirements[0].minValues: must be less than or equal to 50",
                "spec.template.spec.requirements[0]: requirements with 'minValues' must have at least that many values specified in the 'values' field",
            ],
        ),
        case(
            "value pattern",
            set(np(), REQ, req("example.com/a", "In", &["bad value"])),
            &[
                r#"spec.template.spec.requirements[0].values[0]: invalid value "bad value": must match '^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$'"#,
            ],
        ),
        case(
            "known values",
            set(
                np(),
                REQ,
                req("karpenter.sh/capacity-type", "In", &["cheap"]),
            ),
            &[
                r#"spec.template.spec.requirements[0].values: no valid value for "karpenter.sh/capacity-type": expected one of on-demand, spot, reserved"#,
            ],
        ),
        case(
            "known values and minValues",
            set(
                set(
                    np(),
                    REQ,
                    req("karpenter.sh/capacity-type", "In", &["spot", "cheap"]),
                ),
                &format!("{REQ}/minValues"),
                json!(2),
            ),
            &[
                r#"spec.template.spec.requirements[0].values: "karpenter.sh/capacity-type" has 1 valid values, fewer than minValues"#,
            ],
        ),
        case(
            "requirements maxItems",
            set(np(), "/spec/template/spec/requirements", json!(many_reqs)),
            &["spec.template.spec.requirements: must have at most 100 items"],
        ),
        case(
            "requirements required",
            set(np(), "/spec/template/spec/requirements", Value::Null),
            &["spec.template.spec.requirements: required field is missing"],
        ),
        // Template labels.
        case(
            "label domain",
            set(
                np(),
                "/spec/template/metadata/labels/karpenter.sh~1x",
                json!("a"),
            ),
            &[
                r#"spec.template.metadata.labels[karpenter.sh/x]: label domain "karpenter.sh" is restricted"#,
            ],
        ),
        case(
            "label value length",
            set(
                np(),
                "/spec/template/metadata/labels/example.com~1team",
                json!("a".repeat(64)),
            ),
            &[
                "spec.template.metadata.labels[example.com/team]: may not be longer than 63 characters",
            ],
        ),
        case(
            "label value pattern",
            set(
                np(),
                "/spec/template/metadata/labels/example.com~1team",
                json!("-a"),
            ),
            &[
                r#"spec.template.metadata.labels[example.com/team]: invalid value "-a": must match '^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$'"#,
            ],
        ),
        case(
            "label key name",
            set(
                np(),
                "/spec/template/metadata/labels/example.com~1bad key",
                json!("a"),
            ),
            &[
                r#"spec.template.metadata.labels[example.com/bad key]: "example.com/bad key" is not a qualified name: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"#,
            ],
        ),
        case(
            "labels maxProperties",
            set(
                np(),
                "/spec/template/metadata/labels",
                Value::Object(many_labels),
            ),
            &["spec.template.metadata.labels: must have at most 100 properties"],
        ),
        case(
            "nodepool label in labels",
            set(
                np(),
                "/spec/template/metadata/labels/karpenter.sh~1nodepool",
                json!("a"),
            ),
            &[
                r#"spec.template.metadata.labels[karpenter.sh/nodepool]: label "karpenter.sh/nodepool" is restricted"#,
            ],
        ),
        // Taints.
        case(
            "taint effect",
            set(
                np(),
                "/spec/template/spec/taints",
                json!([taint("example.com/a", None, "Sometimes")]),
            ),
            &[
                r#"spec.template.spec.taints[0].effect: unsupported value "Sometimes": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute""#,
            ],
        ),
        case(
            "taint key empty",
            set(
                np(),
                "/spec/template/spec/taints",
                json!([taint("", None, "NoSchedule")]),
            ),
            &[
                "spec.template.spec.taints[0].key: must be at least 1 characters long",
                r#"spec.template.spec.taints[0].key: invalid value "": must match '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$'"#,
            ],
        ),
        case(
            "taint key pattern",
            set(
                np(),
                "/spec/template/spec/startupTaints",
                json!([taint("a b", None, "NoSchedule")]),
            ),
            &[
                r#"spec.template.spec.startupTaints[0].key: invalid value "a b": must match '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$'"#,
            ],
        ),
        case(
            "taint value pattern",
            set(
                np(),
                "/spec/template/spec/taints",
                json!([taint("example.com/a", Some("a b"), "NoSchedule")]),
            ),
            &[
                r#"spec.template.spec.taints[0].value: invalid value "a b": must match '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$'"#,
            ],
        ),
        case(
            "taint duplicate",
            set(
                set(
                    np(),
                    "/spec/template/spec/taints",
                    json!([taint("example.com/a", Some("x"), "NoSchedule")]),
                ),
                "/spec/template/spec/startupTaints",
                json!([taint("example.com/a", Some("y"), "NoSchedule")]),
            ),
            &[
                r#"spec.template.spec.startupTaints[0]: duplicate taint key/effect pair "example.com/a:NoSchedule""#,
            ],
        ),
        case(
            "taint effect required",
            set(
                np(),
                "/spec/template/spec/taints",
                json!([{"key": "example.com/a"}]),
            ),
            &["spec.template.spec.taints[0].effect: required field is missing"],
        ),
        // nodeClassRef.
        case(
            "nodeClassRef required",
            set(np(), "/spec/template/spec/nodeClassRef", Value::Null),
            &["spec.template.spec.nodeClassRef: required field is missing"],
        ),
        case(
            "group required",
            set(np(), "/spec/template/spec/nodeClassRef/group", Value::Null),
            &["spec.template.spec.nodeClassRef.group: required field is missing"],
        ),
        case(
            "group empty",
            set(np(), "/spec/template/spec/nodeClassRef/group", json!("")),
            &["spec.template.spec.nodeClassRef.group: group may not be empty"],
        ),
        case(
            "kind empty",
            set(np(), "/spec/template/spec/nodeClassRef/kind", json!("")),
            &["spec.template.spec.nodeClassRef.kind: kind may not be empty"],
        ),
        case(
            "name empty",
            set(np(), "/spec/template/spec/nodeClassRef/name", json!("")),
            &["spec.template.spec.nodeClassRef.name: name may not be empty"],
        ),
        case(
            "group pattern",
            set(
                np(),
                "/spec/template/spec/nodeClassRef/group",
                json!("karpenter.k8s.aws/v1"),
            ),
            &[
                r#"spec.template.spec.nodeClassRef.group: invalid value "karpenter.k8s.aws/v1": must match '^[^/]*$'"#,
            ],
        ),
        // Durations.
        case(
            "expireAfter pattern",
            set(np(), "/spec/template/spec/expireAfter", json!("30d")),
            &[
                r#"spec.template.spec.expireAfter: invalid value "30d": must match '^(([0-9]+(s|m|h))+|Never)$'"#,
            ],
        ),
        case(
            "terminationGracePeriod pattern",
            set(
                np(),
                "/spec/template/spec/terminationGracePeriod",
                json!("Never"),
            ),
            &[
                r#"spec.template.spec.terminationGracePeriod: invalid value "Never": must match '^([0-9]+(s|m|h))+$'"#,
            ],
        ),
        case(
            "consolidateAfter pattern",
            set(np(), "/spec/disruption/consolidateAfter", json!("soon")),
            &[
                r#"spec.disruption.consolidateAfter: invalid value "soon": must match '^(([0-9]+(s|m|h))+|Never)$'"#,
            ],
        ),
        case(
            "consolidateAfter required",
            set(
                np(),
                "/spec/disruption",
                json!({"consolidationPolicy": "WhenEmpty"}),
            ),
            &["spec.disruption.consolidateAfter: required field is missing"],
        ),
        case(
            "consolidationPolicy enum",
            set(
                np(),
                "/spec/disruption/consolidationPolicy",
                json!("WhenUnderutilized"),
            ),
            &[
                r#"spec.disruption.consolidationPolicy: unsupported value "WhenUnderutilized": supported values: "WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced""#,
            ],
        ),
        // Budgets.
        case(
            "budget nodes pattern",
            set(np(), "/spec/disruption/budgets", json!([{"nodes": "110%"}])),
            &[
                r#"spec.disruption.budgets[0].nodes: invalid value "110%": must match '^((100|[0-9]{1,2})%|[0-9]+)$'"#,
            ],
        ),
        case(
            "schedule without duration",
            set(
                np(),
                "/spec/disruption/budgets",
                json!([{"nodes": "0", "schedule": "@daily"}]),
            ),
            &["spec.disruption.budgets[0]: 'schedule' must be set with 'duration'"],
        ),
        case(
            "duration without schedule",
            set(
                np(),
                "/spec/disruption/budgets",
                json!([{"nodes": "0", "duration": "1h"}]),
            ),
            &["spec.disruption.budgets[0]: 'schedule' must be set with 'duration'"],
        ),
        case(
            "budget duration pattern",
            set(
                np(),
                "/spec/disruption/budgets",
                json!([{"nodes": "0", "schedule": "@daily", "duration": "30s"}]),
            ),
            &[
                r#"spec.disruption.budgets[0].duration: invalid value "30s": must match '^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$'"#,
            ],
        ),
        case(
            "budget schedule pattern",
            set(
                np(),
                "/spec/disruption/budgets",
                json!([{"nodes": "0", "schedule": "daily", "duration": "1h"}]),
            ),
            &[
                r#"spec.disruption.budgets[0].schedule: invalid value "daily": must match '^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$'"#,
            ],
        ),
        case(
            "budget cron",
            set(
                np(),
                "/spec/disruption/budgets",
                json!([{"nodes": "0", "schedule": "61 * * * *", "duration": "1h"}]),
            ),
            &[
                r#"spec.disruption.budgets[0].schedule: invalid cron schedule "61 * * * *": minute field "61": 61 is out of range 0-59"#,
            ],
        ),
        case(
            "budget reasons enum",
            set(
                np(),
                "/spec/disruption/budgets",
                json!([{"nodes": "1", "reasons": ["Expired"]}]),
            ),
            &[
                r#"spec.disruption.budgets[0].reasons[0]: unsupported value "Expired": supported values: "Underutilized", "Empty", "Drifted""#,
            ],
        ),
        case(
            "budget reasons set",
            set(
                np(),
                "/spec/disruption/budgets",
                json!([{"nodes": "1", "reasons": ["Empty", "Empty"]}]),
            ),
            &[r#"spec.disruption.budgets[0].reasons[1]: duplicate value "Empty""#],
        ),
        case(
            "budgets maxItems",
            set(np(), "/spec/disruption/budgets", json!(many_budgets)),
            &["spec.disruption.budgets: must have at most 50 items"],
        ),
        // Limits, weight, replicas.
        case(
            "limits quantity",
            set(np(), "/spec/limits", json!({"cpu": "lots"})),
            &[
                r#"spec.limits[cpu]: invalid value "lots": must match '^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$'"#,
            ],
        ),
        case(
            "weight minimum",
            set(np(), "/spec/weight", json!(0)),
            &["spec.weight: must be greater than or equal to 1"],
        ),
        case(
            "weight maximum",
            set(np(), "/spec/weight", json!(101)),
            &["spec.weight: must be less than or equal to 100"],
        ),
        case(
            "weight type",
            set(np(), "/spec/weight", json!("high")),
            &["spec.weight: must be of type integer, got string"],
        ),
        case(
            "replicas minimum",
            set(np(), "/spec/replicas", json!(-1)),
            &["spec.replicas: must be greater than or equal to 0"],
        ),
        case(
            "static weight",
            set(
                set(np(), "/spec/replicas", json!(2)),
                "/spec/weight",
                json!(10),
            ),
            &["spec: 'weight' is not supported on static NodePools"],
        ),
        case(
            "static limits",
            set(
                set(np(), "/spec/replicas", json!(2)),
                "/spec/limits",
                json!({"cpu": "10"}),
            ),
            &["spec: only 'limits.nodes' is supported on static NodePools"],
        ),
        // Object shape.
        case(
            "spec required",
            set(np(), "/spec", Value::Null),
            &["spec: required field is missing"],
        ),
        case(
            "template required",
            set(np(), "/spec/template", Value::Null),
            &["spec.template: required field is missing"],
        ),
        case(
            "name required",
            set(np(), "/metadata/name", Value::Null),
            &["metadata.name: required field is missing"],
        ),
        case(
            "name format",
            set(np(), "/metadata/name", json!("Default")),
            &[r#"metadata.name: invalid name "Default": must be a lowercase RFC 1123 subdomain"#],
        ),
    ]
}

fn case(name: &str, object: Value, errors: &[&str]) -> Case {
    Case::new(name, object, errors.iter().map(|e| e.to_string()).collect())
}
