//! Errors that point at the exact place in a document that is wrong.

use std::fmt;

/// One problem in one field: `spec.template.spec.requirements[2].key: label domain ... is restricted`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct FieldError {
    /// Dotted path with list indices, for example `spec.disruption.budgets[0].nodes`.
    pub path: String,
    pub reason: String,
}

impl FieldError {
    pub fn new(path: impl Into<String>, reason: impl Into<String>) -> Self {
        FieldError {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.reason)
        } else {
            write!(f, "{}: {}", self.path, self.reason)
        }
    }
}

/// Builds field paths without string juggling at every call site.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Path(String);

impl Path {
    pub fn root(name: &str) -> Path {
        Path(name.to_string())
    }

    /// `self.name`.
    pub fn field(&self, name: &str) -> Path {
        if self.0.is_empty() {
            Path(name.to_string())
        } else {
            Path(format!("{}.{name}", self.0))
        }
    }

    /// `self[i]`.
    pub fn index(&self, i: usize) -> Path {
        Path(format!("{}[{i}]", self.0))
    }

    /// `self[key]` for map entries.
    pub fn key(&self, key: &str) -> Path {
        Path(format!("{}[{key}]", self.0))
    }

    pub fn error(&self, reason: impl Into<String>) -> FieldError {
        FieldError::new(self.0.clone(), reason)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_render_like_kubectl() {
        let p = Path::root("spec")
            .field("template")
            .field("spec")
            .field("requirements")
            .index(2);
        assert_eq!(
            p.field("key").error("bad").to_string(),
            "spec.template.spec.requirements[2].key: bad"
        );
        assert_eq!(Path::default().field("spec").as_str(), "spec");
    }
}
