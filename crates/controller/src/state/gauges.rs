//! The periodic gauges upstream derives from its cluster state (`karpenter_nodes_*`,
//! `karpenter_pods_state`, `karpenter_nodepools_usage`/`_limit`) and the pod startup and
//! bound durations, computed from the index. Values are in upstream's units: CPU in cores,
//! memory and storage in bytes, everything else as counts.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use nodewright_core::labels;
use nodewright_core::resources::{CPU, NODES, Resources};

use super::{ClusterState, convert, provisionable};
use crate::clock::from_time;
use crate::metrics::{Metrics, NodeGauge, PodGauge};

fn amounts(r: &Resources) -> BTreeMap<String, f64> {
    r.iter()
        .map(|(k, v)| {
            let value = if k == CPU {
                v as f64 / 1000.0
            } else {
                v as f64
            };
            (k.to_string(), value)
        })
        .collect()
}

fn pod_requests(p: &Pod) -> Resources {
    nodewright_api::workload::pod_from_api(p)
        .map(|p| p.requests)
        .unwrap_or_default()
}

/// Summed container limits (the `karpenter_nodes_total_pod_limits` input).
fn pod_limits(p: &Pod) -> Resources {
    let mut sum = Resources::new();
    for c in p.spec.iter().flat_map(|s| s.containers.iter()) {
        for (k, q) in c
            .resources
            .as_ref()
            .and_then(|r| r.limits.as_ref())
            .into_iter()
            .flatten()
        {
            if let Ok(v) = nodewright_api::quantity::parse_resource(k, &q.0) {
                sum.set(k, sum.get(k) + v);
            }
        }
    }
    sum
}

fn owned_by_daemonset(p: &Pod) -> bool {
    p.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.kind == "DaemonSet")
}

fn condition_true(p: &Pod, type_: &str) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == type_ && c.status == "True")
}

/// One gauge row per Node.
pub fn node_gauges(s: &ClusterState) -> Vec<NodeGauge> {
    s.nodes
        .values()
        .map(|n| {
            let name = n.metadata.name.clone().unwrap_or_default();
            let l = n.metadata.labels.clone().unwrap_or_default();
            let label = |k: &str| l.get(k).cloned().unwrap_or_default();
            let allocatable = convert::node(n).map(|n| n.allocatable).unwrap_or_default();
            let (mut requests, mut limits, mut daemon) =
                (Resources::new(), Resources::new(), Resources::new());
            for p in s.pods_on(&name) {
                let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
                if matches!(phase, Some("Succeeded" | "Failed")) {
                    continue;
                }
                let r = pod_requests(p);
                requests.add(&r);
                limits.add(&pod_limits(p));
                if owned_by_daemonset(p) {
                    daemon.add(&r);
                }
            }
            NodeGauge {
                node_name: name,
                nodepool: label(labels::NODEPOOL),
                zone: label(labels::ZONE),
                instance_type: label(labels::INSTANCE_TYPE),
                capacity_type: label(labels::CAPACITY_TYPE),
                arch: label(labels::ARCH),
                allocatable: amounts(&allocatable),
                pod_requests: amounts(&requests),
                pod_limits: amounts(&limits),
                daemon_requests: amounts(&daemon),
            }
        })
        .collect()
}

/// One `karpenter_pods_state` row per pod.
pub fn pod_gauges(s: &ClusterState) -> Vec<PodGauge> {
    s.pods
        .values()
        .map(|p| {
            let node = p
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_default();
            let nl = s
                .nodes
                .get(&node)
                .and_then(|n| n.metadata.labels.clone())
                .unwrap_or_default();
            let label = |k: &str| nl.get(k).cloned().unwrap_or_default();
            PodGauge {
                name: p.metadata.name.clone().unwrap_or_default(),
                namespace: p.metadata.namespace.clone().unwrap_or_default(),
                owner: p
                    .metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .find(|o| o.controller == Some(true))
                    .map(|o| format!("{}/{}", o.kind, o.name))
                    .unwrap_or_default(),
                scheduled: !node.is_empty(),
                node,
                nodepool: label(labels::NODEPOOL),
                zone: label(labels::ZONE),
                instance_type: label(labels::INSTANCE_TYPE),
                capacity_type: label(labels::CAPACITY_TYPE),
                phase: p
                    .status
                    .as_ref()
                    .and_then(|s| s.phase.clone())
                    .unwrap_or_default(),
                ready: condition_true(p, "Ready"),
            }
        })
        .collect()
}

/// Sets every NodePool's usage (what its claims hold) and its limits.
pub fn set_nodepools(s: &ClusterState, metrics: &Metrics) {
    for (name, pool) in &s.nodepools {
        let mut used = Resources::new();
        let mut nodes = 0;
        for c in s.all_claims().filter(|c| {
            c.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(labels::NODEPOOL))
                == Some(name)
        }) {
            if c.metadata.deletion_timestamp.is_some() {
                continue;
            }
            nodes += 1;
            used.add(
                &convert::resources(c.status.as_ref().and_then(|s| s.capacity.as_ref()))
                    .unwrap_or_default(),
            );
        }
        used.set(NODES, nodes);
        for (k, v) in amounts(&used) {
            metrics.nodepool_usage(name, &k, v);
        }
        let limits = convert::resources(pool.spec.limits.as_ref()).unwrap_or_default();
        for (k, v) in amounts(&limits) {
            metrics.nodepool_limit(name, &k, v);
        }
    }
}

/// Observes each pod's startup (creation → Ready) and bind (creation → PodScheduled) once,
/// for pods this controller saw pending: the pods it provisioned for, not the ones that were
/// already running when it started.
#[derive(Debug, Default)]
pub struct PodStartup {
    /// Pod keys seen provisionable; the value says whether the bind was observed.
    pending: BTreeMap<String, bool>,
}

impl PodStartup {
    pub fn observe(&mut self, s: &ClusterState, metrics: &Metrics) {
        let mut done = BTreeSet::new();
        for (key, p) in &s.pods {
            if provisionable(p) {
                self.pending.entry(key.clone()).or_insert(false);
                continue;
            }
            let Some(bound_seen) = self.pending.get_mut(key) else {
                continue;
            };
            let Some(created) = p.metadata.creation_timestamp.as_ref().map(from_time) else {
                continue;
            };
            let since = |type_: &str| {
                p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .into_iter()
                    .flatten()
                    .find(|c| c.type_ == type_ && c.status == "True")
                    .and_then(|c| c.last_transition_time.as_ref())
                    .map(from_time)
            };
            if !*bound_seen && let Some(t) = since("PodScheduled") {
                metrics.pod_bound(t.since(created).as_secs_f64());
                *bound_seen = true;
            }
            if let Some(t) = since("Ready") {
                metrics.pod_startup(t.since(created).as_secs_f64());
                done.insert(key.clone());
            }
        }
        self.pending
            .retain(|k, _| !done.contains(k) && s.pods.contains_key(k));
    }
}

/// Every periodic gauge at once.
pub fn set_all(s: &ClusterState, metrics: &Metrics) {
    metrics.cluster_state(s.synced(), s.nodes.len());
    metrics.set_nodes(&node_gauges(s));
    metrics.set_pods(&pod_gauges(s));
    set_nodepools(s, metrics);
}
