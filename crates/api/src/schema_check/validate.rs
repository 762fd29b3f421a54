//! `validate_object`: defaulting, then the OpenAPI checks, then the CEL rules, in the order an
//! API server applies them on create and update.

use serde_json::Value;

use super::defaults;
use super::rules::Rules;
use super::shape::Shape;
use crate::error::{FieldError, Path};

/// What the server says when type errors keep it from running CEL rules.
pub const RULES_NOT_CHECKED: &str = "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";

/// Validates `object` against an `openAPIV3Schema`; `old` is the stored object on update.
///
/// Defaults are applied first (to `old` too). Type errors stop the CEL rules from running, as
/// on the server, and are followed by one error saying so. Rules naming `oldSelf` run only when
/// `old` is given. On update, values equal to their correlated old value are not validated
/// again (ratcheting, as Kubernetes 1.30+ does by default), except by transition rules. A rule that cannot be evaluated gives an error whose reason starts with
/// [`super::RULE_NOT_EVALUATED`].
pub fn validate_object(schema: &Value, object: &Value, old: Option<&Value>) -> Vec<FieldError> {
    validate_at(schema, object, old, true)
}

/// Validates a value below the object root, such as a `default`.
pub(crate) fn validate_value(schema: &Value, value: &Value) -> Vec<FieldError> {
    validate_at(schema, value, None, false)
}

fn validate_at(schema: &Value, object: &Value, old: Option<&Value>, root: bool) -> Vec<FieldError> {
    let mut object = object.clone();
    defaults::apply(schema, &mut object);
    let old = old.map(|o| {
        let mut o = o.clone();
        defaults::apply(schema, &mut o);
        o
    });
    let mut shape = Shape::default();
    shape.node(schema, &object, old.as_ref(), &Path::default(), root);
    let mut errors = shape.errors;
    if shape.type_error {
        errors.push(FieldError::new("", RULES_NOT_CHECKED));
        return errors;
    }
    let mut rules = Rules::default();
    rules.node(schema, &object, old.as_ref(), &Path::default());
    errors.extend(rules.errors);
    errors
}

/// The object as the server would store it: `object` with the schema's defaults applied.
pub fn with_defaults(schema: &Value, object: &Value) -> Value {
    let mut object = object.clone();
    defaults::apply(schema, &mut object);
    object
}
