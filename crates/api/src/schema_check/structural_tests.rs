//! Tests of `check_structural` on CRDs written for them, each case accepted or rejected.

use serde_json::{Value, json};

use super::check_structural;
use crate::schema::{array, integer, map_of, object, quantity, string};

const AT: &str = "spec.versions[0].schema.openAPIV3Schema";

fn crd(schema: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.dev"},
        "spec": {
            "group": "example.dev",
            "names": {"kind": "Widget", "listKind": "WidgetList", "plural": "widgets", "singular": "widget", "shortNames": ["wd"]},
            "scope": "Cluster",
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "schema": {"openAPIV3Schema": schema},
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                    {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
                ]
            }]
        }
    })
}

fn root(spec: crate::schema::Schema) -> Value {
    let condition = object()
        .prop("type", string().max_length(316))
        .prop("status", string().enumerate(&["True", "False", "Unknown"]))
        .required(&["type", "status"]);
    object()
        .prop("apiVersion", string())
        .prop("kind", string())
        .prop("metadata", object())
        .prop("spec", spec)
        .prop(
            "status",
            object().prop(
                "conditions",
                array(condition).list_type("map").list_map_keys(&["type"]),
            ),
        )
        .into_value()
}

fn good_spec() -> crate::schema::Schema {
    let item = object()
        .prop(
            "key",
            string().max_length(316).rule(
                "self.find('^([^/]+)') != 'forbidden.dev'",
                "domain forbidden",
            ),
        )
        .prop("operator", string().enumerate(&["In", "NotIn"]))
        .prop("values", array(string().max_length(63)).max_items(50))
        .required(&["key", "operator"]);
    object()
        .prop("size", integer().minimum(0).default(json!(1)))
        .prop(
            "requirements",
            array(item).max_items(100).rule(
                "self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)",
                "In needs values",
            ),
        )
        .prop(
            "labels",
            map_of(string().max_length(63)).max_properties(100).rule(
                "self.all(k, !k.startsWith('x/') && self[k] != '')",
                "bad label",
            ),
        )
        .prop("limits", map_of(quantity()))
        .prop(
            "ref",
            object()
                .prop("name", string())
                .transition_rule("self.name == oldSelf.name", "immutable"),
        )
        .required(&["requirements"])
}

fn problems(schema: Value) -> Vec<String> {
    check_structural(&crd(schema))
}

fn assert_reports(got: &[String], path: &str, needle: &str) {
    assert!(
        got.iter()
            .any(|e| e.starts_with(&format!("{AT}{path}: ")) && e.contains(needle)),
        "expected {AT}{path}: ...{needle}... in {got:#?}"
    );
}

#[test]
fn a_well_formed_crd_has_no_problems() {
    assert_eq!(problems(root(good_spec())), Vec::<String>::new());
}

#[test]
fn names_versions_and_columns() {
    let mut c = crd(root(good_spec()));
    c["metadata"]["name"] = json!("widget.example.dev");
    c["spec"]["names"]["plural"] = json!("Widgets");
    c["spec"]["versions"][0]["additionalPrinterColumns"][0]["jsonPath"] = json!(".spec.sizes");
    c["spec"]["versions"][0]["additionalPrinterColumns"][1]["jsonPath"] = json!("spec[");
    c["spec"]["versions"][0]["additionalPrinterColumns"][2]["type"] = json!("time");
    let mut second = c["spec"]["versions"][0].clone();
    second["name"] = json!("v2");
    c["spec"]["versions"].as_array_mut().unwrap().push(second);
    let got = check_structural(&c);
    for (path, needle) in [
        ("metadata.name", "must be spec.names.plural"),
        ("spec.names.plural", "DNS-1035"),
        (
            "spec.versions",
            "exactly one version marked as storage version, found 2",
        ),
        (
            "spec.versions[0].additionalPrinterColumns[0].jsonPath",
            "\"sizes\" is not declared",
        ),
        (
            "spec.versions[0].additionalPrinterColumns[1].jsonPath",
            "must start with '.'",
        ),
        (
            "spec.versions[0].additionalPrinterColumns[2].type",
            "Unsupported value",
        ),
    ] {
        assert!(
            got.iter()
                .any(|e| e.starts_with(&format!("{path}: ")) && e.contains(needle)),
            "{path} {needle} in {got:#?}"
        );
    }
}

#[test]
fn structural_schema_rules() {
    let spec = object()
        .prop(
            "both",
            object()
                .prop("a", string())
                .set("additionalProperties", json!({"type": "string"})),
        )
        .prop(
            "keys",
            array(object().prop("k", string())).list_map_keys(&["k"]),
        )
        .prop(
            "mapList",
            array(object().prop("k", string()).prop("o", object()))
                .list_type("map")
                .list_map_keys(&["k", "o"]),
        )
        .prop("ios", quantity().set("type", json!("string")))
        .prop("uniq", array(string()).set("uniqueItems", json!(true)))
        .prop("closed", object().set("additionalProperties", json!(false)))
        .prop("req", object().prop("a", string()).required(&["a", "b"]))
        .prop("color", string().set("enum", json!(["red", 3])))
        .prop("pat", string().pattern("(?=lookahead)"))
        .prop("ref", object().set("$ref", json!("#/definitions/x")));
    let mut schema = root(spec);
    schema["properties"]["spec"]["properties"]["untyped"] = json!({"description": "no type"});
    schema["properties"]["spec"]["properties"]["list"] = json!({"type": "array"});
    let got = problems(schema);
    let p = ".properties[spec].properties";
    assert_reports(&got, &format!("{p}[untyped].type"), "Required value");
    assert_reports(
        &got,
        &format!("{p}[both].additionalProperties"),
        "mutual exclusive",
    );
    assert_reports(&got, &format!("{p}[list].items"), "Required value");
    assert_reports(
        &got,
        &format!("{p}[keys].x-kubernetes-list-map-keys"),
        "only allowed with x-kubernetes-list-type map",
    );
    assert_reports(
        &got,
        &format!("{p}[mapList].items.properties[k]"),
        "required or have a default",
    );
    assert_reports(
        &got,
        &format!("{p}[mapList].items.properties[o].type"),
        "scalar type",
    );
    assert_reports(
        &got,
        &format!("{p}[ios].type"),
        "x-kubernetes-int-or-string",
    );
    assert_reports(&got, &format!("{p}[uniq].uniqueItems"), "quadratic");
    assert_reports(
        &got,
        &format!("{p}[closed].additionalProperties"),
        "cannot be set to false",
    );
    assert_reports(
        &got,
        &format!("{p}[req].required"),
        "\"b\": not a declared property",
    );
    assert_reports(
        &got,
        &format!("{p}[color].enum[1]"),
        "must be of type string",
    );
    assert_reports(&got, &format!("{p}[pat].pattern"), "does not compile");
    assert_reports(&got, &format!("{p}[ref].$ref"), "Forbidden");
}

#[test]
fn defaults_must_validate_against_their_schema_and_rules() {
    let spec = object()
        .prop("mode", string().enumerate(&["A", "B"]).default(json!("C")))
        .prop("n", integer().maximum(5).default(json!(9)))
        .prop(
            "name",
            string()
                .rule("self != ''", "name may not be empty")
                .default(json!("")),
        )
        .prop(
            "nested",
            object()
                .prop("x", integer())
                .default(json!({"x": "one", "y": 2})),
        );
    let got = problems(root(spec));
    let p = ".properties[spec].properties";
    assert_reports(
        &got,
        &format!("{p}[mode].default"),
        "Unsupported value: \"C\"",
    );
    assert_reports(&got, &format!("{p}[n].default"), "less than or equal to 5");
    assert_reports(&got, &format!("{p}[name].default"), "name may not be empty");
    assert_reports(
        &got,
        &format!("{p}[nested].default.x"),
        "must be of type integer",
    );
    assert_reports(&got, &format!("{p}[nested].default.y"), "not declared");
}

#[test]
fn rules_must_compile_name_declared_fields_and_known_functions() {
    let spec = object()
        .prop("a", string().max_length(10))
        .rule("self.a ==", "syntax")
        .rule("self.b == 'x'", "undeclared field")
        .rule("self.a.frobnicate()", "unknown function")
        .rule("quantity(self.a).isLessThan(quantity('1'))", "unevaluable")
        .rule("has(self.a) ? self.a.startsWith('x') : true", "fine");
    let got = problems(root(spec));
    let rule = |i: usize| format!(".properties[spec].x-kubernetes-validations[{i}].rule");
    assert_reports(&got, &rule(0), "compilation failed");
    assert_reports(&got, &rule(1), "undefined field 'b'");
    assert_reports(&got, &rule(2), "undeclared reference to 'frobnicate'");
    assert_reports(
        &got,
        &rule(3),
        "rule could not be evaluated: calls isLessThan",
    );
    assert!(!got.iter().any(|e| e.contains(&rule(4))), "{got:#?}");
}

#[test]
fn root_rules_may_read_the_name_only() {
    let mut schema = root(good_spec());
    schema["x-kubernetes-validations"] = json!([
        {"rule": "self.metadata.name.size() <= 63", "message": "name too long"},
        {"rule": "has(self.metadata.labels)", "message": "labels are not visible"}
    ]);
    let got = problems(schema);
    assert_eq!(got.len(), 1, "{got:#?}");
    assert_reports(
        &got,
        ".x-kubernetes-validations[1].rule",
        "undefined field 'labels'",
    );
}

#[test]
fn transition_rules_need_correlatable_nodes() {
    let spec = object()
        .prop(
            "atomic",
            array(
                object()
                    .prop("v", string())
                    .transition_rule("self.v == oldSelf.v", "immutable"),
            ),
        )
        .prop(
            "keyed",
            array(
                object()
                    .prop("k", string())
                    .transition_rule("self.k == oldSelf.k", "immutable")
                    .required(&["k"]),
            )
            .list_type("map")
            .list_map_keys(&["k"]),
        );
    let got = problems(root(spec));
    assert_reports(
        &got,
        ".properties[spec].properties[atomic].items.x-kubernetes-validations[0].rule",
        "uncorrelatable",
    );
    assert!(!got.iter().any(|e| e.contains("[keyed]")), "{got:#?}");
}

#[test]
fn cost_is_estimated_from_bounds() {
    let rule = "self.all(x, x.matches('^[a-z]+$'))";
    let unbounded = object().prop("names", array(string()).rule(rule, "lowercase"));
    let got = problems(root(unbounded));
    assert_reports(
        &got,
        ".properties[spec].properties[names].x-kubernetes-validations[0].rule",
        "estimated rule cost exceeds budget",
    );
    let only_items = object().prop(
        "names",
        array(string()).max_items(100).rule(rule, "lowercase"),
    );
    assert_reports(
        &problems(root(only_items)),
        ".properties[spec].properties[names].x-kubernetes-validations[0].rule",
        "estimated rule cost exceeds budget",
    );
    let bounded = object().prop("size", integer()).prop(
        "names",
        array(string().max_length(63))
            .max_items(100)
            .rule(rule, "lowercase"),
    );
    assert_eq!(problems(root(bounded)), Vec::<String>::new());
    // Cheap rules on unbounded lists are fine, as on the server.
    let cheap = object().prop("size", integer()).prop(
        "names",
        array(string()).rule("self.size() != 0", "non-empty"),
    );
    assert_eq!(problems(root(cheap)), Vec::<String>::new());
}

#[test]
fn rule_metadata_is_checked() {
    let spec = object().prop("a", string()).set(
        "x-kubernetes-validations",
        json!([
            {"rule": "self.a != ''", "message": "two\nlines"},
            {"rule": "self.a != ''", "reason": "FieldValueOdd"},
            {"rule": "self.a != ''", "fieldPath": ".nope"},
            {"rule": "self.a != ''", "optionalOldSelf": true},
            {"rule": "self.a != ''", "messageExpression": "'a' +"},
            {"rule": "self.a != ''", "fieldPath": ".a", "messageExpression": "'bad a: ' + self.a"}
        ]),
    );
    let got = problems(root(spec));
    let v = |i: usize, f: &str| format!(".properties[spec].x-kubernetes-validations[{i}].{f}");
    assert_reports(&got, &v(0, "message"), "line breaks");
    assert_reports(&got, &v(1, "reason"), "Unsupported value");
    assert_reports(&got, &v(2, "fieldPath"), "declared field");
    assert_reports(&got, &v(3, "optionalOldSelf"), "does not use oldSelf");
    assert_reports(&got, &v(4, "messageExpression"), "compilation failed");
    assert!(
        !got.iter().any(|e| e.contains("validations[5]")),
        "{got:#?}"
    );
}

#[test]
fn root_metadata_may_only_constrain_name() {
    let schema = object()
        .prop("metadata", object().prop("labels", map_of(string())))
        .prop("spec", good_spec())
        .into_value();
    assert_reports(
        &problems(schema),
        ".properties[metadata]",
        "name and generateName",
    );
}

#[test]
fn objects_are_validated_against_the_named_version() {
    let c = crd(root(good_spec()));
    let ok = json!({
        "apiVersion": "example.dev/v1",
        "kind": "Widget",
        "metadata": {"name": "w1"},
        "spec": {"requirements": [{"key": "a", "operator": "In", "values": ["x"]}], "ref": {"name": "r"}}
    });
    assert_eq!(super::validate_against_crd(&c, "v1", &ok, None), vec![]);
    let mut bad = ok.clone();
    bad["apiVersion"] = json!("example.dev/v2");
    bad["kind"] = json!("Gadget");
    bad["metadata"]["name"] = json!("Not_A_Name");
    bad["spec"]["requirements"][0]["values"] = json!([]);
    bad["spec"]["ref"]["name"] = json!("changed");
    let got: Vec<String> = super::validate_against_crd(&c, "v1", &bad, Some(&ok))
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(got.len(), 5, "{got:#?}");
    assert!(got[0].starts_with("apiVersion: Invalid value: \"example.dev/v2\""));
    assert!(got[1].starts_with("kind: Invalid value: \"Gadget\""));
    assert!(got[2].starts_with("metadata.name: Invalid value: \"Not_A_Name\""));
    assert_eq!(got[3], "spec.requirements: In needs values");
    assert_eq!(got[4], "spec.ref: immutable");
    let missing = super::validate_against_crd(&c, "v9", &ok, None);
    assert_eq!(
        missing[0].to_string(),
        "apiVersion: version \"v9\" is not defined by the CRD"
    );
}

#[test]
fn optional_syntax_and_other_macros_are_understood() {
    let spec = object()
        .prop("size", integer())
        .prop("a", string().max_length(10))
        .prop("xs", array(string().max_length(10)).max_items(10))
        .rule("self.?a.orValue('') != 'x'", "optional select")
        .rule("self.xs.exists_one(x, x == 'only')", "exists_one")
        .rule("self.xs.map(x, x.size()).all(n, n < 10)", "map")
        .rule("self.xs.filter(x, x.startsWith('a')).size() < 3", "filter");
    assert_eq!(problems(root(spec.clone())), Vec::<String>::new());
    let schema = spec.into_value();
    let ok = super::validate_object(&schema, &json!({"a": "y", "xs": ["only", "b"]}), None);
    assert_eq!(ok, vec![]);
    let bad = super::validate_object(
        &schema,
        &json!({"a": "x", "xs": ["only", "only", "a1", "a2", "a3"]}),
        None,
    );
    let reasons: Vec<&str> = bad.iter().map(|e| e.reason.as_str()).collect();
    assert_eq!(reasons, vec!["optional select", "exists_one", "filter"]);
}

#[test]
fn rules_with_impossible_types_are_rejected() {
    let spec = object()
        .prop("size", integer())
        .prop("name", string().max_length(10))
        .prop("xs", array(string().max_length(10)).max_items(10))
        .rule("self.size == '1'", "int against string")
        .rule("self.name.size() > 'a'", "ordering int and string")
        .rule("self.size.startsWith('1')", "string function on an int")
        .rule("self.name.size()", "not a bool")
        .rule("self.name.all(c, c != 'x')", "comprehension over a string")
        .rule(
            "self.xs.size() == 2 && self.name",
            "string in a conjunction",
        )
        .rule(
            "self.size == 1 && self.xs == ['a'] && self.name + 'x' != 'y'",
            "fine",
        )
        .rule("'a' in self.name", "in on a string");
    let got = problems(root(spec));
    let rule = |i: usize| format!(".properties[spec].x-kubernetes-validations[{i}].rule");
    assert_reports(
        &got,
        &rule(0),
        "no matching overload for '_==_' applied to '(int, string)'",
    );
    assert_reports(
        &got,
        &rule(1),
        "no matching overload for '_>_' applied to '(int, string)'",
    );
    assert_reports(
        &got,
        &rule(2),
        "no matching overload for 'startsWith' applied to 'int'",
    );
    assert_reports(&got, &rule(3), "must evaluate to bool, not int");
    assert_reports(&got, &rule(4), "cannot be the range of a comprehension");
    assert_reports(&got, &rule(5), "'_&&_' applied to '(bool, string)'");
    assert!(!got.iter().any(|e| e.contains(&rule(6))), "{got:#?}");
    assert_reports(&got, &rule(7), "'@in' applied to '(string, string)'");
    assert_eq!(got.len(), 7, "{got:#?}");
}
