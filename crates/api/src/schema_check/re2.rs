//! Schema patterns are Go RE2 expressions. The `regex` crate speaks nearly the same language,
//! but its Perl classes (`\d`, `\w`, `\s`, `\b`) are Unicode-aware where RE2's are ASCII-only:
//! `\d` would accept Arabic-Indic digits that the API server rejects. Patterns are rewritten to
//! the ASCII classes before compiling.

use regex::Regex;

/// Compiles a schema `pattern` with RE2's meaning of the Perl classes.
pub(crate) fn compile(pattern: &str) -> Result<Regex, regex::Error> {
    Regex::new(&ascii_classes(pattern))
}

fn class_body(c: char) -> Option<&'static str> {
    match c {
        'd' => Some("0-9"),
        'w' => Some("0-9A-Za-z_"),
        's' => Some("\\t\\n\\f\\r "),
        _ => None,
    }
}

fn ascii_classes(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut chars = pattern.chars().peekable();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(next) = chars.next() else {
                    out.push('\\');
                    break;
                };
                let lower = next.to_ascii_lowercase();
                match (in_class, class_body(lower), next.is_ascii_uppercase()) {
                    // Inside a class only the positive forms can be spliced in.
                    (true, Some(body), false) => out.push_str(body),
                    (false, Some(body), false) => {
                        out.push('[');
                        out.push_str(body);
                        out.push(']');
                    }
                    (false, Some(body), true) => {
                        out.push_str("[^");
                        out.push_str(body);
                        out.push(']');
                    }
                    _ if !in_class && (next == 'b' || next == 'B') => {
                        out.push_str("(?-u:\\");
                        out.push(next);
                        out.push(')');
                    }
                    _ => {
                        out.push('\\');
                        out.push(next);
                    }
                }
            }
            '[' if !in_class => {
                in_class = true;
                out.push('[');
                // A `]` right after `[` or `[^` is a literal member, not the end.
                if chars.peek() == Some(&'^') {
                    out.push(chars.next().unwrap_or('^'));
                }
                if chars.peek() == Some(&']') {
                    out.push(chars.next().unwrap_or(']'));
                }
            }
            '[' if in_class && chars.peek() == Some(&':') => {
                // A POSIX class such as `[:alpha:]` stays as written.
                out.push('[');
                for p in chars.by_ref() {
                    out.push(p);
                    if p == ']' {
                        break;
                    }
                }
            }
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perl_classes_are_ascii_like_re2() {
        let digits = compile(r"^\d{1,2}%$").unwrap();
        assert!(digits.is_match("42%"));
        assert!(!digits.is_match("٤٢%"));
        assert!(compile(r"^[\d.]+$").unwrap().is_match("1.5"));
        assert!(!compile(r"^[\d.]+$").unwrap().is_match("١"));
        assert!(!compile(r"^\w+$").unwrap().is_match("é"));
        assert!(compile(r"^\S+$").unwrap().is_match("a-b"));
        assert!(!compile(r"^\s$").unwrap().is_match("\u{a0}"));
        assert!(compile(r"a\bb").unwrap().find("a b").is_none());
        assert!(compile(r"^[]a]+$").unwrap().is_match("]a"));
        assert!(compile(r"^[[:alpha:]]+$").unwrap().is_match("abc"));
        assert!(compile(r"^(\+|-)?\.5$").unwrap().is_match("-.5"));
        assert!(compile(r"(?=x)").is_err());
    }
}
