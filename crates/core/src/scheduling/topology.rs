//! Topology groups: spread constraints, pod affinity and anti-affinity, counted per domain.
//!
//! Each distinct constraint (kind, key, selector, namespaces, node filter) is one group shared by
//! every pod class that carries it. A group counts the pods matching its selector in each domain
//! (a value of its topology key), from running pods and from this run's placements. Existing pods
//! with required anti-affinity form *inverse* groups: they keep matching pods out of their domain.

use std::collections::BTreeMap;

use super::intern::Interner;
use super::reqs::Reqs;
use crate::selector::LabelSelector;
use crate::taints::{self, Taint, Toleration};

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    Spread {
        max_skew: i32,
        min_domains: Option<i32>,
    },
    Affinity,
    AntiAffinity,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Namespaces {
    All,
    /// Sorted.
    Set(Vec<String>),
}

impl Namespaces {
    pub(crate) fn contains(&self, ns: &str) -> bool {
        match self {
            Namespaces::All => true,
            Namespaces::Set(s) => s.binary_search_by(|x| x.as_str().cmp(ns)).is_ok(),
        }
    }
}

/// Which nodes a spread constraint counts (its `nodeAffinityPolicy`/`nodeTaintsPolicy`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct NodeFilter {
    pub reqs: Option<Reqs>,
    pub tolerations: Option<Vec<Toleration>>,
}

impl NodeFilter {
    pub(crate) fn accepts(&self, node: &Reqs, taints: &[Taint], interner: &Interner) -> bool {
        self.reqs
            .as_ref()
            .is_none_or(|r| node.intersects(r, interner).is_ok())
            && self
                .tolerations
                .as_ref()
                .is_none_or(|t| taints::first_untolerated(t, taints).is_none())
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct GroupKey {
    pub kind: Kind,
    pub key: u32,
    pub selector: Option<LabelSelector>,
    pub namespaces: Namespaces,
    pub filter: NodeFilter,
}

#[derive(Clone, Debug)]
pub(crate) struct Group {
    pub(crate) def: GroupKey,
    /// Matching pods per domain value id.
    counts: Vec<u32>,
    pub total: u64,
    /// Spread only: the domains this constraint may use (not used for hostname).
    pub eligible: Vec<u32>,
    /// Smallest count over `eligible`, kept current by [`Group::record`].
    min: u32,
}

impl Group {
    pub(crate) fn new(def: GroupKey) -> Self {
        Group {
            def,
            counts: Vec::new(),
            total: 0,
            eligible: Vec::new(),
            min: 0,
        }
    }

    pub(crate) fn matches(&self, namespace: &str, labels: &BTreeMap<String, String>) -> bool {
        self.def.namespaces.contains(namespace)
            && self
                .def
                .selector
                .as_ref()
                .is_some_and(|s| s.matches(labels))
    }

    pub(crate) fn count(&self, domain: u32) -> u32 {
        self.counts.get(domain as usize).copied().unwrap_or(0)
    }

    pub(crate) fn record(&mut self, domain: u32, n: u32) {
        let i = domain as usize;
        if self.counts.len() <= i {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += n;
        self.total += u64::from(n);
        if !self.eligible.is_empty() {
            self.refresh_min();
        }
    }

    pub(crate) fn refresh_min(&mut self) {
        self.min = self
            .eligible
            .iter()
            .map(|&d| self.count(d))
            .min()
            .unwrap_or(0);
    }

    /// The global minimum a spread constraint measures skew against.
    pub(crate) fn spread_min(&self, hostname: bool) -> u32 {
        let Kind::Spread { min_domains, .. } = self.def.kind else {
            return 0;
        };
        if hostname || self.eligible.is_empty() {
            return 0;
        }
        if min_domains.is_some_and(|m| (self.eligible.len() as i64) < i64::from(m)) {
            return 0;
        }
        self.eligible
            .iter()
            .map(|&d| self.count(d))
            .min()
            .unwrap_or(0)
    }

    pub(crate) fn describe_counts(&self, domains: &[u32], interner: &Interner) -> String {
        let parts: Vec<String> = domains
            .iter()
            .take(6)
            .map(|&d| format!("{}={}", interner.name(d), self.count(d)))
            .collect();
        let more = if domains.len() > 6 {
            format!(", +{} more", domains.len() - 6)
        } else {
            String::new()
        };
        format!("{}{more}", parts.join(", "))
    }
}

/// Existing or placed pods with a required anti-affinity term, per domain.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct InverseKey {
    pub key: u32,
    pub selector: Option<LabelSelector>,
    pub namespaces: Namespaces,
}

#[derive(Clone, Debug)]
pub(crate) struct Inverse {
    pub def: InverseKey,
    counts: Vec<u32>,
}

impl Inverse {
    pub(crate) fn new(def: InverseKey) -> Self {
        Inverse {
            def,
            counts: Vec::new(),
        }
    }

    pub(crate) fn blocks(&self, namespace: &str, labels: &BTreeMap<String, String>) -> bool {
        self.def.namespaces.contains(namespace)
            && self
                .def
                .selector
                .as_ref()
                .is_some_and(|s| s.matches(labels))
    }

    pub(crate) fn count(&self, domain: u32) -> u32 {
        self.counts.get(domain as usize).copied().unwrap_or(0)
    }

    pub(crate) fn record(&mut self, domain: u32, n: u32) {
        let i = domain as usize;
        if self.counts.len() <= i {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += n;
    }
}
