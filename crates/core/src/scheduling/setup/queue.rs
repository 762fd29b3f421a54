//! The order pods meet the solver in: the kube-scheduler's queue and Karpenter's, which pods
//! a run places at all, and the order the classes are taken in.

use super::*;

/// The kube-scheduler's queue as a consolidation's moved pods meet it: by priority; the pods
/// already pending (older in the queue) before the pods of deleting nodes, which their
/// controllers create anew together, one controller after another; then by name.
pub(crate) fn kube_queue_cmp(a: &Pod, b: &Pod) -> std::cmp::Ordering {
    let key = |p: &Pod| {
        let moved = p.node_name.is_some();
        (
            std::cmp::Reverse(p.priority),
            moved,
            (!moved).then_some(p.creation_timestamp),
        )
    };
    fn owner(p: &Pod) -> &str {
        p.owner.as_ref().map_or("", |o| o.name.as_str())
    }
    key(a)
        .cmp(&key(b))
        .then_with(|| a.namespace.cmp(&b.namespace))
        .then_with(|| owner(a).cmp(owner(b)))
        .then_with(|| a.name.cmp(&b.name))
}

/// Karpenter's queue: the largest pods (cpu, then memory) first.
pub(crate) fn karpenter_queue_cmp(a: &Pod, b: &Pod) -> std::cmp::Ordering {
    let cpu = |p: &Pod| p.requests.get(crate::resources::CPU);
    let mem = |p: &Pod| p.requests.get(crate::resources::MEMORY);
    cpu(b)
        .cmp(&cpu(a))
        .then_with(|| mem(b).cmp(&mem(a)))
        .then_with(|| a.creation_timestamp.cmp(&b.creation_timestamp))
        .then_with(|| a.uid.cmp(&b.uid))
        .then_with(|| a.namespace.cmp(&b.namespace))
        .then_with(|| a.name.cmp(&b.name))
}

/// An unbound pod the scheduler places.
pub(crate) fn waits(p: &Pod) -> bool {
    !p.is_daemonset_pod()
        && !p.is_mirror_pod()
        && !p.is_terminal()
        && p.node_name.is_none()
        && !p.is_terminating()
        && p.phase == PodPhase::Pending
}

/// The pods this run places: pending ones, and those on nodes being deleted, in Karpenter's
/// queue order.
pub(crate) fn pods_to_schedule(s: &Snapshot) -> Vec<usize> {
    pods_to_schedule_by(s, karpenter_queue_cmp)
}

/// [`pods_to_schedule`] in the order `cmp` gives.
pub(crate) fn pods_to_schedule_by(
    s: &Snapshot,
    cmp: fn(&Pod, &Pod) -> std::cmp::Ordering,
) -> Vec<usize> {
    let deleting: BTreeSet<&str> = s
        .nodes
        .iter()
        .filter(|n| n.deletion_timestamp.is_some())
        .map(|n| n.name.as_str())
        .collect();
    let mut idx: Vec<usize> = (0..s.pods.len())
        .filter(|&i| {
            let p = &s.pods[i];
            // Most pods run on a node that stays: settled before the checks that read more.
            let asks = match &p.node_name {
                None => true,
                Some(n) => deleting.contains(n.as_str()),
            };
            if !asks || p.is_daemonset_pod() || p.is_mirror_pod() || p.is_terminal() {
                return false;
            }
            match p.node_name {
                // Upstream's reschedulable pods: a pod already terminating is replaced by its
                // controller, and that replacement is the pod to place; only a StatefulSet's
                // replacement waits for the old pod to go, so that one is placed itself.
                Some(_) => !p.is_terminating() || p.is_statefulset_pod(),
                None => waits(p),
            }
        })
        .collect();
    idx.sort_by(|&a, &b| cmp(&s.pods[a], &s.pods[b]));
    idx
}

/// The classes in the order the solve takes them. Classes that force pods apart per host
/// (required hostname anti-affinity against themselves) go first: the nodes they need exist
/// either way, and every later pod can then fill their spare room instead of opening nodes
/// of its own. The sort is stable, so everything else keeps Karpenter's queue order.
pub(super) fn queue_order(
    mut order: Vec<usize>,
    classes: &[Class],
    pools: &[PoolC],
    g: &Groups,
    hostname: u32,
) -> Vec<usize> {
    let forces_nodes = |c: &Class| {
        c.anti_affinity.iter().any(|&gi| {
            g.groups[gi].def.key == hostname && g.groups[gi].matches(&c.namespace, &c.labels)
        })
    };
    order.sort_by_key(|&ci| !forces_nodes(&classes[ci]));
    interleave_by_shape(order, classes, pools, forces_nodes)
}

/// Reorders the classes after the node-forcing ones so cpu-heavy and memory-heavy work
/// alternate: each next class comes from whichever kind has placed less of its share so far.
/// Within each kind the queue order is kept, so large pods still go first; nodes then fill in
/// both dimensions at once instead of running out of cpu with memory to spare.
fn interleave_by_shape(
    order: Vec<usize>,
    classes: &[Class],
    pools: &[PoolC],
    forced: impl Fn(&Class) -> bool,
) -> Vec<usize> {
    let (mut big_cpu, mut big_mem) = (1i64, 1i64);
    for p in pools {
        for it in p.its.iter() {
            big_cpu = big_cpu.max(it.alloc.first().copied().unwrap_or(0));
            big_mem = big_mem.max(it.alloc.get(1).copied().unwrap_or(0));
        }
    }
    let shape = |c: &Class| {
        let cpu = c.requests.first().copied().unwrap_or(0) as f64 / big_cpu as f64;
        let mem = c.requests.get(1).copied().unwrap_or(0) as f64 / big_mem as f64;
        (cpu, mem)
    };
    let mut out: Vec<usize> = order
        .iter()
        .copied()
        .filter(|&ci| forced(&classes[ci]))
        .collect();
    let rest: Vec<usize> = order
        .iter()
        .copied()
        .filter(|&ci| !forced(&classes[ci]))
        .collect();
    let (cpu_heavy, mem_heavy): (Vec<usize>, Vec<usize>) = rest.iter().partition(|&&ci| {
        let (c, m) = shape(&classes[ci]);
        c >= m
    });
    let (mut i, mut j) = (0, 0);
    let (mut cpu_done, mut mem_done) = (0.0f64, 0.0f64);
    while i < cpu_heavy.len() || j < mem_heavy.len() {
        let take_cpu = j >= mem_heavy.len() || (i < cpu_heavy.len() && cpu_done <= mem_done);
        let ci = if take_cpu {
            i += 1;
            cpu_heavy[i - 1]
        } else {
            j += 1;
            mem_heavy[j - 1]
        };
        let (c, m) = shape(&classes[ci]);
        let n = classes[ci].pods.len() as f64;
        cpu_done += c * n;
        mem_done += m * n;
        out.push(ci);
    }
    out
}
