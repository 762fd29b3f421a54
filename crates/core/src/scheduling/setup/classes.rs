//! One pod class from its first pod: compiled selectors and node affinity, volume topology
//! alternatives, and the topology groups its constraints refer to.

use super::*;
use crate::model::WeightedPodAffinityTerm;

/// Volume topology alternatives per pod: each OR'd PV node-affinity term or StorageClass
/// topology term is one alternative; several volumes multiply out.
pub(crate) fn volume_alternatives(
    s: &Snapshot,
    pod: &Pod,
) -> Result<Vec<Vec<Requirement>>, String> {
    let mut alts: Vec<Vec<Requirement>> = vec![vec![]];
    for claim in &pod.volume_claims {
        let pvc = s
            .persistent_volume_claims
            .iter()
            .find(|c| c.namespace == pod.namespace && &c.name == claim)
            .ok_or_else(|| {
                format!(
                    "PersistentVolumeClaim {}/{claim} does not exist",
                    pod.namespace
                )
            })?;
        let terms: Vec<Vec<Requirement>> = if let Some(pv_name) = &pvc.volume_name {
            let pv = s
                .persistent_volumes
                .iter()
                .find(|v| &v.name == pv_name)
                .ok_or_else(|| {
                    format!("PersistentVolume {pv_name} (bound to {claim}) does not exist")
                })?;
            pv.node_affinity
                .iter()
                .map(|t| {
                    t.match_expressions
                        .iter()
                        .filter(|r| !(pv.local_or_host_path && r.key == labels::HOSTNAME))
                        .cloned()
                        .collect()
                })
                .collect()
        } else if let Some(sc_name) = &pvc.storage_class {
            let sc = s
                .storage_classes
                .iter()
                .find(|c| &c.name == sc_name)
                .ok_or_else(|| {
                    format!("StorageClass {sc_name} (used by {claim}) does not exist")
                })?;
            sc.allowed_topologies
                .iter()
                .map(|t| t.match_expressions.clone())
                .collect()
        } else {
            vec![]
        };
        if terms.is_empty() {
            continue;
        }
        let mut next = Vec::new();
        for a in &alts {
            for t in &terms {
                let mut x = a.clone();
                x.extend(t.iter().cloned());
                next.push(x);
            }
        }
        alts = next;
    }
    Ok(alts)
}

pub(super) fn namespaces_of(s: &Snapshot, pod_ns: &str, term: &PodAffinityTerm) -> Namespaces {
    namespaces_in(&s.namespaces, pod_ns, term)
}

/// The namespaces `term` of a pod in `pod_ns` names, its namespace selector read against the
/// labels of `namespaces`.
pub(super) fn namespaces_in(
    namespaces: &BTreeMap<String, BTreeMap<String, String>>,
    pod_ns: &str,
    term: &PodAffinityTerm,
) -> Namespaces {
    if let Some(sel) = &term.namespace_selector {
        if sel.is_empty() {
            return Namespaces::All;
        }
        let mut set: Vec<String> = term.namespaces.clone();
        for (ns, l) in namespaces {
            if sel.matches(l) {
                set.push(ns.clone());
            }
        }
        set.sort();
        set.dedup();
        return Namespaces::Set(set);
    }
    let mut set = if term.namespaces.is_empty() {
        vec![pod_ns.to_string()]
    } else {
        term.namespaces.clone()
    };
    set.sort();
    set.dedup();
    Namespaces::Set(set)
}

pub(super) fn with_label_keys(
    sel: &Option<LabelSelector>,
    pod: &BTreeMap<String, String>,
    matching: &[String],
    mismatching: &[String],
) -> Option<LabelSelector> {
    let mut s = sel.clone()?;
    for k in matching {
        if let Some(v) = pod.get(k) {
            s.match_expressions.push(SelectorRequirement {
                key: k.clone(),
                operator: SelectorOperator::In,
                values: vec![v.clone()],
            });
        }
    }
    for k in mismatching {
        if let Some(v) = pod.get(k) {
            s.match_expressions.push(SelectorRequirement {
                key: k.clone(),
                operator: SelectorOperator::NotIn,
                values: vec![v.clone()],
            });
        }
    }
    Some(s)
}

pub(super) struct Groups {
    pub(super) groups: Vec<Group>,
    pub(super) ids: HashMap<GroupKey, usize>,
    pub(super) inverse: Vec<Inverse>,
    pub(super) inverse_ids: HashMap<InverseKey, usize>,
}

impl Groups {
    pub(super) fn group(&mut self, def: GroupKey) -> usize {
        if let Some(&i) = self.ids.get(&def) {
            return i;
        }
        let i = self.groups.len();
        self.ids.insert(def.clone(), i);
        self.groups.push(Group::new(def));
        i
    }

    pub(super) fn inverse(&mut self, def: InverseKey) -> usize {
        if let Some(&i) = self.inverse_ids.get(&def) {
            return i;
        }
        let i = self.inverse.len();
        self.inverse_ids.insert(def.clone(), i);
        self.inverse.push(Inverse::new(def));
        i
    }
}

/// The class of `pod` (its first pod): compiled node selector and affinity, the volume
/// topology alternatives `vols`, and the topology groups its constraints refer to, entered
/// in `g`.
pub(super) fn compile_class(
    s: &Snapshot,
    pod: &Pod,
    vols: &[Vec<Requirement>],
    names: &Interner,
    interner: &mut Interner,
    g: &mut Groups,
) -> Class {
    let node_selector = compile::node_selector_reqs(&pod.node_selector, interner);
    let required_terms: Vec<Reqs> = pod
        .required_node_affinity
        .iter()
        .map(|t| compile::term_reqs(t, interner))
        .collect();
    let preferred_terms = preferred_node_terms(pod, interner);
    let volume_alternatives = if vols.is_empty() {
        vec![Reqs::new()]
    } else {
        vols.iter()
            .map(|v| reqs::compile_all(v, interner))
            .collect()
    };
    let error = restricted_label_error(pod);
    let strict = strict_reqs(&node_selector, &required_terms, interner);
    let spreads = spread_groups(pod, &strict, interner, g);
    let affinity = pod
        .pod_affinity
        .iter()
        .map(|t| term_group(s, pod, Kind::Affinity, t, interner, g))
        .collect();
    let anti_affinity = pod
        .pod_anti_affinity
        .iter()
        .map(|t| term_group(s, pod, Kind::AntiAffinity, t, interner, g))
        .collect();
    let preferred_affinity = preferred_term_groups(
        s,
        pod,
        Kind::Affinity,
        &pod.preferred_pod_affinity,
        interner,
        g,
    );
    let preferred_anti_affinity = preferred_term_groups(
        s,
        pod,
        Kind::AntiAffinity,
        &pod.preferred_pod_anti_affinity,
        interner,
        g,
    );
    let owns_inverse = inverse_groups(s, pod, interner, g);
    Class {
        namespace: pod.namespace.clone(),
        labels: pod.labels.clone(),
        requests: dense(&pod.requests, names),
        tolerations: pod.tolerations.clone(),
        host_ports: pod.host_ports.clone(),
        node_selector,
        required_terms,
        preferred_terms,
        volume_alternatives,
        spreads,
        affinity,
        preferred_affinity,
        anti_affinity,
        preferred_anti_affinity,
        owns_inverse,
        counted_by: Vec::new(),
        counted_keys: Vec::new(),
        blocked_by: Vec::new(),
        pods: Vec::new(),
        error,
        from_deleting: false,
    }
}

/// The pod's preferred node-affinity terms compiled, heaviest first (ties in the pod's order).
fn preferred_node_terms(pod: &Pod, interner: &mut Interner) -> Vec<Reqs> {
    let mut pref: Vec<(i32, usize)> = pod
        .preferred_node_affinity
        .iter()
        .enumerate()
        .map(|(i, w)| (w.weight, i))
        .collect();
    pref.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    pref.iter()
        .map(|&(_, i)| compile::term_reqs(&pod.preferred_node_affinity[i].term, interner))
        .collect()
}

/// Why the pod cannot schedule when its node selector or required node affinity names a
/// label Karpenter restricts (the hostname and NodePool labels are allowed); the last such
/// label wins.
fn restricted_label_error(pod: &Pod) -> Option<String> {
    let mut error = None;
    for r in pod.node_selector.keys().chain(
        pod.required_node_affinity
            .iter()
            .flat_map(|t| t.match_expressions.iter().map(|e| &e.key)),
    ) {
        if reqs::normalize(r) == labels::HOSTNAME {
            continue;
        }
        if let Some(why) = labels::restriction(r)
            && reqs::normalize(r) != labels::NODEPOOL
        {
            error = Some(format!("node selector uses a restricted label: {why}"));
        }
    }
    error
}

/// The node selector merged with the first required node-affinity term: the nodes a spread
/// constraint that honours node affinity counts.
fn strict_reqs(node_selector: &Reqs, required_terms: &[Reqs], interner: &mut Interner) -> Reqs {
    let mut r = node_selector.clone();
    if let Some(t) = required_terms.first() {
        r.merge(t, interner);
    }
    r
}

/// The topology spread groups of the pod's constraints, each with whether it is only
/// preferred (`ScheduleAnyway`); `strict` is the node affinity a constraint honouring it
/// counts nodes by.
fn spread_groups(
    pod: &Pod,
    strict: &Reqs,
    interner: &mut Interner,
    g: &mut Groups,
) -> Vec<(usize, bool)> {
    let mut spreads = Vec::new();
    for c in &pod.topology_spread {
        let sel = with_label_keys(&c.label_selector, &pod.labels, &c.match_label_keys, &[]);
        let filter = NodeFilter {
            reqs: (c.node_affinity_policy == InclusionPolicy::Honor).then(|| strict.clone()),
            tolerations: (c.node_taints_policy == InclusionPolicy::Honor)
                .then(|| pod.tolerations.clone()),
        };
        let key = interner.intern(reqs::normalize(&c.topology_key));
        let id = g.group(GroupKey {
            kind: Kind::Spread {
                max_skew: c.max_skew.max(1),
                min_domains: c.min_domains,
            },
            key,
            selector: sel,
            namespaces: Namespaces::Set(vec![pod.namespace.clone()]),
            filter,
        });
        spreads.push((
            id,
            c.when_unsatisfiable == WhenUnsatisfiable::ScheduleAnyway,
        ));
    }
    spreads
}

/// A pod-affinity term's selector, narrowed by its match/mismatch label keys against the
/// pod's own labels, and its interned topology key: the parts a term's group and the inverse
/// group it feeds must agree on.
fn term_selector_and_key(
    pod: &Pod,
    t: &PodAffinityTerm,
    interner: &mut Interner,
) -> (Option<LabelSelector>, u32) {
    let sel = with_label_keys(
        &t.label_selector,
        &pod.labels,
        &t.match_label_keys,
        &t.mismatch_label_keys,
    );
    let key = interner.intern(reqs::normalize(&t.topology_key));
    (sel, key)
}

/// The (anti-)affinity group of one of the pod's pod-affinity terms.
fn term_group(
    s: &Snapshot,
    pod: &Pod,
    kind: Kind,
    t: &PodAffinityTerm,
    interner: &mut Interner,
    g: &mut Groups,
) -> usize {
    let (sel, key) = term_selector_and_key(pod, t, interner);
    g.group(GroupKey {
        kind,
        key,
        selector: sel,
        namespaces: namespaces_of(s, &pod.namespace, t),
        filter: NodeFilter::default(),
    })
}

/// The groups of the pod's preferred (anti-)affinity `terms`, heaviest first (ties in the
/// pod's order).
fn preferred_term_groups(
    s: &Snapshot,
    pod: &Pod,
    kind: Kind,
    terms: &[WeightedPodAffinityTerm],
    interner: &mut Interner,
    g: &mut Groups,
) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..terms.len()).collect();
    idx.sort_by(|&a, &b| terms[b].weight.cmp(&terms[a].weight).then(a.cmp(&b)));
    idx.into_iter()
        .map(|i| term_group(s, pod, kind.clone(), &terms[i].term, interner, g))
        .collect()
}

/// The inverse groups the pod's required anti-affinity terms feed: where pods of other
/// classes that those terms select must stay out.
pub(super) fn inverse_groups(
    s: &Snapshot,
    pod: &Pod,
    interner: &mut Interner,
    g: &mut Groups,
) -> Vec<usize> {
    pod.pod_anti_affinity
        .iter()
        .map(|t| {
            let (sel, key) = term_selector_and_key(pod, t, interner);
            g.inverse(InverseKey {
                key,
                selector: sel,
                namespaces: namespaces_of(s, &pod.namespace, t),
            })
        })
        .collect()
}
