//! PodDisruptionBudgets as the cluster keeps them: the manifest is read and checked by
//! `nodewright_api::cluster::pdb`, and `status.disruptionsAllowed` is recomputed from the live
//! pods the way Kubernetes' disruption controller does, whenever the Eviction API or a
//! disruption decision asks.
//!
//! The controller's rules: a pod is healthy when it is Ready and not terminating; the expected
//! count is the pods' controllers' replica counts for `maxUnavailable` and percentage
//! `minAvailable`, and the number of selected pods for an integer `minAvailable`; percentages
//! round up; `disruptionsAllowed = max(0, healthy - desired)`.

use k8s_openapi::api::policy::v1 as policy;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use nodewright_core::model::{Pod, PodDisruptionBudget, UnhealthyPodEvictionPolicy};

use crate::cluster::Cluster;

/// A budget as applied: the manifest, and its core form (selector, unhealthy-pod policy).
#[derive(Clone, Debug)]
pub struct SimPdb {
    pub manifest: policy::PodDisruptionBudget,
    pub budget: PodDisruptionBudget,
}

/// What the disruption controller would write in the budget's status now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PdbStatus {
    pub expected: i32,
    pub healthy: i32,
    pub desired: i32,
    pub allowed: i32,
}

impl SimPdb {
    /// Reads a manifest; the error is a field path and reason.
    pub fn new(mut manifest: policy::PodDisruptionBudget) -> Result<Self, String> {
        // The status is the simulated controller's to write.
        manifest.status = None;
        let spec = manifest.spec.clone().unwrap_or_default();
        if spec.min_available.is_some() && spec.max_unavailable.is_some() {
            return Err("spec: minAvailable and maxUnavailable cannot both be set".into());
        }
        if spec.selector.is_none() {
            return Err("spec.selector: required (a budget without one selects no pod)".into());
        }
        let budget = nodewright_api::cluster::pdb(&manifest, &[]).map_err(|e| e.to_string())?;
        Ok(SimPdb { manifest, budget })
    }

    pub fn namespace(&self) -> &str {
        &self.budget.namespace
    }

    pub fn name(&self) -> &str {
        &self.budget.name
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.budget.namespace, self.budget.name)
    }

    pub fn selects(&self, pod: &Pod) -> bool {
        pod.namespace == self.budget.namespace
            && self
                .budget
                .selector
                .as_ref()
                .is_some_and(|s| s.matches(&pod.labels))
    }

    /// The status over the cluster's current pods.
    pub fn status(&self, cluster: &Cluster) -> PdbStatus {
        let spec = self.manifest.spec.clone().unwrap_or_default();
        let selected: Vec<&Pod> = cluster
            .pods()
            .values()
            .filter(|p| !p.is_terminal() && self.selects(p))
            .map(|p| &**p)
            .collect();
        let healthy = selected
            .iter()
            .filter(|p| p.ready && p.node_name.is_some() && p.deletion_timestamp.is_none())
            .count() as i32;
        let scale = || controller_scale(cluster, &selected);
        let (expected, desired) = match (&spec.max_unavailable, &spec.min_available) {
            (Some(m), _) => {
                let expected = scale();
                (expected, (expected - scaled(m, expected)).max(0))
            }
            (None, Some(IntOrString::Int(n))) => (selected.len() as i32, *n),
            (None, Some(m)) => {
                let expected = scale();
                (expected, scaled(m, expected))
            }
            (None, None) => {
                let expected = selected.len() as i32;
                (expected, expected)
            }
        };
        PdbStatus {
            expected,
            healthy,
            desired,
            allowed: (healthy - desired).max(0),
        }
    }

    /// The core budget with its status filled in, for a decision's snapshot.
    pub fn observed(&self, cluster: &Cluster) -> PodDisruptionBudget {
        PodDisruptionBudget {
            disruptions_allowed: self.status(cluster).allowed,
            ..self.budget.clone()
        }
    }

    /// Whether the Eviction API lets `pod` go now under this budget alone.
    pub fn allows_eviction(&self, cluster: &Cluster, pod: &Pod) -> bool {
        let unhealthy_exempt = self.budget.unhealthy_pod_eviction_policy
            == UnhealthyPodEvictionPolicy::AlwaysAllow
            && !pod.ready;
        unhealthy_exempt || self.status(cluster).allowed > 0
    }
}

/// The summed replica counts of the selected pods' controllers; a pod without a workload the
/// cluster runs counts for itself.
fn controller_scale(cluster: &Cluster, pods: &[&Pod]) -> i32 {
    let mut owners = std::collections::BTreeSet::new();
    let mut loose = 0;
    for p in pods {
        let w = p.owner.as_ref().filter(|o| o.controller).and_then(|o| {
            cluster
                .workloads
                .get(&(p.namespace.clone(), o.name.clone()))
        });
        match w {
            Some(w) => {
                owners.insert((w.namespace.as_str(), w.name.as_str()));
            }
            None => loose += 1,
        }
    }
    let replicas: i64 = owners
        .iter()
        .filter_map(|(ns, n)| cluster.workloads.get(&(ns.to_string(), n.to_string())))
        .map(|w| i64::from(w.wanted()))
        .sum();
    i32::try_from(replicas + loose).unwrap_or(i32::MAX)
}

/// An integer, or a percentage of `total` rounded up (checked when the manifest was read).
fn scaled(v: &IntOrString, total: i32) -> i32 {
    match v {
        IntOrString::Int(i) => *i,
        IntOrString::String(s) => {
            let pct: i64 = s.trim_end_matches('%').parse().unwrap_or(100).clamp(0, 100);
            ((pct * i64::from(total) + 99) / 100) as i32
        }
    }
}
