//! Node requirements as users write them: `{key, operator, values, minValues}`.
//!
//! This is the input form shared by NodePools, pods (node selectors and node affinity) and
//! instance types. The scheduler compiles these into interned, bitset-backed sets.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
    Gte,
    Lte,
}

impl Operator {
    pub const ALL: [Operator; 8] = [
        Operator::In,
        Operator::NotIn,
        Operator::Exists,
        Operator::DoesNotExist,
        Operator::Gt,
        Operator::Lt,
        Operator::Gte,
        Operator::Lte,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Operator::In => "In",
            Operator::NotIn => "NotIn",
            Operator::Exists => "Exists",
            Operator::DoesNotExist => "DoesNotExist",
            Operator::Gt => "Gt",
            Operator::Lt => "Lt",
            Operator::Gte => "Gte",
            Operator::Lte => "Lte",
        }
    }

    pub fn parse(s: &str) -> Option<Operator> {
        Operator::ALL.into_iter().find(|o| o.as_str() == s)
    }

    /// Gt, Lt, Gte and Lte take exactly one non-negative integer.
    pub fn is_numeric(self) -> bool {
        matches!(
            self,
            Operator::Gt | Operator::Lt | Operator::Gte | Operator::Lte
        )
    }
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Requirement {
    pub key: String,
    pub operator: Operator,
    pub values: Vec<String>,
    /// The minimum number of distinct values of `key` the launch's instance types must cover.
    pub min_values: Option<u32>,
}

impl Requirement {
    pub fn new(key: &str, operator: Operator, values: &[&str]) -> Self {
        Requirement {
            key: key.to_string(),
            operator,
            values: values.iter().map(|v| v.to_string()).collect(),
            min_values: None,
        }
    }

    /// `key In [value]`.
    pub fn single(key: &str, value: &str) -> Self {
        Self::new(key, Operator::In, &[value])
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.key, self.operator)?;
        if !self.values.is_empty() {
            write!(f, " [{}]", self.values.join(", "))?;
        }
        if let Some(m) = self.min_values {
            write!(f, " minValues={m}")?;
        }
        Ok(())
    }
}

/// One term of a required node affinity; terms are ORed, expressions within a term ANDed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct NodeSelectorTerm {
    pub match_expressions: Vec<Requirement>,
}
