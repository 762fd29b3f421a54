//! Building the solver's state from a snapshot: the NodePools ([`pools`]), the existing
//! targets ([`targets`]), the pods to place and their order ([`queue`]), pod classes and the
//! topology groups they bring ([`classes`]), what the pods already running use and count
//! ([`running`]), and the domains a spread may use ([`domains`]). This file holds the state
//! and puts it together ([`build_ordered`], [`complete`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use super::compile::{self, ClassKey, ExistingC, PoolBuild, PoolC, Res, dense};
use super::intern::{FastMap, FastSet, Interner};
use super::reqs::{self, Reqs};
use super::topology::{Group, GroupKey, Inverse, InverseKey, Kind, Namespaces, NodeFilter};
use super::{Compile, NodeCache};
use crate::labels;
use crate::model::{
    InclusionPolicy, NodeClaim, Pod, PodAffinityTerm, PodPhase, Snapshot, WhenUnsatisfiable,
};
use crate::requirements::Requirement;
use crate::resources::Resources;
use crate::selector::{LabelSelector, SelectorOperator, SelectorRequirement};
use crate::taints::{Taint, Toleration};

mod classes;
mod domains;
mod pools;
mod queue;
mod running;
mod targets;
pub(crate) use classes::volume_alternatives;
use classes::{Groups, compile_class, inverse_groups, namespaces_in, with_label_keys};
use domains::{domain_universe, eligible_domains};
pub(crate) use pools::*;
pub(crate) use queue::*;
pub(crate) use running::*;
pub(crate) use targets::*;

/// One set of identical pods.
#[derive(Clone, Debug)]
pub(crate) struct Class {
    pub namespace: String,
    pub labels: BTreeMap<String, String>,
    pub requests: Res,
    pub tolerations: Vec<Toleration>,
    pub host_ports: Vec<crate::model::HostPort>,
    pub node_selector: Reqs,
    /// ORed required node-affinity terms.
    pub required_terms: Vec<Reqs>,
    /// Preferred node-affinity terms, heaviest first.
    pub preferred_terms: Vec<Reqs>,
    /// Volume topology alternatives (one empty set when the pod has no volume constraint).
    pub volume_alternatives: Vec<Reqs>,
    /// (group, ScheduleAnyway)
    pub spreads: Vec<(usize, bool)>,
    pub affinity: Vec<usize>,
    pub preferred_affinity: Vec<usize>,
    pub anti_affinity: Vec<usize>,
    pub preferred_anti_affinity: Vec<usize>,
    /// Inverse groups this class's required anti-affinity terms feed.
    pub owns_inverse: Vec<usize>,
    /// Groups that count pods of this class.
    pub counted_by: Vec<usize>,
    /// Distinct topology keys of `counted_by`.
    pub counted_keys: Vec<u32>,
    /// Inverse groups whose owners keep this class out of their domains.
    pub blocked_by: Vec<usize>,
    /// Pod indices, in queue order.
    pub pods: Vec<usize>,
    pub error: Option<String>,
    /// Its pods ran on nodes being deleted, which [`Options::closed`] nodes still take. Told
    /// apart only in solves that close nodes; otherwise false.
    ///
    /// [`Options::closed`]: super::engine::Options::closed
    pub from_deleting: bool,
}

impl Class {
    /// True when placing one pod can change what the next identical pod may do.
    pub(crate) fn one_at_a_time(&self) -> bool {
        !self.spreads.is_empty()
            || !self.affinity.is_empty()
            || !self.preferred_affinity.is_empty()
            || !self.anti_affinity.is_empty()
            || !self.preferred_anti_affinity.is_empty()
            || !self.owns_inverse.is_empty()
            || !self.host_ports.is_empty()
    }
}

/// The existing targets of one solve: a shared compiled list, or a subset of one (in its
/// order), so many solves over one cluster do not copy it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Existing {
    pub(crate) all: Arc<Vec<ExistingC>>,
    /// Indices into `all` that this solve sees; `None` for all of them.
    pub keep: Option<Vec<u32>>,
}

impl Existing {
    pub(crate) fn new(all: Vec<ExistingC>) -> Self {
        Existing {
            all: Arc::new(all),
            keep: None,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.keep.as_ref().map_or(self.all.len(), |k| k.len())
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &ExistingC> + '_ {
        (0..self.len()).map(move |i| &self[i])
    }
}

impl std::ops::Index<usize> for Existing {
    type Output = ExistingC;

    fn index(&self, i: usize) -> &ExistingC {
        match &self.keep {
            None => &self.all[i],
            Some(k) => &self.all[k[i] as usize],
        }
    }
}

/// Plan-wide instance-type ids: names sorted, and per NodePool the id of each of its types.
#[derive(Debug, Default)]
pub(crate) struct TypeNames {
    pub names: Arc<Vec<String>>,
    pub pool_ids: Vec<Vec<u32>>,
}

pub(crate) fn type_names(pools: &[PoolC]) -> Arc<TypeNames> {
    let mut ids: BTreeMap<&str, u32> = BTreeMap::new();
    for p in pools {
        for it in p.its.iter() {
            ids.entry(it.name.as_str()).or_insert(0);
        }
    }
    for (i, v) in ids.values_mut().enumerate() {
        *v = i as u32;
    }
    Arc::new(TypeNames {
        names: Arc::new(ids.keys().map(|k| k.to_string()).collect()),
        pool_ids: pools
            .iter()
            .map(|p| p.its.iter().map(|it| ids[it.name.as_str()]).collect())
            .collect(),
    })
}

/// A value per existing target (usage, host ports) shared with the compiled cluster and copied
/// on first write, so a solve over a masked cluster copies only the targets it fills.
#[derive(Clone, Debug, Default)]
pub(crate) struct PerTarget<T> {
    base: Arc<Vec<T>>,
    /// Indices into `base` this solve sees, as in [`Existing::keep`].
    keep: Option<Vec<u32>>,
    written: HashMap<usize, T>,
}

impl<T: Clone> PerTarget<T> {
    pub(crate) fn new(all: Vec<T>) -> Self {
        PerTarget {
            base: Arc::new(all),
            keep: None,
            written: HashMap::new(),
        }
    }

    /// The same values, seen through `keep`; nothing is copied.
    pub(crate) fn subset(&self, keep: Vec<u32>) -> Self {
        PerTarget {
            base: self.base.clone(),
            keep: Some(keep),
            written: HashMap::new(),
        }
    }

    fn at(&self, i: usize) -> usize {
        self.keep.as_ref().map_or(i, |k| k[i] as usize)
    }

    pub(crate) fn get_mut(&mut self, i: usize) -> &mut T {
        if self.keep.is_none() && self.written.is_empty() && Arc::get_mut(&mut self.base).is_some()
        {
            return &mut Arc::get_mut(&mut self.base).expect("unique")[i];
        }
        let j = self.at(i);
        let base = &self.base;
        self.written.entry(i).or_insert_with(|| base[j].clone())
    }
}

impl<T: Clone> std::ops::Index<usize> for PerTarget<T> {
    type Output = T;

    fn index(&self, i: usize) -> &T {
        if !self.written.is_empty()
            && let Some(v) = self.written.get(&i)
        {
            return v;
        }
        &self.base[self.at(i)]
    }
}

pub(crate) struct World {
    pub(crate) interner: Interner,
    pub(crate) names: Interner,
    pub(crate) pools: Vec<PoolC>,
    pub(crate) type_names: Arc<TypeNames>,
    pub(crate) existing: Existing,
    pub(crate) existing_used: PerTarget<Res>,
    pub(crate) existing_ports: PerTarget<Vec<crate::model::HostPort>>,
    pub groups: Vec<Group>,
    pub(crate) inverse: Vec<Inverse>,
    pub classes: Vec<Class>,
    /// Classes in queue order.
    pub order: Vec<usize>,
    /// Keys a pod may require on a new claim even when the NodePool does not define them.
    pub allow_undefined: Vec<bool>,
    /// Domain values each topology key can take on new claims, with the NodePool offering them.
    pub universe: HashMap<u32, Vec<(u32, usize)>>,
    pub hostname: u32,
    pub zone: u32,
    pub capacity_type: u32,
    pub pods_considered: usize,
    pub any_prefer_no_schedule: bool,
    /// The existing targets by free cpu, when the caller already has them sorted.
    pub(crate) room: Option<super::engine::room::RoomBase>,
}

/// Builds the solver's state for the snapshot's pending pods (and those on deleting nodes),
/// compiled as `compile` says (the result is the same), for a solve that closes nodes (see
/// [`Class::from_deleting`]) when `closes`, the pods taken in the order `cmp` gives.
pub(crate) fn build_ordered(
    s: &Snapshot,
    compile: Compile<'_>,
    closes: bool,
    cmp: fn(&Pod, &Pod) -> std::cmp::Ordering,
) -> World {
    let mut t = targets_with(s, compile);
    let schedule = pods_to_schedule_by(s, cmp);
    let rescheduled: BTreeSet<usize> = schedule.iter().copied().collect();
    let running = usage(s, &mut t, &rescheduled);
    let sched: Vec<(usize, &Pod)> = schedule.iter().map(|&i| (i, &*s.pods[i])).collect();
    let all = || {
        label_sets(s, &running)
            .iter()
            .map(|set| set.iter().map(|&(pi, ei)| (&*s.pods[pi], ei)).collect())
            .collect()
    };
    let running = Running {
        all: &all,
        with_anti_affinity: running
            .iter()
            .map(|&(pi, ei)| (&*s.pods[pi], ei))
            .filter(|(p, _)| !p.pod_anti_affinity.is_empty())
            .collect(),
    };
    complete(s, t, &sched, &running, closes)
}

/// Whether `owner`'s pod affinity term `term` selects `other`: `other` is in a namespace the
/// term names (a namespace selector read against the labels in `namespaces`), and its labels
/// match the term's selector with `matchLabelKeys` and `mismatchLabelKeys` filled in from
/// `owner`'s labels, as the compiled groups count pods. A term without a selector selects
/// nothing.
pub fn term_selects(
    term: &crate::model::PodAffinityTerm,
    owner: &Pod,
    other: &Pod,
    namespaces: &BTreeMap<String, BTreeMap<String, String>>,
) -> bool {
    namespaces_in(namespaces, &owner.namespace, term).contains(&other.namespace)
        && with_label_keys(
            &term.label_selector,
            &owner.labels,
            &term.match_label_keys,
            &term.mismatch_label_keys,
        )
        .is_some_and(|sel| sel.matches(&other.labels))
}

/// Finishes the state for `schedule` (`(index, pod)`, in queue order; the index is what
/// placements name) with `running` pods (`(pod, existing index)`) counted for topology.
pub(crate) fn complete<'p>(
    s: &Snapshot,
    t: Targets,
    schedule: &[(usize, &'p Pod)],
    running: &Running<'p, '_>,
    closes: bool,
) -> World {
    let Targets {
        names,
        mut interner,
        mut pools,
        allow_undefined,
        existing,
        existing_used,
        existing_ports,
        hostname,
        zone,
        capacity_type,
        pool_used,
        type_names: known_type_names,
        ..
    } = t;
    charge_existing(&mut pools, pool_used, &existing, &interner);
    let mut g = Groups {
        groups: Vec::new(),
        ids: HashMap::new(),
        inverse: Vec::new(),
        inverse_ids: HashMap::new(),
    };
    let (mut classes, order) = classes_of(s, schedule, closes, &names, &mut interner, &mut g);
    // Running pods' required anti-affinity keeps matching pods away.
    for &(p, _) in &running.with_anti_affinity {
        inverse_groups(s, p, &mut interner, &mut g);
    }
    for c in classes.iter_mut() {
        c.counted_by = (0..g.groups.len())
            .filter(|&i| g.groups[i].matches(&c.namespace, &c.labels))
            .collect();
        c.blocked_by = (0..g.inverse.len())
            .filter(|&i| g.inverse[i].blocks(&c.namespace, &c.labels))
            .collect();
    }
    let universe = domain_universe(&pools, &g, &interner);
    eligible_domains(&mut g, &universe, &pools, &existing, &interner, hostname);
    if !g.groups.is_empty() {
        count_in_groups(&(running.all)(), &existing, &interner, &mut g);
    }
    count_in_inverse(
        s,
        &running.with_anti_affinity,
        &existing,
        &mut interner,
        &mut g,
    );
    let order = queue_order(order, &classes, &pools, &g, hostname);
    let any_prefer_no_schedule = pools.iter().any(|p| p.has_prefer_no_schedule);
    let type_names = known_type_names.unwrap_or_else(|| type_names(&pools));
    World {
        interner,
        names,
        type_names,
        pools,
        existing,
        existing_used,
        existing_ports,
        groups: g.groups,
        inverse: g.inverse,
        classes,
        order,
        allow_undefined,
        universe,
        hostname,
        zone,
        capacity_type,
        pods_considered: schedule.len(),
        any_prefer_no_schedule,
        room: None,
    }
}

/// The classes of the pods to schedule (identical pods share one), with the topology groups
/// they bring, and the classes in the order their first pods come.
fn classes_of(
    s: &Snapshot,
    schedule: &[(usize, &Pod)],
    closes: bool,
    names: &Interner,
    interner: &mut Interner,
    g: &mut Groups,
) -> (Vec<Class>, Vec<usize>) {
    let mut classes: Vec<Class> = Vec::new();
    let mut class_ids: HashMap<(ClassKey, bool), usize> = HashMap::new();
    let mut order: Vec<usize> = Vec::new();
    for &(pi, pod) in schedule {
        let (vols, vol_err) = match volume_alternatives(s, pod) {
            Ok(v) => (v, None),
            Err(e) => (vec![], Some(e)),
        };
        // A pod still bound to a node here is one of a deleting node's.
        let from_deleting = closes && pod.node_name.is_some();
        let key = (ClassKey::of(pod, vols.clone()), from_deleting);
        if let Some(&ci) = class_ids.get(&key) {
            classes[ci].pods.push(pi);
            continue;
        }
        let ci = classes.len();
        class_ids.insert(key, ci);
        order.push(ci);
        let mut class = compile_class(s, pod, &vols, names, interner, g);
        class.error = vol_err.or(class.error);
        class.from_deleting = from_deleting;
        class.pods.push(pi);
        classes.push(class);
    }
    (classes, order)
}

/// The first taint that keeps this pod off a node. PreferNoSchedule taints count too until
/// relaxation tolerates them, as Karpenter does.
pub(crate) fn untolerated<'a>(
    tolerations: &[Toleration],
    taints: &'a [crate::taints::Taint],
    prefer_no_schedule_tolerated: bool,
) -> Option<&'a crate::taints::Taint> {
    taints.iter().find(|t| {
        let waived = prefer_no_schedule_tolerated
            && t.effect == crate::taints::TaintEffect::PreferNoSchedule;
        !waived && !tolerations.iter().any(|tol| tol.tolerates(t))
    })
}
