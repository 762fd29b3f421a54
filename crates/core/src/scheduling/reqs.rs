//! The requirements algebra over interned keys and values.
//!
//! A [`ValueSet`] is either a finite set (`In`; empty means `DoesNotExist`) or the complement of
//! one (`NotIn`; empty means `Exists`), optionally bounded by integer limits (`Gt`, `Lt`; `Gte`
//! and `Lte` are rewritten to them). Intersection is closed over this form, so a NodePool, a
//! pod, a topology decision and an instance type can all be merged into one [`Reqs`].

use std::fmt::Write as _;
use std::sync::Arc;

use super::intern::Interner;
use crate::labels;
use crate::requirements::{Operator, Requirement};

/// One key's set of allowed values.
///
/// Every node holds one of these per label in each compile that keeps it, so the set is laid
/// out for the common case: a boxed slice rather than a growable list, and integer bounds
/// (rare: `Gt`/`Lt` requirements only) behind a pointer that is null without them. A [`Req`]
/// is then 48 bytes, not 80.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ValueSet {
    pub complement: bool,
    /// Sorted, deduplicated value ids.
    pub values: Box<[u32]>,
    /// Integer bounds (complement sets only); `None` when neither is set.
    bounds: Option<Box<Bounds>>,
}

/// A complement set's integer bounds; at least one is set.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Bounds {
    /// Exclusive lower bound.
    gt: Option<i64>,
    /// Exclusive upper bound.
    lt: Option<i64>,
}

impl ValueSet {
    pub(crate) fn one(v: u32) -> Self {
        ValueSet {
            complement: false,
            values: Box::new([v]),
            bounds: None,
        }
    }

    pub(crate) fn of(mut values: Vec<u32>) -> Self {
        values.sort_unstable();
        values.dedup();
        ValueSet {
            complement: false,
            values: values.into(),
            bounds: None,
        }
    }

    pub(crate) fn not_in(mut values: Vec<u32>) -> Self {
        values.sort_unstable();
        values.dedup();
        ValueSet {
            complement: true,
            values: values.into(),
            bounds: None,
        }
    }

    /// The exclusive lower bound.
    pub(crate) fn gt(&self) -> Option<i64> {
        self.bounds.as_ref().and_then(|b| b.gt)
    }

    /// The exclusive upper bound.
    pub(crate) fn lt(&self) -> Option<i64> {
        self.bounds.as_ref().and_then(|b| b.lt)
    }

    /// This set with the bounds `gt` and `lt`, held only when one is set so that equal sets
    /// compare and hash equal.
    pub(crate) fn with_bounds(mut self, gt: Option<i64>, lt: Option<i64>) -> Self {
        self.bounds = (gt.is_some() || lt.is_some()).then(|| Box::new(Bounds { gt, lt }));
        self
    }

    /// The bounds a value must meet to be within both sets: the higher lower bound and the
    /// lower upper bound.
    fn both_bounds(&self, other: &ValueSet) -> (Option<i64>, Option<i64>) {
        let gt = match (self.gt(), other.gt()) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        let lt = match (self.lt(), other.lt()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        (gt, lt)
    }

    pub(crate) fn exists() -> Self {
        Self::not_in(vec![])
    }

    pub(crate) fn does_not_exist() -> Self {
        Self::of(vec![])
    }

    fn bounded(&self) -> bool {
        self.bounds.is_some()
    }

    fn within_bounds(&self, v: u32, interner: &Interner) -> bool {
        if !self.bounded() {
            return true;
        }
        match interner.number(v) {
            Some(n) => self.gt().is_none_or(|g| n > g) && self.lt().is_none_or(|l| n < l),
            None => false,
        }
    }

    pub(crate) fn has(&self, v: u32, interner: &Interner) -> bool {
        if self.complement {
            self.values.binary_search(&v).is_err() && self.within_bounds(v, interner)
        } else {
            self.values.binary_search(&v).is_ok()
        }
    }

    /// True when no value satisfies the set.
    pub(crate) fn is_empty(&self) -> bool {
        if self.complement {
            matches!((self.gt(), self.lt()), (Some(g), Some(l)) if l.saturating_sub(g) <= 1)
        } else {
            self.values.is_empty()
        }
    }

    /// Kubernetes' operator name for the set, used by the compatibility exceptions.
    pub(crate) fn operator(&self) -> Operator {
        match (self.complement, self.values.is_empty()) {
            (false, true) => Operator::DoesNotExist,
            (false, false) => Operator::In,
            (true, true) if !self.bounded() => Operator::Exists,
            _ => Operator::NotIn,
        }
    }

    /// `!self.intersect(other).is_empty()`, without building the intersection.
    pub(crate) fn overlaps(&self, other: &ValueSet, interner: &Interner) -> bool {
        match (self.complement, other.complement) {
            (false, false) => {
                let (mut i, mut j) = (0, 0);
                while i < self.values.len() && j < other.values.len() {
                    match self.values[i].cmp(&other.values[j]) {
                        std::cmp::Ordering::Equal => return true,
                        std::cmp::Ordering::Less => i += 1,
                        std::cmp::Ordering::Greater => j += 1,
                    }
                }
                false
            }
            (false, true) => self.values.iter().any(|&v| other.has(v, interner)),
            (true, false) => other.overlaps(self, interner),
            (true, true) => {
                let (gt, lt) = self.both_bounds(other);
                !matches!((gt, lt), (Some(g), Some(l)) if l.saturating_sub(g) <= 1)
            }
        }
    }

    pub(crate) fn intersect(&self, other: &ValueSet, interner: &Interner) -> ValueSet {
        match (self.complement, other.complement) {
            (false, false) => {
                let values = self
                    .values
                    .iter()
                    .copied()
                    .filter(|v| other.values.binary_search(v).is_ok())
                    .collect();
                ValueSet {
                    complement: false,
                    values,
                    bounds: None,
                }
            }
            (false, true) => {
                let values = self
                    .values
                    .iter()
                    .copied()
                    .filter(|&v| other.has(v, interner))
                    .collect();
                ValueSet {
                    complement: false,
                    values,
                    bounds: None,
                }
            }
            (true, false) => other.intersect(self, interner),
            (true, true) => {
                let mut values = Vec::with_capacity(self.values.len() + other.values.len());
                values.extend_from_slice(&self.values);
                values.extend_from_slice(&other.values);
                let (gt, lt) = self.both_bounds(other);
                let s = ValueSet::not_in(values).with_bounds(gt, lt);
                if s.is_empty() {
                    ValueSet::does_not_exist()
                } else {
                    s
                }
            }
        }
    }

    pub(crate) fn describe(&self, interner: &Interner) -> String {
        let names: Vec<&str> = self.values.iter().map(|&v| interner.name(v)).collect();
        let mut s = match self.operator() {
            Operator::Exists => "Exists".to_string(),
            Operator::DoesNotExist => "DoesNotExist".to_string(),
            Operator::In => format!("In [{}]", names.join(", ")),
            _ if names.is_empty() => "Exists".to_string(),
            _ => format!("NotIn [{}]", names.join(", ")),
        };
        if let Some(g) = self.gt() {
            let _ = write!(s, " >{g}");
        }
        if let Some(l) = self.lt() {
            let _ = write!(s, " <{l}");
        }
        s
    }
}

/// One key's constraint plus its `minValues`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Req {
    pub key: u32,
    pub(crate) set: ValueSet,
    pub min_values: Option<u32>,
}

/// A conjunction of per-key constraints, sorted by key.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Reqs {
    pub items: Vec<Req>,
}

/// Why two requirement sets cannot hold at once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Conflict {
    pub key: u32,
    /// The incoming (pod) side.
    pub(crate) wanted: ValueSet,
    /// What the node side allows; `None` when the node side does not define the key.
    pub(crate) allowed: Option<ValueSet>,
}

impl Conflict {
    pub(crate) fn describe(&self, interner: &Interner) -> String {
        let key = interner.name(self.key);
        match &self.allowed {
            None => format!(
                "label {key} is not defined here (needs {})",
                self.wanted.describe(interner)
            ),
            Some(a) => format!(
                "{key} {} conflicts with {} available",
                self.wanted.describe(interner),
                a.describe(interner)
            ),
        }
    }
}

impl Reqs {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    pub(crate) fn get(&self, key: u32) -> Option<&ValueSet> {
        self.find(key).map(|i| &self.items[i].set)
    }

    pub(crate) fn get_req(&self, key: u32) -> Option<&Req> {
        self.find(key).map(|i| &self.items[i])
    }

    fn find(&self, key: u32) -> Option<usize> {
        self.items.binary_search_by_key(&key, |r| r.key).ok()
    }

    /// Intersects `set` into this key's constraint. Returns true when the set changed.
    pub(crate) fn add(
        &mut self,
        key: u32,
        set: ValueSet,
        min_values: Option<u32>,
        interner: &Interner,
    ) -> bool {
        match self.items.binary_search_by_key(&key, |r| r.key) {
            Ok(i) => {
                let merged = self.items[i].set.intersect(&set, interner);
                let mv = match (self.items[i].min_values, min_values) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    (a, b) => a.or(b),
                };
                let changed = merged != self.items[i].set || mv != self.items[i].min_values;
                self.items[i].set = merged;
                self.items[i].min_values = mv;
                changed
            }
            Err(i) => {
                self.items.insert(
                    i,
                    Req {
                        key,
                        set,
                        min_values,
                    },
                );
                true
            }
        }
    }

    /// Merges every constraint of `other`; returns the keys that changed.
    pub(crate) fn merge(&mut self, other: &Reqs, interner: &Interner) -> Vec<u32> {
        let mut changed = Vec::new();
        for r in &other.items {
            if self.add(r.key, r.set.clone(), r.min_values, interner) {
                changed.push(r.key);
            }
        }
        changed
    }

    /// True when merging `other` would narrow some key (cheap; allocates nothing for the
    /// common case of a settled single-valued key).
    pub(crate) fn would_change(&self, other: &Reqs, interner: &Interner) -> bool {
        other.items.iter().any(|r| match self.get_req(r.key) {
            None => true,
            Some(mine) => {
                if r.min_values
                    .is_some_and(|m| mine.min_values.is_none_or(|x| x < m))
                {
                    return true;
                }
                if !mine.set.complement {
                    !mine.set.values.iter().all(|&v| r.set.has(v, interner))
                } else {
                    mine.set.intersect(&r.set, interner) != mine.set
                }
            }
        })
    }

    /// Karpenter's `Intersects`: every key both sides define must share a value, except that
    /// two negative constraints (`NotIn`/`DoesNotExist`) never conflict.
    pub(crate) fn intersects(
        &self,
        incoming: &Reqs,
        interner: &Interner,
    ) -> Result<(), Box<Conflict>> {
        for r in &incoming.items {
            if let Some(existing) = self.get(r.key)
                && !existing.overlaps(&r.set, interner)
            {
                let neg = |o: Operator| matches!(o, Operator::NotIn | Operator::DoesNotExist);
                if neg(r.set.operator()) && neg(existing.operator()) {
                    continue;
                }
                return Err(Box::new(Conflict {
                    key: r.key,
                    wanted: r.set.clone(),
                    allowed: Some(existing.clone()),
                }));
            }
        }
        Ok(())
    }

    /// [`Reqs::compatible`] as a yes/no answer that allocates nothing.
    pub(crate) fn compatible_ok(
        &self,
        incoming: &Reqs,
        interner: &Interner,
        allow_undefined: &dyn Fn(u32) -> bool,
    ) -> bool {
        let neg = |o: Operator| matches!(o, Operator::NotIn | Operator::DoesNotExist);
        incoming.items.iter().all(|r| match self.get(r.key) {
            None => neg(r.set.operator()) || allow_undefined(r.key),
            Some(existing) => {
                existing.overlaps(&r.set, interner)
                    || (neg(r.set.operator()) && neg(existing.operator()))
            }
        })
    }

    /// Karpenter's `Compatible`: like [`Reqs::intersects`], and a positive constraint on a key
    /// this side does not define fails unless `allow_undefined(key)`.
    pub(crate) fn compatible(
        &self,
        incoming: &Reqs,
        interner: &Interner,
        allow_undefined: &dyn Fn(u32) -> bool,
    ) -> Result<(), Box<Conflict>> {
        for r in &incoming.items {
            if self.get(r.key).is_none()
                && !matches!(r.set.operator(), Operator::NotIn | Operator::DoesNotExist)
                && !allow_undefined(r.key)
            {
                return Err(Box::new(Conflict {
                    key: r.key,
                    wanted: r.set.clone(),
                    allowed: None,
                }));
            }
        }
        self.intersects(incoming, interner)
    }

    /// Node labels as single-valued requirements.
    pub(crate) fn from_labels<'a>(
        labels: impl IntoIterator<Item = (&'a String, &'a String)>,
        interner: &mut Interner,
    ) -> Reqs {
        let labels = labels.into_iter();
        // One slot a label: a node's requirements are kept as long as the node.
        let mut reqs = Reqs {
            items: Vec::with_capacity(labels.size_hint().0),
        };
        for (k, v) in labels {
            let key = interner.intern(normalize(k));
            let value = interner.intern(v);
            reqs.add(key, ValueSet::one(value), None, interner);
        }
        reqs
    }

    /// The constraints back in user form: one requirement per key and operator
    /// (`NotIn` plus `Gt`/`Lt` when a complement set is also bounded).
    pub(crate) fn to_requirements(
        &self,
        interner: &Interner,
    ) -> Vec<crate::requirements::Requirement> {
        use crate::requirements::Requirement;
        let mut out = Vec::new();
        for r in &self.items {
            let key = interner.name(r.key).to_string();
            let values: Vec<String> = r
                .set
                .values
                .iter()
                .map(|&v| interner.name(v).to_string())
                .collect();
            let op = r.set.operator();
            let base = match op {
                Operator::NotIn if values.is_empty() => None,
                _ => Some(Requirement {
                    key: key.clone(),
                    operator: op,
                    values: values.into(),
                    min_values: r.min_values,
                }),
            };
            out.extend(base);
            for (bound, op) in [(r.set.gt(), Operator::Gt), (r.set.lt(), Operator::Lt)] {
                if let Some(b) = bound {
                    out.push(Requirement {
                        key: key.clone(),
                        operator: op,
                        values: Arc::from([b.to_string()]),
                        min_values: None,
                    });
                }
            }
        }
        out
    }

    pub(crate) fn describe(&self, interner: &Interner) -> Vec<String> {
        self.items
            .iter()
            .map(|r| {
                let mut s = format!("{} {}", interner.name(r.key), r.set.describe(interner));
                if let Some(m) = r.min_values {
                    let _ = write!(s, " minValues={m}");
                }
                s
            })
            .collect()
    }
}

/// Stable label key: beta aliases and the legacy provisioner label map to today's names.
pub(crate) fn normalize(key: &str) -> &str {
    if key == labels::LEGACY_PROVISIONER_NAME {
        return labels::NODEPOOL;
    }
    labels::normalize_key(key)
}

/// Compiles one user-written requirement into the algebra. Numeric operators with a value that
/// is not an integer make the set empty, so nothing matches (as Kubernetes' validation would
/// reject the object).
pub(crate) fn compile(req: &Requirement, interner: &mut Interner) -> Req {
    let key = interner.intern(normalize(&req.key));
    let ids = |interner: &mut Interner| {
        req.values
            .iter()
            .map(|v| interner.intern(v))
            .collect::<Vec<_>>()
    };
    let number = req
        .values
        .first()
        .and_then(|v| v.trim().parse::<i64>().ok());
    let set = match req.operator {
        Operator::In => ValueSet::of(ids(interner)),
        Operator::NotIn => ValueSet::not_in(ids(interner)),
        Operator::Exists => ValueSet::exists(),
        Operator::DoesNotExist => ValueSet::does_not_exist(),
        Operator::Gt | Operator::Lt | Operator::Gte | Operator::Lte => match number {
            None => ValueSet::does_not_exist(),
            Some(n) => {
                let (gt, lt) = match req.operator {
                    Operator::Gt => (Some(n), None),
                    Operator::Gte => (Some(n.saturating_sub(1)), None),
                    Operator::Lt => (None, Some(n)),
                    _ => (None, Some(n.saturating_add(1))),
                };
                ValueSet::exists().with_bounds(gt, lt)
            }
        },
    };
    Req {
        key,
        set,
        min_values: req.min_values,
    }
}

/// Compiles a conjunction.
pub(crate) fn compile_all<'a>(
    reqs: impl IntoIterator<Item = &'a Requirement>,
    interner: &mut Interner,
) -> Reqs {
    let mut out = Reqs::new();
    for r in reqs {
        let c = compile(r, interner);
        out.add(c.key, c.set, c.min_values, interner);
    }
    out
}

#[cfg(test)]
mod tests;
