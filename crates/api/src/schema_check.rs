//! Offline checks that stand in for a Kubernetes API server: whether a CRD would be accepted
//! ([`check_structural`]) and whether an object would be accepted by a CRD's schema
//! ([`validate_object`], [`validate_against_crd`]), `x-kubernetes-validations` CEL rules included.
//!
//! CEL comes from the `cel` crate, extended with the Kubernetes libraries the rules in this
//! project's schemas use; see `cel_env` for what is and is not there.

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
