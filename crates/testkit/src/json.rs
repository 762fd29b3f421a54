//! Editing JSON objects by pointer: how every invalid case is made from a valid base.

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
    fn with_applies_changes_in_order() {
        let v = with(json!({}), &[("/a", json!(1)), ("/a", json!(2))]);
        assert_eq!(v, json!({"a": 2}));
    }
}
