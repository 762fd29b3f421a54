//! Label selectors (`matchLabels` + `matchExpressions`) as used by pod affinity, topology
//! spread and PodDisruptionBudgets.
//!
//! Offers the selector and its matcher; namespace selection for affinity is the scheduler's.

use std::collections::BTreeMap;

/// A label selector operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SelectorOperator {
    /// The label is set to one of the values.
    In,
    /// The label is absent or set to none of the values.
    NotIn,
    /// The label is set, to anything.
    Exists,
    /// The label is absent.
    DoesNotExist,
}

/// One `matchExpressions` entry.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SelectorRequirement {
    /// The label key.
    pub key: String,
    /// How the label's value is matched against `values`.
    pub operator: SelectorOperator,
    /// The values `In` and `NotIn` match; empty for `Exists` and `DoesNotExist`.
    pub values: Vec<String>,
}

/// An empty selector matches everything; a missing selector (`Option::None` at the use site)
/// matches nothing, as in Kubernetes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct LabelSelector {
    /// `matchLabels`: each key must be set to exactly its value.
    pub match_labels: BTreeMap<String, String>,
    /// `matchExpressions`: each must hold.
    pub match_expressions: Vec<SelectorRequirement>,
}

impl LabelSelector {
    /// Whether `labels` satisfy every `matchLabels` entry and every expression.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| {
                let value = labels.get(&r.key);
                match r.operator {
                    SelectorOperator::In => value.is_some_and(|v| r.values.contains(v)),
                    SelectorOperator::NotIn => value.is_none_or(|v| !r.values.contains(v)),
                    SelectorOperator::Exists => value.is_some(),
                    SelectorOperator::DoesNotExist => value.is_none(),
                }
            })
    }

    /// Whether the selector has no terms (it then matches everything).
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selector_semantics() {
        let labels: BTreeMap<String, String> = [("app".to_string(), "web".to_string())]
            .into_iter()
            .collect();
        let mut s = LabelSelector::default();
        assert!(s.matches(&labels));
        s.match_labels.insert("app".into(), "web".into());
        assert!(s.matches(&labels));
        s.match_expressions.push(SelectorRequirement {
            key: "tier".into(),
            operator: SelectorOperator::NotIn,
            values: vec!["db".into()],
        });
        assert!(s.matches(&labels));
        s.match_expressions.push(SelectorRequirement {
            key: "tier".into(),
            operator: SelectorOperator::Exists,
            values: vec![],
        });
        assert!(!s.matches(&labels));
    }
}
