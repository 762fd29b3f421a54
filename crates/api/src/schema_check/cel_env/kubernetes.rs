//! The Kubernetes CEL libraries that the `cel` crate lacks: regex (`find`, `findAll`, and an
//! RE2-faithful `matches`), lists (`isSorted`, `sum`, `min`, `max`, `indexOf`, `lastIndexOf`)
//! and sets (`sets.contains`, `sets.equivalent`, `sets.intersects`).

use std::sync::Arc;

use cel::common::ast::{CallExpr, Expr};
use cel::common::types::{DYN_TYPE, INT_TYPE, LIST_TYPE, STRING_TYPE};
use cel::common::value::CowVal;
use cel::parser::Macro;
use cel::{Env, ExecutionError, Value};

type Args<'b, 'v> = Vec<CowVal<'b, 'v>>;
type Out<'b, 'v> = Result<CowVal<'b, 'v>, ExecutionError>;

/// The overload `matches` is rewritten to, so that it uses RE2's ASCII classes like `find`;
/// the `@` keeps rules from calling it by name.
pub(crate) const RE2_MATCHES: &str = "@re2Matches";

/// Registers the Kubernetes functions on `env`.
pub(super) fn libraries(env: &mut Env) -> Result<(), cel::DeclarationError> {
    env.add_member_overload(
        RE2_MATCHES,
        "string.@re2Matches(string)",
        STRING_TYPE,
        vec![STRING_TYPE],
        re2_matches,
    )?;
    env.add_macro(Macro::receiver("matches", 1, |helper, target, args| {
        let Some(target) = target.take() else {
            return Ok(None);
        };
        Ok(Some(helper.next_expr(Expr::Call(CallExpr {
            func_name: RE2_MATCHES.to_string(),
            target: Some(Box::new(target)),
            args: std::mem::take(args),
        }))))
    }))?;
    env.add_macro(Macro::global("matches", 2, |helper, _target, args| {
        let pattern = args.pop();
        let subject = args.pop();
        let (Some(subject), Some(pattern)) = (subject, pattern) else {
            return Ok(None);
        };
        Ok(Some(helper.next_expr(Expr::Call(CallExpr {
            func_name: RE2_MATCHES.to_string(),
            target: Some(Box::new(subject)),
            args: vec![pattern],
        }))))
    }))?;
    env.add_member_overload(
        "find",
        "string.find(string)",
        STRING_TYPE,
        vec![STRING_TYPE],
        find,
    )?;
    env.add_member_overload(
        "findAll",
        "string.findAll(string)",
        STRING_TYPE,
        vec![STRING_TYPE],
        find_all,
    )?;
    env.add_member_overload(
        "findAll",
        "string.findAll(string,int)",
        STRING_TYPE,
        vec![STRING_TYPE, INT_TYPE],
        find_all_n,
    )?;
    env.add_member_overload("isSorted", "list.isSorted()", LIST_TYPE, vec![], is_sorted)?;
    env.add_member_overload("sum", "list.sum()", LIST_TYPE, vec![], sum)?;
    env.add_member_overload("min", "list.min()", LIST_TYPE, vec![], min)?;
    env.add_member_overload("max", "list.max()", LIST_TYPE, vec![], max)?;
    env.add_member_overload(
        "indexOf",
        "list.indexOf(dyn)",
        LIST_TYPE,
        vec![DYN_TYPE],
        index_of,
    )?;
    env.add_member_overload(
        "lastIndexOf",
        "list.lastIndexOf(dyn)",
        LIST_TYPE,
        vec![DYN_TYPE],
        last_index_of,
    )?;
    env.add_overload(
        "sets.contains",
        "sets.contains(list,list)",
        vec![LIST_TYPE, LIST_TYPE],
        sets_contains,
    )?;
    env.add_overload(
        "sets.equivalent",
        "sets.equivalent(list,list)",
        vec![LIST_TYPE, LIST_TYPE],
        sets_equivalent,
    )?;
    env.add_overload(
        "sets.intersects",
        "sets.intersects(list,list)",
        vec![LIST_TYPE, LIST_TYPE],
        sets_intersects,
    )?;
    Ok(())
}

fn to_value(v: &CowVal<'_, '_>) -> Result<Value, ExecutionError> {
    Value::try_from(&**v)
        .map_err(|_| ExecutionError::function_error("convert", "value has no plain form"))
}

fn out<'b, 'v>(v: Value) -> Out<'b, 'v> {
    let boxed: Box<dyn cel::common::value::Val> = v
        .try_into()
        .map_err(|_| ExecutionError::function_error("convert", "value has no CEL form"))?;
    Ok(CowVal::from(boxed))
}

fn string_arg(
    args: &Args<'_, '_>,
    i: usize,
    function: &str,
) -> Result<Arc<String>, ExecutionError> {
    match args.get(i).map(to_value).transpose()? {
        Some(Value::String(s)) => Ok(s),
        other => Err(ExecutionError::function_error(
            function,
            format!("expected a string argument, got {other:?}"),
        )),
    }
}

fn list_arg(
    args: &Args<'_, '_>,
    i: usize,
    function: &str,
) -> Result<Arc<Vec<Value>>, ExecutionError> {
    match args.get(i).map(to_value).transpose()? {
        Some(Value::List(l)) => Ok(l),
        other => Err(ExecutionError::function_error(
            function,
            format!("expected a list argument, got {other:?}"),
        )),
    }
}

fn regex(function: &str, pattern: &str) -> Result<regex::Regex, ExecutionError> {
    crate::schema_check::re2::compile(pattern)
        .map_err(|e| ExecutionError::function_error(function, e.to_string()))
}

/// `s.matches(re)`: whether `re` matches anywhere in `s`.
fn re2_matches<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let s = string_arg(&args, 0, "matches")?;
    let re = regex("matches", &string_arg(&args, 1, "matches")?)?;
    out(Value::Bool(re.is_match(&s)))
}

/// `s.find(re)`: the first match of `re` in `s`, or the empty string.
fn find<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let s = string_arg(&args, 0, "find")?;
    let re = regex("find", &string_arg(&args, 1, "find")?)?;
    out(Value::String(Arc::new(
        re.find(&s)
            .map(|m| m.as_str().to_string())
            .unwrap_or_default(),
    )))
}

fn find_all<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    find_all_limited(&args, -1)
}

fn find_all_n<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let n = match args.get(2).map(to_value).transpose()? {
        Some(Value::Int(n)) => n,
        other => {
            return Err(ExecutionError::function_error(
                "findAll",
                format!("expected an int limit, got {other:?}"),
            ));
        }
    };
    find_all_limited(&args, n)
}

/// A negative limit means all matches, as in Go's `FindAllString`.
fn find_all_limited<'b, 'v>(args: &Args<'b, 'v>, limit: i64) -> Out<'b, 'v> {
    let s = string_arg(args, 0, "findAll")?;
    let re = regex("findAll", &string_arg(args, 1, "findAll")?)?;
    let take = usize::try_from(limit).unwrap_or(usize::MAX);
    let found: Vec<Value> = re
        .find_iter(&s)
        .take(take)
        .map(|m| Value::String(Arc::new(m.as_str().into())))
        .collect();
    out(Value::List(Arc::new(found)))
}

/// Orders two comparable scalars of the same kind; Kubernetes' list functions refuse mixed lists.
fn compare(function: &str, a: &Value, b: &Value) -> Result<std::cmp::Ordering, ExecutionError> {
    let ord = match (a, b) {
        (Value::Int(x), Value::Int(y)) => x.partial_cmp(y),
        (Value::UInt(x), Value::UInt(y)) => x.partial_cmp(y),
        (Value::Float(x), Value::Float(y)) => x.partial_cmp(y),
        (Value::String(x), Value::String(y)) => x.partial_cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.partial_cmp(y),
        (Value::Bytes(x), Value::Bytes(y)) => x.partial_cmp(y),
        _ => None,
    };
    ord.ok_or_else(|| {
        ExecutionError::function_error(function, format!("cannot compare {a:?} with {b:?}"))
    })
}

fn is_sorted<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let list = list_arg(&args, 0, "isSorted")?;
    for pair in list.windows(2) {
        if compare("isSorted", &pair[0], &pair[1])? == std::cmp::Ordering::Greater {
            return out(Value::Bool(false));
        }
    }
    out(Value::Bool(true))
}

fn sum<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let list = list_arg(&args, 0, "sum")?;
    let mut total = match list.first() {
        None | Some(Value::Int(_)) => Value::Int(0),
        Some(Value::UInt(_)) => Value::UInt(0),
        Some(Value::Float(_)) => Value::Float(0.0),
        Some(other) => {
            return Err(ExecutionError::function_error(
                "sum",
                format!("cannot sum {other:?}"),
            ));
        }
    };
    for item in list.iter() {
        total = match (&total, item) {
            (Value::Int(a), Value::Int(b)) => Value::Int(
                a.checked_add(*b)
                    .ok_or_else(|| ExecutionError::function_error("sum", "integer overflow"))?,
            ),
            (Value::UInt(a), Value::UInt(b)) => Value::UInt(
                a.checked_add(*b)
                    .ok_or_else(|| ExecutionError::function_error("sum", "integer overflow"))?,
            ),
            (Value::Float(a), Value::Float(b)) => Value::Float(a + b),
            _ => {
                return Err(ExecutionError::function_error(
                    "sum",
                    format!("cannot add {item:?} to {total:?}"),
                ));
            }
        };
    }
    out(total)
}

fn extreme<'b, 'v>(args: Args<'b, 'v>, function: &str, keep: std::cmp::Ordering) -> Out<'b, 'v> {
    let list = list_arg(&args, 0, function)?;
    let mut best = list
        .first()
        .cloned()
        .ok_or_else(|| ExecutionError::function_error(function, "empty list"))?;
    for item in list.iter().skip(1) {
        if compare(function, item, &best)? == keep {
            best = item.clone();
        }
    }
    out(best)
}

fn min<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    extreme(args, "min", std::cmp::Ordering::Less)
}

fn max<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    extreme(args, "max", std::cmp::Ordering::Greater)
}

fn position<'b, 'v>(args: Args<'b, 'v>, last: bool) -> Out<'b, 'v> {
    let list = list_arg(&args, 0, "indexOf")?;
    let needle = args
        .get(1)
        .map(to_value)
        .transpose()?
        .unwrap_or(Value::Null);
    let mut found = list
        .iter()
        .enumerate()
        .filter(|(_, v)| **v == needle)
        .map(|(i, _)| i);
    let at = if last {
        found.next_back()
    } else {
        found.next()
    };
    out(Value::Int(at.map_or(-1, |i| i as i64)))
}

fn index_of<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    position(args, false)
}

fn last_index_of<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    position(args, true)
}

fn sets_contains<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let (a, b) = (
        list_arg(&args, 0, "sets.contains")?,
        list_arg(&args, 1, "sets.contains")?,
    );
    out(Value::Bool(b.iter().all(|x| a.contains(x))))
}

fn sets_equivalent<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let (a, b) = (
        list_arg(&args, 0, "sets.equivalent")?,
        list_arg(&args, 1, "sets.equivalent")?,
    );
    out(Value::Bool(
        b.iter().all(|x| a.contains(x)) && a.iter().all(|x| b.contains(x)),
    ))
}

fn sets_intersects<'b, 'v>(args: Args<'b, 'v>) -> Out<'b, 'v> {
    let (a, b) = (
        list_arg(&args, 0, "sets.intersects")?,
        list_arg(&args, 1, "sets.intersects")?,
    );
    out(Value::Bool(b.iter().any(|x| a.contains(x))))
}
