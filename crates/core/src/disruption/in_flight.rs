//! What running commands hold while later rounds plan and re-check.
//!
//! A command that has started waits for its replacements before its targets go. Later rounds
//! must neither count on what it takes away nor on what it brings:
//!
//! - its targets are planned as deleting, as upstream's `MarkForDeletion` marks a started
//!   command's candidates: they are no longer candidates and they count against the budgets.
//!   Their pods stay where they are in the simulations, and the target takes no new pods (it
//!   carries the `karpenter.sh/disrupted` taint in the cluster, and in the planning snapshot
//!   even before the taint is observed);
//! - its replacements are reserved until the command finishes: their capacity is already
//!   spoken for by the targets' pods, which the simulations keep on the targets. A reserved
//!   replacement carries the same taint in the planning snapshot, so no other candidate's
//!   pods land on it. Without this, the other candidates' pods would land on the
//!   empty-looking replacement: while it launches they fail the simulation (a pod placed on
//!   an uninitialized claim is no safe landing spot), so a round with a replacement in flight
//!   would find nothing; once it is initialized they succeed, and a second command counts on
//!   room the first one's pods are about to take. A replacement stays reserved after it
//!   initializes, while its command waits for its other replacements or for the next pass
//!   to delete the targets, and is planned as still initializing until then: no candidate
//!   (an empty replacement would otherwise be the first thing emptiness removes, failing the
//!   command that launched it) and not counted by the budgets, as before it initialized;
//! - nodes whose instance is already terminating leave the snapshot, as upstream leaves
//!   `InstanceTerminating` claims out of the budget counts.
//!
//! The controller and the simulator both plan and re-check on [`InFlight::view`].

use std::borrow::Cow;
use std::collections::BTreeSet;

use super::command::Command;
use crate::model::Snapshot;
use crate::taints::{Taint, TaintEffect};

/// The taint of a node being disrupted: nothing new may land on it.
pub const DISRUPTED_TAINT: &str = "karpenter.sh/disrupted";

/// The running commands as later rounds must see them.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct InFlight {
    /// NodeClaims of the running commands' targets.
    pub targets: BTreeSet<String>,
    /// NodeClaims the running commands launched as replacements.
    pub replacements: BTreeSet<String>,
    /// Nodes whose instance is terminating.
    pub terminating: BTreeSet<String>,
}

impl InFlight {
    /// Adds a running command and the names of the claims it launched.
    pub fn add<'a>(&mut self, command: &Command, replacements: impl IntoIterator<Item = &'a str>) {
        self.targets
            .extend(command.targets.iter().map(|t| t.nodeclaim.clone()));
        self.replacements
            .extend(replacements.into_iter().map(str::to_string));
    }

    pub fn is_empty(&self) -> bool {
        self.targets.is_empty() && self.replacements.is_empty() && self.terminating.is_empty()
    }

    /// `snapshot` as later rounds must see it; borrowed when nothing is in flight.
    pub fn view<'a>(&self, snapshot: &'a Snapshot) -> Cow<'a, Snapshot> {
        if self.is_empty() {
            return Cow::Borrowed(snapshot);
        }
        let mut s = snapshot.clone();
        self.apply(&mut s);
        Cow::Owned(s)
    }

    /// Turns `snapshot` into [`InFlight::view`] in place.
    pub fn apply(&self, snapshot: &mut Snapshot) {
        if !self.terminating.is_empty() {
            snapshot
                .nodes
                .retain(|n| !self.terminating.contains(&n.name));
        }
        if self.targets.is_empty() && self.replacements.is_empty() {
            return;
        }
        let now = snapshot.now;
        // Nodes that must take no new pods: the targets' and the reserved replacements'.
        let mut closed: BTreeSet<String> = BTreeSet::new();
        for c in &mut snapshot.node_claims {
            if self.targets.contains(&c.name) {
                c.deletion_timestamp.get_or_insert(now);
                closed.extend(c.node_name.clone());
            } else if self.replacements.contains(&c.name) {
                // An unregistered claim is placed on by its own taints.
                add_taint(&mut c.taints);
                c.initialized = false;
                closed.extend(c.node_name.clone());
            }
        }
        for n in &mut snapshot.nodes {
            if closed.contains(&n.name) {
                add_taint(&mut n.taints);
            }
        }
    }
}

fn add_taint(taints: &mut Vec<Taint>) {
    if !taints
        .iter()
        .any(|t| t.key == DISRUPTED_TAINT && t.effect == TaintEffect::NoSchedule)
    {
        taints.push(Taint::new(DISRUPTED_TAINT, "", TaintEffect::NoSchedule));
    }
}

#[cfg(test)]
mod tests;
