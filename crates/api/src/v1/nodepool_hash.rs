//! The NodePool drift hash written to `karpenter.sh/nodepool-hash` (with
//! `karpenter.sh/nodepool-hash-version`) on the NodePool and on every NodeClaim made from it,
//! by the controller and the simulator alike; [`crate::to_core::nodepool`] carries it.
//! A claim whose hash differs from its pool's current one, at the same version, has drifted.
//!
//! What is hashed follows upstream: `spec.template` without the fields it marks
//! `hash:"ignore"` (the requirements, which requirement drift checks instead), with zero values
//! and empty collections dropped (so an absent list and an empty one agree) and lists treated
//! as sets. `expireAfter` counts as its default when absent, because the API server defaults
//! it and a pool read before and after defaulting must hash alike.
//!
//! The value cannot equal upstream's (that one comes from a Go reflection walk); it is FNV-1a
//! 64 over canonical JSON (keys sorted), in decimal, stable across releases of this program.
//! It carries its own version, [`HASH_VERSION`], so a cluster moved over from Karpenter sees
//! a version change: claims are then re-stamped with the new hash instead of being reported
//! as drifted, exactly as upstream does when it bumps its own version.

use std::collections::BTreeMap;

use crate::stable_hash::fnv1a64;
use crate::v1::nodepool::{NodePool, defaults};
use serde_json::{Map, Value};

pub use nodewright_core::disruption::drift::{
    NODEPOOL_HASH as HASH_ANNOTATION, NODEPOOL_HASH_VERSION as HASH_VERSION_ANNOTATION,
    NODEPOOL_HASH_VERSION_CURRENT as HASH_VERSION,
};

/// Keys sorted, zero values dropped, arrays sorted by their canonical text. `None` when the
/// whole value is zero.
fn canonical(v: Value) -> Option<Value> {
    match v {
        Value::Null => None,
        Value::Bool(false) => None,
        Value::String(s) if s.is_empty() => None,
        Value::Number(n) if n.as_f64() == Some(0.0) => None,
        Value::Object(m) => {
            let sorted: BTreeMap<String, Value> = m
                .into_iter()
                .filter_map(|(k, v)| canonical(v).map(|v| (k, v)))
                .collect();
            if sorted.is_empty() {
                None
            } else {
                Some(Value::Object(sorted.into_iter().collect::<Map<_, _>>()))
            }
        }
        Value::Array(a) => {
            let mut items: Vec<(String, Value)> = a
                .into_iter()
                .filter_map(canonical)
                .map(|v| (v.to_string(), v))
                .collect();
            if items.is_empty() {
                return None;
            }
            items.sort_by(|x, y| x.0.cmp(&y.0));
            Some(Value::Array(items.into_iter().map(|(_, v)| v).collect()))
        }
        other => Some(other),
    }
}

/// The hash of `pool`'s template.
pub fn nodepool_hash(pool: &NodePool) -> String {
    let mut template = pool.spec.template.clone();
    template.spec.requirements.clear();
    if template.spec.expire_after.is_none() {
        template.spec.expire_after = Some(crate::v1::NillableDuration::new(defaults::EXPIRE_AFTER));
    }
    let value = serde_json::to_value(&template).unwrap_or(Value::Null);
    let text = canonical(value).unwrap_or(Value::Null).to_string();
    fnv1a64(text.as_bytes()).to_string()
}

/// The `(hash, version)` annotations an object stamped for `pool` carries.
pub fn annotations(pool: &NodePool) -> [(String, String); 2] {
    [
        (HASH_ANNOTATION.to_string(), nodepool_hash(pool)),
        (
            HASH_VERSION_ANNOTATION.to_string(),
            HASH_VERSION.to_string(),
        ),
    ]
}

/// The hash and version an object's annotations carry.
pub fn stamped(annotations: Option<&BTreeMap<String, String>>) -> (Option<&str>, Option<&str>) {
    let get = |k: &str| annotations.and_then(|a| a.get(k)).map(String::as_str);
    (get(HASH_ANNOTATION), get(HASH_VERSION_ANNOTATION))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pool(template: Value) -> NodePool {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "p"},
            "spec": {"template": template}
        }))
        .unwrap()
    }

    fn base() -> Value {
        json!({
            "metadata": {"labels": {"team": "web", "tier": "1"}},
            "spec": {
                "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}],
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "taints": [{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoSchedule"}]
            }
        })
    }

    #[test]
    fn requirements_and_order_do_not_change_the_hash() {
        let h = nodepool_hash(&pool(base()));
        let mut t = base();
        t["spec"]["requirements"] = json!([{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]);
        t["spec"]["taints"] =
            json!([{"effect": "NoSchedule", "key": "b"}, {"key": "a", "effect": "NoSchedule"}]);
        t["metadata"]["labels"] = json!({"tier": "1", "team": "web"});
        assert_eq!(nodepool_hash(&pool(t)), h);
    }

    #[test]
    fn absent_and_empty_and_defaulted_agree() {
        let h = nodepool_hash(&pool(base()));
        let mut t = base();
        t["spec"]["startupTaints"] = json!([]);
        t["metadata"]["annotations"] = json!({});
        t["spec"]["expireAfter"] = json!("720h");
        assert_eq!(nodepool_hash(&pool(t)), h);
    }

    #[test]
    fn labels_taints_class_and_expiry_change_the_hash() {
        let h = nodepool_hash(&pool(base()));
        let edits: [fn(&mut Value); 6] = [
            |t| t["metadata"]["labels"]["team"] = json!("api"),
            |t| t["metadata"]["annotations"] = json!({"x": "y"}),
            |t| t["spec"]["taints"] = json!([{"key": "a", "effect": "NoSchedule"}]),
            |t| t["spec"]["nodeClassRef"]["name"] = json!("other"),
            |t| t["spec"]["expireAfter"] = json!("Never"),
            |t| t["spec"]["terminationGracePeriod"] = json!("1h"),
        ];
        for (i, edit) in edits.iter().enumerate() {
            let mut t = base();
            edit(&mut t);
            assert_ne!(nodepool_hash(&pool(t)), h, "edit {i}");
        }
    }

    #[test]
    fn the_value_is_stable() {
        // Fixed so a release that changes the hashing by accident fails here rather than
        // reporting every node in every cluster as drifted.
        assert_eq!(nodepool_hash(&pool(base())), "8895846736350208377");
    }
}
