//! Offline checks that stand in for a Kubernetes API server: whether a CRD would be accepted
//! ([`check_structural`]) and whether an object would be accepted by a CRD's schema
//! ([`validate_object`], [`validate_against_crd`]), `x-kubernetes-validations` CEL rules included.
//!
//! CEL comes from the `cel` crate, extended with the Kubernetes libraries the rules in this
//! project's schemas use; see `cel_env` for what is and is not there.
//!
//! # Using it in tests
//!
//! ```
//! use nodewright_api::schema::{array, object, string};
//! use nodewright_api::schema_check::{is_unevaluated_rule, validate_object};
//! use serde_json::json;
//!
//! let schema = object()
//!     .prop("values", array(string().max_length(63)).max_items(10).rule("self.size() != 0", "values may not be empty"))
//!     .into_value();
//! let errors = validate_object(&schema, &json!({"values": []}), None);
//! assert_eq!(errors[0].to_string(), "values: values may not be empty");
//! assert!(!errors.iter().any(is_unevaluated_rule));
//! ```
//!
//! # What errors look like
//!
//! Paths are rendered like [`crate::error::Path`] (`spec.requirements[2].key`, map entries as
//! `spec.limits[cpu]`); a rule on the root has an empty path. Reasons:
//!
//! | check | reason |
//! | --- | --- |
//! | rule failed | the rule's `messageExpression` result, else `message`, else `failed rule: <rule>`; at the rule's `fieldPath` when set |
//! | rule not evaluable | `rule could not be evaluated: <rule>: <cause>` ([`RULE_NOT_EVALUATED`]) |
//! | type | `must be of type <t>, got <actual>`, followed by one [`RULES_NOT_CHECKED`] at the root |
//! | required | `Required value` |
//! | enum | `Unsupported value: <v>: supported values: <list>` |
//! | pattern | `Invalid value: "<s>": should match '<pattern>'` |
//! | maxLength / minLength | `Too long: may not be longer than <n>` / `should be at least <n> chars long` |
//! | maximum / minimum | `Invalid value: <v>: should be less (greater) than or equal to <n>` |
//! | maxItems / minItems | `Too many: <n>: must have at most <m> items` / `should have at least <n> items` |
//! | maxProperties / minProperties | `Too many: <n>: must have at most <m> properties` / `should have at least <n> properties` |
//! | undeclared field | `field not declared in schema` (what `kubectl apply`'s strict field validation rejects) |
//! | list-type set / map | `Duplicate value: <item or keys>` at the duplicate's index |

mod cel_env;
mod correlate;
mod crd_object;
mod defaults;
mod jsonpath;
mod keyword;
mod re2;
mod rule_check;
mod rules;
mod shape;
mod structural;
mod validate;

pub use crd_object::validate_against_crd;
pub use structural::{RULE_COST_LIMIT, SCHEMA_COST_LIMIT, check_structural};
pub use validate::{RULES_NOT_CHECKED, validate_object, with_defaults};

use crate::error::FieldError;

/// Prefix of every error about a rule that could not be compiled or evaluated. Such an error
/// says nothing about the object; tests of a schema should forbid it.
pub const RULE_NOT_EVALUATED: &str = "rule could not be evaluated";

/// Whether `e` reports a rule that could not be evaluated rather than a rule that failed.
pub fn is_unevaluated_rule(e: &FieldError) -> bool {
    e.reason.starts_with(RULE_NOT_EVALUATED)
}

#[cfg(test)]
mod cel_env_tests;
#[cfg(test)]
mod shapes_tests;
#[cfg(test)]
mod structural_tests;
#[cfg(test)]
mod validate_tests;
