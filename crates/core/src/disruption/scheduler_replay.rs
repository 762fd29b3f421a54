//! The cluster's scheduler replayed over a consolidation's moved pods.
//!
//! A consolidation's simulation opens a replacement only for the pods no other node takes.
//! The cluster's scheduler sees the pods the other way round: the targets are drained once
//! the replacement is Ready, and then the replacement is the emptiest node there is, so
//! kube-scheduler's `LeastAllocated` sends it the first pods, and the pods already pending
//! ahead of them in its queue too. A pod the simulation put on an existing node can then
//! take room on the replacement that the simulation kept for a larger pod, and the larger
//! pod is left pending; the provisioner launches a node like the one just removed for it.
//!
//! So a command is taken only if the scheduler's own order places every moved pod: pending
//! pods first, then the moved ones, each on the node with the largest share of cpu free
//! (ties by node name, the replacement last), among the Ready, schedulable nodes it
//! tolerates and selects, the replacement Ready as the cheapest of its options. Only
//! resources, taints, node selectors and required node affinity are replayed: a pod with
//! other constraints waiting is left out, and one being moved is placed by them alone, so
//! the replay refuses a command only when the scheduler would find no room.

use std::cmp::Reverse;
use std::collections::BTreeSet;

use super::command::Command;
use crate::model::{Node, Pod, Snapshot};
use crate::resources::{CPU, Resources};
use crate::scheduling::setup::kube_queue_cmp;
use crate::taints::{DISRUPTED_TAINT, first_untolerated};

/// One node the replay may place pods on.
struct Slot<'s> {
    /// `None` for the replacement.
    node: Option<&'s Node>,
    allocatable_cpu: i64,
    free: Resources,
}

/// The schedulable nodes of one snapshot with what is free on each, built once for the many
/// commands a round weighs.
pub struct Replay<'s> {
    snapshot: &'s Snapshot,
    slots: Vec<Slot<'s>>,
    /// Nodes carrying the disrupted taint: running commands' targets and replacements.
    disrupted: BTreeSet<&'s str>,
}

impl<'s> Replay<'s> {
    pub fn new(snapshot: &'s Snapshot) -> Replay<'s> {
        let mut index: std::collections::HashMap<&str, usize> = Default::default();
        let mut slots: Vec<Slot<'s>> = Vec::new();
        for n in &snapshot.nodes {
            if !n.ready || n.unschedulable || n.deletion_timestamp.is_some() {
                continue;
            }
            index.insert(n.name.as_str(), slots.len());
            slots.push(Slot {
                node: Some(n),
                allocatable_cpu: n.allocatable.get(CPU),
                free: n.allocatable.clone(),
            });
        }
        for p in &snapshot.pods {
            if p.is_terminal() {
                continue;
            }
            if let Some(i) = p.node_name.as_deref().and_then(|n| index.get(n)) {
                slots[*i].free.sub(&p.requests);
            }
        }
        let disrupted = snapshot
            .nodes
            .iter()
            .filter(|n| n.taints.iter().any(|t| t.key == DISRUPTED_TAINT))
            .map(|n| n.name.as_str())
            .collect();
        Replay {
            snapshot,
            slots,
            disrupted,
        }
    }

    /// The first pod of `moving` (the pods of `command`'s targets) that the cluster's
    /// scheduler would leave without a node, with why, when the nodes in `gone` (other
    /// commands' targets) are gone too; `None` when it places them all, or when the command
    /// launches more than one node (the replay judges one replacement).
    pub fn unplaced(
        &self,
        command: &Command,
        moving: &[&Pod],
        gone: &BTreeSet<String>,
    ) -> Option<(String, String)> {
        if command.replacements.len() > 1 {
            return None;
        }
        let targets: BTreeSet<&str> = command.targets.iter().map(|t| t.node.as_str()).collect();
        let without = |n: &str| targets.contains(n) || gone.contains(n);
        let mut slots: Vec<(usize, Resources)> = Vec::new();
        let mut replacement: Option<Slot<'_>> = None;
        if let Some(r) = command.replacements.first() {
            let it = self
                .snapshot
                .instance_types
                .get(&r.nodepool)
                .and_then(|its| {
                    let name = r.instance_types.first()?;
                    its.iter().find(|it| &it.name == name)
                })?;
            let mut free = it.allocatable();
            // The replacement runs the daemons the targets run.
            let target = command.targets.first().map(|t| t.node.as_str());
            for p in &self.snapshot.pods {
                if p.is_daemonset_pod() && !p.is_terminal() && p.node_name.as_deref() == target {
                    free.sub(&p.requests);
                }
            }
            replacement = Some(Slot {
                node: None,
                allocatable_cpu: it.allocatable().get(CPU),
                free,
            });
        }
        // kube-scheduler's queue: pods already pending before the moved ones' new pods.
        let mut queue: Vec<&Pod> = self
            .snapshot
            .pods
            .iter()
            .filter(|p| p.node_name.is_none() && waits(p))
            .collect();
        queue.extend(moving.iter().copied());
        // The pods of running commands' targets move too, and before these: upstream's
        // simulations place the pods of deleting nodes with the candidates' and act only if
        // every one of them finds room. Their replacements are reserved, so they are no room.
        let leaving =
            |n: &str| !targets.contains(n) && (gone.contains(n) || self.disrupted.contains(n));
        queue.extend(self.snapshot.pods.iter().filter(|p| {
            p.node_name.as_deref().is_some_and(leaving)
                && !p.is_daemonset_pod()
                && !p.is_terminal()
                && p.deletion_timestamp.is_none()
        }));
        queue.sort_by(|a, b| kube_queue_cmp(a, b));
        for (k, pod) in queue.iter().enumerate() {
            let is_moving = pod.node_name.is_some();
            // Nodes this replay changed keep their free room in `slots`.
            let free_of = |i: usize| {
                slots
                    .iter()
                    .find(|(j, _)| *j == i)
                    .map_or(&self.slots[i].free, |(_, f)| f)
            };
            let mut best: Option<(Reverse<i64>, bool, &str, Option<usize>)> = None;
            for (i, s) in self.slots.iter().enumerate() {
                let node = s.node.expect("existing slots have nodes");
                if without(&node.name) || !admits(node, pod) {
                    continue;
                }
                let free = free_of(i);
                if !pod.requests.fits_in(free) {
                    continue;
                }
                let key = (
                    Reverse(share(free, s.allocatable_cpu)),
                    false,
                    node.name.as_str(),
                    Some(i),
                );
                if best.as_ref().is_none_or(|b| key < *b) {
                    best = Some(key);
                }
            }
            if let Some(r) = &replacement
                && pod.requests.fits_in(&r.free)
            {
                let key = (Reverse(share(&r.free, r.allocatable_cpu)), true, "", None);
                if best.as_ref().is_none_or(|b| key < *b) {
                    best = Some(key);
                }
            }
            match best {
                Some((_, _, _, Some(i))) => match slots.iter_mut().find(|(j, _)| *j == i) {
                    Some((_, f)) => f.sub(&pod.requests),
                    None => {
                        let mut f = self.slots[i].free.clone();
                        f.sub(&pod.requests);
                        slots.push((i, f));
                    }
                },
                Some((_, _, _, None)) => {
                    if let Some(r) = replacement.as_mut() {
                        r.free.sub(&pod.requests);
                    }
                }
                None if is_moving => {
                    return Some((
                        pod.key(),
                        format!(
                            "the cluster's scheduler, placing the {} pods ahead of it on the emptiest nodes{}, leaves it no room",
                            k,
                            if replacement.is_some() {
                                " (the replacement first while it is emptiest)"
                            } else {
                                ""
                            }
                        ),
                    ));
                }
                None => {}
            }
        }
        None
    }
}

/// Per mille of cpu free: kube-scheduler's `LeastAllocated` as the simulator scores it.
fn share(free: &Resources, allocatable_cpu: i64) -> i64 {
    free.get(CPU) * 1000 / allocatable_cpu.max(1)
}

/// Whether a pending pod waits in the scheduler's queue with a placement that depends only
/// on what the replay checks.
fn waits(p: &Pod) -> bool {
    !p.is_terminal()
        && p.deletion_timestamp.is_none()
        && !p.is_daemonset_pod()
        && p.topology_spread.is_empty()
        && p.pod_affinity.is_empty()
        && p.pod_anti_affinity.is_empty()
        && p.volume_claims.is_empty()
        && p.host_ports.is_empty()
}

/// The scheduler's filters the replay applies: taints, node selector, required affinity.
fn admits(node: &Node, pod: &Pod) -> bool {
    first_untolerated(&pod.tolerations, &node.taints).is_none()
        && pod
            .node_selector
            .iter()
            .all(|(k, v)| node.labels.get(k) == Some(v))
        && (pod.required_node_affinity.is_empty()
            || pod.required_node_affinity.iter().any(|term| {
                term.match_expressions
                    .iter()
                    .all(|r| r.admits_labels(&node.labels))
            }))
}
