//! NodeClaim between `karpenter.sh/v1beta1` and `v1`, and the `nodeClassRef` forms both
//! karpenter.sh kinds share.
//!
//! v1beta1 → v1: `nodeClassRef.apiVersion` becomes `group` and `kubelet` is parked in an
//! annotation. v1 → v1beta1 undoes both and parks `expireAfter` and `terminationGracePeriod`,
//! which a v1beta1 NodeClaim does not have.

use serde_json::{Map, Value};

use super::fields::{self, Form, Part};
use super::{
    EXPIRE_AFTER, KUBELET, TERMINATION_GRACE_PERIOD, V1_NODE_CLASS_REF, V1BETA1_NODE_CLASS_REF,
};
use crate::convert::{DEFAULT_NODE_CLASS_GROUP, DEFAULT_NODE_CLASS_KIND};

const REF: Part<'static> = Part {
    parent: &["spec"],
    keys: &["nodeClassRef"],
};

pub fn up(obj: &mut Value) {
    fields::park(obj, &["spec", "kubelet"], KUBELET, Form::Json);
    fields::exchange(
        obj,
        &REF,
        V1BETA1_NODE_CLASS_REF,
        V1_NODE_CLASS_REF,
        ref_up,
        ref_down,
    );
    fields::unpark(obj, &["spec", "expireAfter"], EXPIRE_AFTER, Form::Text);
    fields::unpark(
        obj,
        &["spec", "terminationGracePeriod"],
        TERMINATION_GRACE_PERIOD,
        Form::Text,
    );
}

pub fn down(obj: &mut Value) {
    fields::park(
        obj,
        &["spec", "terminationGracePeriod"],
        TERMINATION_GRACE_PERIOD,
        Form::Text,
    );
    fields::park(obj, &["spec", "expireAfter"], EXPIRE_AFTER, Form::Text);
    fields::exchange(
        obj,
        &REF,
        V1_NODE_CLASS_REF,
        V1BETA1_NODE_CLASS_REF,
        ref_down,
        ref_up,
    );
    fields::unpark(obj, &["spec", "kubelet"], KUBELET, Form::Json);
}

/// `{apiVersion, kind, name}` → `{group, kind, name}`: the group of `apiVersion`, and
/// Karpenter's defaults (the EC2NodeClass) for what is left out. Other fields pass.
pub fn ref_up(part: &Map<String, Value>) -> Map<String, Value> {
    rewrite_ref(part, |r| {
        let group = match r.remove("apiVersion") {
            Some(Value::String(av)) => match av.split_once('/') {
                Some((g, _)) if !g.is_empty() => g.to_string(),
                _ => DEFAULT_NODE_CLASS_GROUP.to_string(),
            },
            _ => DEFAULT_NODE_CLASS_GROUP.to_string(),
        };
        r.insert("group".into(), Value::String(group));
        let kind = r.get("kind").and_then(Value::as_str);
        if kind.is_none_or(|k| k == "AWSNodeTemplate") {
            r.insert("kind".into(), Value::String(DEFAULT_NODE_CLASS_KIND.into()));
        }
    })
}

/// `{group, kind, name}` → `{apiVersion: <group>/v1beta1, kind, name}`.
pub fn ref_down(part: &Map<String, Value>) -> Map<String, Value> {
    rewrite_ref(part, |r| {
        if let Some(Value::String(group)) = r.remove("group") {
            r.insert(
                "apiVersion".into(),
                Value::String(format!("{group}/v1beta1")),
            );
        }
    })
}

fn rewrite_ref(
    part: &Map<String, Value>,
    edit: impl FnOnce(&mut Map<String, Value>),
) -> Map<String, Value> {
    let mut part = part.clone();
    if let Some(Value::Object(r)) = part.get_mut("nodeClassRef") {
        edit(r);
    }
    part
}
