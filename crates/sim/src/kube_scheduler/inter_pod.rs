//! The kube-scheduler's inter-pod affinity filter, for one pod: where its required pod
//! affinity terms let it go, and where its own and the bound pods' required anti-affinity
//! terms keep it out.
//!
//! A term names a topology key; the pods it selects put the domains (values of that key) of
//! their nodes off limits (anti-affinity) or make them the only ones allowed (affinity). A
//! pod whose affinity term selects no pod anywhere may still go where it likes when the term
//! selects the pod itself: it is the first of its group. A node without the key is outside
//! every domain: an anti-affinity term never excludes it, an affinity term always does.

use std::collections::{BTreeMap, BTreeSet};

use nodewright_core::model::{Node, Pod, PodAffinityTerm};
use nodewright_core::scheduling::term_selects;

use crate::cluster::Cluster;

/// Per topology key, domains a node must be in (`within`, one set per affinity term) or must
/// not be in (`outside`).
#[derive(Debug, Default)]
pub(super) struct InterPod {
    within: Vec<(String, BTreeSet<String>)>,
    outside: Vec<(String, BTreeSet<String>)>,
}

impl InterPod {
    /// What the bound pods of `cluster` allow for `pod`.
    pub(super) fn of(cluster: &Cluster, pod: &Pod) -> InterPod {
        let mut out = InterPod::default();
        if pod.pod_affinity.is_empty()
            && pod.pod_anti_affinity.is_empty()
            && cluster.anti_affine_pods().next().is_none()
        {
            return out;
        }
        let namespaces = &cluster.last_view().namespaces;
        // Every live node's labels by node name: a bound pod's domains are its node's.
        let labels: BTreeMap<&str, &BTreeMap<String, String>> = cluster
            .claims()
            .values()
            .filter(|c| c.is_live())
            .filter_map(|c| c.node.as_ref())
            .map(|n| (n.name.as_str(), &n.labels))
            .collect();
        let domain = |q: &Pod, key: &str| -> Option<String> {
            labels.get(q.node_name.as_deref()?)?.get(key).cloned()
        };
        let others = || cluster.pods().values().filter(|q| is_other_bound(q, pod));
        let selected = |term: &PodAffinityTerm| -> (bool, BTreeSet<String>) {
            let mut any = false;
            let mut domains = BTreeSet::new();
            for q in others().filter(|q| term_selects(term, pod, q, namespaces)) {
                any = true;
                domains.extend(domain(q, &term.topology_key));
            }
            (any, domains)
        };
        for term in &pod.pod_affinity {
            let (any, domains) = selected(term);
            if !any && term_selects(term, pod, pod, namespaces) {
                continue;
            }
            out.within.push((term.topology_key.clone(), domains));
        }
        for term in &pod.pod_anti_affinity {
            let (_, domains) = selected(term);
            out.outside.push((term.topology_key.clone(), domains));
        }
        for q in cluster
            .anti_affine_pods()
            .filter(|q| is_other_bound(q, pod))
        {
            for term in &q.pod_anti_affinity {
                if term_selects(term, q, pod, namespaces)
                    && let Some(d) = domain(q, &term.topology_key)
                {
                    out.outside
                        .push((term.topology_key.clone(), BTreeSet::from([d])));
                }
            }
        }
        out
    }

    /// Why `node` breaks a term, or `None` when every term allows it.
    pub(super) fn unfit(&self, node: &Node) -> Option<String> {
        for (key, domains) in &self.within {
            if !node.labels.get(key).is_some_and(|v| domains.contains(v)) {
                return Some(format!("required pod affinity on {key} is not met"));
            }
        }
        for (key, domains) in &self.outside {
            if node.labels.get(key).is_some_and(|v| domains.contains(v)) {
                return Some(format!("required pod anti-affinity on {key}"));
            }
        }
        None
    }
}

/// A pod other than `pod`, bound to a node and still running there.
fn is_other_bound(q: &Pod, pod: &Pod) -> bool {
    q.node_name.is_some()
        && !q.is_terminal()
        && (q.namespace != pod.namespace || q.name != pod.name)
}
