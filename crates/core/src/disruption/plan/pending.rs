//! Consolidation waits for the backlog. Upstream places the cluster's pending pods in every
//! consolidation simulation beside the candidates' own, so while some pending pod needs a new
//! NodeClaim no candidate comes out as a delete (which launches nothing), and the one node a
//! replace may launch would have to hold that backlog too. Here the question is asked once a
//! round: the pending pods are placed on the cluster as it stands, less the nodes earlier
//! methods took; if that launches new claims, the consolidation methods sit the round out and
//! every candidate they would have weighed says why. Pending pods that fit nowhere launch
//! nothing and hold nothing back, as upstream ignores the pending pods' own failures.
//!
//! Without it a round during a scale-up may empty nodes whose pods then queue behind the
//! backlog, for capacity the provisioner launches again.
//!
//! The executor's re-check asks the same question of a planned consolidation on a fresh
//! snapshot, less the command's own nodes: a backlog that arrived while the command waited
//! rejects it, as upstream's re-simulation would.

use std::collections::BTreeSet;
use std::fmt;

use super::{Round, Verdict};
use crate::disruption::simulate::{Purpose, Simulator};
use crate::model::{Pod, Snapshot};
use crate::scheduling::setup::waits;

/// The pending pods found needing new nodes.
#[derive(Debug)]
pub(crate) struct Backlog {
    /// Pending pods in all.
    pub pods: usize,
    /// The new claims placing them launches.
    pub claims: usize,
}

impl fmt::Display for Backlog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (pods, claims) = (self.pods, self.claims);
        write!(
            f,
            "{pods} pending {} {} {claims} new {}",
            if pods == 1 { "pod" } else { "pods" },
            if pods == 1 { "needs" } else { "need" },
            if claims == 1 { "node" } else { "nodes" },
        )
    }
}

/// The round's backlog, when its pending pods need new nodes.
pub(super) fn needing_nodes(round: &Round<'_>, simulator: &dyn Simulator) -> Option<Backlog> {
    backlog(round.snapshot, &round.taken, simulator)
}

/// The backlog of `snapshot`'s pending pods placed on its nodes less `without`, when placing
/// them launches new claims.
pub(crate) fn backlog(
    snapshot: &Snapshot,
    without: &BTreeSet<String>,
    simulator: &dyn Simulator,
) -> Option<Backlog> {
    let pending: Vec<&Pod> = snapshot
        .pods
        .iter()
        .map(|p| &**p)
        .filter(|p| waits(p))
        .collect();
    if pending.is_empty() {
        return None;
    }
    // Drift's rules: a pending pod may land on any node that stays, consolidateAfter or not.
    let sim = simulator.simulate(snapshot, Purpose::Drift, without, &pending);
    (!sim.new_claims.is_empty()).then_some(Backlog {
        pods: pending.len(),
        claims: sim.new_claims.len(),
    })
}

/// Says for each of the `nodes` not yet given a verdict that consolidation waits for
/// `backlog`.
pub(super) fn wait<'n>(
    round: &mut Round<'_>,
    backlog: &Backlog,
    nodes: impl IntoIterator<Item = &'n str>,
) {
    for node in nodes {
        round.verdicts.first(node, || {
            Verdict::new(
                node,
                "pending-pods",
                format!("{backlog}; consolidation waits until they are placed"),
            )
        });
    }
}
