//! The resource requests of a disruption command's replacements, as provisioning computes
//! them for new claims: the solve of the cluster without the targets, with the targets'
//! reschedulable pods pending, gives each new claim its pods' requests plus the daemonset
//! overhead. The solve follows the rules of the command's simulation ([`Purpose::of`]): a
//! consolidation's closes the nodes still inside `consolidateAfter`, or the replacement would
//! be sized for pods that were never meant to go to it.

use std::collections::BTreeSet;

use super::candidates::is_reschedulable;
use super::command::Command;
use super::engine_simulator::{EngineSimulator, reduced};
use super::simulate::Purpose;
use crate::model::{Pod, Snapshot};
use crate::resources::Resources;
use crate::scheduling;

/// Each replacement's requests, in the command's order. Replacements are matched to the
/// solve's new claims by NodePool, in order; one the solve did not reproduce (the cluster
/// moved) falls back to the moving pods' requests when it is the only replacement, and to
/// nothing otherwise.
pub fn replacement_requests(
    snap: &Snapshot,
    command: &Command,
    simulator: &EngineSimulator,
) -> Vec<Resources> {
    if command.replacements.is_empty() {
        return Vec::new();
    }
    let without: BTreeSet<String> = command.targets.iter().map(|t| t.node.clone()).collect();
    let pods: Vec<&Pod> = snap
        .pods
        .iter()
        .map(|p| &**p)
        .filter(|p| {
            p.node_name.as_ref().is_some_and(|n| without.contains(n)) && is_reschedulable(p)
        })
        .collect();
    let options = simulator.options_for(snap, Purpose::of(command.method));
    let plan = scheduling::solve(&reduced(snap, &without, &pods), &options);
    let mut used = vec![false; plan.new_claims.len()];
    let single = command.replacements.len() == 1;
    command
        .replacements
        .iter()
        .map(|r| {
            let found = plan
                .new_claims
                .iter()
                .enumerate()
                .find(|(i, c)| !used[*i] && c.nodepool == r.nodepool)
                .map(|(i, _)| i);
            match found {
                Some(i) => {
                    used[i] = true;
                    plan.new_claims[i].requests.clone()
                }
                None if single => {
                    let mut sum = Resources::new();
                    for p in &pods {
                        sum.add(&p.requests);
                    }
                    sum
                }
                None => Resources::new(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disruption::candidates::select_both;
    use crate::disruption::command::{Method, Replacement};
    use crate::disruption::consolidation::target;
    use crate::resources::CPU;
    use crate::testkit::cluster as fixture;
    use crate::time::Timestamp;
    use std::sync::Arc;

    /// n1's two pods move; n2 has room for both but had a pod event 20 s ago, under a
    /// one-minute consolidateAfter; n3 has room for the small one only.
    fn replacing_n1(method: Method) -> (Snapshot, Command) {
        let mut s = fixture::cluster(
            &["a"],
            &[
                ("n1", "large", &[1500, 500]),
                ("n2", "large", &[500]),
                ("n3", "small", &[1400]),
            ],
        );
        s.nodepools[0].disruption.consolidate_after = Some(std::time::Duration::from_secs(60));
        for c in s.node_claims.iter_mut().map(Arc::make_mut) {
            let ago = if c.name == "c-n2" { 20_000 } else { 600_000 };
            c.last_pod_event_time = Some(Timestamp(s.now.0 - ago));
        }
        let (graceful, _) = select_both(&s);
        let n1 = graceful.candidates.iter().find(|c| c.node.name == "n1");
        let target = target(n1.expect("n1 is a candidate"));
        let replacement = Replacement {
            nodepool: "default".into(),
            requirements: Vec::new(),
            instance_types: vec!["small".into()],
            price: 0.2,
        };
        (s, Command::new(method, vec![target], vec![replacement]))
    }

    #[test]
    fn a_consolidation_sizes_its_replacement_for_the_pods_closed_nodes_do_not_take() {
        let (s, c) = replacing_n1(Method::SingleNodeConsolidation);
        let got = replacement_requests(&s, &c, &EngineSimulator::default());
        // The small pod goes to n3; the large one, kept off n2, is the replacement's.
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].get(CPU), 1500);
    }

    #[test]
    fn a_drift_replacement_is_sized_without_that_rule() {
        let (s, c) = replacing_n1(Method::Drift);
        let got = replacement_requests(&s, &c, &EngineSimulator::default());
        // Both pods fit on n2, so the solve launches nothing: the replacement gets them all.
        assert_eq!(got[0].get(CPU), 2000);
    }
}
