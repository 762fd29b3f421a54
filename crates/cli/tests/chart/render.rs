//! A renderer for the subset of Helm's template language the chart keeps to (listed at the
//! top of `charts/nodewright/templates/_helpers.tpl`), with Go template semantics for that
//! subset: trim markers, truthiness, `else if`, pipelines passing the value as the last
//! argument. It is stricter than Helm where Helm would quietly print `<no value>`: reading
//! through a missing map, printing a missing value, an unknown function or action all fail.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_yaml::Value;

/// What the templates can see besides `.Values`.
pub struct Context {
    pub values: Value,
    pub release_name: String,
    pub release_namespace: String,
    pub chart: Value,
}

#[derive(Debug, Clone)]
enum Token {
    Text(String),
    Action(String),
}

#[derive(Debug, Clone)]
enum Node {
    Text(String),
    Print(String),
    If(Vec<(String, Vec<Node>)>, Vec<Node>),
    /// `range PIPELINE`: the body once per item of a list, with `.` the item.
    Range(String, Vec<Node>),
}

pub struct Chart {
    /// The chart's directory, for `.Files.Get`.
    dir: PathBuf,
    defines: BTreeMap<String, Vec<Node>>,
    /// Template file name to its parsed body.
    files: BTreeMap<String, Vec<Node>>,
}

/// Splits source into text and actions, applying `{{-` / `-}}` trims and dropping comments.
fn lex(src: &str) -> Result<Vec<Token>, String> {
    let mut out: Vec<Token> = Vec::new();
    let mut rest = src;
    let mut trim_next = false;
    while let Some(start) = rest.find("{{") {
        let mut text = rest[..start].to_string();
        if trim_next {
            text = text.trim_start().to_string();
        }
        let after = &rest[start + 2..];
        let trim_left = after.starts_with("- ") || after.starts_with("-\n");
        let body_start = if trim_left { 1 } else { 0 };
        let inner = &after[body_start..];
        let is_comment = inner.trim_start().starts_with("/*");
        let end = if is_comment {
            let close = inner
                .find("*/")
                .ok_or_else(|| "unterminated comment".to_string())?;
            let tail = &inner[close + 2..];
            let to_braces = tail.find("}}").ok_or("unterminated comment action")?;
            if !tail[..to_braces]
                .trim_matches(|c| c == ' ' || c == '-')
                .is_empty()
            {
                return Err("text after a comment inside its action".into());
            }
            close + 2 + to_braces
        } else {
            inner.find("}}").ok_or("unterminated action")?
        };
        let raw = &inner[..end];
        let trim_right = raw.ends_with(" -") || raw.ends_with("\n-");
        let action = if trim_right {
            &raw[..raw.len() - 1]
        } else {
            raw
        };
        if trim_left {
            text = text.trim_end().to_string();
        }
        out.push(Token::Text(text));
        if !is_comment {
            out.push(Token::Action(action.trim().to_string()));
        }
        trim_next = trim_right;
        rest = &inner[end + 2..];
    }
    let mut text = rest.to_string();
    if trim_next {
        text = text.trim_start().to_string();
    }
    out.push(Token::Text(text));
    Ok(out)
}

/// Builds the tree; `define` bodies go to `defines`.
fn parse(
    tokens: &[Token],
    pos: &mut usize,
    defines: &mut BTreeMap<String, Vec<Node>>,
) -> Result<(Vec<Node>, Option<String>), String> {
    let mut nodes = Vec::new();
    while *pos < tokens.len() {
        let t = tokens[*pos].clone();
        *pos += 1;
        match t {
            Token::Text(s) => nodes.push(Node::Text(s)),
            Token::Action(a) => {
                let word = a.split_whitespace().next().unwrap_or_default();
                match word {
                    "end" => return Ok((nodes, Some("end".into()))),
                    "else" => return Ok((nodes, Some(a))),
                    "if" => {
                        let mut branches = Vec::new();
                        let mut cond = a["if".len()..].trim().to_string();
                        let mut otherwise = Vec::new();
                        loop {
                            let (body, stop) = parse(tokens, pos, defines)?;
                            match stop.as_deref() {
                                Some("end") => {
                                    branches.push((cond, body));
                                    break;
                                }
                                Some("else") => {
                                    branches.push((cond, body));
                                    let (body, stop) = parse(tokens, pos, defines)?;
                                    if stop.as_deref() != Some("end") {
                                        return Err("else without end".into());
                                    }
                                    otherwise = body;
                                    break;
                                }
                                Some(s) if s.starts_with("else if ") => {
                                    branches.push((cond, body));
                                    cond = s["else if ".len()..].trim().to_string();
                                }
                                other => return Err(format!("if ended by {other:?}")),
                            }
                        }
                        nodes.push(Node::If(branches, otherwise));
                    }
                    "define" => {
                        let name = unquote(a["define".len()..].trim())?;
                        let (body, stop) = parse(tokens, pos, defines)?;
                        if stop.as_deref() != Some("end") {
                            return Err(format!("define {name} without end"));
                        }
                        defines.insert(name, body);
                    }
                    "range" => {
                        let over = a["range".len()..].trim().to_string();
                        let (body, stop) = parse(tokens, pos, defines)?;
                        if stop.as_deref() != Some("end") {
                            return Err(format!("range ended by {stop:?}: no else in the subset"));
                        }
                        nodes.push(Node::Range(over, body));
                    }
                    "with" | "template" | "block" => {
                        return Err(format!("action {word:?} is outside the chart's subset"));
                    }
                    _ => nodes.push(Node::Print(a)),
                }
            }
        }
    }
    Ok((nodes, None))
}

fn unquote(s: &str) -> Result<String, String> {
    if s.starts_with('"') && s.ends_with('"') && s.len() >= 2 {
        serde_json::from_str(s).map_err(|e| format!("bad string {s}: {e}"))
    } else {
        Err(format!("expected a string, got {s}"))
    }
}

/// Splits on `sep` outside double quotes.
fn split_outside_quotes(s: &str, sep: impl Fn(char) -> bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut escaped = false;
    for c in s.chars() {
        if quoted {
            cur.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                quoted = false;
            }
        } else if c == '"' {
            quoted = true;
            cur.push(c);
        } else if sep(c) {
            if !cur.trim().is_empty() {
                out.push(cur.trim().to_string());
            }
            cur.clear();
        } else {
            cur.push(c);
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

/// A value in a pipeline: data, or the root context `.` (only `include` takes it).
#[derive(Clone, Debug, PartialEq)]
enum Val {
    Data(Value),
    Root,
}

fn truthy(v: &Val) -> bool {
    match v {
        Val::Root => true,
        Val::Data(Value::Null) => false,
        Val::Data(Value::Bool(b)) => *b,
        Val::Data(Value::String(s)) => !s.is_empty(),
        Val::Data(Value::Number(n)) => n.as_f64() != Some(0.0),
        Val::Data(Value::Sequence(s)) => !s.is_empty(),
        Val::Data(Value::Mapping(m)) => !m.is_empty(),
        Val::Data(Value::Tagged(_)) => true,
    }
}

/// Go's `fmt.Sprint` of a value decoded from YAML, as Helm prints it.
fn print(v: &Val) -> Result<String, String> {
    match v {
        Val::Data(Value::String(s)) => Ok(s.clone()),
        Val::Data(Value::Bool(b)) => Ok(b.to_string()),
        Val::Data(Value::Number(n)) => Ok(n.to_string()),
        Val::Data(Value::Null) => {
            Err("printing a missing value (Helm would print <no value>)".into())
        }
        other => Err(format!("printing a collection {other:?} without toYaml")),
    }
}

impl Chart {
    pub fn load(dir: &Path) -> Result<Chart, String> {
        let mut defines = BTreeMap::new();
        let mut files = BTreeMap::new();
        let mut entries: Vec<_> = std::fs::read_dir(dir.join("templates"))
            .map_err(|e| e.to_string())?
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let src = std::fs::read_to_string(&path).map_err(|e| e.to_string())?;
            let tokens = lex(&src).map_err(|e| format!("{name}: {e}"))?;
            let mut pos = 0;
            let (body, stop) =
                parse(&tokens, &mut pos, &mut defines).map_err(|e| format!("{name}: {e}"))?;
            if stop.is_some() {
                return Err(format!("{name}: unbalanced {stop:?}"));
            }
            if !name.starts_with('_') {
                files.insert(name, body);
            }
        }
        Ok(Chart {
            dir: dir.to_path_buf(),
            defines,
            files,
        })
    }

    pub fn file_names(&self) -> Vec<String> {
        self.files.keys().cloned().collect()
    }

    pub fn render(&self, file: &str, ctx: &Context) -> Result<String, String> {
        let body = self.files.get(file).ok_or(format!("no template {file}"))?;
        let mut out = String::new();
        self.run(body, ctx, &Val::Root, &mut out)
            .map_err(|e| format!("{file}: {e}"))?;
        Ok(out)
    }

    /// Runs `nodes` with `dot` as `.` (the root outside `range`).
    fn run(
        &self,
        nodes: &[Node],
        ctx: &Context,
        dot: &Val,
        out: &mut String,
    ) -> Result<(), String> {
        for n in nodes {
            match n {
                Node::Text(s) => out.push_str(s),
                Node::Print(p) => out.push_str(&print(&self.pipeline(p, ctx, dot)?)?),
                Node::If(branches, otherwise) => {
                    let mut taken = false;
                    for (cond, body) in branches {
                        if truthy(&self.pipeline(cond, ctx, dot)?) {
                            self.run(body, ctx, dot, out)?;
                            taken = true;
                            break;
                        }
                    }
                    if !taken {
                        self.run(otherwise, ctx, dot, out)?;
                    }
                }
                Node::Range(over, body) => match self.pipeline(over, ctx, dot)? {
                    Val::Data(Value::Null) => {}
                    Val::Data(Value::Sequence(items)) => {
                        for item in items {
                            self.run(body, ctx, &Val::Data(item), out)?;
                        }
                    }
                    other => {
                        return Err(format!(
                            "range over {other:?}: only lists are in the subset"
                        ));
                    }
                },
            }
        }
        Ok(())
    }

    fn pipeline(&self, p: &str, ctx: &Context, dot: &Val) -> Result<Val, String> {
        // `$` alone or as `$.Values…` is the root; variables (`$x`, `:=`) are outside the subset.
        let variable = p.contains(":=")
            || p.match_indices('$').any(|(i, _)| {
                p[i + 1..]
                    .chars()
                    .next()
                    .is_some_and(|c| c != '.' && !c.is_whitespace())
            });
        if p.contains('(') || variable {
            return Err(format!(
                "{p:?}: parentheses and variables are outside the subset"
            ));
        }
        let mut piped: Option<Val> = None;
        for command in split_outside_quotes(p, |c| c == '|') {
            let words = split_outside_quotes(&command, char::is_whitespace);
            let (head, args) = words.split_first().ok_or("empty command")?;
            let mut args: Vec<Val> = args
                .iter()
                .map(|a| self.term(a, ctx, dot))
                .collect::<Result<_, _>>()?;
            if let Some(v) = piped.take() {
                args.push(v);
            }
            piped = Some(if is_function(head) || *head == FILES_GET {
                self.call(head, &args, ctx)?
            } else if args.is_empty() {
                self.term(head, ctx, dot)?
            } else {
                return Err(format!("{head} is not a function"));
            });
        }
        piped.ok_or_else(|| "empty pipeline".into())
    }

    fn term(&self, t: &str, ctx: &Context, dot: &Val) -> Result<Val, String> {
        if t == "." {
            return Ok(dot.clone());
        }
        if t == "$" {
            return Ok(Val::Root);
        }
        // `.field` inside `range`: a key of the item.
        if let (Val::Data(item), Some(rest)) = (dot, t.strip_prefix('.')) {
            let path: Vec<&str> = rest.split('.').collect();
            return lookup(item, &path, t);
        }
        let t = t.strip_prefix('$').unwrap_or(t);
        if t.starts_with('"') {
            return Ok(Val::Data(Value::String(unquote(t)?)));
        }
        if let Ok(n) = t.parse::<i64>() {
            return Ok(Val::Data(Value::Number(n.into())));
        }
        if t == "true" || t == "false" {
            return Ok(Val::Data(Value::Bool(t == "true")));
        }
        let path: Vec<&str> = t
            .strip_prefix('.')
            .ok_or(format!("unknown term {t}"))?
            .split('.')
            .collect();
        match path.as_slice() {
            ["Values", rest @ ..] => lookup(&ctx.values, rest, t),
            ["Release", "Name"] => Ok(Val::Data(Value::String(ctx.release_name.clone()))),
            ["Release", "Namespace"] => Ok(Val::Data(Value::String(ctx.release_namespace.clone()))),
            ["Release", "Service"] => Ok(Val::Data(Value::String("Helm".into()))),
            ["Chart", field @ ("Name" | "Version" | "AppVersion")] => {
                let key = match *field {
                    "Name" => "name",
                    "Version" => "version",
                    _ => "appVersion",
                };
                Ok(Val::Data(
                    ctx.chart.get(key).cloned().unwrap_or(Value::Null),
                ))
            }
            _ => Err(format!("unknown term {t}")),
        }
    }

    fn call(&self, f: &str, args: &[Val], ctx: &Context) -> Result<Val, String> {
        let arity = |n: usize| {
            if args.len() == n {
                Ok(())
            } else {
                Err(format!("{f} takes {n} arguments, got {}", args.len()))
            }
        };
        let data = |v: &Val| match v {
            Val::Data(d) => Ok(d.clone()),
            Val::Root => Err(format!("{f} cannot take the root context")),
        };
        match f {
            "include" => {
                arity(2)?;
                if args[1] != Val::Root {
                    return Err("include must be given the root context".into());
                }
                let name = match &args[0] {
                    Val::Data(Value::String(s)) => s.clone(),
                    _ => return Err("include needs a template name".into()),
                };
                let body = self
                    .defines
                    .get(&name)
                    .ok_or(format!("no template named {name}"))?;
                let mut out = String::new();
                self.run(body, ctx, &Val::Root, &mut out)?;
                Ok(Val::Data(Value::String(out)))
            }
            "default" => {
                arity(2)?;
                Ok(if truthy(&args[1]) {
                    args[1].clone()
                } else {
                    args[0].clone()
                })
            }
            "required" => {
                arity(2)?;
                if truthy(&args[1]) {
                    Ok(args[1].clone())
                } else {
                    Err(format!("required: {}", print(&args[0])?))
                }
            }
            "quote" => {
                arity(1)?;
                let s = match &args[0] {
                    Val::Data(Value::Null) => String::new(),
                    v => print(v)?,
                };
                Ok(Val::Data(Value::String(
                    serde_json::to_string(&s).map_err(|e| e.to_string())?,
                )))
            }
            "toYaml" => {
                arity(1)?;
                let text = serde_yaml::to_string(&data(&args[0])?).map_err(|e| e.to_string())?;
                Ok(Val::Data(Value::String(
                    text.trim_end_matches('\n').to_string(),
                )))
            }
            "nindent" => {
                arity(2)?;
                let n = match &args[0] {
                    Val::Data(Value::Number(n)) => n.as_u64().ok_or("bad indent")? as usize,
                    _ => return Err("nindent needs a number".into()),
                };
                let pad = " ".repeat(n);
                let text = print(&args[1])?;
                let body: Vec<String> = text.lines().map(|l| format!("{pad}{l}")).collect();
                Ok(Val::Data(Value::String(format!("\n{}", body.join("\n")))))
            }
            FILES_GET => {
                arity(1)?;
                let Val::Data(Value::String(path)) = &args[0] else {
                    return Err(format!("{FILES_GET} needs a path"));
                };
                // Helm's .Files never holds the templates; a missing file is an error here,
                // where Helm would quietly give an empty string.
                if path.starts_with("templates/") || path.contains("..") {
                    return Err(format!("{FILES_GET} {path:?}: outside .Files"));
                }
                let text = std::fs::read_to_string(self.dir.join(path))
                    .map_err(|e| format!("{FILES_GET} {path:?}: {e}"))?;
                Ok(Val::Data(Value::String(text)))
            }
            "eq" | "ne" => {
                arity(2)?;
                let same = data(&args[0])? == data(&args[1])?;
                Ok(Val::Data(Value::Bool(same == (f == "eq"))))
            }
            "not" => {
                arity(1)?;
                Ok(Val::Data(Value::Bool(!truthy(&args[0]))))
            }
            _ => Err(format!("function {f} is outside the subset")),
        }
    }
}

/// The one method call of the subset: a chart file's text.
const FILES_GET: &str = ".Files.Get";

fn is_function(word: &str) -> bool {
    !word.starts_with('.')
        && !word.starts_with('$')
        && !word.starts_with('"')
        && word.parse::<i64>().is_err()
}

/// `.Values.a.b.c`: every map on the way must exist (Helm fails on a nil map too); the last
/// key may be missing, which reads as null.
fn lookup(values: &Value, path: &[&str], whole: &str) -> Result<Val, String> {
    let mut cur = values;
    for (i, key) in path.iter().enumerate() {
        let map = cur
            .as_mapping()
            .ok_or(format!("{whole}: {} is not a map", path[..i].join(".")))?;
        match map.get(Value::String((*key).to_string())) {
            Some(v) => cur = v,
            None if i + 1 == path.len() => return Ok(Val::Data(Value::Null)),
            None => return Err(format!("{whole}: no map at {}", path[..=i].join("."))),
        }
    }
    Ok(Val::Data(cur.clone()))
}

/// Helm's merge of user values over the chart's: maps merge key by key, anything else
/// replaces, null deletes.
pub fn merge(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Mapping(b), Value::Mapping(o)) => {
            for (k, v) in o {
                if v.is_null() {
                    b.remove(k);
                } else if let Some(existing) = b.get_mut(k) {
                    merge(existing, v);
                } else {
                    b.insert(k.clone(), v.clone());
                }
            }
        }
        (b, o) => *b = o.clone(),
    }
}

/// Every `.Values.…` path a source text mentions.
pub fn value_paths(src: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = src;
    while let Some(i) = rest.find(".Values.") {
        let tail = &rest[i + ".Values.".len()..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '_'))
            .unwrap_or(tail.len());
        let path = tail[..end].trim_end_matches('.');
        if !path.is_empty() {
            out.push(path.to_string());
        }
        rest = &tail[end..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(src: &str) -> Result<(Chart, Context), String> {
        let tokens = lex(src)?;
        let mut defines = BTreeMap::new();
        let (body, _) = parse(&tokens, &mut 0, &mut defines)?;
        let chart = Chart {
            dir: PathBuf::new(),
            defines,
            files: BTreeMap::from([("t".to_string(), body)]),
        };
        let ctx = Context {
            values: serde_yaml::from_str(
                "a: {b: 1, s: x, on: true, off: false}\nl: [{k: 1}, {k: 2, sel: y}]",
            )
            .unwrap(),
            release_name: "r".into(),
            release_namespace: "ns".into(),
            chart: serde_yaml::from_str("name: c").unwrap(),
        };
        Ok((chart, ctx))
    }

    fn render(src: &str) -> Result<String, String> {
        let (c, ctx) = chart(src)?;
        c.render("t", &ctx)
    }

    #[test]
    fn trims_and_branches_follow_go() {
        assert_eq!(
            render("x:\n  {{- if .Values.a.on }}\n  y: 1\n  {{- end }}\n").unwrap(),
            "x:\n  y: 1\n"
        );
        assert_eq!(
            render("x:\n  {{- if .Values.a.off }}\n  y: 1\n  {{- end }}\n").unwrap(),
            "x:\n"
        );
        assert_eq!(
            render(
                "{{ if .Values.a.off }}1{{ else if eq .Values.a.s \"x\" }}2{{ else }}3{{ end }}"
            )
            .unwrap(),
            "2"
        );
        assert_eq!(render("a: {{ .Values.a.b | quote }}").unwrap(), "a: \"1\"");
        assert_eq!(render("{{ .Values.a.nope | default \"d\" }}").unwrap(), "d");
        assert_eq!(
            render(
                "{{- define \"l\" -}}\nk: v\n{{- end -}}\nm:\n  {{- include \"l\" . | nindent 2 }}"
            )
            .unwrap(),
            "m:\n  k: v"
        );
        assert_eq!(render("{{/* a {{ comment }} */}}\nz").unwrap(), "\nz");
    }

    #[test]
    fn range_binds_the_item_to_dot_and_the_root_to_dollar() {
        let src = "{{- define \"n\" -}}\n{{ .Release.Name }}\n{{- end -}}\n\
                   {{- range .Values.l }}\n- {{ .k }}/{{ .sel | default (\"none\") }}{{ end }}";
        assert!(render(src).is_err(), "parentheses stay outside the subset");
        let src = "{{- define \"n\" -}}\n{{ .Release.Name }}\n{{- end -}}\n\
                   {{- range .Values.l }}\n- {{ .k }} {{ .sel | default \"none\" }} \
                   {{ include \"n\" $ }} {{ $.Values.a.s }}{{ end }}";
        assert_eq!(render(src).unwrap(), "\n- 1 none r x\n- 2 y r x");
        assert_eq!(
            render("{{ range .Values.l }}{{ if not .sel }}-{{ toYaml . }}{{ end }}{{ end }}")
                .unwrap(),
            "-k: 1"
        );
        assert_eq!(render("{{ range .Values.a.nope }}x{{ end }}").unwrap(), "");
        let e = render("{{- define \"n\" -}}x{{- end -}}{{ include \"n\" .Values.a }}");
        assert!(e.unwrap_err().contains("root context"));
    }

    #[test]
    fn what_helm_would_print_as_no_value_is_an_error() {
        assert!(render("{{ .Values.a.nope }}").is_err());
        assert!(
            render("{{ .Values.x.y }}").is_err(),
            "missing map on the way"
        );
        assert!(
            render("{{ .Values.a.nope | required \"need it\" }}")
                .unwrap_err()
                .contains("need it")
        );
        assert!(
            render("{{ range .Values.a }}{{ end }}").is_err(),
            "range over a map"
        );
        assert!(render("{{ range .Values.l }}{{ else }}{{ end }}").is_err());
        assert!(render("{{ $x := 1 }}").is_err(), "variables");
        assert!(render("{{ .Values.a.s | upper }}").is_err());
    }
}
