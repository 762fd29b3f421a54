//! The cluster's scheduler replayed over a consolidation's moved pods.
//!
//! A consolidation's simulation opens a replacement only for the pods no other node takes.
//! The cluster's scheduler sees the pods the other way round: the targets are drained once
//! the replacement is Ready, and then the replacement is the emptiest node there is, so
//! kube-scheduler's `LeastAllocated` sends it the first pods, and the pods already pending
//! ahead of them in its queue too. A pod the simulation put on an existing node can then
//! take room on the replacement that the simulation kept for a larger pod, and the larger
//! pod is left pending; the provisioner launches a node like the one just removed for it.
//! Likewise the pods of a running command's targets, which later rounds plan as staying put,
//! move to the emptiest nodes when their replacement is Ready, not only onto it.
//!
//! So a command is taken only if the scheduler's own order places every moved pod. First
//! the pods already pending. Then the running commands drain one at a time, in the order
//! their replacements become Ready, as each drains as soon as its own are: those already
//! Ready first, then by when the last of them was created (a launch takes about as long as
//! another), then as the commands were added ([`Snapshot::commands_in_flight`]). When one
//! drains, its replacements join the nodes Ready and empty (as their claims' allocatable
//! says, or before their launch as the cheapest type they allow), and its targets' pods are
//! queued with the pending pods still without room: a running command's pod may use the
//! replacements of the commands draining before it, not those of the commands after it.
//! Targets and replacements of no recorded command drain with the pending pods. Then the
//! pods of the round's other commands, and last the command's own pods, with its replacement
//! Ready as the cheapest of its options; a pending pod still without room is left to the
//! provisioner. Each pod goes to the node with the largest share of cpu free (ties by node
//! name, a replacement after the nodes), among the Ready, schedulable nodes it tolerates and
//! selects. As upstream acts only if the pods of deleting nodes schedule too, a running
//! command's pod without room refuses the command as well. Only resources, taints, node
//! selectors and required node affinity are replayed: a pending pod with other constraints
//! is left out, and a moving one is placed by these alone, so the replay refuses only where
//! the scheduler finds no room.

use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::BTreeSet;
use std::sync::Arc;

use super::command::{Command, Replacement};
use crate::model::{CommandInFlight, Node, Pod, Snapshot};
use crate::resources::{CPU, Resources};
use crate::scheduling::intern::FastMap;
use crate::scheduling::setup::kube_queue_cmp;
use crate::taints::{DISRUPTED_TAINT, first_untolerated};

/// Where the scheduler ranks a node for a pod: most cpu free (per mille) first, nodes before
/// replacements, then by name; the last field says which slot.
type Rank<'a> = (Reverse<i64>, bool, &'a str, usize);

/// One node the replay may place pods on: `node` is `None` for a replacement.
struct Slot<'s> {
    node: Option<&'s Node>,
    name: &'s str,
    allocatable_cpu: i64,
    free: Resources,
}

impl<'s> Slot<'s> {
    fn rank(&self, free: &Resources, i: usize) -> Rank<'s> {
        let share = free.get(CPU) * 1000 / self.allocatable_cpu.max(1);
        (Reverse(share), self.node.is_none(), self.name, i)
    }
}

/// The schedulable nodes of one snapshot with what is free on each, in the scheduler's
/// order, and what running commands move and bring; built once for the commands a round
/// weighs.
pub(crate) struct Replay<'s> {
    snapshot: &'s Snapshot,
    /// Ready, schedulable nodes without the disrupted taint, then running commands'
    /// launched replacements.
    slots: Vec<Slot<'s>>,
    /// The nodes (indices into `slots`) by rank, emptiest first.
    order: Vec<usize>,
    /// What moves ahead of a new command, step by step: first the pods waiting for a node
    /// whose placement the replay can judge, then each running command's as it drains.
    steps: Vec<Step<'s>>,
    /// The slot of each node's name.
    index: FastMap<&'s str, usize>,
    /// Daemon pods' requests per node: a replacement runs its targets' daemons.
    daemons: FastMap<&'s str, Resources>,
}

/// One step of the drain ahead of a new command.
#[derive(Default)]
struct Step<'s> {
    /// The replacements (indices into `slots`) Ready from this step on.
    opens: Vec<usize>,
    /// The pods that join the scheduler's queue at this step, in its order.
    pods: Vec<&'s Pod>,
}

impl<'s> Replay<'s> {
    /// Reads `snapshot` once: the nodes and running commands' replacements the scheduler
    /// may use, with their free room, and the pods that move ahead of a new command.
    pub(crate) fn new(snapshot: &'s Snapshot) -> Replay<'s> {
        let (mut slots, mut index, mut leaving_nodes) = ready_nodes(snapshot);
        let nodes = slots.len();
        // Step 0 takes the pending pods; each running command drains at the step after it.
        let (steps_of_claims, commands) = drain_steps(snapshot);
        let mut steps: Vec<Step<'s>> = (0..=commands).map(|_| Step::default()).collect();
        let step_of = |claim: &str| steps_of_claims.get(claim).copied().unwrap_or(0);
        add_replacements(
            snapshot,
            &mut slots,
            &mut index,
            &mut leaving_nodes,
            &mut steps,
            step_of,
        );
        let mut step_of_node: FastMap<&str, usize> = FastMap::default();
        for c in &snapshot.node_claims {
            if let Some(n) = &c.node_name {
                step_of_node.insert(n.as_str(), step_of(&c.name));
            }
        }
        let daemons_on = place_bound_pods(
            snapshot,
            &mut slots,
            &index,
            &leaving_nodes,
            &step_of_node,
            &mut steps,
        );
        let mut order: Vec<usize> = (0..nodes).collect();
        order.sort_by(|&a, &b| {
            slots[a]
                .rank(&slots[a].free, a)
                .cmp(&slots[b].rank(&slots[b].free, b))
        });
        for step in &mut steps {
            step.pods.sort_by(|a, b| kube_queue_cmp(a, b));
        }
        Replay {
            snapshot,
            slots,
            order,
            steps,
            index,
            daemons: daemons_on,
        }
    }

    /// The first pod of `moving` (the pods of `command`'s targets), or of a running
    /// command's, that the cluster's scheduler would leave without a node, with why, when
    /// the nodes in `gone` (other commands' targets this round) are gone too; `None` when
    /// it places them all, or when the command launches more than one node (the replay
    /// judges one replacement).
    pub(crate) fn unplaced(
        &self,
        command: &Command,
        moving: &[&Pod],
        gone: &BTreeSet<String>,
    ) -> Option<(String, String)> {
        if command.replacements.len() > 1 {
            return None;
        }
        let targets: BTreeSet<&str> = command.targets.iter().map(|t| t.node.as_str()).collect();
        let mut run = Run {
            replay: self,
            closed: self.closed(&targets, gone),
            changed: FastMap::default(),
            extra: Vec::new(),
            ranked: BTreeSet::new(),
        };
        // First what moves ahead of the command: pending pods, the running commands' pods
        // as each drains, then those of this round's other commands.
        if let Some(refused) = run.drain_ahead() {
            return Some(refused);
        }
        for pod in self.other_commands_pods(&targets, gone) {
            if !run.place(pod) {
                return Some((
                    pod.key(),
                    "a pod of another command this round the cluster's scheduler would leave without room"
                        .to_string(),
                ));
            }
        }
        // Then the command's replacement is Ready and its pods move.
        if let Some(r) = command.replacements.first() {
            run.add_replacement(self.replacement_slot(r, &targets)?);
        }
        let mut ours: Vec<&Pod> = moving.to_vec();
        ours.sort_by(|a, b| kube_queue_cmp(a, b));
        for (k, pod) in ours.iter().enumerate() {
            if !run.place(pod) {
                return Some((
                    pod.key(),
                    format!(
                        "the cluster's scheduler, placing the pods ahead of it on the emptiest nodes ({k} of this command's{}), leaves it no room",
                        if command.replacements.is_empty() {
                            ""
                        } else {
                            ", its replacement among them while emptiest"
                        }
                    ),
                ));
            }
        }
        None
    }

    /// Per slot, whether it is a node of `targets` or of `gone`: closed to the moving pods.
    fn closed(&self, targets: &BTreeSet<&str>, gone: &BTreeSet<String>) -> Vec<bool> {
        let mut closed = vec![false; self.slots.len()];
        for n in targets
            .iter()
            .copied()
            .chain(gone.iter().map(String::as_str))
        {
            if let Some(&i) = self.index.get(n) {
                closed[i] = true;
            }
        }
        closed
    }

    /// The moving pods of the nodes in `gone` that are not the command's `targets`, in the
    /// scheduler's queue order.
    fn other_commands_pods(
        &self,
        targets: &BTreeSet<&str>,
        gone: &BTreeSet<String>,
    ) -> Vec<&'s Pod> {
        // Most commands weigh alone: no other command's nodes, so no scan of every pod.
        let all: &[Arc<Pod>] = if gone.is_empty() {
            &[]
        } else {
            &self.snapshot.pods
        };
        let mut others: Vec<&Pod> = all
            .iter()
            .map(|p| &**p)
            .filter(|p| {
                p.node_name
                    .as_deref()
                    .is_some_and(|n| gone.contains(n) && !targets.contains(n))
                    && moves(p)
            })
            .collect();
        others.sort_by(|a, b| kube_queue_cmp(a, b));
        others
    }

    /// The command's replacement `r` as a slot, the cheapest of its options, with the
    /// daemons of its `targets` taken from its room; `None` when that type is not in the
    /// snapshot.
    fn replacement_slot(&self, r: &Replacement, targets: &BTreeSet<&str>) -> Option<Slot<'s>> {
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
        for t in targets {
            if let Some(d) = self.daemons.get(t) {
                free.sub(d);
            }
        }
        Some(Slot {
            node: None,
            name: "",
            allocatable_cpu: it.allocatable().get(CPU),
            free,
        })
    }
}

/// One replay: what it placed so far.
struct Run<'r, 's> {
    replay: &'r Replay<'s>,
    /// Per slot of the replay: a target of this command or of another this round.
    closed: Vec<bool>,
    /// Free room of the slots this run changed (or added), by slot index.
    changed: FastMap<usize, Resources>,
    /// Slots this run added (the command's replacement), indexed after the replay's.
    extra: Vec<Slot<'s>>,
    /// The changed and added slots and the running commands' replacements, by rank.
    ranked: BTreeSet<Rank<'s>>,
}

impl<'s> Run<'_, 's> {
    fn slot(&self, i: usize) -> &Slot<'s> {
        self.replay
            .slots
            .get(i)
            .unwrap_or_else(|| &self.extra[i - self.replay.slots.len()])
    }

    fn free(&self, i: usize) -> &Resources {
        self.changed.get(&i).unwrap_or(&self.slot(i).free)
    }

    /// A running command's replacement is Ready: the scheduler may place pods on it.
    fn open(&mut self, i: usize) {
        let slot = &self.replay.slots[i];
        self.ranked.insert(slot.rank(&slot.free, i));
    }

    fn add_replacement(&mut self, slot: Slot<'s>) {
        let i = self.replay.slots.len() + self.extra.len();
        self.ranked.insert(slot.rank(&slot.free, i));
        self.extra.push(slot);
    }

    /// Places what moves ahead of a new command, step by step: the pending pods, then each
    /// running command's pods as it drains and its replacements open. A pending pod without
    /// room waits for the next step's; a running command's pod without room refuses the
    /// command, with why.
    fn drain_ahead(&mut self) -> Option<(String, String)> {
        let replay = self.replay;
        let mut waiting: Vec<&Pod> = Vec::new();
        for step in &replay.steps {
            for &i in &step.opens {
                self.open(i);
            }
            let queue: Cow<'_, [&Pod]> = if waiting.is_empty() {
                Cow::Borrowed(&step.pods)
            } else {
                let mut q = std::mem::take(&mut waiting);
                q.extend(step.pods.iter().copied());
                q.sort_by(|a, b| kube_queue_cmp(a, b));
                Cow::Owned(q)
            };
            for &pod in queue.iter() {
                if self.place(pod) {
                    continue;
                }
                if pod.node_name.is_some() {
                    return Some((
                        pod.key(),
                        "a running command's pod the cluster's scheduler would leave without room"
                            .to_string(),
                    ));
                }
                waiting.push(pod);
            }
        }
        None
    }

    /// Places `pod` where the scheduler would; whether it found room.
    fn place(&mut self, pod: &Pod) -> bool {
        let fits = |run: &Self, i: usize| {
            let s = run.slot(i);
            s.node
                .is_none_or(|n| !run.closed.get(i).copied().unwrap_or(false) && admits(n, pod))
                && pod.requests.fits_in(run.free(i))
        };
        // The best unchanged node is the first in order that fits; a changed or added slot
        // may rank above it.
        let unchanged = self
            .replay
            .order
            .iter()
            .copied()
            .find(|&i| !self.changed.contains_key(&i) && fits(self, i));
        let changed = self.ranked.iter().copied().find(|r| fits(self, r.3));
        let best = match (unchanged, changed) {
            (Some(u), Some(c)) => {
                let ur = self.slot(u).rank(self.free(u), u);
                if (ur.0, ur.1, ur.2) <= (c.0, c.1, c.2) {
                    u
                } else {
                    c.3
                }
            }
            (Some(u), None) => u,
            (None, Some(c)) => c.3,
            (None, None) => return false,
        };
        let before = self.slot(best).rank(self.free(best), best);
        let mut free = self.free(best).clone();
        free.sub(&pod.requests);
        let after = self.slot(best).rank(&free, best);
        self.ranked.remove(&before);
        self.ranked.insert(after);
        self.changed.insert(best, free);
        true
    }
}

/// The step at which each running command's claims (targets and replacements) drain, from 1
/// on, and how many commands there are: those whose replacements are all Ready first, then
/// by when their last replacement was created, then as they were added.
fn drain_steps(snapshot: &Snapshot) -> (FastMap<&str, usize>, usize) {
    let commands = &snapshot.commands_in_flight;
    if commands.is_empty() {
        return (FastMap::default(), 0);
    }
    let ready: BTreeSet<&str> = snapshot
        .nodes
        .iter()
        .filter(|n| n.ready)
        .map(|n| n.name.as_str())
        .collect();
    let claims: FastMap<&str, &crate::model::NodeClaim> = snapshot
        .node_claims
        .iter()
        .map(|c| (c.name.as_str(), &**c))
        .collect();
    let drains = |c: &CommandInFlight| {
        let theirs = c.replacements.iter().filter_map(|r| claims.get(r.as_str()));
        let launching = theirs
            .clone()
            .any(|r| r.node_name.as_deref().is_none_or(|n| !ready.contains(n)));
        (launching, theirs.map(|r| r.creation_timestamp).max())
    };
    let mut order: Vec<(usize, _)> = commands.iter().map(drains).enumerate().collect();
    order.sort_by_key(|&(i, key)| (key, i));
    let mut steps = FastMap::default();
    for (step, (i, _)) in order.into_iter().enumerate() {
        let c = &commands[i];
        for name in c.targets.iter().chain(&c.replacements) {
            steps.insert(name.as_str(), step + 1);
        }
    }
    (steps, commands.len())
}

/// Whether `taints` hold the disrupted taint (`karpenter.sh/disrupted`).
fn disrupted(taints: &[crate::taints::Taint]) -> bool {
    taints.iter().any(|t| t.key == DISRUPTED_TAINT)
}

/// The slots of the Ready, schedulable nodes not being deleted and without the disrupted
/// taint, with each one's slot by name, and the names of those with it (they are leaving).
fn ready_nodes(snapshot: &Snapshot) -> (Vec<Slot<'_>>, FastMap<&str, usize>, BTreeSet<&str>) {
    let mut index: FastMap<&str, usize> = FastMap::default();
    let mut slots: Vec<Slot<'_>> = Vec::new();
    let mut leaving_nodes: BTreeSet<&str> = BTreeSet::new();
    for n in &snapshot.nodes {
        if !n.ready || n.unschedulable || n.deletion_timestamp.is_some() {
            continue;
        }
        if disrupted(&n.taints) {
            leaving_nodes.insert(n.name.as_str());
            continue;
        }
        index.insert(n.name.as_str(), slots.len());
        slots.push(Slot {
            node: Some(n),
            name: n.name.as_str(),
            allocatable_cpu: n.allocatable.get(CPU),
            free: n.allocatable.clone(),
        });
    }
    (slots, index, leaving_nodes)
}

/// Adds a slot for each running command's replacement (a reserved claim not being
/// deleted), opened at its command's step; its node, if any, is not leaving.
fn add_replacements<'s>(
    snapshot: &'s Snapshot,
    slots: &mut Vec<Slot<'s>>,
    index: &mut FastMap<&'s str, usize>,
    leaving_nodes: &mut BTreeSet<&'s str>,
    steps: &mut [Step<'s>],
    step_of: impl Fn(&str) -> usize,
) {
    let daemons = {
        let mut r = Resources::new();
        for d in &snapshot.daemonsets {
            r.add(&d.pod.requests);
        }
        r
    };
    for c in &snapshot.node_claims {
        if !disrupted(&c.taints) || c.deletion_timestamp.is_some() {
            continue;
        }
        if let Some(n) = &c.node_name {
            leaving_nodes.remove(n.as_str());
        }
        // Before its launch answers, the claim is the cheapest type it allows, as the
        // launch will most likely make it.
        let allocatable = if c.allocatable.is_empty() {
            match cheapest_allowed(snapshot, c) {
                Some(a) => a,
                None => continue,
            }
        } else {
            c.allocatable.clone()
        };
        let mut free = allocatable.clone();
        if c.node_name.is_none() {
            free.sub(&daemons);
        }
        if let Some(n) = &c.node_name {
            index.insert(n.as_str(), slots.len());
        }
        steps[step_of(&c.name)].opens.push(slots.len());
        slots.push(Slot {
            node: None,
            name: c.name.as_str(),
            allocatable_cpu: allocatable.get(CPU),
            free,
        });
    }
}

/// Takes the requests of the pods bound to a slot's node from its free room, and queues the
/// pods that move: those of leaving nodes at their command's step, the pending ones the
/// replay can judge at step 0. Returns the daemon pods' requests per node.
fn place_bound_pods<'s>(
    snapshot: &'s Snapshot,
    slots: &mut [Slot<'s>],
    index: &FastMap<&'s str, usize>,
    leaving_nodes: &BTreeSet<&'s str>,
    step_of_node: &FastMap<&'s str, usize>,
    steps: &mut [Step<'s>],
) -> FastMap<&'s str, Resources> {
    let mut daemons_on: FastMap<&str, Resources> = FastMap::default();
    for p in &snapshot.pods {
        if p.is_terminal() {
            continue;
        }
        match p.node_name.as_deref() {
            Some(n) => {
                if p.is_daemonset_pod() {
                    daemons_on.entry(n).or_default().add(&p.requests);
                }
                if let Some(&i) = index.get(n) {
                    slots[i].free.sub(&p.requests);
                } else if leaving_nodes.contains(n) && moves(p) {
                    let step = step_of_node.get(n).copied().unwrap_or(0);
                    steps[step].pods.push(p);
                }
            }
            None if moves(p) && judged(p) => steps[0].pods.push(p),
            None => {}
        }
    }
    daemons_on
}

/// The allocatable of the cheapest available type `claim` allows.
fn cheapest_allowed(snapshot: &Snapshot, claim: &crate::model::NodeClaim) -> Option<Resources> {
    let price = |it: &crate::model::InstanceType| {
        it.offerings
            .iter()
            .filter(|o| o.available)
            .map(|o| o.price)
            .min_by(f64::total_cmp)
    };
    snapshot
        .instance_types
        .get(&claim.nodepool)?
        .iter()
        .filter(|it| it.compatible_with(&claim.requirements))
        .filter_map(|it| Some((price(it)?, it)))
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, it)| it.allocatable())
}

/// Whether a pod moves with its node and waits for the scheduler: not a daemon, not done,
/// not being deleted.
fn moves(p: &Pod) -> bool {
    !p.is_terminal() && p.deletion_timestamp.is_none() && !p.is_daemonset_pod()
}

/// Whether the replay can judge where a pending pod goes: no constraint it does not check.
fn judged(p: &Pod) -> bool {
    p.topology_spread.is_empty()
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
