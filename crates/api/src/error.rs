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

    /// `self` followed by a path relative to it (`maxPods`, `[0].key`, or empty for `self`).
    pub fn append(&self, relative: &str) -> Path {
        match relative {
            "" => self.clone(),
            r if r.starts_with('[') || self.0.is_empty() => Path(format!("{}{r}", self.0)),
            r => Path(format!("{}.{r}", self.0)),
        }
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
        let kubelet = Path::root("spec").field("kubelet");
        assert_eq!(kubelet.append("maxPods").as_str(), "spec.kubelet.maxPods");
        assert_eq!(kubelet.append("[a]").as_str(), "spec.kubelet[a]");
        assert_eq!(kubelet.append("").as_str(), "spec.kubelet");
        assert_eq!(Path::default().append("a.b").as_str(), "a.b");
    }
}
