//! Schema pieces shared by NodePool and NodeClaim: requirements, taints, the node class
//! reference, durations and status conditions.

use crate::schema::{self, Schema};
use crate::validation::labels::{self, KeyContext};

pub const MSG_IN_NEEDS_VALUES: &str = "requirements with operator 'In' must have a value defined";
pub const MSG_NUMERIC_OPERATOR: &str =
    "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value";
pub const MSG_MIN_VALUES: &str = "requirements with 'minValues' must have at least that many values specified in the 'values' field";

/// Durations in `s`, `m`, `h` units, or `Never`.
pub const NILLABLE_DURATION_PATTERN: &str = r"^(([0-9]+(s|m|h))+|Never)$";
/// Durations in `s`, `m`, `h` units.
pub const DURATION_PATTERN: &str = r"^([0-9]+(s|m|h))+$";

pub const OPERATORS: &[&str] = &[
    "In",
    "NotIn",
    "Exists",
    "DoesNotExist",
    "Gt",
    "Lt",
    "Gte",
    "Lte",
];
pub const TAINT_EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// A requirement key: a qualified name, not in a restricted domain.
pub fn requirement_key(ctx: KeyContext) -> Schema {
    let mut s = schema::string()
        .max_length(316)
        .pattern(labels::QUALIFIED_NAME_PATTERN);
    for rule in labels::key_rules(ctx) {
        s = s.rule(&rule.cel("self"), &rule.message());
    }
    s
}

/// The requirements list with upstream's three list rules.
pub fn requirements(ctx: KeyContext) -> Schema {
    let item = schema::object()
        .prop("key", requirement_key(ctx))
        .prop("operator", schema::string().enumerate(OPERATORS))
        .prop(
            "values",
            schema::array(
                schema::string()
                    .max_length(63)
                    .pattern(labels::LABEL_VALUE_PATTERN),
            )
            .list_type("atomic"),
        )
        .prop("minValues", schema::integer().minimum(1).maximum(50))
        .required(&["key", "operator"]);
    schema::array(item)
        .max_items(100)
        .list_type("atomic")
        .rule("self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)", MSG_IN_NEEDS_VALUES)
        .rule(
            "self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)",
            MSG_NUMERIC_OPERATOR,
        )
        .rule(
            "self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)",
            MSG_MIN_VALUES,
        )
}

pub fn taint() -> Schema {
    schema::object()
        .prop(
            "key",
            schema::string()
                .min_length(1)
                .pattern(labels::QUALIFIED_NAME_PATTERN),
        )
        .prop(
            "value",
            schema::string().pattern(labels::QUALIFIED_NAME_PATTERN),
        )
        .prop("effect", schema::string().enumerate(TAINT_EFFECTS))
        .prop("timeAdded", schema::string().format("date-time"))
        .required(&["effect", "key"])
}

pub fn taints() -> Schema {
    schema::array(taint()).list_type("atomic")
}

/// `{group, kind, name}`, all required and non-empty.
pub fn node_class_ref() -> Schema {
    schema::object()
        .prop(
            "group",
            schema::string()
                .pattern("^[^/]*$")
                .rule("self != ''", "group may not be empty"),
        )
        .prop(
            "kind",
            schema::string().rule("self != ''", "kind may not be empty"),
        )
        .prop(
            "name",
            schema::string().rule("self != ''", "name may not be empty"),
        )
        .required(&["group", "kind", "name"])
}

/// A status condition; `reason` may be empty.
pub fn conditions() -> Schema {
    let cond = schema::object()
        .prop("lastTransitionTime", schema::string().format("date-time"))
        .prop("message", schema::string().max_length(32768))
        .prop("observedGeneration", schema::int64().minimum(0))
        .prop(
            "reason",
            schema::string().max_length(1024).pattern(r"^([A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?)?$"),
        )
        .prop("status", schema::string().enumerate(&["True", "False", "Unknown"]))
        .prop(
            "type",
            schema::string().max_length(316).pattern(
                r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
            ),
        )
        .required(&["lastTransitionTime", "status", "type"]);
    schema::array(cond)
        .list_type("map")
        .list_map_keys(&["type"])
}

/// A resource list: names to quantities.
pub fn resource_list() -> Schema {
    schema::map_of(schema::quantity())
}
