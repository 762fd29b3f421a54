//! Hashes of API objects that must not change between releases: the drift annotations
//! (`karpenter.sh/nodepool-hash`, `karpenter.k8s.aws/ec2nodeclass-hash`) and the names derived
//! from a configuration (instance profiles, launch templates) are compared with values written
//! by earlier runs, so every writer uses this one function over one canonical text.

use serde_json::{Map, Value};

/// 64-bit FNV-1a: small, fixed by its definition, and independent of the std hasher's seed.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// `v` with every object's keys in sorted order, so its JSON text does not depend on the
/// order fields were set or read in.
pub fn sorted_keys(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut entries: Vec<(String, Value)> = m.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, sorted_keys(v)))
                    .collect::<Map<_, _>>(),
            )
        }
        Value::Array(a) => Value::Array(a.into_iter().map(sorted_keys).collect()),
        other => other,
    }
}

/// The serialized fields of `spec` without the `ignored` ones: what a spec hash starts from
/// (fields that resolve into status are left out, so resolving them again is not drift).
pub fn spec_fields<T: serde::Serialize>(spec: &T, ignored: &[&str]) -> Map<String, Value> {
    let mut fields = match serde_json::to_value(spec) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    };
    for k in ignored {
        fields.remove(*k);
    }
    fields
}

/// The hash annotation's value for `fields`: FNV-1a of their key-sorted JSON, in decimal.
pub fn hash_fields(fields: Map<String, Value>) -> String {
    fnv1a64(sorted_keys(Value::Object(fields)).to_string().as_bytes()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fnv1a64_matches_the_published_test_vectors() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x85944171f73967e8);
    }

    #[test]
    fn key_order_does_not_change_the_text() {
        let a = sorted_keys(json!({"b": 1, "a": {"d": [ {"y": 1, "x": 2} ], "c": 0}}));
        assert_eq!(a.to_string(), r#"{"a":{"c":0,"d":[{"x":2,"y":1}]},"b":1}"#);
    }
}
