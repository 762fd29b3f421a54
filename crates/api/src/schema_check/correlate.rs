//! Which part of the old object corresponds to a node of the new one, on update: object
//! properties by name, map entries by key, and list items only in `x-kubernetes-list-type:
//! map` lists, by their keys. Transition rules and ratcheting both depend on it.

use serde_json::Value;

use super::keyword::{get, strings, text};

/// The old item matching `item` of a list with schema `list_schema`, if the list correlates.
pub(crate) fn list_item<'a>(
    list_schema: &Value,
    item: &Value,
    old_list: Option<&'a Value>,
) -> Option<&'a Value> {
    if text(list_schema, "x-kubernetes-list-type") != Some("map") {
        return None;
    }
    let keys = strings(list_schema, "x-kubernetes-list-map-keys");
    if keys.is_empty() {
        return None;
    }
    old_list?
        .as_array()?
        .iter()
        .find(|o| keys.iter().all(|k| get(o, k) == get(item, k)))
}

/// The old value of property or map entry `key`.
pub(crate) fn entry<'a>(old_object: Option<&'a Value>, key: &str) -> Option<&'a Value> {
    old_object.and_then(|o| get(o, key))
}
