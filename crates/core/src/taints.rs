//! Taints and tolerations, with the kube-scheduler's matching rules.
//!
//! Offers taints, tolerations, the taint keys Karpenter writes ([`DISRUPTED_TAINT`],
//! [`UNREGISTERED_TAINT`]) and the matcher ([`first_untolerated`]); putting taints on nodes is the
//! controller's.

use std::fmt;

/// The taint on a node being disrupted, so nothing new schedules onto it.
pub const DISRUPTED_TAINT: &str = "karpenter.sh/disrupted";
/// The taint a launched node registers with and keeps until the claim is registered.
pub const UNREGISTERED_TAINT: &str = "karpenter.sh/unregistered";

/// A taint's effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TaintEffect {
    /// Pods that do not tolerate it are not scheduled onto the node.
    NoSchedule,
    /// The scheduler avoids the node for pods that do not tolerate it, but may still use it.
    PreferNoSchedule,
    /// As `NoSchedule`, and pods already running that do not tolerate it are evicted.
    NoExecute,
}

impl TaintEffect {
    /// The effect as Kubernetes spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }

    /// The effect Kubernetes spells `s`, if any.
    pub fn parse(s: &str) -> Option<TaintEffect> {
        match s {
            "NoSchedule" => Some(TaintEffect::NoSchedule),
            "PreferNoSchedule" => Some(TaintEffect::PreferNoSchedule),
            "NoExecute" => Some(TaintEffect::NoExecute),
            _ => None,
        }
    }
}

/// A node taint.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Taint {
    /// The taint's key.
    pub key: String,
    /// The taint's value; may be empty.
    pub value: String,
    /// What the taint does to pods that do not tolerate it.
    pub effect: TaintEffect,
}

impl Taint {
    /// A taint from its parts.
    pub fn new(key: &str, value: &str, effect: TaintEffect) -> Self {
        Taint {
            key: key.into(),
            value: value.into(),
            effect,
        }
    }
}

impl fmt::Display for Taint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.value.is_empty() {
            write!(f, "{}:{}", self.key, self.effect.as_str())
        } else {
            write!(f, "{}={}:{}", self.key, self.value, self.effect.as_str())
        }
    }
}

/// A toleration's operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TolerationOperator {
    /// Tolerates a taint whose value equals the toleration's.
    Equal,
    /// Tolerates a taint with the key whatever its value.
    Exists,
}

/// A pod's toleration.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Toleration {
    /// Empty with `Exists` tolerates every taint.
    pub key: String,
    /// How the taint's value is matched.
    pub operator: TolerationOperator,
    /// The value `Equal` matches; ignored by `Exists`.
    pub value: String,
    /// `None` matches every effect.
    pub effect: Option<TaintEffect>,
}

impl Toleration {
    pub(crate) fn tolerates(&self, taint: &Taint) -> bool {
        if self.effect.is_some_and(|e| e != taint.effect) {
            return false;
        }
        if self.key.is_empty() {
            return self.operator == TolerationOperator::Exists;
        }
        if self.key != taint.key {
            return false;
        }
        match self.operator {
            TolerationOperator::Exists => true,
            TolerationOperator::Equal => self.value == taint.value,
        }
    }
}

/// The first taint with a scheduling effect (NoSchedule or NoExecute) that no toleration covers.
/// PreferNoSchedule taints never block.
pub fn first_untolerated<'a>(tolerations: &[Toleration], taints: &'a [Taint]) -> Option<&'a Taint> {
    taints.iter().find(|t| {
        t.effect != TaintEffect::PreferNoSchedule && !tolerations.iter().any(|tol| tol.tolerates(t))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tol(
        key: &str,
        op: TolerationOperator,
        value: &str,
        effect: Option<TaintEffect>,
    ) -> Toleration {
        Toleration {
            key: key.into(),
            operator: op,
            value: value.into(),
            effect,
        }
    }

    #[test]
    fn matching_rules() {
        let t = Taint::new("gpu", "true", TaintEffect::NoSchedule);
        assert!(tol("gpu", TolerationOperator::Equal, "true", None).tolerates(&t));
        assert!(!tol("gpu", TolerationOperator::Equal, "false", None).tolerates(&t));
        assert!(
            tol(
                "gpu",
                TolerationOperator::Exists,
                "",
                Some(TaintEffect::NoSchedule)
            )
            .tolerates(&t)
        );
        assert!(
            !tol(
                "gpu",
                TolerationOperator::Exists,
                "",
                Some(TaintEffect::NoExecute)
            )
            .tolerates(&t)
        );
        assert!(tol("", TolerationOperator::Exists, "", None).tolerates(&t));
        let soft = Taint::new("x", "", TaintEffect::PreferNoSchedule);
        assert_eq!(first_untolerated(&[], std::slice::from_ref(&soft)), None);
        assert_eq!(first_untolerated(&[], &[soft, t.clone()]), Some(&t));
    }
}
