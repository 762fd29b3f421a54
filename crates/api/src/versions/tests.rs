//! The conversion on seed 000's objects, its refusals, and round trips over generated
//! objects of both versions.

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::*;

fn up(obj: &Value) -> Value {
    let desired = obj["apiVersion"].as_str().unwrap().replace("v1beta1", "v1");
    convert(obj, &desired, 0).unwrap()
}

fn down(obj: &Value) -> Value {
    let desired = obj["apiVersion"]
        .as_str()
        .unwrap()
        .replace("/v1", "/v1beta1");
    convert(obj, &desired, 0).unwrap()
}

fn seed(file: &str) -> Value {
    let path = format!(
        "{}/../../fixtures/seed-manifests/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(path).unwrap();
    serde_yaml::from_str(&text).unwrap()
}

#[test]
fn seed_000_nodepool_as_v1_and_back() {
    let old = seed("01-nodepool-v1beta1.yaml");
    let new = up(&old);
    assert_eq!(
        new,
        json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "default", "annotations": {
                KUBELET: "{\"maxPods\":110}",
                V1BETA1_NODE_CLASS_REF: "{\"nodeClassRef\":{\"name\":\"default\"}}",
            }},
            "spec": {
                "template": {"spec": {
                    "requirements": old["spec"]["template"]["spec"]["requirements"],
                    "nodeClassRef": {"name": "default", "group": "karpenter.k8s.aws", "kind": "EC2NodeClass"},
                    "expireAfter": "720h",
                }},
                "limits": {"cpu": 1000},
                "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized"},
            },
        })
    );
    assert_eq!(down(&new), old);
}

#[test]
fn seed_000_ec2nodeclass_as_v1_and_back() {
    let old = seed("02-ec2nodeclass-v1beta1.yaml");
    let new = up(&old);
    assert_eq!(
        new["spec"]["amiSelectorTerms"],
        json!([{"alias": "bottlerocket@latest"}])
    );
    assert_eq!(new["spec"].get("amiFamily"), None);
    assert_eq!(new["metadata"].get("annotations"), None, "nothing to keep");
    assert_eq!(
        new["spec"]["metadataOptions"],
        old["spec"]["metadataOptions"]
    );
    assert_eq!(down(&new), old);
}

#[test]
fn a_v1_nodepool_keeps_what_v1beta1_lacks_in_annotations() {
    let new = json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "p"},
        "spec": {
            "replicas": 3,
            "template": {"spec": {
                "requirements": [],
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"},
                "terminationGracePeriod": "1h", "expireAfter": "Never",
            }},
            "disruption": {"consolidateAfter": "5m", "consolidationPolicy": "WhenEmptyOrUnderutilized",
                "budgets": [{"nodes": "1", "reasons": ["Drifted"]}, {"nodes": "10%"}]},
        },
    });
    let old = down(&new);
    assert_eq!(
        old,
        json!({
            "apiVersion": "karpenter.sh/v1beta1", "kind": "NodePool",
            "metadata": {"name": "p", "annotations": {
                REPLICAS: "3", TERMINATION_GRACE_PERIOD: "1h",
                BUDGET_REASONS: "[[\"Drifted\"],null]",
            }},
            "spec": {
                "template": {"spec": {
                    "requirements": [],
                    "nodeClassRef": {"apiVersion": "karpenter.k8s.aws/v1beta1", "kind": "EC2NodeClass", "name": "d"},
                }},
                "disruption": {"consolidateAfter": "5m", "consolidationPolicy": "WhenUnderutilized",
                    "budgets": [{"nodes": "1"}, {"nodes": "10%"}], "expireAfter": "Never"},
            },
        })
    );
    assert_eq!(up(&old), new);
}

#[test]
fn an_edit_made_in_the_other_version_wins_over_the_kept_original() {
    let old = seed("01-nodepool-v1beta1.yaml");
    let mut new = up(&old);
    new["spec"]["template"]["spec"]["nodeClassRef"]["name"] = json!("other");
    let back = down(&new);
    assert_eq!(
        back["spec"]["template"]["spec"]["nodeClassRef"],
        json!({"name": "other", "apiVersion": "karpenter.k8s.aws/v1beta1", "kind": "EC2NodeClass"})
    );
    assert_eq!(
        back["metadata"]["annotations"].get(V1BETA1_NODE_CLASS_REF),
        Some(&json!("{\"nodeClassRef\":{\"name\":\"default\"}}")),
        "the stale original stays, unused"
    );
}

#[test]
fn ubuntu_becomes_al2_and_comes_back() {
    let old = json!({"apiVersion": "karpenter.k8s.aws/v1beta1", "kind": "EC2NodeClass",
        "metadata": {"name": "u"},
        "spec": {"amiFamily": "Ubuntu", "amiSelectorTerms": [{"id": "ami-0123456789abcdef0"}],
                 "role": "r", "subnetSelectorTerms": [{"id": "subnet-1"}]}});
    let new = up(&old);
    assert_eq!(new["spec"]["amiFamily"], "AL2");
    assert_eq!(
        new["spec"]["blockDeviceMappings"][0]["deviceName"],
        "/dev/sda1"
    );
    assert!(new["metadata"]["annotations"][V1BETA1_AMI_SELECTION].is_string());
    assert_eq!(down(&new), old);
}

#[test]
fn refusals_name_the_object_and_why() {
    let err = |obj: Value, desired: &str| convert(&obj, desired, 2).unwrap_err().to_string();
    assert_eq!(
        err(json!([1]), "karpenter.sh/v1"),
        "objects[2]: expected a JSON object, found an array"
    );
    assert_eq!(
        err(
            json!({"apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner", "metadata": {"name": "p"}}),
            "karpenter.sh/v1"
        ),
        "objects[2] (Provisioner \"p\"): apiVersion \"karpenter.sh/v1alpha5\" is not served here (served: karpenter.sh/v1beta1, karpenter.sh/v1, karpenter.k8s.aws/v1beta1, karpenter.k8s.aws/v1)"
    );
    assert_eq!(
        err(
            json!({"apiVersion": "karpenter.sh/v1", "kind": "Machine", "metadata": {"name": "m"}}),
            "karpenter.sh/v1beta1"
        ),
        "objects[2] (Machine \"m\"): kind \"Machine\" of group karpenter.sh is not converted here"
    );
    assert_eq!(
        err(
            json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "p"}}),
            "karpenter.k8s.aws/v1beta1"
        ),
        "objects[2] (NodePool \"p\"): cannot convert group karpenter.sh to karpenter.k8s.aws"
    );
    assert_eq!(
        err(
            json!({"kind": "NodePool", "metadata": {"name": "p"}}),
            "karpenter.sh/v1"
        ),
        "objects[2] (NodePool \"p\"): apiVersion is missing or not a string"
    );
}

#[test]
fn odd_shapes_pass_through_without_a_panic() {
    for spec in [
        json!(null),
        json!("x"),
        json!({"template": 1}),
        json!({"template": {"spec": []}, "disruption": 3}),
    ] {
        let obj = json!({"apiVersion": "karpenter.sh/v1beta1", "kind": "NodePool", "spec": spec});
        assert_eq!(down(&up(&obj)), obj);
    }
    // Nowhere to keep what v1 lacks: it stays where it is rather than being lost.
    for metadata in [json!("x"), json!({"annotations": 7})] {
        let obj = json!({"apiVersion": "karpenter.sh/v1beta1", "kind": "NodePool", "metadata": metadata,
            "spec": {"template": {"spec": {"kubelet": {"maxPods": 1}, "nodeClassRef": {"name": "d"}}}}});
        let new = up(&obj);
        assert_eq!(
            new["spec"]["template"]["spec"]["kubelet"],
            json!({"maxPods": 1})
        );
        assert_eq!(down(&new), obj);
    }
}

// Generated objects: every field each version's schema accepts, in the shapes it accepts.

fn opt<T: std::fmt::Debug + Clone + 'static>(
    s: impl Strategy<Value = T> + 'static,
) -> BoxedStrategy<Option<T>> {
    proptest::option::of(s).boxed()
}

fn pick(values: &'static [&'static str]) -> BoxedStrategy<Value> {
    proptest::sample::select(values)
        .prop_map(|v| json!(v))
        .boxed()
}

fn object(fields: Vec<(&str, Option<Value>)>) -> Value {
    Value::Object(
        fields
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k.to_string(), v)))
            .collect::<Map<_, _>>(),
    )
}

fn duration() -> BoxedStrategy<Value> {
    pick(&["Never", "720h", "30s", "1h30m", "0s"])
}

fn metadata() -> BoxedStrategy<Value> {
    (
        opt(pick(&["team-a", "team-b"])),
        opt(Just(json!("{\"maxPods\":7}"))),
    )
        .prop_map(|(team, foreign)| {
            let mut annotations = Map::new();
            if let Some(t) = team {
                annotations.insert("example.com/team".into(), t);
            }
            if let Some(f) = foreign {
                annotations.insert("example.com/kubelet".into(), f);
            }
            let annotations = (!annotations.is_empty()).then_some(Value::Object(annotations));
            object(vec![
                ("name", Some(json!("x"))),
                ("annotations", annotations),
            ])
        })
        .boxed()
}

fn requirements() -> BoxedStrategy<Value> {
    proptest::collection::vec(
        (
            pick(&["kubernetes.io/arch", "karpenter.sh/capacity-type"]),
            opt(1..3i64),
        )
            .prop_map(|(key, min)| {
                object(vec![
                    ("key", Some(key)),
                    ("operator", Some(json!("In"))),
                    ("values", Some(json!(["a", "b"]))),
                    ("minValues", min.map(|m| json!(m))),
                ])
            }),
        0..3,
    )
    .prop_map(Value::Array)
    .boxed()
}

fn ref_v1beta1() -> BoxedStrategy<Value> {
    (
        opt(pick(&[
            "karpenter.k8s.aws/v1beta1",
            "karpenter.k8s.aws/v1",
            "example.com/v1",
            "v1",
        ])),
        opt(pick(&["EC2NodeClass", "AWSNodeTemplate", "Other"])),
    )
        .prop_map(|(av, kind)| {
            object(vec![
                ("apiVersion", av),
                ("kind", kind),
                ("name", Some(json!("d"))),
            ])
        })
        .boxed()
}

fn ref_v1() -> BoxedStrategy<Value> {
    (
        pick(&["karpenter.k8s.aws", "example.com", ""]),
        pick(&["EC2NodeClass", "Other"]),
    )
        .prop_map(|(g, k)| json!({"group": g, "kind": k, "name": "d"}))
        .boxed()
}

fn kubelet() -> BoxedStrategy<Value> {
    (1..200i64, opt(pick(&["100m", "1"])))
        .prop_map(|(m, cpu)| {
            object(vec![
                ("maxPods", Some(json!(m))),
                ("systemReserved", cpu.map(|c| json!({"cpu": c}))),
            ])
        })
        .boxed()
}

fn budgets(with_reasons: bool) -> BoxedStrategy<Value> {
    let reasons = if with_reasons {
        opt(pick(&["Drifted", "Empty"]).prop_map(|r| json!([r])))
    } else {
        Just(None).boxed()
    };
    proptest::collection::vec(
        (pick(&["10%", "0", "3"]), any::<bool>(), reasons).prop_map(|(nodes, sched, reasons)| {
            object(vec![
                ("nodes", Some(nodes)),
                ("schedule", sched.then(|| json!("@daily"))),
                ("duration", sched.then(|| json!("10m"))),
                ("reasons", reasons),
            ])
        }),
        0..3,
    )
    .prop_map(Value::Array)
    .boxed()
}

fn nodepool_v1beta1() -> impl Strategy<Value = Value> {
    let disruption = (
        opt(pick(&["WhenEmpty", "WhenUnderutilized"])),
        opt(duration()),
        opt(duration()),
        opt(budgets(false)),
    )
        .prop_map(|(p, ca, ea, b)| {
            object(vec![
                ("consolidationPolicy", p),
                ("consolidateAfter", ca),
                ("expireAfter", ea),
                ("budgets", b),
            ])
        });
    let spec = (
        requirements(),
        ref_v1beta1(),
        opt(kubelet()),
        opt(Just(json!({"requests": {"cpu": "1"}}))),
    )
        .prop_map(|(r, nc, k, res)| {
            object(vec![
                ("requirements", Some(r)),
                ("nodeClassRef", Some(nc)),
                ("kubelet", k),
                ("resources", res),
            ])
        });
    (
        metadata(),
        spec,
        opt(disruption),
        opt(1..100i64),
        opt(Just(json!({"resources": {"cpu": "4"}}))),
    )
        .prop_map(|(meta, spec, d, w, status)| {
            object(vec![
                ("apiVersion", Some(json!("karpenter.sh/v1beta1"))),
                ("kind", Some(json!("NodePool"))),
                ("metadata", Some(meta)),
                (
                    "spec",
                    Some(object(vec![
                        ("template", Some(json!({"spec": spec}))),
                        ("disruption", d),
                        ("weight", w.map(|w| json!(w))),
                    ])),
                ),
                ("status", status),
            ])
        })
}

fn nodepool_v1() -> impl Strategy<Value = Value> {
    let disruption = (
        duration(),
        opt(pick(&["WhenEmpty", "WhenEmptyOrUnderutilized"])),
        opt(budgets(true)),
    )
        .prop_map(|(ca, p, b)| {
            object(vec![
                ("consolidateAfter", Some(ca)),
                ("consolidationPolicy", p),
                ("budgets", b),
            ])
        });
    let spec = (
        requirements(),
        ref_v1(),
        opt(duration()),
        opt(pick(&["1h", "30s"])),
    )
        .prop_map(|(r, nc, ea, tgp)| {
            object(vec![
                ("requirements", Some(r)),
                ("nodeClassRef", Some(nc)),
                ("expireAfter", ea),
                ("terminationGracePeriod", tgp),
            ])
        });
    (
        metadata(),
        spec,
        opt(disruption),
        opt(0..5i64),
        opt(Just(json!({"nodes": 2, "conditions": []}))),
    )
        .prop_map(|(meta, spec, d, replicas, status)| {
            object(vec![
                ("apiVersion", Some(json!("karpenter.sh/v1"))),
                ("kind", Some(json!("NodePool"))),
                ("metadata", Some(meta)),
                (
                    "spec",
                    Some(object(vec![
                        ("template", Some(json!({"spec": spec}))),
                        ("disruption", d),
                        ("replicas", replicas.map(|r| json!(r))),
                    ])),
                ),
                ("status", status),
            ])
        })
}

fn nodeclaim_v1beta1() -> impl Strategy<Value = Value> {
    (
        metadata(),
        requirements(),
        ref_v1beta1(),
        opt(kubelet()),
        opt(Just(json!({"nodeName": "n", "providerID": "sim://1"}))),
    )
        .prop_map(|(meta, r, nc, k, status)| {
            object(vec![
                ("apiVersion", Some(json!("karpenter.sh/v1beta1"))),
                ("kind", Some(json!("NodeClaim"))),
                ("metadata", Some(meta)),
                (
                    "spec",
                    Some(object(vec![
                        ("requirements", Some(r)),
                        ("nodeClassRef", Some(nc)),
                        ("kubelet", k),
                        ("resources", Some(json!({"requests": {"cpu": "2"}}))),
                    ])),
                ),
                ("status", status),
            ])
        })
}

fn nodeclaim_v1() -> impl Strategy<Value = Value> {
    (
        metadata(),
        requirements(),
        ref_v1(),
        opt(duration()),
        opt(pick(&["1h", "30s"])),
    )
        .prop_map(|(meta, r, nc, ea, tgp)| {
            object(vec![
                ("apiVersion", Some(json!("karpenter.sh/v1"))),
                ("kind", Some(json!("NodeClaim"))),
                ("metadata", Some(meta)),
                (
                    "spec",
                    Some(object(vec![
                        ("requirements", Some(r)),
                        ("nodeClassRef", Some(nc)),
                        ("expireAfter", ea),
                        ("terminationGracePeriod", tgp),
                    ])),
                ),
            ])
        })
}

fn ec2nodeclass(
    api_version: &'static str,
    families: &'static [&'static str],
    terms: BoxedStrategy<Value>,
    with_kubelet: bool,
) -> impl Strategy<Value = Value> {
    let k = if with_kubelet {
        opt(kubelet())
    } else {
        Just(None).boxed()
    };
    let bdm = json!([{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "20Gi"}}]);
    (
        metadata(),
        opt(pick(families)),
        opt(terms),
        k,
        opt(Just(bdm)),
        opt(Just(json!({"httpPutResponseHopLimit": 2}))),
    )
        .prop_map(move |(meta, fam, terms, k, bdm, mo)| {
            object(vec![
                ("apiVersion", Some(json!(api_version))),
                ("kind", Some(json!("EC2NodeClass"))),
                ("metadata", Some(meta)),
                (
                    "spec",
                    Some(object(vec![
                        ("amiFamily", fam),
                        ("amiSelectorTerms", terms),
                        ("kubelet", k),
                        ("blockDeviceMappings", bdm),
                        ("metadataOptions", mo),
                        ("role", Some(json!("r"))),
                        ("subnetSelectorTerms", Some(json!([{"tags": {"a": "b"}}]))),
                    ])),
                ),
                (
                    "status",
                    Some(json!({"amis": [{"id": "ami-1", "name": "x"}]})),
                ),
            ])
        })
}

fn ec2nodeclass_v1beta1() -> impl Strategy<Value = Value> {
    let terms = prop_oneof![
        Just(json!([])),
        Just(json!([{"id": "ami-0123456789abcdef0"}])),
        Just(json!([{"tags": {"a": "b"}}, {"name": "n"}]))
    ]
    .boxed();
    ec2nodeclass(
        "karpenter.k8s.aws/v1beta1",
        &[
            "AL2",
            "AL2023",
            "Bottlerocket",
            "Ubuntu",
            "Custom",
            "Windows2022",
        ],
        terms,
        false,
    )
}

fn ec2nodeclass_v1() -> impl Strategy<Value = Value> {
    let terms = prop_oneof![
        pick(&[
            "al2023@latest",
            "al2@v20240807",
            "bottlerocket@latest",
            "windows2022@latest"
        ])
        .prop_map(|a| json!([{"alias": a}])),
        Just(json!([{"id": "ami-0123456789abcdef0"}])),
        Just(json!([{"ssmParameter": "/my/ami"}])),
    ]
    .boxed();
    ec2nodeclass(
        "karpenter.k8s.aws/v1",
        &["AL2", "AL2023", "Custom", "Bottlerocket"],
        terms,
        true,
    )
}

/// Fields of the other version left behind after a conversion.
fn foreign_fields(obj: &Value) -> Vec<&'static str> {
    let spec = &obj["spec"];
    let v1 = obj["apiVersion"].as_str().unwrap().ends_with("/v1");
    let tmpl = if obj["kind"] == "NodePool" {
        &spec["template"]["spec"]
    } else {
        spec
    };
    let checks: Vec<(&'static str, bool)> = if v1 {
        vec![
            (
                "kubelet",
                obj["kind"] != "EC2NodeClass" && tmpl.get("kubelet").is_some(),
            ),
            (
                "resources",
                obj["kind"] == "NodePool" && tmpl.get("resources").is_some(),
            ),
            (
                "disruption.expireAfter",
                spec["disruption"].get("expireAfter").is_some(),
            ),
            (
                "nodeClassRef.apiVersion",
                tmpl["nodeClassRef"].get("apiVersion").is_some(),
            ),
            (
                "WhenUnderutilized",
                spec["disruption"]["consolidationPolicy"] == "WhenUnderutilized",
            ),
            (
                "Ubuntu",
                spec["amiFamily"] == "Ubuntu"
                    && spec["amiSelectorTerms"]
                        .as_array()
                        .is_some_and(|t| !t.is_empty()),
            ),
        ]
    } else {
        vec![
            (
                "kubelet",
                obj["kind"] == "EC2NodeClass" && spec.get("kubelet").is_some(),
            ),
            ("expireAfter", tmpl.get("expireAfter").is_some()),
            (
                "terminationGracePeriod",
                tmpl.get("terminationGracePeriod").is_some(),
            ),
            ("replicas", spec.get("replicas").is_some()),
            (
                "reasons",
                spec["disruption"]["budgets"]
                    .as_array()
                    .is_some_and(|b| b.iter().any(|b| b.get("reasons").is_some())),
            ),
            (
                "nodeClassRef.group",
                tmpl["nodeClassRef"].get("group").is_some(),
            ),
            (
                "WhenEmptyOrUnderutilized",
                spec["disruption"]["consolidationPolicy"] == "WhenEmptyOrUnderutilized",
            ),
            (
                "alias",
                spec["amiSelectorTerms"]
                    .as_array()
                    .is_some_and(|t| t.iter().any(|t| t.get("alias").is_some())),
            ),
        ]
    };
    checks
        .into_iter()
        .filter(|(_, bad)| *bad)
        .map(|(n, _)| n)
        .collect()
}

proptest! {
    #[test]
    fn v1beta1_to_v1_and_back_is_exact(
        obj in prop_oneof![nodepool_v1beta1().boxed(), nodeclaim_v1beta1().boxed(), ec2nodeclass_v1beta1().boxed()]
    ) {
        let new = up(&obj);
        prop_assert_eq!(foreign_fields(&new), Vec::<&str>::new(), "{}", new);
        prop_assert_eq!(down(&new), obj);
    }

    #[test]
    fn v1_to_v1beta1_and_back_is_exact(
        obj in prop_oneof![nodepool_v1().boxed(), nodeclaim_v1().boxed(), ec2nodeclass_v1().boxed()]
    ) {
        let old = down(&obj);
        prop_assert_eq!(foreign_fields(&old), Vec::<&str>::new(), "{}", old);
        prop_assert_eq!(up(&old), obj);
    }

    #[test]
    fn only_the_documented_annotations_are_added(
        obj in prop_oneof![nodepool_v1beta1().boxed(), ec2nodeclass_v1beta1().boxed(), nodepool_v1().boxed(), ec2nodeclass_v1().boxed()]
    ) {
        let other = if obj["apiVersion"].as_str().unwrap().ends_with("/v1") { down(&obj) } else { up(&obj) };
        let before = obj["metadata"]["annotations"].as_object().cloned().unwrap_or_default();
        for key in other["metadata"]["annotations"].as_object().into_iter().flat_map(|a| a.keys()) {
            prop_assert!(before.contains_key(key) || ANNOTATIONS.contains(&key.as_str()), "{}", key);
        }
    }
}
