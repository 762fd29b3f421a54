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
//! The view also records each running command's targets and replacements
//! ([`Snapshot::commands_in_flight`]): the scheduler replay drains them in the order their
//! replacements become Ready.
//!
//! The controller and the simulator both plan and re-check on [`InFlight::view`], and both
//! keep a finished command's replacements reserved while its targets drain ([`draining`]).

pub mod draining;

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::sync::Arc;

use super::command::Command;
use crate::model::{CommandInFlight, Node, Snapshot};
use crate::taints::{Taint, TaintEffect};

use crate::taints::DISRUPTED_TAINT;

/// The running commands as later rounds must see them.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct InFlight {
    /// NodeClaims of the running commands' targets.
    pub targets: BTreeSet<String>,
    /// NodeClaims the running commands launched as replacements.
    pub replacements: BTreeSet<String>,
    /// Nodes whose instance is terminating.
    pub terminating: BTreeSet<String>,
    /// Each running command's targets and replacements, in the order they were added: the
    /// scheduler replay drains them in turn ([`Snapshot::commands_in_flight`]).
    pub commands: Vec<CommandInFlight>,
}

impl InFlight {
    /// Adds a running command and the names of the claims it launched.
    pub(crate) fn add<'a>(
        &mut self,
        command: &Command,
        replacements: impl IntoIterator<Item = &'a str>,
    ) {
        self.targets
            .extend(command.targets.iter().map(|t| t.nodeclaim.clone()));
        let replacements: Vec<String> = replacements.into_iter().map(str::to_string).collect();
        self.replacements.extend(replacements.iter().cloned());
        self.commands.push(CommandInFlight {
            targets: command
                .targets
                .iter()
                .map(|t| t.nodeclaim.clone())
                .collect(),
            replacements,
        });
    }

    /// Whether nothing is in flight.
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
        let _ = self.apply_reversibly(snapshot);
    }

    /// [`InFlight::apply`], remembering what it changed so [`Applied::revert`] can put the
    /// snapshot back exactly as it was: a caller that keeps one snapshot up to date plans on
    /// the view without copying every node, claim and pod.
    pub fn apply_reversibly(&self, snapshot: &mut Snapshot) -> Applied {
        let mut done = Applied::default();
        if !self.terminating.is_empty() {
            let all = std::mem::take(&mut snapshot.nodes);
            snapshot.nodes.reserve(all.len());
            for (i, n) in all.into_iter().enumerate() {
                if self.terminating.contains(&n.name) {
                    done.removed.push((i, n));
                } else {
                    snapshot.nodes.push(n);
                }
            }
        }
        if self.targets.is_empty() && self.replacements.is_empty() {
            return done;
        }
        done.commands = Some(std::mem::replace(
            &mut snapshot.commands_in_flight,
            self.commands.clone(),
        ));
        let now = snapshot.now;
        // Nodes that must take no new pods: the targets' and the reserved replacements'.
        let mut closed: BTreeSet<String> = BTreeSet::new();
        // Changed claims and nodes are copied first (`make_mut`) where a shell's index still
        // shares them; the rest stay shared.
        for (i, c) in snapshot.node_claims.iter_mut().enumerate() {
            if self.targets.contains(&c.name) {
                let c = Arc::make_mut(c);
                if c.deletion_timestamp.is_none() {
                    c.deletion_timestamp = Some(now);
                    done.deleting.push(i);
                }
                closed.extend(c.node_name.clone());
            } else if self.replacements.contains(&c.name) {
                let c = Arc::make_mut(c);
                // An unregistered claim is placed on by its own taints.
                if add_taint(&mut c.taints) {
                    done.tainted_claims.push(i);
                }
                // Planned as still initializing: no candidate, not counted by budgets.
                if c.initialized {
                    c.initialized = false;
                    done.uninitialized.push(i);
                }
                closed.extend(c.node_name.clone());
            }
        }
        for (i, n) in snapshot.nodes.iter_mut().enumerate() {
            if closed.contains(&n.name) && add_taint(&mut Arc::make_mut(n).taints) {
                done.tainted_nodes.push(i);
            }
        }
        done
    }
}

/// What [`InFlight::apply_reversibly`] changed in a snapshot.
#[derive(Clone, Debug, Default)]
#[must_use = "a snapshot applied in place is put back with `revert`"]
pub struct Applied {
    /// Nodes taken out, with their positions before.
    removed: Vec<(usize, Arc<Node>)>,
    /// Claims given a deletion time.
    deleting: Vec<usize>,
    /// Initialized replacements planned as still initializing.
    uninitialized: Vec<usize>,
    /// Claims and nodes (positions after the removal) given the disrupted taint, last.
    tainted_claims: Vec<usize>,
    tainted_nodes: Vec<usize>,
    /// The commands in flight the snapshot recorded before.
    commands: Option<Vec<CommandInFlight>>,
}

impl Applied {
    /// Puts `snapshot`, as [`InFlight::apply_reversibly`] left it, back as it was before.
    pub fn revert(self, snapshot: &mut Snapshot) {
        if let Some(commands) = self.commands {
            snapshot.commands_in_flight = commands;
        }
        for i in self.tainted_nodes {
            snapshot.node_mut(i).taints.pop();
        }
        for i in self.tainted_claims {
            snapshot.claim_mut(i).taints.pop();
        }
        for i in self.deleting {
            snapshot.claim_mut(i).deletion_timestamp = None;
        }
        for i in self.uninitialized {
            snapshot.claim_mut(i).initialized = true;
        }
        // Ascending positions: each node goes back where it was once those before it are.
        for (i, n) in self.removed {
            snapshot.nodes.insert(i, n);
        }
    }
}

/// Adds the disrupted taint last unless the taints have it; whether it was added.
fn add_taint(taints: &mut Vec<Taint>) -> bool {
    let has = taints
        .iter()
        .any(|t| t.key == DISRUPTED_TAINT && t.effect == TaintEffect::NoSchedule);
    if !has {
        taints.push(Taint::new(DISRUPTED_TAINT, "", TaintEffect::NoSchedule));
    }
    !has
}

#[cfg(test)]
mod tests;
