//! The cost half of the rule check: how big strings and collections can get, and what a
//! call on them costs, in the shape of the server's estimator.

use cel::IdedExpr;
use cel::common::ast::{Expr, LiteralValue};
use serde_json::Value as Json;

use super::Ty;
use crate::schema_check::keyword::{additional_schema, count, get, properties, text};

/// Requests are at most this big; the server derives unbounded sizes from it.
pub(super) const MAX_REQUEST_BYTES: f64 = 3.0 * 1024.0 * 1024.0;
/// Cost the server charges per character scanned.
pub(super) const STRING_TRAVERSAL_FACTOR: f64 = 0.1;
/// Assumed bound on map keys.
pub(super) const MAP_KEY_MAX: f64 = 316.0;

/// Largest size of a collection node, from its bound or from the request size limit.
pub(crate) fn max_size(schema: &Json) -> f64 {
    let is_map = additional_schema(schema).is_some();
    let bound = if is_map || text(schema, "type") == Some("object") {
        count(schema, "maxProperties")
    } else {
        count(schema, "maxItems")
    };
    if let Some(b) = bound {
        return b as f64;
    }
    if let Some(props) = properties(schema)
        && !is_map
    {
        return props.len() as f64;
    }
    let element = if is_map {
        additional_schema(schema)
    } else {
        get(schema, "items")
    };
    let element_min = element.map_or(1.0, min_serialized_size);
    // A map entry also carries its key, quotes and colon.
    let overhead = if is_map { 4.0 } else { 1.0 };
    (MAX_REQUEST_BYTES / (element_min + overhead)).floor()
}

fn min_serialized_size(schema: &Json) -> f64 {
    match text(schema, "type") {
        Some("string") => 2.0 + count(schema, "minLength").unwrap_or(0) as f64,
        Some("boolean") => 4.0,
        Some("object") | Some("array") => 2.0,
        _ => 1.0,
    }
}

pub(super) fn max_len(ty: &Ty<'_>) -> f64 {
    match ty {
        Ty::Str(n) => *n,
        Ty::Node(s) => {
            if let Some(n) = count(s, "maxLength") {
                n as f64
            } else if let Some(values) = get(s, "enum").and_then(Json::as_array) {
                values
                    .iter()
                    .filter_map(Json::as_str)
                    .map(|v| v.chars().count())
                    .max()
                    .unwrap_or(0) as f64
            } else if text(s, "format") == Some("date-time") {
                64.0
            } else {
                MAX_REQUEST_BYTES - 2.0
            }
        }
        Ty::Prim(_) | Ty::Dyn => 1.0,
    }
}

/// Cost the server charges per regex character, on top of the string scan.
const REGEX_LENGTH_FACTOR: f64 = 0.25;

/// Extra cost of a call on strings, following the shape of the server's estimator: scans are
/// charged by the length of what they scan, `startsWith`/`endsWith` by the prefix/suffix,
/// regex functions by string length times pattern length, comparisons by the shorter operand.
pub(super) fn string_cost(
    name: &str,
    receiver: Option<&Ty<'_>>,
    args: &[Ty<'_>],
    arg_exprs: &[IdedExpr],
) -> f64 {
    let scan = |len: f64| ((1.0 + len) * STRING_TRAVERSAL_FACTOR).ceil();
    let first = receiver.or(args.first());
    let Some(first) = first else { return 0.0 };
    match name {
        "startsWith" | "endsWith" => args.first().map_or(0.0, |a| scan(max_len(a))),
        "contains" => args.first().map_or(0.0, |a| {
            (max_len(first) * max_len(a) * STRING_TRAVERSAL_FACTOR).ceil()
        }),
        "matches" | crate::schema_check::cel_env::RE2_MATCHES | "find" | "findAll" => {
            let pattern_index = if receiver.is_some() { 0 } else { 1 };
            let pattern_len = arg_exprs
                .get(pattern_index)
                .and_then(string_literal_len)
                .unwrap_or(MAP_KEY_MAX);
            scan(max_len(first)) * (pattern_len * REGEX_LENGTH_FACTOR).ceil().max(1.0)
        }
        "split" | "lowerAscii" | "upperAscii" | "replace" | "trim" | "indexOf" | "lastIndexOf"
        | "substring" | "charAt" => scan(max_len(first)),
        "_==_" | "_!=_" | "_<_" | "_>_" | "_<=_" | "_>=_" => {
            let shorter = args.iter().map(max_len).fold(f64::INFINITY, f64::min);
            if shorter.is_finite() {
                scan(shorter)
            } else {
                0.0
            }
        }
        "_+_" => scan(args.iter().map(max_len).sum()),
        _ => 0.0,
    }
}

fn string_literal_len(e: &IdedExpr) -> Option<f64> {
    match &e.expr {
        Expr::Literal(LiteralValue::String(s)) => Some(s.chars().count() as f64),
        _ => None,
    }
}

pub(super) fn literal_len(e: &IdedExpr) -> Option<f64> {
    match &e.expr {
        Expr::List(l) => Some(l.elements.len() as f64),
        Expr::Map(m) => Some(m.entries.len() as f64),
        _ => None,
    }
}
