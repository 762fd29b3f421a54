//! The round's verdicts by node name, kept only for callers that show them: a round's
//! commands never depend on its verdicts, so a caller that shows none (the simulator) does not
//! pay for formatting a message per node every round.

use std::collections::BTreeMap;

use super::Verdict;

pub(super) struct Verdicts(Option<BTreeMap<String, Verdict>>);

impl Verdicts {
    pub(super) fn new(kept: bool) -> Self {
        Verdicts(kept.then(BTreeMap::new))
    }

    /// Sets `node`'s verdict, replacing an earlier one.
    pub(super) fn set(&mut self, node: &str, verdict: impl FnOnce() -> Verdict) {
        if let Some(m) = &mut self.0 {
            m.insert(node.to_string(), verdict());
        }
    }

    /// Sets `node`'s verdict unless an earlier method already gave one.
    pub(super) fn first(&mut self, node: &str, verdict: impl FnOnce() -> Verdict) {
        if let Some(m) = &mut self.0
            && !m.contains_key(node)
        {
            m.insert(node.to_string(), verdict());
        }
    }

    /// Sorted by node name; empty when not kept.
    pub(super) fn into_sorted(self) -> Vec<Verdict> {
        self.0
            .map(|m| m.into_values().collect())
            .unwrap_or_default()
    }
}
