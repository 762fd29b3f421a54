//! Upper bounds on what consolidating one candidate on its own can save, found without a
//! simulation, so the single-node search can stop once no candidate left could beat the best
//! command it has.
//!
//! Deleting a candidate saves its price. Replacing it saves its price less the replacement's,
//! and no replacement costs less than the cheapest offering a NodePool may launch on (of an
//! instance type it lists, with a capacity type its requirements admit). A delete needs
//! every pod of the candidate placed on a node already running, and no simulator lets a node
//! take more than its allocatable less the requests of the pods bound to it. So for any
//! threshold `t` of cpu and memory, the candidate's pods that ask for at least `t` can only go
//! to other nodes with at least `t` free, and must fit in what those nodes have free together;
//! when for some `t` they do not, the candidate can at best be replaced. In a packed cluster
//! that is most candidates, and their bound is the small price gap to the cheapest offering
//! instead of their whole price.
//!
//! A replacement is a single new node, and it must take every pod that fits on no other node
//! on its own: no instance type whose allocatable is below those pods' summed requests is
//! among its options. So the replacement costs at least the cheapest offering of a type that
//! holds them. When that is no less than the candidate's own price (its pods need its own
//! type or a dearer one), and it cannot be deleted, no command can come from it: the search
//! leaves it out.
//!
//! "Other nodes" are the Nodes and the initialized claims whose Node is missing: a pod placed
//! on a claim that has not initialized fails the simulation, so it never makes a command.
//! Nodes still inside their NodePool's `consolidateAfter` are left out too: a consolidation's
//! simulation puts none of the moving pods there ([`closed_nodes`]).
//!
//! The same room answers the multi-node search: a prefix of candidates consolidates only if
//! its pods fit in the other nodes' free room and one new node, so a prefix whose pods ask for
//! more cpu or memory than that in all is invalid without a simulation; so is one whose pods
//! that fit on no node outside it need a new node costing at least what the prefix does (no
//! type holding them at all included).

use std::cell::RefCell;
use std::cmp::Reverse;

use super::candidates::{Candidate, closed_node_names};
use crate::labels;
use crate::model::{CapacityType, Snapshot};
use crate::requirements::Operator;
use crate::resources::{CPU, MEMORY, Resources};
use crate::scheduling::intern::FastMap;

/// `(cpu, memory)`: a pod's requests, a node's free room, or a threshold on either.
type Pair = (i64, i64);

/// Thresholds taken from at most this many of a candidate's pod shapes: any subset of the
/// checks is sound, and a node of many differently sized pods should not cost a scan each.
const MAX_SHAPES: usize = 16;

/// What a snapshot tells about consolidating its nodes without a simulation (see the module
/// header).
#[derive(Debug)]
pub(crate) struct SavingBounds<'a> {
    /// The cheapest offering a new node of any NodePool may launch on.
    floor: f64,
    /// Every node's free room: allocatable less the requests of its pods (may be negative),
    /// by cpu, then memory, most first.
    free: Vec<(Pair, &'a str)>,
    /// The slot (in `slots`) of each of `free`'s names.
    free_slots: Vec<u32>,
    /// The free rooms no other one covers in both cpu and memory, by cpu ascending (so memory
    /// descending), each with its node's name; equal rooms of different nodes are all kept.
    frontier: Vec<(Pair, &'a str)>,
    /// Per instance type of any NodePool: its allocatable and its cheapest offering that
    /// NodePool may launch on, cheapest first.
    types: Vec<(Pair, f64)>,
    /// The cheapest of `types` that holds a sum of requests, worked out once per sum.
    holding: RefCell<FastMap<Pair, f64>>,
    /// Per name of a node or claim, its slot in `rooms_of`: the free rooms of the nodes (or
    /// claims) of that name, none when closed.
    slots: FastMap<&'a str, u32>,
    rooms_of: Vec<Rooms>,
    /// Per threshold, the room of every node that meets it (see [`room`]).
    rooms: RefCell<FastMap<Pair, Pair>>,
    /// The most cpu and the most memory of any instance type: more than one new node holds.
    largest: Pair,
}

/// Whether a node with `free` room can take a pod that reaches `t`: a pod is only compared
/// on what it asks for, so a threshold of zero (or less) admits any node.
fn meets(free: Pair, t: Pair) -> bool {
    (t.0 <= 0 || free.0 >= t.0) && (t.1 <= 0 || free.1 >= t.1)
}

/// What a node with `free` room can still take: nothing of a resource it has overcommitted.
fn room(free: Pair) -> Pair {
    (free.0.max(0), free.1.max(0))
}

fn add(a: Pair, b: Pair) -> Pair {
    (a.0.saturating_add(b.0), a.1.saturating_add(b.1))
}

impl<'a> SavingBounds<'a> {
    /// Reads `snapshot` once: what a new node may cost and hold, and every other node's free
    /// room.
    pub(crate) fn new(snapshot: &'a Snapshot) -> Self {
        let types = offered_types(snapshot);
        let floor = types.first().map_or(f64::INFINITY, |t| t.1);
        let (slots, owners, slot_of) = name_slots(snapshot);
        let used = used_per_slot(snapshot, &slots);
        let mut closed = vec![false; slots.len()];
        for name in closed_node_names(snapshot) {
            if let Some(&slot) = slots.get(name) {
                closed[slot as usize] = true;
            }
        }
        let (free, free_slots, rooms_of) = free_rooms(owners, slot_of, &used, &closed);
        let frontier = frontier_of(free.iter().copied());
        let largest = snapshot
            .instance_types
            .values()
            .flat_map(|its| its.iter())
            .fold((0, 0), |(cpu, mem), it| {
                (
                    cpu.max(it.capacity.get(CPU)),
                    mem.max(it.capacity.get(MEMORY)),
                )
            });
        SavingBounds {
            floor,
            free,
            free_slots,
            frontier,
            types,
            holding: RefCell::default(),
            slots,
            rooms_of,
            rooms: RefCell::default(),
            largest,
        }
    }

    /// The free rooms of the nodes named `name`, closed ones left out.
    fn rooms_named(&self, name: &str) -> &[Pair] {
        self.slots
            .get(name)
            .map_or(&[][..], |&s| self.rooms_of[s as usize].as_slice())
    }

    /// At least what any single-node command for `c` saves: its price, or its price less the
    /// cheapest offering when its pods cannot all move to other nodes, or less the cheapest
    /// one that holds the pods no other node can take. `None` when no command for `c` alone
    /// exists: it cannot be deleted, and no replacement costs less than it (a replacement
    /// command always saves something).
    pub(crate) fn of(&self, c: &Candidate<'_>) -> Option<f64> {
        let pods: Vec<Pair> = c.reschedulable_pods.iter().map(|p| requests(p)).collect();
        let name = c.node.name.as_str();
        let own = self.rooms_named(name);
        let stranded = pods
            .iter()
            .filter(|&&q| !self.fits_elsewhere(q, name))
            .fold(None, |a: Option<Pair>, &q| {
                Some(add(a.unwrap_or_default(), q))
            });
        let replaced = |least: f64| Some(c.price - least).filter(|&saving| saving > 0.0);
        if let Some(need) = stranded {
            return replaced(self.floor.max(self.cheapest_holding(need)));
        }
        let mut shapes = pods.clone();
        shapes.sort_unstable_by_key(|&(cpu, mem)| (Reverse(cpu), Reverse(mem)));
        shapes.dedup();
        shapes.truncate(MAX_SHAPES);
        let mut thresholds: Vec<Pair> = vec![(0, 0)];
        for &(cpu, mem) in &shapes {
            thresholds.extend([(cpu, mem), (cpu, 0), (0, mem)]);
        }
        thresholds.sort_unstable();
        thresholds.dedup();
        let stuck = thresholds.iter().any(|&t| {
            // Every pod reaching `t` needs a node meeting `t`; together they need at least
            // their sum of that room.
            let need = pods
                .iter()
                .filter(|&&q| meets(q, t))
                .fold((0, 0), |a, &q| add(a, q));
            let have = self.room_elsewhere(t, own);
            need.0 > have.0 || need.1 > have.1
        });
        if stuck {
            replaced(self.floor)
        } else {
            Some(c.price)
        }
    }

    /// Whether no command consolidates `prefix` together: its pods ask for more than the
    /// other nodes have free and the largest instance type holds, or the pods that fit on no
    /// other node need a new node that costs at least what the prefix does.
    pub(crate) fn rules_out_together(&self, prefix: &[&Candidate<'_>]) -> bool {
        let need = prefix
            .iter()
            .flat_map(|c| &c.reschedulable_pods)
            .fold((0, 0), |a, p| add(a, requests(p)));
        // The prefix's nodes by slot, each name once: their rooms are taken, and they are not
        // among the other nodes.
        let mut in_prefix = vec![false; self.rooms_of.len()];
        let mut taken = (0, 0);
        for c in prefix {
            if let Some(&slot) = self.slots.get(c.node.name.as_str())
                && !std::mem::replace(&mut in_prefix[slot as usize], true)
            {
                taken = self.rooms_of[slot as usize]
                    .as_slice()
                    .iter()
                    .fold(taken, |a, &f| add(a, room(f)));
            }
        }
        let all = self.room_meeting((0, 0));
        let have = add(
            (all.0.saturating_sub(taken.0), all.1.saturating_sub(taken.1)),
            self.largest,
        );
        if need.0 > have.0 || need.1 > have.1 {
            return true;
        }
        let outside = frontier_of(
            self.free
                .iter()
                .zip(&self.free_slots)
                .filter(|&(_, &slot)| !in_prefix[slot as usize])
                .map(|(&room, _)| room),
        );
        let stranded = prefix
            .iter()
            .flat_map(|c| &c.reschedulable_pods)
            .map(|p| requests(p))
            .filter(|&q| meeting(&outside, q).next().is_none())
            .fold(None, |a: Option<Pair>, q| {
                Some(add(a.unwrap_or_default(), q))
            });
        // Summed as the command's own saving is, so the comparison is with the same number.
        let total: f64 = prefix.iter().map(|c| c.price).sum();
        stranded.is_some_and(|need| self.cheapest_holding(need) >= total)
    }

    /// The room of every node that meets `t`, worked out once per threshold.
    fn room_meeting(&self, t: Pair) -> Pair {
        *self.rooms.borrow_mut().entry(t).or_insert_with(|| {
            self.free
                .iter()
                .filter(|&&(f, _)| meets(f, t))
                .fold((0, 0), |a, &(f, _)| add(a, room(f)))
        })
    }

    /// Whether a node not called `name` has the free room a pod asking for `q` needs.
    fn fits_elsewhere(&self, q: Pair, name: &str) -> bool {
        let mut any = false;
        for &(_, n) in meeting(&self.frontier, q) {
            if n != name {
                return true;
            }
            any = true;
        }
        // Only the candidate's own rooms lead there: one of the rooms they cover may still
        // meet `q`.
        any && self.free.iter().any(|&(f, n)| n != name && meets(f, q))
    }

    /// The cheapest instance type whose allocatable holds `need`, or infinity when none does.
    fn cheapest_holding(&self, need: Pair) -> f64 {
        *self.holding.borrow_mut().entry(need).or_insert_with(|| {
            self.types
                .iter()
                .find(|&&(a, _)| a.0 >= need.0 && a.1 >= need.1)
                .map_or(f64::INFINITY, |t| t.1)
        })
    }

    /// The room of the nodes that meet `t`, but for the candidate's own rooms `own` (every
    /// node of its name: a simulation without the candidate removes them all).
    fn room_elsewhere(&self, t: Pair, own: &[Pair]) -> Pair {
        let all = self.room_meeting(t);
        let own = own
            .iter()
            .filter(|&&f| meets(f, t))
            .fold((0, 0), |a, &f| add(a, room(f)));
        (all.0.saturating_sub(own.0), all.1.saturating_sub(own.1))
    }
}

/// Per instance type of any NodePool: its allocatable and its cheapest offering that NodePool
/// may launch on, cheapest first (types with no such offering left out).
fn offered_types(snapshot: &Snapshot) -> Vec<(Pair, f64)> {
    let mut types: Vec<(Pair, f64)> = snapshot
        .instance_types
        .iter()
        .flat_map(|(pool, its)| {
            let admits = admitted_capacity_types(snapshot, pool);
            its.iter().filter_map(move |it| {
                let price = it
                    .offerings
                    .iter()
                    .filter(|o| admits.contains(&o.capacity_type))
                    .map(|o| o.price)
                    .fold(f64::INFINITY, f64::min);
                let a = it.allocatable();
                (price < f64::INFINITY).then_some(((a.get(CPU), a.get(MEMORY)), price))
            })
        })
        .collect();
    types.sort_by(|a, b| a.1.total_cmp(&b.1));
    types
}

/// The nodes and initialized claims whose free room counts: each one's name and allocatable.
type Owners<'a> = Vec<(&'a str, &'a Resources)>;

/// One slot per name of a node, or of an initialized claim no node is named after; the
/// nodes' names are entered first. Also each node's (then each such claim's) name and
/// allocatable, with its slot.
fn name_slots(snapshot: &Snapshot) -> (FastMap<&str, u32>, Owners<'_>, Vec<u32>) {
    let mut slots: FastMap<&str, u32> = FastMap::default();
    slots.reserve(snapshot.nodes.len());
    let mut owners: Owners<'_> = Vec::with_capacity(snapshot.nodes.len());
    let mut slot_of: Vec<u32> = Vec::with_capacity(snapshot.nodes.len());
    for n in &snapshot.nodes {
        let next = slots.len() as u32;
        slot_of.push(*slots.entry(n.name.as_str()).or_insert(next));
        owners.push((n.name.as_str(), &n.allocatable));
    }
    let node_slots = slots.len() as u32;
    for c in &snapshot.node_claims {
        if !c.initialized || c.deletion_timestamp.is_some() {
            continue;
        }
        let name = c.node_name.as_deref().unwrap_or(&c.name);
        let next = slots.len() as u32;
        let slot = *slots.entry(name).or_insert(next);
        if slot >= node_slots {
            slot_of.push(slot);
            owners.push((name, &c.allocatable));
        }
    }
    (slots, owners, slot_of)
}

/// Per slot, the summed requests of the pods bound to it.
fn used_per_slot(snapshot: &Snapshot, slots: &FastMap<&str, u32>) -> Vec<Pair> {
    // Terminal pods hold nothing; every other bound pod counts against its node, as in
    // every simulator (which may count more, never less).
    let mut used = vec![(0, 0); slots.len()];
    for p in &snapshot.pods {
        if p.is_terminal() {
            continue;
        }
        let r = requests(p);
        if let Some(&slot) = p.node_name.as_deref().and_then(|n| slots.get(n)) {
            used[slot as usize] = add(used[slot as usize], r);
        }
    }
    used
}

/// The free room of each owner (allocatable less `used`) whose slot is not `closed`: all of
/// them by cpu, then memory, most first, with their names and slots, and per slot its own.
fn free_rooms<'a>(
    owners: Owners<'a>,
    slot_of: Vec<u32>,
    used: &[Pair],
    closed: &[bool],
) -> (Vec<(Pair, &'a str)>, Vec<u32>, Vec<Rooms>) {
    let mut free = Vec::with_capacity(owners.len());
    let mut rooms_of = Vec::new();
    rooms_of.resize_with(used.len(), Rooms::default);
    for ((name, allocatable), slot) in owners.into_iter().zip(slot_of) {
        let slot = slot as usize;
        if closed[slot] {
            continue;
        }
        let u = used[slot];
        let f = (
            allocatable.get(CPU).saturating_sub(u.0),
            allocatable.get(MEMORY).saturating_sub(u.1),
        );
        free.push((f, name, slot as u32));
        rooms_of[slot].push(f);
    }
    free.sort_unstable_by_key(|&((cpu, mem), _, _)| (Reverse(cpu), Reverse(mem)));
    let (free, free_slots): (Vec<(Pair, &str)>, Vec<u32>) =
        free.into_iter().map(|(f, n, s)| ((f, n), s)).unzip();
    (free, free_slots, rooms_of)
}

/// The rooms no other one of `rooms` covers in both cpu and memory, by cpu ascending (so
/// memory descending), from `rooms` sorted by cpu then memory, most first: a room joins when
/// it has more memory than every room with more cpu before it, or equals the last one kept.
fn frontier_of<'a>(rooms: impl Iterator<Item = (Pair, &'a str)>) -> Vec<(Pair, &'a str)> {
    let mut frontier: Vec<(Pair, &str)> = Vec::new();
    for (f, name) in rooms {
        match frontier.last() {
            Some(&(last, _)) if f != last && f.1 <= last.1 => {}
            _ => frontier.push((f, name)),
        }
    }
    frontier.reverse();
    frontier
}

/// The rooms of `frontier` (as [`frontier_of`] gives it) that can take a pod asking for `q`:
/// those with enough cpu, while they have enough memory (it only falls from there).
fn meeting<'f, 'a>(
    frontier: &'f [(Pair, &'a str)],
    q: Pair,
) -> impl Iterator<Item = &'f (Pair, &'a str)> {
    let start = if q.0 <= 0 {
        0
    } else {
        frontier.partition_point(|&((cpu, _), _)| cpu < q.0)
    };
    frontier[start..]
        .iter()
        .take_while(move |&&(f, _)| meets(f, q))
}

/// The free rooms of the nodes of one name: nearly always one, kept without a vector.
#[derive(Debug, Default)]
enum Rooms {
    #[default]
    None,
    One(Pair),
    Many(Vec<Pair>),
}

impl Rooms {
    fn push(&mut self, room: Pair) {
        *self = match std::mem::take(self) {
            Rooms::None => Rooms::One(room),
            Rooms::One(first) => Rooms::Many(vec![first, room]),
            Rooms::Many(mut all) => {
                all.push(room);
                Rooms::Many(all)
            }
        };
    }

    fn as_slice(&self) -> &[Pair] {
        match self {
            Rooms::None => &[],
            Rooms::One(room) => std::slice::from_ref(room),
            Rooms::Many(all) => all,
        }
    }
}

/// A pod's `(cpu, memory)` requests.
fn requests(p: &crate::model::Pod) -> Pair {
    p.requests.cpu_and_memory()
}

/// The capacity types a new node of `pool` may have: those its `In` requirements on
/// `karpenter.sh/capacity-type` all list, or every type when it has none (or is unknown). A
/// replacement's requirements are the NodePool's narrowed by its pods', so its price comes
/// from an offering of one of these types.
fn admitted_capacity_types(snapshot: &Snapshot, pool: &str) -> Vec<CapacityType> {
    let mut admitted = vec![
        CapacityType::OnDemand,
        CapacityType::Spot,
        CapacityType::Reserved,
    ];
    let Some(pool) = snapshot.nodepools.iter().find(|p| p.name == pool) else {
        return admitted;
    };
    for r in &pool.template.requirements {
        if r.key == labels::CAPACITY_TYPE && r.operator == Operator::In {
            admitted.retain(|ct| r.values.iter().any(|v| v == ct.as_str()));
        }
    }
    admitted
}

#[cfg(test)]
mod tests;
