//! Editing JSON objects: by pointer (how every invalid case is made from a valid base) and by
//! merge patch (how a test adds what it is about to a builder's object).

use serde_json::{Value, json};

/// `v` with the field at the JSON pointer `pointer` set to `new`, creating missing objects on
/// the way; `Value::Null` removes the field instead. `~1` in a segment stands for `/`, and a
/// numeric segment indexes an array.
///
/// Panics on a pointer that runs through a scalar: the data is the test's own.
pub fn set(mut v: Value, pointer: &str, new: Value) -> Value {
    let (parent, last) = pointer.rsplit_once('/').expect("a JSON pointer");
    let mut cur = &mut v;
    for part in parent.split('/').skip(1) {
        cur = match cur {
            Value::Array(a) => &mut a[index(part)],
            Value::Object(o) => o.entry(unescape(part)).or_insert_with(|| json!({})),
            _ => panic!("{pointer}: {part} is not a container"),
        };
    }
    match cur {
        Value::Array(a) => a[index(last)] = new,
        Value::Object(o) if new.is_null() => {
            o.remove(&unescape(last));
        }
        Value::Object(o) => {
            o.insert(unescape(last), new);
        }
        _ => panic!("{pointer}: not a container"),
    }
    v
}

/// `base` with each `(pointer, value)` change applied in order, as [`set`] does.
pub fn with(base: Value, changes: &[(&str, Value)]) -> Value {
    changes
        .iter()
        .fold(base, |v, (pointer, new)| set(v, pointer, new.clone()))
}

/// `base` with `patch` merged in as a JSON merge patch (RFC 7386): objects merge key by key, a
/// `null` removes the key, anything else replaces what was there.
pub fn merge(mut base: Value, patch: Value) -> Value {
    merge_into(&mut base, patch);
    base
}

/// [`merge`] in place, as an API server applies a merge patch to a stored object.
pub fn merge_into(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(patch)) => {
            for (k, v) in patch {
                if v.is_null() {
                    t.remove(&k);
                } else {
                    merge_into(t.entry(k).or_insert(Value::Null), v);
                }
            }
        }
        (t, patch @ Value::Object(_)) => {
            *t = json!({});
            merge_into(t, patch);
        }
        (t, patch) => *t = patch,
    }
}

fn unescape(segment: &str) -> String {
    segment.replace("~1", "/").replace("~0", "~")
}

fn index(segment: &str) -> usize {
    segment
        .parse()
        .unwrap_or_else(|_| panic!("{segment}: not an array index"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_creates_escapes_indexes_and_removes() {
        let v = json!({"a": [{"b": 1}], "c": 2});
        let v = set(v, "/a/0/b", json!(3));
        let v = set(v, "/d/e~1f", json!("x"));
        let v = set(v, "/c", Value::Null);
        assert_eq!(v, json!({"a": [{"b": 3}], "d": {"e/f": "x"}}));
    }

    #[test]
    fn merge_merges_objects_removes_nulls_and_replaces_the_rest() {
        let v = merge(
            json!({"a": {"b": 1, "c": 2}, "d": [1], "e": 3}),
            json!({"a": {"b": null, "x": {"y": 1}}, "d": [2], "e": {"f": 4}}),
        );
        assert_eq!(
            v,
            json!({"a": {"c": 2, "x": {"y": 1}}, "d": [2], "e": {"f": 4}})
        );
        assert_eq!(merge(json!({"a": 1}), json!(5)), json!(5));
    }

    #[test]
    fn with_applies_changes_in_order() {
        let v = with(json!({}), &[("/a", json!(1)), ("/a", json!(2))]);
        assert_eq!(v, json!({"a": 2}));
    }
}
