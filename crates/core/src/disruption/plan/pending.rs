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

use super::{Round, Verdict};
use crate::disruption::simulate::{Purpose, Simulator};
use crate::model::Pod;
use crate::scheduling::setup::waits;

/// The pending pods a round found needing new nodes.
pub(super) struct Backlog {
    /// Pending pods in all.
    pub pods: usize,
    /// The new claims placing them launches.
    pub claims: usize,
}

/// The round's backlog, when its pending pods need new nodes.
pub(super) fn needing_nodes(round: &Round<'_>, simulator: &dyn Simulator) -> Option<Backlog> {
    let pending: Vec<&Pod> = round
        .snapshot
        .pods
        .iter()
        .map(|p| &**p)
        .filter(|p| waits(p))
        .collect();
    if pending.is_empty() {
        return None;
    }
    // Drift's rules: a pending pod may land on any node that stays, consolidateAfter or not.
    let sim = simulator.simulate(round.snapshot, Purpose::Drift, &round.taken, &pending);
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
                format!(
                    "{} pending {} {} {} new {}; consolidation waits until they are placed",
                    backlog.pods,
                    if backlog.pods == 1 { "pod" } else { "pods" },
                    if backlog.pods == 1 { "needs" } else { "need" },
                    backlog.claims,
                    if backlog.claims == 1 { "node" } else { "nodes" },
                ),
            )
        });
    }
}
