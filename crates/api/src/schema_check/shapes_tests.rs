//! Rule shapes found in node class and node pool schemas, in a schema written for this test:
//! the CRD must pass `check_structural` without any rule left unevaluated, and objects must be
//! accepted and rejected as the rules say.

use serde_json::{Value, json};

use super::{check_structural, is_unevaluated_rule, validate_object};
use crate::schema::{array, boolean, int32, map_of, object, string};

const SIGNALS: &str = "['memory.available', 'nodefs.available', 'pid.available']";

fn class_schema() -> Value {
    let tags = map_of(string()).max_properties(20).rule(
        "self.all(k, k != '' && self[k] != '')",
        "empty tag keys or values aren't supported",
    );
    let term = object()
        .prop(
            "alias",
            string()
                .max_length(30)
                .rule(
                    "self.matches('^[a-zA-Z0-9]*@.*$')",
                    "alias must be family@version",
                )
                .rule(
                    "self.find('^[^@]+') in ['fam1', 'fam2']",
                    "family not supported",
                ),
        )
        .prop("id", string().pattern("img-[0-9a-z]+"))
        .prop("name", string())
        .prop("tags", tags.clone());
    let terms = array(term)
        .min_items(1)
        .max_items(30)
        .rule(
            "self.all(x, has(x.tags) || has(x.id) || has(x.name) || has(x.alias))",
            "expected at least one field",
        )
        .rule(
            "!self.exists(x, has(x.id) && (has(x.alias) || has(x.tags) || has(x.name)))",
            "'id' is exclusive",
        )
        .rule(
            "!(self.exists(x, has(x.alias)) && self.size() != 1)",
            "'alias' stands alone",
        );
    let disk = object()
        .prop("size", string())
        .prop("snapshot", string())
        .rule(
            "has(self.snapshot) || has(self.size)",
            "snapshot or size must be defined",
        );
    let mapping = object().prop("disk", disk).prop("root", boolean());
    let kubelet = object()
        .prop("high", int32().minimum(0).maximum(100))
        .prop("low", int32().minimum(0).maximum(100))
        .prop(
            "soft",
            map_of(string()).rule(&format!("self.all(x, x in {SIGNALS})"), "unknown signal"),
        )
        .prop(
            "softGrace",
            map_of(string()).rule(&format!("self.all(x, x in {SIGNALS})"), "unknown signal"),
        )
        .prop(
            "reserved",
            map_of(string())
                .rule(
                    "self.all(x, x=='cpu' || x=='memory' || x=='pid')",
                    "unknown resource",
                )
                .rule(
                    "self.all(x, !self[x].startsWith('-'))",
                    "negative reservation",
                ),
        )
        .rule(
            "has(self.high) && has(self.low) ? self.high > self.low : true",
            "high must exceed low",
        )
        .rule(
            "has(self.soft) ? self.soft.all(e, (e in self.softGrace)) : true",
            "soft needs grace",
        )
        .rule(
            "has(self.softGrace) ? self.softGrace.all(e, (e in self.soft)) : true",
            "grace needs soft",
        );
    let spec = object()
        .prop("family", string().enumerate(&["Fam1", "Fam2", "Custom"]))
        .prop("terms", terms)
        .prop("mappings", array(mapping).max_items(50)
            .rule("self.filter(x, has(x.root) ? x.root == true : false).size() <= 1", "one root volume at most"))
        .prop("kubelet", kubelet)
        .prop("role", string().rule("self != ''", "role cannot be empty").transition_rule("self == oldSelf", "immutable field changed"))
        .prop("profile", string().rule("self != ''", "profile cannot be empty"))
        .prop("tags", map_of(string())
            .rule("self.all(k, !k.startsWith('cluster.example/'))", "restricted tag")
            .rule("self.all(k, k != 'example.dev/pool')", "restricted tag"))
        .required(&["terms"])
        .rule("has(self.role) != has(self.profile)", "exactly one of role and profile")
        .rule("(has(oldSelf.role) && has(self.role)) || (has(oldSelf.profile) && has(self.profile))", "cannot switch")
        .rule("!has(self.family) || (self.terms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'fam1') ? (self.family == 'Custom' || self.family == 'Fam1') : true)", "family must match alias")
        .rule("self.terms.exists(x, has(x.alias)) ? true : has(self.family)", "family required without alias");
    object()
        .prop("apiVersion", string())
        .prop("kind", string())
        .prop("metadata", object())
        .prop("spec", spec)
        .required(&["spec"])
        .into_value()
}

fn crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "nodeclasses.example.dev"},
        "spec": {
            "group": "example.dev",
            "names": {"kind": "NodeClass", "listKind": "NodeClassList", "plural": "nodeclasses", "singular": "nodeclass"},
            "scope": "Cluster",
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": class_schema()}}]
        }
    })
}

fn good() -> Value {
    json!({"spec": {
        "family": "Fam1",
        "terms": [{"alias": "fam1@latest"}],
        "mappings": [{"disk": {"size": "20Gi"}, "root": true}, {"disk": {"snapshot": "s"}}],
        "kubelet": {"high": 85, "low": 80, "soft": {"memory.available": "5%"}, "softGrace": {"memory.available": "1m"}, "reserved": {"cpu": "1"}},
        "role": "node-role",
        "tags": {"team": "a"}
    }})
}

fn messages(object: Value, old: Option<Value>) -> Vec<String> {
    let errs = validate_object(&class_schema(), &object, old.as_ref());
    assert!(!errs.iter().any(is_unevaluated_rule), "{errs:#?}");
    errs.iter().map(ToString::to_string).collect()
}

#[test]
fn the_crd_is_well_formed_and_every_rule_is_evaluable() {
    assert_eq!(check_structural(&crd()), Vec::<String>::new());
}

#[test]
fn a_good_object_passes() {
    assert_eq!(messages(good(), None), Vec::<String>::new());
    assert_eq!(messages(good(), Some(good())), Vec::<String>::new());
}

#[test]
fn each_rule_rejects_its_case() {
    let mut signals = good();
    signals["spec"]["kubelet"] =
        json!({"soft": {"disk.weird": "5%"}, "softGrace": {"disk.weird": "1m"}});
    assert_eq!(
        messages(signals, None),
        vec![
            "spec.kubelet.soft: unknown signal",
            "spec.kubelet.softGrace: unknown signal"
        ]
    );
    let mut family = good();
    family["spec"]["family"] = json!("Custom");
    family["spec"]["terms"] = json!([{"id": "img-1", "name": "n"}]);
    assert_eq!(
        messages(family, None),
        vec!["spec.terms: 'id' is exclusive"]
    );
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "/spec/terms",
            json!([{"alias": "fam1@1"}, {"id": "img-1"}]),
            "spec.terms: 'alias' stands alone",
        ),
        (
            "/spec/terms",
            json!([{}]),
            "spec.terms: expected at least one field",
        ),
        (
            "/spec/terms",
            json!([{"alias": "fam9@1"}]),
            "spec.terms[0].alias: family not supported",
        ),
        (
            "/spec/terms",
            json!([{"tags": {"a": ""}}]),
            "spec.terms[0].tags: empty tag keys or values aren't supported",
        ),
        (
            "/spec/mappings",
            json!([{"root": true}, {"root": true}]),
            "spec.mappings: one root volume at most",
        ),
        (
            "/spec/mappings",
            json!([{"disk": {}}]),
            "spec.mappings[0].disk: snapshot or size must be defined",
        ),
        (
            "/spec/kubelet/low",
            json!(90),
            "spec.kubelet: high must exceed low",
        ),
        (
            "/spec/kubelet/soft",
            json!({"memory.available": "5%", "pid.available": "1%"}),
            "spec.kubelet: soft needs grace",
        ),
        (
            "/spec/kubelet/reserved",
            json!({"memory": "-1Gi"}),
            "spec.kubelet.reserved: negative reservation",
        ),
        (
            "/spec/kubelet/reserved",
            json!({"gpu": "1"}),
            "spec.kubelet.reserved: unknown resource",
        ),
        (
            "/spec/tags",
            json!({"cluster.example/x": "owned"}),
            "spec.tags: restricted tag",
        ),
        (
            "/spec/family",
            json!("Fam2"),
            "spec: family must match alias",
        ),
        ("/spec/role", json!(""), "spec.role: role cannot be empty"),
    ];
    for (pointer, value, expected) in cases {
        let mut obj = good();
        *obj.pointer_mut(pointer)
            .unwrap_or_else(|| panic!("{pointer}")) = value;
        assert_eq!(messages(obj, None), vec![expected.to_string()], "{pointer}");
    }
}

#[test]
fn object_level_and_transition_rules() {
    let mut both = good();
    both["spec"]["profile"] = json!("p");
    assert_eq!(
        messages(both, None),
        vec!["spec: exactly one of role and profile"]
    );
    let mut no_alias = good();
    no_alias["spec"]["terms"] = json!([{"id": "img-1"}]);
    no_alias["spec"].as_object_mut().unwrap().remove("family");
    assert_eq!(
        messages(no_alias.clone(), None),
        vec!["spec: family required without alias"]
    );
    no_alias["spec"]["family"] = json!("Custom");
    assert_eq!(messages(no_alias, None), Vec::<String>::new());
    let mut renamed = good();
    renamed["spec"]["role"] = json!("other");
    assert_eq!(
        messages(renamed, Some(good())),
        vec!["spec.role: immutable field changed"]
    );
    let mut switched = good();
    switched["spec"].as_object_mut().unwrap().remove("role");
    switched["spec"]["profile"] = json!("p");
    assert_eq!(
        messages(switched, Some(good())),
        vec!["spec: cannot switch"]
    );
}
