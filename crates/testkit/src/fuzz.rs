//! What the fuzz targets (`tests/fuzz.rs` in api, aws-model and sim) share: how many cases to
//! run, a generator of JSON values made to break careless readers, and the mutation that puts
//! one such value at one place of a valid document (or removes what is there).

use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::Value;

/// `NODEWRIGHT_FUZZ_CASES` when set (to search longer), else `default`.
pub fn cases(default: u32) -> u32 {
    std::env::var("NODEWRIGHT_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A runner of [`cases`]`(default)` cases that writes no regression files into the checkout.
pub fn config(default: u32) -> Config {
    Config {
        cases: cases(default),
        failure_persistence: None,
        ..Config::default()
    }
}

/// Any JSON value, small: the numbers that overflow careless arithmetic, any text, and the
/// strings a target's readers should see (`strings`: durations, quantities, names).
pub fn any_json(strings: impl Strategy<Value = String> + 'static) -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        prop_oneof![
            Just(i64::MIN),
            Just(i64::MAX),
            Just(-1),
            Just(0),
            any::<i64>()
        ]
        .prop_map(Value::from),
        prop_oneof![Just(u64::MAX), any::<u64>(), 0..200_000u64].prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        prop_oneof!["\\PC{0,12}", strings].prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 12, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-zA-Z./-]{1,10}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Every JSON pointer in `v`, inner ones before their parents, the root (`""`) last.
pub fn pointers(v: &Value) -> Vec<String> {
    fn walk(v: &Value, at: String, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => m.iter().for_each(|(k, c)| {
                let key = k.replace('~', "~0").replace('/', "~1");
                walk(c, format!("{at}/{key}"), out)
            }),
            Value::Array(a) => a
                .iter()
                .enumerate()
                .for_each(|(i, c)| walk(c, format!("{at}/{i}"), out)),
            _ => {}
        }
        out.push(at);
    }
    let mut out = Vec::new();
    walk(v, String::new(), &mut out);
    out
}

/// `base` with the value at one of its pointers (chosen by `pick`) replaced by `with`, or
/// removed; and that pointer. Removing the root replaces it.
pub fn mutate(base: &Value, pick: usize, with: Value, remove: bool) -> (Value, String) {
    let mut v = base.clone();
    let all = pointers(&v);
    let at = all[pick % all.len()].clone();
    match at.rsplit_once('/') {
        Some((parent, key)) if remove => match v.pointer_mut(parent) {
            Some(Value::Object(m)) => {
                m.remove(&key.replace("~1", "/").replace("~0", "~"));
            }
            Some(Value::Array(a)) => {
                let i = key.parse::<usize>().unwrap_or(0).min(a.len() - 1);
                a.remove(i);
            }
            _ => {}
        },
        _ => {
            if let Some(slot) = v.pointer_mut(&at) {
                *slot = with;
            }
        }
    }
    (v, at)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn every_place_of_a_document_can_be_replaced_or_removed() {
        let doc = json!({"spec": {"a/b": [1, {"c": 2}]}, "kind": "K"});
        let all = pointers(&doc);
        assert_eq!(all.len(), 7);
        assert_eq!(all.last().map(String::as_str), Some(""));
        for at in [
            "/kind",
            "/spec",
            "/spec/a~1b",
            "/spec/a~1b/0",
            "/spec/a~1b/1/c",
        ] {
            assert!(all.iter().any(|p| p == at), "{at} missing from {all:?}");
        }
        let pick = |at: &str| all.iter().position(|p| p == at).unwrap();

        let (v, at) = mutate(&doc, pick("/spec/a~1b/0"), json!("x"), false);
        assert_eq!(at, "/spec/a~1b/0");
        assert_eq!(v, json!({"spec": {"a/b": ["x", {"c": 2}]}, "kind": "K"}));
        let (v, _) = mutate(&doc, pick("/spec/a~1b"), Value::Null, true);
        assert_eq!(v, json!({"spec": {}, "kind": "K"}));
        let (v, _) = mutate(&doc, pick("/spec/a~1b/0"), Value::Null, true);
        assert_eq!(v, json!({"spec": {"a/b": [{"c": 2}]}, "kind": "K"}));
        // `pick` wraps around; the root cannot be removed, only replaced.
        let (v, at) = mutate(&doc, 2 * all.len() - 1, json!(7), true);
        assert_eq!((v, at.as_str()), (json!(7), ""));
    }
}
