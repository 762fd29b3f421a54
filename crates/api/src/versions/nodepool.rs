//! NodePool between `karpenter.sh/v1beta1` and `v1`.
//!
//! v1beta1 → v1: `disruption.expireAfter` moves into the template, `WhenUnderutilized` is
//! `WhenEmptyOrUnderutilized`, `nodeClassRef.apiVersion` becomes `group`, and the template's
//! `kubelet` and `resources` are parked in annotations. v1 → v1beta1 undoes each, and parks
//! what v1beta1 has no field for: the template's `terminationGracePeriod`, `replicas` and the
//! budgets' `reasons`. `consolidateAfter` is carried as it is in both (the served v1beta1
//! allows it with either policy).

use serde_json::Value;

use super::fields::{self, Form, Part};
use super::{
    BUDGET_REASONS, KUBELET, REPLICAS, RESOURCES, TERMINATION_GRACE_PERIOD, V1_NODE_CLASS_REF,
    V1BETA1_NODE_CLASS_REF, nodeclaim,
};

const TEMPLATE_SPEC: &[&str] = &["spec", "template", "spec"];
const REF: Part<'static> = Part {
    parent: TEMPLATE_SPEC,
    keys: &["nodeClassRef"],
};

fn template(field: &'static str) -> [&'static str; 4] {
    ["spec", "template", "spec", field]
}

pub fn up(obj: &mut Value) {
    fields::park(obj, &template("kubelet"), KUBELET, Form::Json);
    fields::park(obj, &template("resources"), RESOURCES, Form::Json);
    move_expire_after_up(obj);
    rename_policy(obj, "WhenUnderutilized", "WhenEmptyOrUnderutilized");
    fields::exchange(
        obj,
        &REF,
        V1BETA1_NODE_CLASS_REF,
        V1_NODE_CLASS_REF,
        nodeclaim::ref_up,
        nodeclaim::ref_down,
    );
    fields::unpark(
        obj,
        &template("terminationGracePeriod"),
        TERMINATION_GRACE_PERIOD,
        Form::Text,
    );
    fields::unpark(obj, &["spec", "replicas"], REPLICAS, Form::Json);
    unpark_reasons(obj);
}

pub fn down(obj: &mut Value) {
    park_reasons(obj);
    fields::park(obj, &["spec", "replicas"], REPLICAS, Form::Json);
    fields::park(
        obj,
        &template("terminationGracePeriod"),
        TERMINATION_GRACE_PERIOD,
        Form::Text,
    );
    fields::exchange(
        obj,
        &REF,
        V1_NODE_CLASS_REF,
        V1BETA1_NODE_CLASS_REF,
        nodeclaim::ref_down,
        nodeclaim::ref_up,
    );
    rename_policy(obj, "WhenEmptyOrUnderutilized", "WhenUnderutilized");
    move_expire_after_down(obj);
    fields::unpark(obj, &template("resources"), RESOURCES, Form::Json);
    fields::unpark(obj, &template("kubelet"), KUBELET, Form::Json);
}

/// `disruption.expireAfter` → template; a `disruption` that held only it goes with it (the
/// way down creates one for it).
fn move_expire_after_up(obj: &mut Value) {
    let Some(disruption) = fields::object_mut(obj, &["spec", "disruption"]) else {
        return;
    };
    let Some(expire) = disruption.remove("expireAfter") else {
        return;
    };
    if disruption.is_empty() {
        fields::take(obj, &["spec", "disruption"]);
    }
    if fields::get(obj, TEMPLATE_SPEC).is_some_and(Value::is_object) {
        fields::put(obj, &template("expireAfter"), expire);
    } else {
        // Nowhere to put it (no template spec): leave it where it was.
        fields::put(obj, &["spec", "disruption", "expireAfter"], expire);
    }
}

fn move_expire_after_down(obj: &mut Value) {
    if fields::get(obj, &["spec", "disruption"]).is_some_and(|d| !d.is_object()) {
        return;
    }
    if let Some(expire) = fields::take(obj, &template("expireAfter")) {
        fields::put(obj, &["spec", "disruption", "expireAfter"], expire);
    }
}

fn rename_policy(obj: &mut Value, from: &str, to: &str) {
    if let Some(d) = fields::object_mut(obj, &["spec", "disruption"])
        && d.get("consolidationPolicy").and_then(Value::as_str) == Some(from)
    {
        d.insert("consolidationPolicy".into(), Value::String(to.into()));
    }
}

/// Each budget's `reasons` (or `null`), in budget order, into one annotation.
fn park_reasons(obj: &mut Value) {
    let Some(Value::Array(budgets)) = fields::get(obj, &["spec", "disruption", "budgets"]) else {
        return;
    };
    if !budgets.iter().any(|b| b.get("reasons").is_some()) || !budgets.iter().all(Value::is_object)
    {
        return;
    }
    let reasons: Vec<Value> = budgets
        .iter()
        .map(|b| b.get("reasons").cloned().unwrap_or(Value::Null))
        .collect();
    let Ok(text) = serde_json::to_string(&reasons) else {
        return;
    };
    if let Some(Value::Array(budgets)) =
        fields::object_mut(obj, &["spec", "disruption"]).and_then(|d| d.get_mut("budgets"))
    {
        for b in budgets.iter_mut().filter_map(Value::as_object_mut) {
            b.remove("reasons");
        }
    }
    fields::set_annotation(obj, BUDGET_REASONS, text);
}

fn unpark_reasons(obj: &mut Value) {
    let Some(Value::Array(reasons)) =
        fields::annotation(obj, BUDGET_REASONS).and_then(|t| fields::decode(t, Form::Json))
    else {
        return;
    };
    let Some(Value::Array(budgets)) =
        fields::object_mut(obj, &["spec", "disruption"]).and_then(|d| d.get_mut("budgets"))
    else {
        return;
    };
    let fits = budgets.len() == reasons.len()
        && budgets
            .iter()
            .all(|b| b.as_object().is_some_and(|b| !b.contains_key("reasons")))
        && reasons.iter().any(|r| !r.is_null());
    if !fits {
        return;
    }
    for (budget, r) in budgets.iter_mut().zip(reasons) {
        if let (Some(b), false) = (budget.as_object_mut(), r.is_null()) {
            b.insert("reasons".into(), r);
        }
    }
    fields::remove_annotation(obj, BUDGET_REASONS);
}
