//! The CEL environment of a Kubernetes API server, as far as rules in CRDs can see it.
//!
//! The `cel` crate brings the CEL standard library, the `has`/`all`/`exists`/`exists_one`/
//! `map`/`filter` macros, optional values and the strings extension (`split`, `lowerAscii`,
//! `indexOf`, ...). Kubernetes adds libraries of its own; those that rules in node pool and
//! node class schemas use are added here: the regex library (`find`, `findAll`), the list
//! library (`isSorted`, `sum`, `min`, `max`, `indexOf`, `lastIndexOf`) and the sets library
//! (`sets.contains`, `sets.equivalent`, `sets.intersects`).
//!
//! Absent on purpose: the quantity, URL, IP/CIDR, format and authorizer libraries. A rule
//! calling them is reported as not evaluable, never as passing.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use cel::{Context, Env, Value};
use serde_json::Value as Json;

mod kubernetes;

pub(crate) use kubernetes::RE2_MATCHES;

/// The shared environment; building it registers a few hundred overloads, so it is built once.
pub(crate) fn env() -> Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| Arc::new(build_env())).clone()
}

fn build_env() -> Env {
    let mut env = Env::stdlib();
    // Registration only fails on a duplicate overload: a bug in this file, caught by every test.
    env.add_extension(cel::extensions::strings)
        .expect("strings extension registers");
    env.add_extension(kubernetes::libraries)
        .expect("kubernetes libraries register");
    env
}

/// CEL keywords that Kubernetes escapes as `__kw__` when they name a property.
const RESERVED: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// The name under which a declared property is visible to CEL, or `None` when it is not
/// reachable by field selection (Kubernetes' escaping rules).
pub(crate) fn escape_property(name: &str) -> Option<String> {
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || matches!(c, '_' | '.' | '-' | '/'));
    if !first_ok
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/'))
    {
        return None;
    }
    Some(
        name.replace("__", "__underscores__")
            .replace('.', "__dot__")
            .replace('-', "__dash__")
            .replace('/', "__slash__"),
    )
}

fn field<'a>(schema: &'a Json, key: &str) -> Option<&'a Json> {
    schema.as_object().and_then(|m| m.get(key))
}

/// Converts a JSON value into the CEL value a rule sees, guided by its schema: `number`
/// fields are doubles even when written as `3`, declared properties use escaped names.
pub(crate) fn to_cel(schema: Option<&Json>, value: &Json) -> Value {
    let ty = schema.and_then(|s| field(s, "type")).and_then(Json::as_str);
    match value {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => {
            if ty == Some("number") {
                Value::Float(n.as_f64().unwrap_or(f64::NAN))
            } else if let Some(i) = n.as_i64() {
                Value::Int(i)
            } else if let Some(u) = n.as_u64() {
                Value::UInt(u)
            } else {
                Value::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Json::String(s) => Value::String(Arc::new(s.clone())),
        Json::Array(items) => {
            let item_schema = schema.and_then(|s| field(s, "items"));
            Value::List(Arc::new(
                items.iter().map(|i| to_cel(item_schema, i)).collect(),
            ))
        }
        Json::Object(map) => {
            let props = schema
                .and_then(|s| field(s, "properties"))
                .and_then(Json::as_object);
            let additional = schema
                .and_then(|s| field(s, "additionalProperties"))
                .filter(|a| a.is_object());
            let mut out: HashMap<String, Value> = HashMap::new();
            for (k, v) in map {
                if let Some(prop) = props.and_then(|p| p.get(k)) {
                    if let Some(name) = escape_property(k) {
                        out.insert(name, to_cel(Some(prop), v));
                    }
                } else {
                    out.insert(k.clone(), to_cel(additional, v));
                }
            }
            Value::from(out)
        }
    }
}

/// Outcome of one rule.
#[derive(Debug, PartialEq)]
pub(crate) enum Outcome {
    Pass,
    Fail,
    /// The rule did not compile, called something unknown, failed at run time or did not
    /// return a bool.
    Unevaluated(String),
}

/// The macro-expanded syntax tree of a rule, for static checks.
pub(crate) fn parse(source: &str) -> Result<cel::IdedExpr, String> {
    env().parser().parse(source).map_err(|e| e.to_string())
}

/// A compiled rule, kept so that a rule is parsed once per validation however many nodes it
/// applies to.
pub(crate) struct Compiled {
    program: Result<cel::Program, String>,
}

impl Compiled {
    pub(crate) fn new(source: &str) -> Compiled {
        Compiled {
            program: env().compile(source).map_err(|e| e.to_string()),
        }
    }

    #[cfg(test)]
    pub(crate) fn parse_error(&self) -> Option<&str> {
        self.program.as_ref().err().map(String::as_str)
    }

    /// Evaluates with `self` and, when given, `oldSelf` bound.
    pub(crate) fn eval(&self, this: &Value, old: Option<&Value>) -> Result<Value, String> {
        let program = self
            .program
            .as_ref()
            .map_err(|e| format!("does not compile: {e}"))?;
        let mut ctx = Context::with_env(env());
        ctx.add_variable_from_value("self", this.clone());
        if let Some(old) = old {
            ctx.add_variable_from_value("oldSelf", old.clone());
        }
        program.execute(&ctx).map_err(|e| e.to_string())
    }

    pub(crate) fn check(&self, this: &Value, old: Option<&Value>) -> Outcome {
        match self.eval(this, old) {
            Ok(Value::Bool(true)) => Outcome::Pass,
            Ok(Value::Bool(false)) => Outcome::Fail,
            Ok(other) => Outcome::Unevaluated(format!("returned {other:?}, not a bool")),
            Err(e) => Outcome::Unevaluated(e),
        }
    }
}

/// `optional.of(v)` / `optional.none()`, for rules with `optionalOldSelf`.
pub(crate) fn optional(v: Option<&Value>) -> Result<Value, String> {
    let source = if v.is_some() {
        "optional.of(self)"
    } else {
        "optional.none()"
    };
    Compiled::new(source).eval(v.unwrap_or(&Value::Null), None)
}

/// Whether a rule names `oldSelf` outside string literals: such rules are transition rules.
pub(crate) fn mentions_old_self(rule: &str) -> bool {
    let bytes = rule.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'"' || c == b'\'' {
            // Skip the literal, honouring backslash escapes; triple quotes end at the same char.
            i += 1;
            while i < bytes.len() && bytes[i] != c {
                if bytes[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            if &rule[start..i] == "oldSelf" {
                return true;
            }
            continue;
        }
        i += 1;
    }
    false
}
