//! The moves every conversion is made of, on JSON: reaching a field by path, parking a field
//! the other version lacks in an annotation (and taking it back), and exchanging a part of an
//! object whose forms differ, with the original kept when the return trip would not give it
//! back.

use serde_json::{Map, Value};

/// The field at `path`, if every step is an object that has it.
pub fn get<'a>(obj: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(obj, |v, key| v.as_object()?.get(*key))
}

/// The object at `path`, if there is one.
pub fn object_mut<'a>(obj: &'a mut Value, path: &[&str]) -> Option<&'a mut Map<String, Value>> {
    path.iter()
        .try_fold(obj, |v, key| v.as_object_mut()?.get_mut(*key))?
        .as_object_mut()
}

/// Removes and returns the field at `path`.
pub fn take(obj: &mut Value, path: &[&str]) -> Option<Value> {
    let (last, parent) = path.split_last()?;
    object_mut(obj, parent)?.remove(*last)
}

/// Sets the field at `path`, creating the objects on the way. Does nothing when a step on the
/// way is there but is not an object (the API server would not have let such an object in).
pub fn put(obj: &mut Value, path: &[&str], value: Value) {
    let Some((last, parent)) = path.split_last() else {
        return;
    };
    let mut here = obj;
    for key in parent {
        let Some(map) = here.as_object_mut() else {
            return;
        };
        here = map
            .entry(key.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    if let Some(map) = here.as_object_mut() {
        map.insert(last.to_string(), value);
    }
}

pub fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    get(obj, &["metadata", "annotations", key])?.as_str()
}

pub fn set_annotation(obj: &mut Value, key: &str, value: String) {
    put(obj, &["metadata", "annotations", key], Value::String(value));
}

/// Whether an annotation can be written: `metadata` and its `annotations` are objects or
/// absent. (The API server never sends anything else, but a field must not be taken from
/// where it is and then have nowhere to go.)
fn can_annotate(obj: &Value) -> bool {
    obj.is_object()
        && ["metadata", "annotations"]
            .iter()
            .scan(obj, |here, key| {
                let next = here.get(*key);
                *here = next.unwrap_or(&Value::Null);
                Some(next)
            })
            .all(|v| v.is_none_or(Value::is_object))
}

/// Removes an annotation, and the annotations map when that left it empty.
pub fn remove_annotation(obj: &mut Value, key: &str) {
    let Some(meta) = object_mut(obj, &["metadata"]) else {
        return;
    };
    let Some(Value::Object(annotations)) = meta.get_mut("annotations") else {
        return;
    };
    if annotations.remove(key).is_some() && annotations.is_empty() {
        meta.remove("annotations");
    }
}

/// How a parked value is written: strings as they are, anything else as compact JSON.
#[derive(Clone, Copy)]
pub enum Form {
    Text,
    Json,
}

fn encode(value: &Value, form: Form) -> Option<String> {
    match (form, value) {
        (Form::Text, Value::String(s)) => Some(s.clone()),
        (Form::Text, _) => None,
        (Form::Json, v) => serde_json::to_string(v).ok(),
    }
}

/// The annotation back as the value it was written from; `None` unless writing that value
/// again gives exactly the annotation (so taking it back and parking it again is exact).
pub fn decode(text: &str, form: Form) -> Option<Value> {
    let value = match form {
        Form::Text => Value::String(text.to_string()),
        Form::Json => serde_json::from_str(text).ok()?,
    };
    (encode(&value, form).as_deref() == Some(text)).then_some(value)
}

/// Moves the field at `path` into annotation `key`. A field that cannot be written in `form`
/// stays where it is.
pub fn park(obj: &mut Value, path: &[&str], key: &str, form: Form) {
    let Some(text) = get(obj, path).and_then(|v| encode(v, form)) else {
        return;
    };
    if !can_annotate(obj) {
        return;
    }
    take(obj, path);
    set_annotation(obj, key, text);
}

/// Moves annotation `key` back to the field at `path`, unless the field is already there or
/// the annotation is not what [`park`] writes (then both stay as they are).
pub fn unpark(obj: &mut Value, path: &[&str], key: &str, form: Form) {
    if get(obj, path).is_some() {
        return;
    }
    let Some(value) = annotation(obj, key).and_then(|t| decode(t, form)) else {
        return;
    };
    let Some((_, parent)) = path.split_last() else {
        return;
    };
    if get(obj, parent).is_some_and(|p| !p.is_object()) {
        return;
    }
    remove_annotation(obj, key);
    put(obj, path, value);
}

/// A part of an object: the named fields of the object at `parent` that are present.
pub struct Part<'a> {
    pub parent: &'a [&'a str],
    pub keys: &'a [&'a str],
}

impl Part<'_> {
    fn read(&self, obj: &Value) -> Option<Map<String, Value>> {
        let parent = get(obj, self.parent)?.as_object()?;
        Some(
            self.keys
                .iter()
                .filter_map(|k| parent.get(*k).map(|v| (k.to_string(), v.clone())))
                .collect(),
        )
    }

    fn write(&self, obj: &mut Value, part: Map<String, Value>) {
        let Some(parent) = object_mut(obj, self.parent) else {
            return;
        };
        for key in self.keys {
            parent.remove(*key);
        }
        parent.extend(part);
    }
}

/// Rewrites `part` with `forward`. When `backward` would not give the original back, the
/// original is kept in annotation `mine`; when the object carries the other direction's kept
/// original (`theirs`) and it still stands for this part, that original is taken instead.
pub fn exchange(
    obj: &mut Value,
    part: &Part<'_>,
    mine: &str,
    theirs: &str,
    forward: impl Fn(&Map<String, Value>) -> Map<String, Value>,
    backward: impl Fn(&Map<String, Value>) -> Map<String, Value>,
) {
    let Some(old) = part.read(obj) else {
        return;
    };
    if !can_annotate(obj) {
        return;
    }
    let kept = annotation(obj, theirs)
        .and_then(|t| decode(t, Form::Json))
        .and_then(|v| match v {
            Value::Object(m) if backward(&m) == old => Some(m),
            _ => None,
        });
    let new = match kept {
        Some(original) => {
            remove_annotation(obj, theirs);
            original
        }
        None => {
            let new = forward(&old);
            if backward(&new) != old
                && let Some(text) = encode(&Value::Object(old.clone()), Form::Json)
            {
                set_annotation(obj, mine, text);
            }
            new
        }
    };
    part.write(obj, new);
}
