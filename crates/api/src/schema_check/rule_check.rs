//! Static checks of one CEL rule against the schema node it is attached to, standing in for
//! the API server's type check and cost estimate:
//!
//! - field selections must name declared properties (with Kubernetes' name escaping);
//! - every function called must exist in the Kubernetes CEL environment, and the checker says
//!   which of those it cannot evaluate offline;
//! - an estimated cost, from `maxItems`, `maxProperties` and `maxLength`, or from the request
//!   size limit where they are missing, as the server does.
//!
//! The cost model is an approximation of the server's, not a copy: it multiplies collection
//! sizes through comprehensions and charges string-scanning functions by string length. Map
//! keys are taken to be at most 316 characters (a qualified label key), since the schema cannot
//! bound them.

use cel::IdedExpr;
use cel::common::ast::{EntryExpr, Expr, LiteralValue};
use serde_json::Value as Json;

use super::cel_env::escape_property;
use super::keyword::{additional_schema, flag, get, properties, text};

mod cost;

pub(crate) use cost::max_size;
use cost::{MAP_KEY_MAX, literal_len, max_len, string_cost};

/// Functions the checker evaluates (stdlib, strings extension, Kubernetes regex/list/set libraries).
const EVALUATED: &[&str] = &[
    "size",
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "int",
    "uint",
    "double",
    "string",
    "bytes",
    "bool",
    "dyn",
    "type",
    "charAt",
    "indexOf",
    "lastIndexOf",
    "lowerAscii",
    "upperAscii",
    "replace",
    "split",
    "substring",
    "trim",
    "join",
    "strings.quote",
    "find",
    "findAll",
    "isSorted",
    "sum",
    "min",
    "max",
    "sets.contains",
    "sets.equivalent",
    "sets.intersects",
    "optional.of",
    "optional.none",
    "optional.ofNonZeroValue",
    "hasValue",
    "value",
    "orValue",
    "or",
];

/// Functions a Kubernetes 1.30 server knows that this checker cannot evaluate.
const KUBERNETES_ONLY: &[&str] = &[
    "quantity",
    "isQuantity",
    "sign",
    "isInteger",
    "asInteger",
    "asApproximateFloat",
    "isGreaterThan",
    "isLessThan",
    "compareTo",
    "add",
    "sub",
    "url",
    "isURL",
    "getScheme",
    "getHost",
    "getHostname",
    "getPort",
    "getEscapedPath",
    "getQuery",
    "ip",
    "isIP",
    "cidr",
    "isCIDR",
    "duration",
    "timestamp",
    "getFullYear",
    "getMonth",
    "getDayOfYear",
    "getDayOfMonth",
    "getDate",
    "getDayOfWeek",
    "getHours",
    "getMinutes",
    "getSeconds",
    "getMilliseconds",
    "cel.bind",
    "format",
];

/// Identifiers that name types, usable in `type(x) == int`.
const TYPE_NAMES: &[&str] = &[
    "int",
    "uint",
    "double",
    "string",
    "bytes",
    "bool",
    "list",
    "map",
    "null_type",
    "type",
    "dyn",
];

const NAMESPACES: &[&str] = &["sets", "optional", "strings", "cel"];

#[derive(Clone, Debug)]
enum Ty<'a> {
    /// A value described by a schema node.
    Node(&'a Json),
    /// A string of at most this many characters.
    Str(f64),
    /// A value of a known CEL type: `int`, `uint`, `double`, `bool`, `null`, `bytes`, `list`, `map`.
    Prim(&'static str),
    Dyn,
}

/// The CEL type family of a value when it is known for sure. Strings with time formats are
/// left unknown, since the server turns them into timestamps and durations.
fn family(t: &Ty<'_>) -> Option<&'static str> {
    match t {
        Ty::Str(_) => Some("string"),
        Ty::Prim(f) => Some(f),
        Ty::Dyn => None,
        Ty::Node(s) if flag(s, "x-kubernetes-int-or-string") => None,
        Ty::Node(s) => match text(s, "type") {
            Some("string")
                if matches!(text(s, "format"), Some("date-time" | "date" | "duration")) =>
            {
                None
            }
            Some("string") => Some("string"),
            Some("integer") => Some("int"),
            Some("number") => Some("double"),
            Some("boolean") => Some("bool"),
            Some("array") => Some("list"),
            Some("object") => Some("map"),
            _ => None,
        },
    }
}

fn numeric(f: &str) -> bool {
    matches!(f, "int" | "uint" | "double")
}

/// Whether two known families can meet in `==` or an ordering: numbers mix, the rest must match.
fn comparable(a: &str, b: &str) -> bool {
    a == b || (numeric(a) && numeric(b)) || a == "null" || b == "null"
}

const STRING_MEMBERS: &[&str] = &[
    "startsWith",
    "endsWith",
    "contains",
    "find",
    "findAll",
    "lowerAscii",
    "upperAscii",
    "split",
    "trim",
    "replace",
    "substring",
    "charAt",
    super::cel_env::RE2_MATCHES,
];

#[derive(Default)]
pub(crate) struct RuleFacts {
    pub(crate) errors: Vec<String>,
    /// Functions the server knows but this checker cannot evaluate.
    pub(crate) unevaluable: Vec<String>,
    pub(crate) cost: f64,
}

/// Analyses `expr` as a rule on `schema`; `root` when the node is the object root, whose
/// rules may read `self.metadata.name` and `self.metadata.generateName`.
pub(crate) fn analyse(expr: &IdedExpr, schema: &Json, root: bool) -> RuleFacts {
    let mut a = Analyser {
        schema,
        root,
        facts: RuleFacts::default(),
        scope: Vec::new(),
    };
    let (result, cost) = a.walk(expr);
    if let Some(f) = family(&result).filter(|f| *f != "bool") {
        a.error(format!("rule must evaluate to bool, not {f}"));
    }
    a.facts.cost = cost;
    a.facts.errors.dedup();
    a.facts.unevaluable.sort();
    a.facts.unevaluable.dedup();
    a.facts
}

struct Analyser<'a> {
    schema: &'a Json,
    root: bool,
    facts: RuleFacts,
    scope: Vec<(String, Ty<'a>)>,
}

fn is_operator(name: &str) -> bool {
    name.starts_with('_') || name.starts_with('@') || name.starts_with('!') || name.starts_with('-')
}

impl<'a> Analyser<'a> {
    fn error(&mut self, e: String) {
        self.facts.errors.push(e);
    }

    fn walk(&mut self, e: &IdedExpr) -> (Ty<'a>, f64) {
        match &e.expr {
            Expr::Unspecified => (Ty::Dyn, 0.0),
            Expr::Literal(LiteralValue::String(s)) => (Ty::Str(s.chars().count() as f64), 1.0),
            Expr::Literal(lit) => {
                let f = match lit {
                    LiteralValue::Boolean(_) => "bool",
                    LiteralValue::Bytes(_) => "bytes",
                    LiteralValue::Double(_) => "double",
                    LiteralValue::Int(_) => "int",
                    LiteralValue::Null => "null",
                    LiteralValue::UInt(_) => "uint",
                    LiteralValue::String(_) => "string",
                };
                (Ty::Prim(f), 1.0)
            }
            Expr::Ident(name) => (self.ident(name), 1.0),
            Expr::Select(sel) => {
                let (t, c) = self.walk(&sel.operand);
                let selected = self.select(&t, &sel.field);
                // `has(x.f)` is a select in test mode: it yields whether the field is set.
                let ty = if sel.test { Ty::Prim("bool") } else { selected };
                (ty, c + 1.0)
            }
            Expr::List(list) => {
                let mut cost = 1.0;
                for el in &list.elements {
                    cost += self.walk(el).1;
                }
                (Ty::Prim("list"), cost)
            }
            Expr::Map(map) => {
                let mut cost = 1.0;
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(m) = &entry.expr {
                        cost += self.walk(&m.key).1 + self.walk(&m.value).1;
                    }
                }
                (Ty::Prim("map"), cost)
            }
            Expr::Struct(s) => {
                self.error(format!(
                    "object construction '{}' is not available in CRD rules",
                    s.type_name
                ));
                (Ty::Dyn, 1.0)
            }
            Expr::Call(call) => self.call(&call.func_name, call.target.as_deref(), &call.args),
            Expr::Comprehension(c) => {
                let (range_ty, range_cost) = self.walk(&c.iter_range);
                if let Some(f) = family(&range_ty).filter(|f| !matches!(*f, "list" | "map")) {
                    self.error(format!(
                        "expression of type '{f}' cannot be the range of a comprehension (must be list or map)"
                    ));
                }
                let (element, size) = match &range_ty {
                    Ty::Node(s) if text(s, "type") == Some("array") => {
                        (get(s, "items").map_or(Ty::Dyn, Ty::Node), max_size(s))
                    }
                    Ty::Node(s) if additional_schema(s).is_some() || properties(s).is_some() => {
                        let key_len = properties(s).map_or(MAP_KEY_MAX, |p| {
                            p.keys().map(|k| k.chars().count()).max().unwrap_or(0) as f64
                        });
                        (Ty::Str(key_len), max_size(s))
                    }
                    _ => (Ty::Dyn, literal_len(&c.iter_range).unwrap_or(1.0)),
                };
                let (_, init_cost) = self.walk(&c.accu_init);
                self.scope.push((c.iter_var.clone(), element));
                if let Some(v2) = &c.iter_var2 {
                    self.scope.push((v2.clone(), Ty::Dyn));
                }
                self.scope.push((c.accu_var.clone(), Ty::Dyn));
                let (_, cond_cost) = self.walk(&c.loop_cond);
                let (_, step_cost) = self.walk(&c.loop_step);
                self.scope.pop();
                if c.iter_var2.is_some() {
                    self.scope.pop();
                }
                self.scope.pop();
                self.scope.push((c.accu_var.clone(), Ty::Dyn));
                let (_, result_cost) = self.walk(&c.result);
                self.scope.pop();
                (
                    Ty::Dyn,
                    range_cost + init_cost + size * (cond_cost + step_cost) + result_cost,
                )
            }
        }
    }

    fn ident(&mut self, name: &str) -> Ty<'a> {
        if let Some((_, t)) = self.scope.iter().rev().find(|(n, _)| n == name) {
            return t.clone();
        }
        match name {
            "self" | "oldSelf" => Ty::Node(self.schema),
            _ if TYPE_NAMES.contains(&name) || NAMESPACES.contains(&name) => Ty::Dyn,
            // Macro-internal accumulators are bound by the parser.
            _ if name.starts_with('@') || name.starts_with("__") => Ty::Dyn,
            _ => {
                self.error(format!("undeclared reference to '{name}'"));
                Ty::Dyn
            }
        }
    }

    fn select(&mut self, on: &Ty<'a>, field: &str) -> Ty<'a> {
        let Ty::Node(s) = on else { return Ty::Dyn };
        if self.root && field == "metadata" && std::ptr::eq(*s, self.schema) {
            return Ty::Node(root_metadata());
        }
        if let Some(props) = properties(s) {
            if let Some((_, prop)) = props
                .iter()
                .find(|(name, _)| escape_property(name).as_deref() == Some(field))
            {
                return Ty::Node(prop);
            }
            if flag(s, "x-kubernetes-preserve-unknown-fields") {
                return Ty::Dyn;
            }
            self.error(format!("undefined field '{field}'"));
            return Ty::Dyn;
        }
        if let Some(values) = additional_schema(s) {
            return Ty::Node(values);
        }
        match text(s, "type") {
            Some(t @ ("string" | "integer" | "number" | "boolean" | "array")) => {
                self.error(format!(
                    "type '{t}' does not support field selection ('{field}')"
                ));
                Ty::Dyn
            }
            Some("object") if !flag(s, "x-kubernetes-preserve-unknown-fields") => {
                self.error(format!("undefined field '{field}'"));
                Ty::Dyn
            }
            _ => Ty::Dyn,
        }
    }

    fn call(&mut self, name: &str, target: Option<&IdedExpr>, args: &[IdedExpr]) -> (Ty<'a>, f64) {
        // `sets.contains(a, b)` parses as a call on the identifier `sets`.
        let namespaced = match target.map(|t| &t.expr) {
            Some(Expr::Ident(ns))
                if NAMESPACES.contains(&ns.as_str())
                    && !self.scope.iter().any(|(n, _)| n == ns) =>
            {
                Some(format!("{ns}.{name}"))
            }
            _ => None,
        };
        let full_name = namespaced.clone().unwrap_or_else(|| name.to_string());
        let mut cost = 1.0;
        let mut receiver = None;
        if let Some(t) = target.filter(|_| namespaced.is_none()) {
            let (ty, c) = self.walk(t);
            cost += c;
            receiver = Some(ty);
        }
        let mut arg_types = Vec::with_capacity(args.len());
        for a in args {
            let (ty, c) = self.walk(a);
            cost += c;
            arg_types.push(ty);
        }
        if !is_operator(&full_name) && !EVALUATED.contains(&full_name.as_str()) {
            if KUBERNETES_ONLY.contains(&full_name.as_str()) {
                self.facts.unevaluable.push(full_name.clone());
            } else {
                self.error(format!("undeclared reference to '{full_name}'"));
            }
        }
        cost += string_cost(&full_name, receiver.as_ref(), &arg_types, args);
        if full_name == "@in"
            && let Some(n) = args.get(1).and_then(literal_len)
        {
            cost += n;
        }
        self.check_overload(&full_name, receiver.as_ref(), &arg_types);
        (result_type(&full_name, receiver.as_ref(), &arg_types), cost)
    }

    /// Rejects calls whose operand types are known and have no overload, as the server's type
    /// check does (`self.count == 'a'` on an integer, `startsWith` on a list, ...).
    fn check_overload(&mut self, name: &str, receiver: Option<&Ty<'a>>, args: &[Ty<'a>]) {
        let fams: Vec<Option<&str>> = args.iter().map(family).collect();
        let no_overload = |shown: &[&str]| {
            format!(
                "found no matching overload for '{name}' applied to '({})'",
                shown.join(", ")
            )
        };
        match name {
            "_==_" | "_!=_" | "_<_" | "_>_" | "_<=_" | "_>=_" => {
                if let [Some(a), Some(b)] = fams[..] {
                    let ordering = !matches!(name, "_==_" | "_!=_");
                    let unordered = ordering && matches!(a, "list" | "map" | "null");
                    if !comparable(a, b) || unordered {
                        self.error(no_overload(&[a, b]));
                    }
                }
            }
            "_&&_" | "_||_" | "!_" => {
                if fams.iter().any(|f| f.is_some_and(|f| f != "bool")) {
                    let shown: Vec<&str> = fams.iter().map(|f| f.unwrap_or("dyn")).collect();
                    self.error(no_overload(&shown));
                }
            }
            "_?_:_" => {
                if let Some(Some(f)) = fams.first()
                    && *f != "bool"
                {
                    self.error(format!("ternary condition must be bool, not {f}"));
                }
            }
            "@in" => {
                if let Some(Some(f)) = fams.get(1)
                    && !matches!(*f, "list" | "map")
                {
                    self.error(no_overload(&[fams[0].unwrap_or("dyn"), f]));
                }
            }
            _ => {
                let Some(r) = receiver.and_then(family) else {
                    return;
                };
                let string_only = STRING_MEMBERS.contains(&name)
                    && !(matches!(name, "indexOf" | "lastIndexOf") && r == "list");
                let sized = name == "size" && !matches!(r, "string" | "bytes" | "list" | "map");
                if (string_only && r != "string") || sized {
                    self.error(format!(
                        "found no matching overload for '{name}' applied to '{r}'"
                    ));
                }
            }
        }
    }
}

/// The type a call yields, where it is certain.
fn result_type<'a>(name: &str, receiver: Option<&Ty<'a>>, args: &[Ty<'a>]) -> Ty<'a> {
    let fams: Vec<Option<&str>> = args.iter().map(family).collect();
    match name {
        "_[_]" => match args.first() {
            Some(Ty::Node(s)) => match text(s, "type") {
                Some("array") => get(s, "items").map_or(Ty::Dyn, Ty::Node),
                _ => additional_schema(s).map_or(Ty::Dyn, Ty::Node),
            },
            _ => Ty::Dyn,
        },
        "_==_"
        | "_!=_"
        | "_<_"
        | "_>_"
        | "_<=_"
        | "_>=_"
        | "_&&_"
        | "_||_"
        | "!_"
        | "@in"
        | "@not_strictly_false"
        | "startsWith"
        | "endsWith"
        | "contains"
        | "isSorted"
        | "sets.contains"
        | "sets.equivalent"
        | "sets.intersects"
        | "hasValue" => Ty::Prim("bool"),
        n if n == super::cel_env::RE2_MATCHES => Ty::Prim("bool"),
        "size" | "int" => Ty::Prim("int"),
        "indexOf" | "lastIndexOf" => Ty::Prim("int"),
        "double" => Ty::Prim("double"),
        "uint" => Ty::Prim("uint"),
        "bool" => Ty::Prim("bool"),
        "split" | "findAll" => Ty::Prim("list"),
        "find" | "lowerAscii" | "upperAscii" | "trim" | "replace" | "substring" | "charAt" => {
            Ty::Str(receiver.map_or(1.0, max_len))
        }
        "string" => Ty::Str(64.0),
        "_?_:_" => match (args.get(1), fams.get(1), fams.get(2)) {
            (Some(t), Some(Some(a)), Some(Some(b))) if a == b => t.clone(),
            _ => Ty::Dyn,
        },
        "_+_" => match (fams.first(), fams.get(1)) {
            (Some(Some("string")), Some(Some("string"))) => Ty::Str(args.iter().map(max_len).sum()),
            (Some(Some(a)), Some(Some(b))) if a == b && numeric(a) => Ty::Prim(a),
            (Some(Some("list")), Some(Some("list"))) => Ty::Prim("list"),
            _ => Ty::Dyn,
        },
        "_-_" | "_*_" | "_/_" | "_%_" => match (fams.first(), fams.get(1)) {
            (Some(Some(a)), Some(Some(b))) if a == b && numeric(a) => Ty::Prim(a),
            _ => Ty::Dyn,
        },
        "-_" => args.first().cloned().unwrap_or(Ty::Dyn),
        _ => Ty::Dyn,
    }
}

/// What rules at the root see of `metadata`: its name and generateName.
fn root_metadata() -> &'static Json {
    static META: std::sync::OnceLock<Json> = std::sync::OnceLock::new();
    META.get_or_init(|| {
        serde_json::json!({"type": "object", "properties": {
            "name": {"type": "string", "maxLength": 253},
            "generateName": {"type": "string", "maxLength": 253}
        }})
    })
}
