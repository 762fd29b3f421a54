//! Tests of `validate_object`: defaulting, OpenAPI constraints, CEL rules, transitions, ratcheting.

use serde_json::{Value, json};

use super::{
    RULE_NOT_EVALUATED, RULES_NOT_CHECKED, is_unevaluated_rule, validate_object, with_defaults,
};
use crate::error::FieldError;
use crate::schema::{array, boolean, int32, integer, map_of, number, object, quantity, string};

fn errors(schema: &Value, object: Value) -> Vec<String> {
    validate_object(schema, &object, None)
        .iter()
        .map(FieldError::to_string)
        .collect()
}

fn update_errors(schema: &Value, old: Value, new: Value) -> Vec<String> {
    validate_object(schema, &new, Some(&old))
        .iter()
        .map(FieldError::to_string)
        .collect()
}

/// A node-pool-like schema written for these tests.
fn pool() -> Value {
    let requirement = object()
        .prop(
            "key",
            string()
                .max_length(316)
                .rule("self != ''", "key may not be empty"),
        )
        .prop(
            "operator",
            string().enumerate(&["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]),
        )
        .prop("values", array(string()).list_type("atomic"))
        .prop("minValues", integer().minimum(1).maximum(50))
        .required(&["key", "operator"]);
    let requirements = array(requirement)
        .max_items(100)
        .rule("self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)", "'In' needs values")
        .rule(
            "self.all(x, (x.operator == 'Gt' || x.operator == 'Lt') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)",
            "'Gt' and 'Lt' need one non-negative integer",
        )
        .rule(
            "self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)",
            "too few values for minValues",
        );
    let labels = map_of(string().max_length(63))
        .set("maxProperties", json!(4))
        .rule(
            "self.all(k, k in ['kubernetes.io/arch', 'kubernetes.io/os'] || k.find('^([^/]+)').endsWith('node.kubernetes.io') || !k.find('^([^/]+)').endsWith('kubernetes.io'))",
            "label domain kubernetes.io is restricted",
        );
    let class_ref = object()
        .prop("group", string())
        .prop("kind", string())
        .prop("name", string().rule("self != ''", "name may not be empty"))
        .required(&["group", "kind", "name"])
        .transition_rule("self.group == oldSelf.group", "group is immutable");
    let budget = object()
        .prop(
            "nodes",
            string()
                .pattern(r"^((100|[0-9]{1,2})%|[0-9]+)$")
                .default(json!("10%")),
        )
        .prop("schedule", string())
        .prop("duration", string().pattern(r"^([0-9]+(h|m))+$"))
        .required(&["nodes"]);
    let disruption = object()
        .prop(
            "consolidationPolicy",
            string()
                .enumerate(&["WhenEmpty", "WhenEmptyOrUnderutilized"])
                .default(json!("WhenEmptyOrUnderutilized")),
        )
        .prop(
            "consolidateAfter",
            string().pattern(r"^(([0-9]+(s|m|h))+)|(Never)$"),
        )
        .prop(
            "budgets",
            array(budget)
                .max_items(50)
                .default(json!([{"nodes": "10%"}]))
                .rule(
                    "self.all(x, has(x.schedule) == has(x.duration))",
                    "'schedule' must be set with 'duration'",
                ),
        )
        .required(&["consolidateAfter"])
        .default(json!({"consolidateAfter": "0s"}));
    let spec = object()
        .prop("requirements", requirements)
        .prop("nodeClassRef", class_ref)
        .prop("weight", int32().minimum(1).maximum(100))
        .prop("labels", labels)
        .prop("limits", map_of(quantity()))
        .prop("disruption", disruption)
        .required(&["requirements"]);
    object()
        .prop("apiVersion", string())
        .prop("kind", string())
        .prop("metadata", object())
        .prop("spec", spec)
        .required(&["spec"])
        .into_value()
}

fn valid_pool() -> Value {
    json!({
        "apiVersion": "example.dev/v1",
        "kind": "Pool",
        "metadata": {"name": "default", "labels": {"anything": "goes"}},
        "spec": {
            "requirements": [
                {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                {"key": "example.dev/gen", "operator": "Gt", "values": ["2"]},
                {"key": "example.dev/family", "operator": "In", "values": ["c", "m"], "minValues": 2}
            ],
            "nodeClassRef": {"group": "example.dev", "kind": "Class", "name": "default"},
            "labels": {"team": "a", "node.kubernetes.io/role": "x"},
            "limits": {"cpu": "1000", "memory": 512}
        }
    })
}

#[test]
fn a_valid_object_passes_and_gets_defaults() {
    let schema = pool();
    assert_eq!(errors(&schema, valid_pool()), Vec::<String>::new());
    let stored = with_defaults(&schema, &valid_pool());
    assert_eq!(
        stored["spec"]["disruption"],
        json!({"consolidateAfter": "0s", "consolidationPolicy": "WhenEmptyOrUnderutilized", "budgets": [{"nodes": "10%"}]})
    );
}

#[test]
fn defaults_replace_non_nullable_nulls_and_nulls_without_default_are_dropped() {
    let schema = pool();
    let mut obj = valid_pool();
    obj["spec"]["disruption"] = json!({"consolidateAfter": "1m", "consolidationPolicy": null});
    obj["spec"]["weight"] = Value::Null;
    let stored = with_defaults(&schema, &obj);
    assert_eq!(
        stored["spec"]["disruption"]["consolidationPolicy"],
        "WhenEmptyOrUnderutilized"
    );
    assert!(stored["spec"].get("weight").is_none());
    assert_eq!(errors(&schema, obj), Vec::<String>::new());
}

#[test]
fn openapi_constraints_are_enforced_with_paths() {
    let schema = pool();
    let mut obj = valid_pool();
    obj["spec"]["requirements"][1]["operator"] = json!("Around");
    obj["spec"]["requirements"][2]["minValues"] = json!(0);
    obj["spec"]["weight"] = json!(101);
    obj["spec"]["labels"]["team"] = json!("x".repeat(64));
    obj["spec"]["disruption"] = json!({"consolidateAfter": "soon", "budgets": [{"nodes": "101%"}]});
    obj["spec"]["nodeClassRef"]
        .as_object_mut()
        .unwrap()
        .remove("kind");
    obj["spec"]["surprise"] = json!(true);
    let got = errors(&schema, obj);
    let expected = [
        "spec.requirements[1].operator: Unsupported value: \"Around\": supported values: \"In\", \"NotIn\", \"Exists\", \"DoesNotExist\", \"Gt\", \"Lt\"",
        "spec.requirements[2].minValues: Invalid value: 0: should be greater than or equal to 1",
        "spec.nodeClassRef.kind: Required value",
        "spec.weight: Invalid value: 101: should be less than or equal to 100",
        "spec.labels[team]: Too long: may not be longer than 63",
        "spec.disruption.consolidateAfter: Invalid value: \"soon\": should match '^(([0-9]+(s|m|h))+)|(Never)$'",
        "spec.disruption.budgets[0].nodes: Invalid value: \"101%\": should match '^((100|[0-9]{1,2})%|[0-9]+)$'",
        "spec.surprise: field not declared in schema",
    ];
    for e in expected {
        assert!(got.contains(&e.to_string()), "missing {e:?} in {got:#?}");
    }
    assert_eq!(got.len(), expected.len(), "{got:#?}");
}

#[test]
fn type_errors_stop_rules_like_the_server() {
    let schema = pool();
    let mut obj = valid_pool();
    obj["spec"]["weight"] = json!("heavy");
    obj["spec"]["limits"]["gpu"] = json!(true);
    obj["spec"]["requirements"][0]["values"] = json!([]);
    let got = errors(&schema, obj);
    assert_eq!(
        got,
        vec![
            "spec.limits[gpu]: must be of type integer or string, got boolean".to_string(),
            "spec.weight: must be of type integer, got string".to_string(),
            RULES_NOT_CHECKED.to_string(),
        ]
    );
}

#[test]
fn int_or_string_and_any_of() {
    let schema = object()
        .prop("q", quantity())
        .prop("n", number())
        .into_value();
    assert!(errors(&schema, json!({"q": 2, "n": 1.5})).is_empty());
    assert!(errors(&schema, json!({"q": "1Gi", "n": 3})).is_empty());
    assert_eq!(
        errors(&schema, json!({"q": 1.5})),
        vec![
            "q: must be of type integer or string, got number".to_string(),
            RULES_NOT_CHECKED.to_string()
        ]
    );
    let got = errors(&schema, json!({"q": "lots"}));
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].starts_with("q: Invalid value: \"lots\": should match"),
        "{got:?}"
    );
}

#[test]
fn list_rules_accept_and_reject() {
    let schema = pool();
    let mut obj = valid_pool();
    obj["spec"]["requirements"] = json!([
        {"key": "a", "operator": "In", "values": []},
        {"key": "b", "operator": "Lt", "values": ["-1"]},
        {"key": "c", "operator": "In", "values": ["x"], "minValues": 2}
    ]);
    assert_eq!(
        errors(&schema, obj),
        vec![
            "spec.requirements: 'In' needs values",
            "spec.requirements: 'Gt' and 'Lt' need one non-negative integer",
            "spec.requirements: too few values for minValues",
        ]
    );
}

#[test]
fn a_runtime_error_in_a_rule_is_reported_not_passed() {
    let schema = pool();
    let mut obj = valid_pool();
    obj["spec"]["requirements"] = json!([{"key": "b", "operator": "Gt", "values": ["two"]}]);
    let got = validate_object(&schema, &obj, None);
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(is_unevaluated_rule(&got[0]), "{got:?}");
    assert_eq!(got[0].path, "spec.requirements");
}

#[test]
fn map_rules_see_keys_and_find() {
    let schema = pool();
    for (key, ok) in [
        ("kubernetes.io/os", true),
        ("node.kubernetes.io/pool", true),
        ("example.dev/x", true),
        ("kubernetes.io/hostname", false),
        ("sub.kubernetes.io/x", false),
    ] {
        let mut obj = valid_pool();
        obj["spec"]["labels"] = json!({ key: "v" });
        let got = errors(&schema, obj);
        if ok {
            assert!(got.is_empty(), "{key}: {got:?}");
        } else {
            assert_eq!(
                got,
                vec!["spec.labels: label domain kubernetes.io is restricted"],
                "{key}"
            );
        }
    }
}

#[test]
fn rules_on_defaulted_values_and_has() {
    let schema = pool();
    let mut obj = valid_pool();
    obj["spec"]["disruption"] =
        json!({"consolidateAfter": "1m", "budgets": [{"nodes": "1", "schedule": "@daily"}]});
    assert_eq!(
        errors(&schema, obj.clone()),
        vec!["spec.disruption.budgets: 'schedule' must be set with 'duration'"]
    );
    obj["spec"]["disruption"]["budgets"][0]["duration"] = json!("1h");
    assert!(errors(&schema, obj).is_empty());
}

#[test]
fn scalar_rules_report_at_the_field() {
    let schema = pool();
    let mut obj = valid_pool();
    obj["spec"]["requirements"][2]["key"] = json!("");
    obj["spec"]["nodeClassRef"]["name"] = json!("");
    assert_eq!(
        errors(&schema, obj),
        vec![
            "spec.requirements[2].key: key may not be empty",
            "spec.nodeClassRef.name: name may not be empty"
        ]
    );
}

#[test]
fn transition_rules_run_only_on_update() {
    let schema = pool();
    let old = valid_pool();
    let mut new = valid_pool();
    new["spec"]["nodeClassRef"]["group"] = json!("other.dev");
    assert!(
        errors(&schema, new.clone()).is_empty(),
        "create does not compare"
    );
    assert_eq!(
        update_errors(&schema, old.clone(), new.clone()),
        vec!["spec.nodeClassRef: group is immutable"]
    );
    assert!(update_errors(&schema, old.clone(), old.clone()).is_empty());
    // No old value at that path: the rule is skipped.
    let mut old_without = old;
    old_without["spec"]
        .as_object_mut()
        .unwrap()
        .remove("nodeClassRef");
    assert!(update_errors(&schema, old_without, new).is_empty());
}

#[test]
fn object_rules_with_optional_fields_and_old_self_has() {
    let class = object()
        .prop("role", string().rule("self != ''", "role cannot be empty").transition_rule("self == oldSelf", "immutable field changed"))
        .prop("instanceProfile", string())
        .prop("high", int32().minimum(0).maximum(100))
        .prop("low", int32().minimum(0).maximum(100))
        .prop("tags", map_of(string()).rule("self.all(k, k != '' && self[k] != '')", "empty tag keys or values aren't supported"))
        .rule("has(self.role) != has(self.instanceProfile)", "must specify exactly one of ['role', 'instanceProfile']")
        .rule("(has(oldSelf.role) && has(self.role)) || (has(oldSelf.instanceProfile) && has(self.instanceProfile))", "cannot switch")
        .rule("has(self.high) && has(self.low) ? self.high > self.low : true", "high must be greater than low")
        .into_value();
    assert!(errors(&class, json!({"role": "r", "high": 80, "low": 70})).is_empty());
    assert_eq!(
        errors(
            &class,
            json!({"role": "r", "instanceProfile": "p", "high": 10, "low": 70, "tags": {"a": ""}})
        ),
        vec![
            "must specify exactly one of ['role', 'instanceProfile']",
            "high must be greater than low",
            "tags: empty tag keys or values aren't supported",
        ]
    );
    assert_eq!(
        update_errors(&class, json!({"role": "a"}), json!({"role": "b"})),
        vec!["role: immutable field changed"]
    );
    assert_eq!(
        update_errors(
            &class,
            json!({"role": "a"}),
            json!({"instanceProfile": "p"})
        ),
        vec!["cannot switch"]
    );
}

#[test]
fn filter_exists_and_matches_shapes() {
    let term = object()
        .prop(
            "alias",
            string()
                .max_length(30)
                .rule(
                    "self.matches('^[a-zA-Z0-9]*@.*$')",
                    "alias must look like family@version",
                )
                .rule(
                    "self.find('^[^@]+') in ['fam1', 'fam2']",
                    "family not supported",
                ),
        )
        .prop("id", string().pattern("i-[0-9a-z]+"))
        .prop("root", boolean());
    let schema = object()
        .prop(
            "terms",
            array(term)
                .min_items(1)
                .max_items(30)
                .rule(
                    "self.all(x, has(x.alias) || has(x.id))",
                    "expected at least one of alias, id",
                )
                .rule(
                    "!(self.exists(x, has(x.alias)) && self.size() != 1)",
                    "alias stands alone",
                )
                .rule(
                    "self.filter(x, has(x.root) ? x.root == true : false).size() <= 1",
                    "one root at most",
                ),
        )
        .into_value();
    assert!(errors(&schema, json!({"terms": [{"alias": "fam1@latest"}]})).is_empty());
    assert!(
        errors(
            &schema,
            json!({"terms": [{"id": "i-1", "root": true}, {"id": "i-2", "root": false}]})
        )
        .is_empty()
    );
    assert_eq!(
        errors(
            &schema,
            json!({"terms": [{"alias": "fam3@v1"}, {"id": "i-1", "root": true}, {"id": "i-2", "root": true}, {}]})
        ),
        vec![
            "terms: expected at least one of alias, id",
            "terms: alias stands alone",
            "terms: one root at most",
            "terms[0].alias: family not supported",
        ]
    );
    assert_eq!(
        errors(&schema, json!({"terms": []})),
        vec!["terms: should have at least 1 items"]
    );
    assert_eq!(
        errors(&schema, json!({"terms": [{"alias": "nope"}]}))[0],
        "terms[0].alias: alias must look like family@version"
    );
}

#[test]
fn a_missing_key_in_a_rule_is_an_evaluation_error() {
    // `self.b` is absent: the server fails such a rule with "no such key"; so do we.
    let schema = object()
        .prop("a", map_of(string()))
        .prop("b", map_of(string()))
        .rule(
            "has(self.a) ? self.a.all(e, e in self.b) : true",
            "a keys need b",
        )
        .into_value();
    assert!(errors(&schema, json!({"a": {"x": "1"}, "b": {"x": "2"}})).is_empty());
    assert_eq!(
        errors(&schema, json!({"a": {"x": "1"}, "b": {}})),
        vec!["a keys need b"]
    );
    let got = validate_object(&schema, &json!({"a": {"x": "1"}}), None);
    assert_eq!(got.len(), 1);
    assert!(
        got[0]
            .reason
            .starts_with(&format!("{RULE_NOT_EVALUATED}: ")),
        "{got:?}"
    );
}

#[test]
fn unknown_functions_are_never_silent_passes() {
    let schema = string()
        .rule("quantity(self).isGreaterThan(quantity('1'))", "too small")
        .into_value();
    let got = validate_object(&schema, &json!("2"), None);
    assert_eq!(got.len(), 1);
    assert!(is_unevaluated_rule(&got[0]));
}

#[test]
fn message_expression_field_path_and_default_message() {
    let schema = object()
        .prop("spec", object().prop("size", integer()).prop("m", map_of(string())))
        .set(
            "x-kubernetes-validations",
            json!([
                {"rule": "self.spec.size < 10", "messageExpression": "'size ' + string(self.spec.size) + ' is too big'", "fieldPath": ".spec.size"},
                {"rule": "!('bad' in self.spec.m)", "fieldPath": ".spec.m['bad']"},
            ]),
        )
        .into_value();
    assert_eq!(
        errors(&schema, json!({"spec": {"size": 12, "m": {"bad": "1"}}})),
        vec![
            "spec.size: size 12 is too big",
            "spec.m[bad]: failed rule: !('bad' in self.spec.m)"
        ]
    );
}

#[test]
fn list_map_items_correlate_for_transition_rules_and_must_be_unique() {
    let item = object()
        .prop("name", string())
        .prop("value", string())
        .required(&["name"])
        .transition_rule("self.value == oldSelf.value", "value is immutable");
    let schema = object()
        .prop(
            "items",
            array(item).list_type("map").list_map_keys(&["name"]),
        )
        .prop("set", array(string()).list_type("set"))
        .into_value();
    let old = json!({"items": [{"name": "a", "value": "1"}, {"name": "b", "value": "2"}]});
    let new = json!({"items": [{"name": "b", "value": "2"}, {"name": "a", "value": "9"}, {"name": "c", "value": "3"}]});
    assert_eq!(
        update_errors(&schema, old, new),
        vec!["items[1]: value is immutable"]
    );
    assert_eq!(
        errors(
            &schema,
            json!({"items": [{"name": "a"}, {"name": "a"}], "set": ["x", "y", "x"]})
        ),
        vec![
            "items[1]: Duplicate value: {name=\"a\"}",
            "set[2]: Duplicate value: \"x\""
        ]
    );
}

#[test]
fn formats_and_root_metadata() {
    let schema = object()
        .prop("metadata", object())
        .prop("at", string().format("date-time"))
        .into_value();
    assert!(errors(&schema, json!({"apiVersion": "v1", "kind": "K", "metadata": {"name": "x"}, "at": "2024-01-02T03:04:05Z"})).is_empty());
    assert_eq!(
        errors(&schema, json!({"at": "yesterday"})),
        vec!["at: Invalid value: \"yesterday\": must be a date-time (RFC 3339)"]
    );
}

#[test]
fn updates_ratchet_unchanged_values() {
    let schema = object()
        .prop(
            "name",
            string().max_length(3).rule("self != 'bad'", "name is bad"),
        )
        .prop("size", integer().maximum(5))
        .into_value();
    let stored = json!({"name": "bad", "size": 9});
    // Unchanged invalid values pass an update that touches something else ...
    assert!(update_errors(&schema, stored.clone(), json!({"name": "bad", "size": 9})).is_empty());
    assert_eq!(
        update_errors(&schema, stored.clone(), json!({"name": "bad", "size": 7})),
        vec!["size: Invalid value: 7: should be less than or equal to 5"]
    );
    // ... and changed ones are checked in full.
    assert_eq!(
        update_errors(&schema, stored, json!({"name": "long", "size": 9})),
        vec!["name: Too long: may not be longer than 3"]
    );
    assert_eq!(
        errors(&schema, json!({"name": "bad"})),
        vec!["name: name is bad"]
    );
}
