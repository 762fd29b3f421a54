//! Errors of this crate: bad catalog data (naming file, line and column) and instance types the
//! formulas cannot describe.

use std::fmt;

/// A row of catalog data that could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataError {
    /// The data file, for example `instance-types.csv`.
    pub file: String,
    /// 1-based line number; the header is line 1.
    pub line: usize,
    /// The column's header name, when the problem is in one field.
    pub column: Option<String>,
    pub reason: String,
}

impl DataError {
    pub(crate) fn new(
        file: &str,
        line: usize,
        column: Option<&str>,
        reason: impl Into<String>,
    ) -> Self {
        DataError {
            file: file.to_string(),
            line,
            column: column.map(str::to_string),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for DataError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)?;
        if let Some(c) = &self.column {
            write!(f, ": column {c:?}")?;
        }
        write!(f, ": {}", self.reason)
    }
}

impl std::error::Error for DataError {}

/// An instance type that cannot become a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BuildError {
    /// None of the type's architectures is one Kubernetes nodes run on (x86_64, arm64);
    /// Karpenter filters these out of DescribeInstanceTypes.
    UnsupportedArchitecture {
        instance_type: String,
        architectures: Vec<String>,
    },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::UnsupportedArchitecture {
                instance_type,
                architectures,
            } => write!(
                f,
                "instance type {instance_type}: unsupported architectures [{}] (want x86_64 or arm64)",
                architectures.join(", ")
            ),
        }
    }
}

impl std::error::Error for BuildError {}
