//! The subset of TOML that Bottlerocket settings use: tables and arrays of tables, dotted and
//! quoted keys, basic and literal strings (also multi-line), integers, booleans, arrays and
//! inline tables. Floats and dates, which no Bottlerocket setting takes, are an error naming
//! the line rather than a silent misread.

use std::collections::BTreeMap;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    String(String),
    Integer(i64),
    Boolean(bool),
    Array(Vec<Value>),
    Table(Table),
}

pub type Table = BTreeMap<String, Value>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TomlError {
    /// 1-based.
    pub line: usize,
    pub reason: String,
}

impl fmt::Display for TomlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TOML line {}: {}", self.line, self.reason)
    }
}

impl std::error::Error for TomlError {}

struct Parser {
    chars: Vec<char>,
    pos: usize,
    line: usize,
}

fn is_bare(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

impl Parser {
    fn err<T>(&self, reason: impl Into<String>) -> Result<T, TomlError> {
        Err(TomlError {
            line: self.line,
            reason: reason.into(),
        })
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn peek_at(&self, n: usize) -> Option<char> {
        self.chars.get(self.pos + n).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += 1;
        if c == '\n' {
            self.line += 1;
        }
        Some(c)
    }

    fn skip_spaces(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t')) {
            self.bump();
        }
    }

    fn skip_comment(&mut self) {
        if self.peek() == Some('#') {
            while !matches!(self.peek(), None | Some('\n')) {
                self.bump();
            }
        }
    }

    /// Spaces, comments and newlines (between statements and inside arrays).
    fn skip_blank(&mut self) {
        loop {
            self.skip_spaces();
            self.skip_comment();
            match self.peek() {
                Some('\n') => {
                    self.bump();
                }
                Some('\r') if self.peek_at(1) == Some('\n') => {
                    self.bump();
                }
                _ => return,
            }
        }
    }

    fn end_of_line(&mut self) -> Result<(), TomlError> {
        self.skip_spaces();
        self.skip_comment();
        if self.peek() == Some('\r') {
            self.bump();
        }
        match self.peek() {
            None => Ok(()),
            Some('\n') => {
                self.bump();
                Ok(())
            }
            Some(c) => self.err(format!("unexpected {c:?} after the value")),
        }
    }

    fn key_part(&mut self) -> Result<String, TomlError> {
        match self.peek() {
            Some('"') => self.basic_string(),
            Some('\'') => self.literal_string(),
            Some(c) if is_bare(c) => {
                let mut s = String::new();
                while let Some(c) = self.peek().filter(|&c| is_bare(c)) {
                    s.push(c);
                    self.bump();
                }
                Ok(s)
            }
            Some(c) => self.err(format!("expected a key, found {c:?}")),
            None => self.err("expected a key, found the end of the input"),
        }
    }

    fn key_path(&mut self) -> Result<Vec<String>, TomlError> {
        let mut path = vec![self.key_part()?];
        loop {
            self.skip_spaces();
            if self.peek() != Some('.') {
                return Ok(path);
            }
            self.bump();
            self.skip_spaces();
            path.push(self.key_part()?);
        }
    }

    fn basic_string(&mut self) -> Result<String, TomlError> {
        let multi = self.peek_at(1) == Some('"') && self.peek_at(2) == Some('"');
        self.open_quotes(multi);
        let mut s = String::new();
        loop {
            match self.bump() {
                None => return self.err("unterminated string"),
                Some('\n') if !multi => return self.err("unterminated string"),
                Some('"') if !multi => return Ok(s),
                Some('"') if self.peek() == Some('"') && self.peek_at(1) == Some('"') => {
                    self.bump();
                    self.bump();
                    return Ok(s);
                }
                Some('\\') if multi && matches!(self.peek(), Some(' ' | '\t' | '\r' | '\n')) => {
                    // A line-ending backslash joins the lines, dropping the whitespace.
                    while matches!(self.peek(), Some(' ' | '\t' | '\r' | '\n')) {
                        self.bump();
                    }
                }
                Some('\\') => {
                    let c = match self.bump() {
                        Some('"') => '"',
                        Some('\\') => '\\',
                        Some('n') => '\n',
                        Some('t') => '\t',
                        Some('r') => '\r',
                        Some('b') => '\u{8}',
                        Some('f') => '\u{c}',
                        Some(u @ ('u' | 'U')) => {
                            let n = if u == 'u' { 4 } else { 8 };
                            let hex: String = (0..n).filter_map(|_| self.bump()).collect();
                            match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                                Some(c) if hex.len() == n => c,
                                _ => return self.err(format!("bad unicode escape \\{u}{hex}")),
                            }
                        }
                        Some(c) => return self.err(format!("unknown escape \\{c}")),
                        None => return self.err("unterminated string"),
                    };
                    s.push(c);
                }
                Some(c) => s.push(c),
            }
        }
    }

    fn literal_string(&mut self) -> Result<String, TomlError> {
        let multi = self.peek_at(1) == Some('\'') && self.peek_at(2) == Some('\'');
        self.open_quotes(multi);
        let mut s = String::new();
        loop {
            match self.bump() {
                None => return self.err("unterminated string"),
                Some('\n') if !multi => return self.err("unterminated string"),
                Some('\'') if !multi => return Ok(s),
                Some('\'') if self.peek() == Some('\'') && self.peek_at(1) == Some('\'') => {
                    self.bump();
                    self.bump();
                    return Ok(s);
                }
                Some(c) => s.push(c),
            }
        }
    }

    /// Consumes the opening quote(s); a multi-line string drops a newline right after them.
    fn open_quotes(&mut self, multi: bool) {
        let n = if multi { 3 } else { 1 };
        for _ in 0..n {
            self.bump();
        }
        if multi {
            if self.peek() == Some('\r') && self.peek_at(1) == Some('\n') {
                self.bump();
            }
            if self.peek() == Some('\n') {
                self.bump();
            }
        }
    }

    fn value(&mut self) -> Result<Value, TomlError> {
        match self.peek() {
            Some('"') => self.basic_string().map(Value::String),
            Some('\'') => self.literal_string().map(Value::String),
            Some('[') => self.array(),
            Some('{') => self.inline_table(),
            Some(_) => self.atom(),
            None => self.err("expected a value, found the end of the input"),
        }
    }

    fn array(&mut self) -> Result<Value, TomlError> {
        self.bump();
        let mut items = Vec::new();
        loop {
            self.skip_blank();
            if self.peek() == Some(']') {
                self.bump();
                return Ok(Value::Array(items));
            }
            items.push(self.value()?);
            self.skip_blank();
            match self.bump() {
                Some(',') => {}
                Some(']') => return Ok(Value::Array(items)),
                Some(c) => {
                    return self.err(format!("expected ',' or ']' in an array, found {c:?}"));
                }
                None => return self.err("unterminated array"),
            }
        }
    }

    fn inline_table(&mut self) -> Result<Value, TomlError> {
        self.bump();
        let mut table = Table::new();
        self.skip_spaces();
        if self.peek() == Some('}') {
            self.bump();
            return Ok(Value::Table(table));
        }
        loop {
            self.skip_spaces();
            let mut path = self.key_path()?;
            self.skip_spaces();
            if self.bump() != Some('=') {
                return self.err(format!("expected '=' after key {}", path.join(".")));
            }
            self.skip_spaces();
            let value = self.value()?;
            let last = path.pop().unwrap_or_default();
            let t = table_at(&mut table, &path, self)?;
            if t.contains_key(&last) {
                return self.err(format!("key {last:?} is defined twice"));
            }
            t.insert(last, value);
            self.skip_spaces();
            match self.bump() {
                Some(',') => {}
                Some('}') => return Ok(Value::Table(table)),
                Some(c) => {
                    return self.err(format!(
                        "expected ',' or '}}' in an inline table, found {c:?}"
                    ));
                }
                None => return self.err("unterminated inline table"),
            }
        }
    }

    fn atom(&mut self) -> Result<Value, TomlError> {
        let mut tok = String::new();
        while let Some(c) = self
            .peek()
            .filter(|&c| c.is_ascii_alphanumeric() || "+-_.:".contains(c))
        {
            tok.push(c);
            self.bump();
        }
        match tok.as_str() {
            "" => {
                let c = self.peek().unwrap_or(' ');
                return self.err(format!("expected a value, found {c:?}"));
            }
            "true" => return Ok(Value::Boolean(true)),
            "false" => return Ok(Value::Boolean(false)),
            _ => {}
        }
        let digits = tok.trim_start_matches(['+', '-']);
        let well_formed = !digits.is_empty()
            && tok.len() - digits.len() <= 1
            && digits.chars().all(|c| c.is_ascii_digit() || c == '_')
            && !digits.starts_with('_')
            && !digits.ends_with('_')
            && !digits.contains("__")
            && !(digits.len() > 1 && digits.starts_with('0'));
        if well_formed {
            if let Ok(n) = tok.replace('_', "").parse::<i64>() {
                return Ok(Value::Integer(n));
            }
            return self.err(format!("integer {tok} is out of range"));
        }
        let numeric_start = tok.starts_with(|c: char| c.is_ascii_digit() || c == '+' || c == '-');
        let float_or_date =
            digits.contains(['.', 'e', 'E', ':', '-']) || digits == "inf" || digits == "nan";
        if numeric_start && float_or_date || digits == "inf" || digits == "nan" {
            return self.err(format!(
                "{tok:?}: floats and dates are not supported; quote the value"
            ));
        }
        if numeric_start {
            return self.err(format!(
                "{tok:?} is not a valid integer (leading zeros, hex, octal and binary are not supported)"
            ));
        }
        self.err(format!("{tok:?} is not a value (strings must be quoted)"))
    }
}

/// The table at `path`, creating empty tables on the way.
fn table_at<'a>(
    root: &'a mut Table,
    path: &[String],
    p: &Parser,
) -> Result<&'a mut Table, TomlError> {
    let mut t = root;
    for k in path {
        let v = t
            .entry(k.clone())
            .or_insert_with(|| Value::Table(Table::new()));
        t = match v {
            Value::Table(inner) => inner,
            // `[[k]]` sections: later headers and keys address the latest element.
            Value::Array(items) if matches!(items.last(), Some(Value::Table(_))) => {
                match items.last_mut() {
                    Some(Value::Table(inner)) => inner,
                    _ => unreachable!("checked above"),
                }
            }
            _ => return p.err(format!("{k:?} is already a value, not a table")),
        };
    }
    Ok(t)
}

pub fn parse(input: &str) -> Result<Table, TomlError> {
    let mut p = Parser {
        chars: input.chars().collect(),
        pos: 0,
        line: 1,
    };
    let mut root = Table::new();
    let mut current: Vec<String> = Vec::new();
    let mut headers: Vec<Vec<String>> = Vec::new();
    loop {
        p.skip_blank();
        match p.peek() {
            None => return Ok(root),
            Some('[') if p.peek_at(1) == Some('[') => {
                p.bump();
                p.bump();
                p.skip_spaces();
                let mut path = p.key_path()?;
                if p.bump() != Some(']') || p.bump() != Some(']') {
                    return p.err("expected ']]' to close the array-of-tables header");
                }
                let last = path.pop().unwrap_or_default();
                let parent = table_at(&mut root, &path, &p)?;
                match parent
                    .entry(last.clone())
                    .or_insert_with(|| Value::Array(Vec::new()))
                {
                    Value::Array(items) if items.iter().all(|i| matches!(i, Value::Table(_))) => {
                        items.push(Value::Table(Table::new()));
                    }
                    _ => {
                        return p.err(format!(
                            "{last:?} is already a value, not an array of tables"
                        ));
                    }
                }
                path.push(last);
                // A new element starts afresh: its sub-tables may be defined again.
                headers.retain(|h| !h.starts_with(&path));
                current = path;
                p.end_of_line()?;
            }
            Some('[') => {
                p.bump();
                p.skip_spaces();
                let path = p.key_path()?;
                if p.bump() != Some(']') {
                    return p.err("expected ']' to close the table header");
                }
                if headers.contains(&path) {
                    return p.err(format!("table [{}] is defined twice", path.join(".")));
                }
                table_at(&mut root, &path, &p)?;
                headers.push(path.clone());
                current = path;
                p.end_of_line()?;
            }
            Some(_) => {
                let mut path = p.key_path()?;
                p.skip_spaces();
                if p.bump() != Some('=') {
                    return p.err(format!("expected '=' after key {}", path.join(".")));
                }
                p.skip_spaces();
                let value = p.value()?;
                p.end_of_line()?;
                let last = path.pop().unwrap_or_default();
                let mut full = current.clone();
                full.extend(path);
                let t = table_at(&mut root, &full, &p)?;
                if t.contains_key(&last) {
                    return p.err(format!("key {last:?} is defined twice"));
                }
                t.insert(last, value);
            }
        }
    }
}

fn render_key(k: &str) -> String {
    if !k.is_empty() && k.chars().all(is_bare) {
        k.to_string()
    } else {
        render_string(k)
    }
}

fn render_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn render_value(v: &Value) -> String {
    match v {
        Value::String(s) => render_string(s),
        Value::Integer(n) => n.to_string(),
        Value::Boolean(b) => b.to_string(),
        Value::Array(items) => format!(
            "[{}]",
            items
                .iter()
                .map(render_value)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        // Only reached inside arrays that are not arrays of tables.
        Value::Table(t) => format!(
            "{{{}}}",
            t.iter()
                .map(|(k, v)| format!("{} = {}", render_key(k), render_value(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn is_array_of_tables(v: &Value) -> bool {
    matches!(v, Value::Array(items)
        if !items.is_empty() && items.iter().all(|i| matches!(i, Value::Table(_))))
}

fn header(path: &[String]) -> String {
    path.iter()
        .map(|k| render_key(k))
        .collect::<Vec<_>>()
        .join(".")
}

/// Writes `table` under `path`: its plain values first (after a `[path]` header, or
/// `[[path]]` for an element of an array of tables), then its sub-tables.
fn render_table(path: &mut Vec<String>, table: &Table, element: bool, out: &mut String) {
    let is_section = |v: &Value| matches!(v, Value::Table(_)) || is_array_of_tables(v);
    let values: Vec<_> = table.iter().filter(|(_, v)| !is_section(v)).collect();
    let has_sections = table.values().any(is_section);
    if element || (!path.is_empty() && (!values.is_empty() || !has_sections)) {
        if !out.is_empty() {
            out.push('\n');
        }
        if element {
            out.push_str(&format!("[[{}]]\n", header(path)));
        } else {
            out.push_str(&format!("[{}]\n", header(path)));
        }
    }
    for (k, v) in values {
        out.push_str(&format!("{} = {}\n", render_key(k), render_value(v)));
    }
    for (k, v) in table {
        path.push(k.clone());
        match v {
            Value::Table(t) => render_table(path, t, false, out),
            Value::Array(items) if is_array_of_tables(v) => {
                for item in items {
                    if let Value::Table(t) = item {
                        render_table(path, t, true, out);
                    }
                }
            }
            _ => {}
        }
        path.pop();
    }
}

/// The table as TOML, keys in order, one `[header]` per table that holds values.
pub fn render(table: &Table) -> String {
    let mut out = String::new();
    render_table(&mut Vec::new(), table, false, &mut out);
    out
}

#[cfg(test)]
mod tests;
