//! A scenario's `steps`: when each runs and its action (apply, delete, scale, interrupt,
//! advance), each field checked with its path.

use std::time::Duration;

use nodewright_api::error::Path;
use nodewright_core::model::CapacityType;
use serde_json::{Map, Value};

use super::{Ctx, manifest_entry, manifest_list};
use crate::report::clock;
use crate::scenario::{
    Action, InterruptTarget, ObjectRef, SUPPORTED_KINDS, ScenarioError, Step, limits,
};

const ACTIONS: &[&str] = &["apply", "delete", "scale", "interrupt", "advance"];

pub(super) fn step(
    ctx: &Ctx<'_>,
    v: &Value,
    path: &Path,
    index: usize,
    cursor: Duration,
) -> Result<Step, ScenarioError> {
    let map = ctx.object(v, path)?;
    let action_name = action_of(ctx, map, path)?;
    let mut known = vec!["at", action_name];
    match action_name {
        "scale" => known.push("replicas"),
        "interrupt" => known.extend(["instanceType", "zone", "count"]),
        _ => {}
    }
    ctx.unknown_fields(map, path, &known)?;
    let mut at = match map.get("at") {
        Some(v) => ctx.duration(v, &path.field("at"))?,
        None => cursor,
    };
    if at < cursor {
        return Err(ctx.err(
            &path.field("at"),
            format!(
                "steps must be in time order: {} is before the previous step at {}",
                clock(at),
                clock(cursor)
            ),
        ));
    }
    let ap = path.field(action_name);
    let raw = &map[action_name];
    let action = match action_name {
        "apply" => Action::Apply(match raw {
            Value::Array(_) => manifest_list(ctx, raw, &ap)?,
            _ => manifest_entry(ctx, raw, &ap)?,
        }),
        "delete" => Action::Delete(object_ref(ctx, raw, &ap)?),
        "scale" => scale(ctx, raw, map, path)?,
        "interrupt" => Action::Interrupt(interrupt(ctx, raw, map, path)?),
        _ => {
            if map.contains_key("at") {
                return Err(ctx.err(
                    &path.field("at"),
                    "advance is relative to the previous step; do not combine it with at",
                ));
            }
            at = cursor + ctx.duration(raw, &ap)?;
            Action::Advance
        }
    };
    if let Some(reason) = limits::too_long(at) {
        let field = if action_name == "advance" {
            action_name
        } else {
            "at"
        };
        return Err(ctx.err(&path.field(field), reason));
    }
    Ok(Step { index, at, action })
}

/// The one action a step names (`apply`, `delete`, `scale`, `interrupt` or `advance`).
fn action_of(
    ctx: &Ctx<'_>,
    map: &Map<String, Value>,
    path: &Path,
) -> Result<&'static str, ScenarioError> {
    let actions: Vec<&str> = ACTIONS
        .iter()
        .copied()
        .filter(|a| map.contains_key(*a))
        .collect();
    match actions.as_slice() {
        [one] => Ok(*one),
        [] => Err(ctx.err(
            path,
            format!("a step needs one action: {}", ACTIONS.join(", ")),
        )),
        many => Err(ctx.err(
            path,
            format!(
                "a step has exactly one action, found {}",
                many.join(" and ")
            ),
        )),
    }
}

/// `scale: NAME` or `NAMESPACE/NAME` with its `replicas`, bounded as the simulator can run.
fn scale(
    ctx: &Ctx<'_>,
    raw: &Value,
    map: &Map<String, Value>,
    path: &Path,
) -> Result<Action, ScenarioError> {
    let ap = path.field("scale");
    let target = ctx.string(raw, &ap)?;
    let (namespace, name) = match target.split_once('/') {
        Some((ns, n)) if !ns.is_empty() && !n.is_empty() && !n.contains('/') => {
            (ns.to_string(), n.to_string())
        }
        None if !target.is_empty() => ("default".to_string(), target.to_string()),
        _ => {
            return Err(ctx.err(&ap, format!("{target:?} is not NAME or NAMESPACE/NAME")));
        }
    };
    let rp = path.field("replicas");
    let replicas = match map.get("replicas") {
        Some(r) => {
            if let Some(reason) = r.as_u64().and_then(limits::too_many_pods) {
                return Err(ctx.err(&rp, reason));
            }
            ctx.count(r, &rp)?
        }
        None => return Err(ctx.err(&rp, "required with scale")),
    };
    Ok(Action::Scale {
        namespace,
        name,
        replicas,
    })
}

fn object_ref(ctx: &Ctx<'_>, v: &Value, path: &Path) -> Result<ObjectRef, ScenarioError> {
    let s = ctx.string(v, path)?;
    let parts: Vec<&str> = s.split('/').collect();
    let r = match parts.as_slice() {
        [kind, name] if !kind.is_empty() && !name.is_empty() => ObjectRef {
            kind: kind.to_string(),
            namespace: None,
            name: name.to_string(),
        },
        [kind, ns, name] if !kind.is_empty() && !ns.is_empty() && !name.is_empty() => ObjectRef {
            kind: kind.to_string(),
            namespace: Some(ns.to_string()),
            name: name.to_string(),
        },
        _ => {
            return Err(ctx.err(
                path,
                format!("{s:?} is not Kind/name or Kind/namespace/name"),
            ));
        }
    };
    if !SUPPORTED_KINDS.contains(&r.kind.as_str()) {
        return Err(ctx.err(
            path,
            format!(
                "kind {:?} is not supported (supported: {})",
                r.kind,
                SUPPORTED_KINDS.join(", ")
            ),
        ));
    }
    Ok(r)
}

/// `interrupt: NODE`, or `interrupt: spot` / `interrupt: any` with optional `instanceType`,
/// `zone` and `count`.
fn interrupt(
    ctx: &Ctx<'_>,
    raw: &Value,
    map: &Map<String, Value>,
    path: &Path,
) -> Result<InterruptTarget, ScenarioError> {
    let s = ctx.string(raw, &path.field("interrupt"))?;
    if s != "spot" && s != "any" {
        if let Some(k) = ["instanceType", "zone", "count"]
            .into_iter()
            .find(|k| map.contains_key(*k))
        {
            return Err(ctx.err(
                &path.field(k),
                "only with interrupt: spot or interrupt: any",
            ));
        }
        return Ok(InterruptTarget::Node(s.to_string()));
    }
    let count = match map.get("count") {
        Some(c) => ctx.count(c, &path.field("count"))?,
        None => 1,
    };
    Ok(InterruptTarget::Matching {
        capacity_type: (s == "spot").then_some(CapacityType::Spot),
        instance_type: ctx.optional_string(map, path, "instanceType")?,
        zone: ctx.optional_string(map, path, "zone")?,
        count,
    })
}
