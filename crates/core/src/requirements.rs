//! Node requirements as users write them: `{key, operator, values, minValues}`.
//!
//! This is the input form shared by NodePools, pods (node selectors and node affinity) and
//! instance types. The scheduler compiles these into interned, bitset-backed sets.
//!
//! Offers the requirement, its operators and its matcher; the scheduler's compiled form is private.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// A node selector operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operator {
    /// The label is set to one of the values.
    In,
    /// The label is absent or set to none of the values.
    NotIn,
    /// The label is set, to anything.
    Exists,
    /// The label is absent.
    DoesNotExist,
    /// The label is an integer greater than the first value.
    Gt,
    /// The label is an integer less than the first value.
    Lt,
    /// The label is an integer at least the first value.
    Gte,
    /// The label is an integer at most the first value.
    Lte,
}

impl Operator {
    pub(crate) const ALL: [Operator; 8] = [
        Operator::In,
        Operator::NotIn,
        Operator::Exists,
        Operator::DoesNotExist,
        Operator::Gt,
        Operator::Lt,
        Operator::Gte,
        Operator::Lte,
    ];

    /// The operator as Kubernetes spells it.
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

    /// The operator Kubernetes spells `s`, if any.
    pub fn parse(s: &str) -> Option<Operator> {
        Operator::ALL.into_iter().find(|o| o.as_str() == s)
    }
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One node requirement: `key operator values`, with an optional `minValues`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Requirement {
    /// The label key.
    pub key: String,
    /// How the label's value is matched against `values`.
    pub operator: Operator,
    /// The values `In` and `NotIn` match, or the integer bound of `Gt`, `Lt`, `Gte` and `Lte`
    /// (the first value); empty for `Exists` and `DoesNotExist`. Shared between the
    /// requirements that list the same values (a NodeClaim's and its copies).
    pub values: Arc<[String]>,
    /// The minimum number of distinct values of `key` the launch's instance types must cover.
    pub min_values: Option<u32>,
}

impl Requirement {
    /// A requirement without `minValues`.
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

    /// Whether a label with `value` (`None`: no such label) satisfies this requirement, by the
    /// kube-scheduler's node-affinity rules: the numeric operators compare integers and fail
    /// when either side is not one. This is the workspace's one matcher of a requirement
    /// against a label; Karpenter's leniency for absent well-known labels is the caller's.
    pub fn admits(&self, value: Option<&str>) -> bool {
        let num = |v: &str| v.parse::<i64>().ok();
        let numeric = |cmp: fn(i64, i64) -> bool| {
            let bound = self.values.first().and_then(|b| num(b));
            matches!((value.and_then(num), bound), (Some(v), Some(b)) if cmp(v, b))
        };
        match self.operator {
            Operator::In => value.is_some_and(|v| self.values.iter().any(|x| x == v)),
            Operator::NotIn => value.is_none_or(|v| !self.values.iter().any(|x| x == v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::Gt => numeric(|v, b| v > b),
            Operator::Lt => numeric(|v, b| v < b),
            Operator::Gte => numeric(|v, b| v >= b),
            Operator::Lte => numeric(|v, b| v <= b),
        }
    }

    /// [`Requirement::admits`] on the value `labels` hold for this requirement's key.
    pub fn admits_labels(&self, labels: &BTreeMap<String, String>) -> bool {
        self.admits(labels.get(&self.key).map(String::as_str))
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
    /// `matchExpressions`, all of which must hold.
    pub match_expressions: Vec<Requirement>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_follows_node_affinity_rules() {
        let r = |op, v: &[&str]| Requirement::new("k", op, v);
        assert!(r(Operator::In, &["x", "y"]).admits(Some("y")));
        assert!(!r(Operator::In, &["x"]).admits(None));
        assert!(r(Operator::NotIn, &["x"]).admits(None));
        assert!(!r(Operator::NotIn, &["x"]).admits(Some("x")));
        assert!(r(Operator::Exists, &[]).admits(Some("")));
        assert!(!r(Operator::DoesNotExist, &[]).admits(Some("")));
        assert!(r(Operator::Gte, &["4"]).admits(Some("4")));
        assert!(!r(Operator::Lt, &["4"]).admits(Some("4")));
        assert!(!r(Operator::Gt, &["4"]).admits(Some("abc")));
        assert!(!r(Operator::Gt, &["abc"]).admits(Some("5")));
        assert!(!r(Operator::Gt, &["4"]).admits(None));
        assert!(r(Operator::Lte, &["4"]).admits(Some("3")));
        let labels = BTreeMap::from([("k".to_string(), "5".to_string())]);
        assert!(r(Operator::Gt, &["4"]).admits_labels(&labels));
    }
}
