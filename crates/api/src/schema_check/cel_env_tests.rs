//! Tests of the CEL environment: Kubernetes functions, value conversion, property escaping.

use super::cel_env::{Compiled, Outcome, escape_property, mentions_old_self, to_cel};
use serde_json::json;

fn run(rule: &str, this: serde_json::Value) -> Outcome {
    Compiled::new(rule).check(&to_cel(None, &this), None)
}

#[test]
fn kubernetes_functions() {
    assert_eq!(
        run("self.find('^([^/]+)') == 'a.io'", json!("a.io/b")),
        Outcome::Pass
    );
    assert_eq!(run("self.find('^x') == ''", json!("a.io/b")), Outcome::Pass);
    assert_eq!(
        run("self.findAll('[0-9]') == ['1', '2']", json!("a1b2")),
        Outcome::Pass
    );
    assert_eq!(
        run("self.findAll('[0-9]', 1) == ['1']", json!("a1b2")),
        Outcome::Pass
    );
    assert_eq!(run("self.isSorted()", json!([1, 2, 2])), Outcome::Pass);
    assert_eq!(run("self.isSorted()", json!(["b", "a"])), Outcome::Fail);
    assert_eq!(
        run(
            "self.sum() == 6 && self.min() == 1 && self.max() == 3",
            json!([1, 2, 3])
        ),
        Outcome::Pass
    );
    assert_eq!(
        run(
            "self.indexOf(2) == 1 && self.lastIndexOf(9) == -1",
            json!([1, 2, 2])
        ),
        Outcome::Pass
    );
    assert_eq!(
        run(
            "sets.contains(self, [1]) && !sets.intersects(self, [7])",
            json!([1, 2])
        ),
        Outcome::Pass
    );
    assert_eq!(
        run("sets.equivalent(self, [2, 1, 1])", json!([1, 2])),
        Outcome::Pass
    );
    assert_eq!(
        run("self.split('/')[0].lowerAscii() == 'a'", json!("A/b")),
        Outcome::Pass
    );
    assert_eq!(
        run("self.matches('^[a-z0-9]+@.*$')", json!("al2@latest")),
        Outcome::Pass
    );
    assert_eq!(
        run("self.matches('^[a-z]+@')", json!("al2@latest")),
        Outcome::Fail
    );
}

#[test]
fn unknown_functions_and_runtime_errors_are_not_passes() {
    assert!(matches!(
        run("quantity(self).isLessThan(quantity('1'))", json!("2")),
        Outcome::Unevaluated(_)
    ));
    assert!(matches!(
        run("self.missing == 1", json!({})),
        Outcome::Unevaluated(_)
    ));
    assert!(matches!(
        run("self.size()", json!("abc")),
        Outcome::Unevaluated(_)
    ));
    assert!(matches!(run("self ==", json!(1)), Outcome::Unevaluated(_)));
    assert!(Compiled::new("self ==").parse_error().is_some());
}

#[test]
fn numbers_follow_the_schema() {
    let schema = json!({"type": "object", "properties": {"n": {"type": "number"}, "i": {"type": "integer"}}});
    let v = to_cel(Some(&schema), &json!({"n": 3, "i": 3}));
    assert_eq!(
        Compiled::new("type(self.n) == double && type(self.i) == int").check(&v, None),
        Outcome::Pass
    );
}

#[test]
fn property_names_are_escaped_like_kubernetes() {
    assert_eq!(
        escape_property("namespace").as_deref(),
        Some("__namespace__")
    );
    assert_eq!(
        escape_property("a-b.c").as_deref(),
        Some("a__dash__b__dot__c")
    );
    assert_eq!(
        escape_property("x__y").as_deref(),
        Some("x__underscores__y")
    );
    assert_eq!(escape_property("1abc"), None);
    assert_eq!(escape_property("plain").as_deref(), Some("plain"));
}

#[test]
fn old_self_is_found_outside_literals_only() {
    assert!(mentions_old_self("self.group == oldSelf.group"));
    assert!(mentions_old_self("has(oldSelf.role)"));
    assert!(!mentions_old_self("self.x == 'oldSelf'"));
    assert!(!mentions_old_self("self.oldSelfish"));
}

#[test]
fn matches_uses_re2_classes() {
    assert_eq!(
        run("matches(self, '^[a-z0-9]+@')", json!("al2@latest")),
        Outcome::Pass
    );
    assert_eq!(run(r"self.matches('^\\d+$')", json!("42")), Outcome::Pass);
    // RE2's \d is ASCII-only, unlike the regex crate's default.
    assert_eq!(run(r"self.matches('^\\d+$')", json!("٤٢")), Outcome::Fail);
    assert_eq!(
        run(r"self.find('\\d+') == '2'", json!("x٤2")),
        Outcome::Pass
    );
}
