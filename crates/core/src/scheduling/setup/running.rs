//! The pods already running: what they use on their targets (daemons still to start
//! included), and what they count in the topology groups of the pods being placed.

use super::*;

/// Counts the pods running on the targets (all but `rescheduled`) and the daemons that still
/// have to start; returns the running pods as `(pod index, existing index)`.
pub(crate) fn usage(
    s: &Snapshot,
    t: &mut Targets,
    rescheduled: &BTreeSet<usize>,
) -> Vec<(usize, usize)> {
    let Targets {
        names,
        interner,
        existing,
        existing_used,
        existing_ports,
        ..
    } = t;
    let existing_index: FastMap<&str, usize> = existing
        .iter()
        .enumerate()
        .map(|(i, e)| (e.name.as_str(), i))
        .collect();

    let resource_id = |k: &str| compile::resource_id(k, names);
    let mut running_ds: BTreeSet<(usize, String)> = BTreeSet::new();
    let mut running: Vec<(usize, usize)> = Vec::new();
    for (pi, p) in s.pods.iter().enumerate() {
        let Some(node) = &p.node_name else { continue };
        let Some(&ei) = existing_index.get(node.as_str()) else {
            continue;
        };
        if p.is_terminal() || rescheduled.contains(&pi) {
            continue;
        }
        // What `dense` would give, added in place: no vector per running pod.
        let used = existing_used.get_mut(ei);
        for (k, r) in p.requests.iter() {
            if let Some(id) = resource_id(k) {
                used[id] += r;
            }
        }
        if !p.host_ports.is_empty() {
            existing_ports
                .get_mut(ei)
                .extend(p.host_ports.iter().cloned());
        }
        if let Some(o) = &p.owner
            && o.kind == "DaemonSet"
        {
            running_ds.insert((ei, o.name.clone()));
        }
        if !p.is_terminating() {
            running.push((pi, ei));
        }
    }
    for (ei, e) in existing.iter().enumerate() {
        for d in &s.daemonsets {
            if running_ds.contains(&(ei, d.name.clone()))
                || !compile::daemon_tolerates(&d.pod, &e.taints)
            {
                continue;
            }
            let dr = compile::daemon_reqs(&d.pod, interner);
            if e.reqs.compatible(&dr, interner, &|_| false).is_ok() {
                for (u, r) in existing_used
                    .get_mut(ei)
                    .iter_mut()
                    .zip(dense(&d.pod.requests, names))
                {
                    *u += r;
                }
                existing_ports
                    .get_mut(ei)
                    .extend(d.pod.host_ports.iter().cloned());
            }
        }
    }
    running
}

/// The running pods a solve counts for topology, `(pod, existing index)`: all of them on
/// demand (only needed when some class brings topology groups), and those with required
/// anti-affinity terms up front.
pub struct Running<'p, 'f> {
    /// Every running pod, in sets that share a namespace and labels (see [`label_sets`]);
    /// called only when some topology group may count them.
    pub all: &'f dyn Fn() -> Vec<Vec<(&'p Pod, usize)>>,
    pub with_anti_affinity: Vec<(&'p Pod, usize)>,
}

/// `running` (`(pod index, existing index)`) in sets of pods with the same namespace and
/// labels, in order of first appearance. A topology group selects all of a set or none of it,
/// so counting matches a selector once per set, not once per pod: a Deployment's thousand
/// replicas are one set. A consolidation round counts the running pods once per candidate, and
/// per pod that made the round's cost grow with the cluster times its candidates.
pub(crate) fn label_sets(s: &Snapshot, running: &[(usize, usize)]) -> Vec<Vec<(usize, usize)>> {
    let mut index: HashMap<(&str, &BTreeMap<String, String>), usize> = HashMap::new();
    let mut sets: Vec<Vec<(usize, usize)>> = Vec::new();
    for &(pi, ei) in running {
        let p = &s.pods[pi];
        let i = *index
            .entry((p.namespace.as_str(), &p.labels))
            .or_insert_with(|| {
                sets.push(Vec::new());
                sets.len() - 1
            });
        sets[i].push((pi, ei));
    }
    sets
}

/// The value `reqs` gives `key` when it gives exactly one: the domain a target is in.
fn single_value(reqs: &Reqs, key: u32) -> Option<u32> {
    reqs.get(key)
        .filter(|set| set.values.len() == 1 && !set.complement)
        .map(|set| set.values[0])
}

/// Counts the running pods, in `sets` of one namespace and labels each, in the groups that
/// select them, where they run.
pub(super) fn count_in_groups(
    sets: &[Vec<(&Pod, usize)>],
    existing: &Existing,
    interner: &Interner,
    g: &mut Groups,
) {
    let mut selecting = Vec::new();
    for set in sets {
        let Some(&(first, _)) = set.first() else {
            continue;
        };
        selecting.clear();
        selecting.extend(
            (0..g.groups.len()).filter(|&i| g.groups[i].matches(&first.namespace, &first.labels)),
        );
        for &(_, ei) in set {
            let e = &existing[ei];
            for &gi in &selecting {
                let grp = &mut g.groups[gi];
                if grp.def.filter.accepts(&e.reqs, &e.taints, interner)
                    && let Some(v) = single_value(&e.reqs, grp.def.key)
                {
                    grp.record(v, 1);
                }
            }
        }
    }
}

/// Counts the running pods with required anti-affinity (`(pod, existing index)`) in the
/// inverse groups of their terms, where they run.
pub(super) fn count_in_inverse(
    s: &Snapshot,
    with_anti_affinity: &[(&Pod, usize)],
    existing: &Existing,
    interner: &mut Interner,
    g: &mut Groups,
) {
    for &(p, ei) in with_anti_affinity {
        for id in inverse_groups(s, p, interner, g) {
            if let Some(v) = single_value(&existing[ei].reqs, g.inverse[id].def.key) {
                g.inverse[id].record(v, 1);
            }
        }
    }
}
