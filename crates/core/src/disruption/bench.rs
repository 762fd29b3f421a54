//! Generated clusters for the consolidation benchmark: `nodes` initialized nodes of the
//! synthetic catalog's types, `pods` generic pods spread over them at random, so many nodes are
//! partly empty, as after a scale-down. Deterministic for a seed.
//!
//! Not a test fixture: tests build their snapshots with `testkit`.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::bench::{instance_types, nodepool};
use crate::labels;
use crate::model::{
    CapacityType, InclusionPolicy, Node, NodeClaim, OwnerRef, Pod, PodPhase, PodTemplate, Snapshot,
    TopologySpreadConstraint, WhenUnsatisfiable,
};
use crate::resources::{CPU, MEMORY, PODS, Resources};
use crate::rng::Rng;
use crate::selector::LabelSelector;
use crate::time::Timestamp;

const MI: i64 = 1 << 20;
const ZONES: [&str; 3] = ["test-zone-1", "test-zone-2", "test-zone-3"];

/// A cluster of `nodes` nodes running `pods` pods (fewer if they do not all fit).
pub fn cluster(nodes: usize, pods: usize, seed: u64) -> Snapshot {
    let mut rng = Rng::new(seed);
    let its = instance_types(400);
    let pool = nodepool();
    let now = Timestamp(1_800_000_000_000);
    let mut s = Snapshot {
        now,
        ..Snapshot::default()
    };
    let mut free: Vec<Resources> = Vec::with_capacity(nodes);
    for i in 0..nodes {
        // 4, 8, 16 or 32 cores.
        let it = &its[*rng.pick(&[3usize, 7, 15, 31])];
        let zone = *rng.pick(&ZONES);
        let ct = if rng.below(4) == 0 {
            CapacityType::Spot
        } else {
            CapacityType::OnDemand
        };
        let name = format!("node-{i:05}");
        let node_labels: BTreeMap<String, String> = [
            (labels::NODEPOOL, pool.name.as_str()),
            (labels::INSTANCE_TYPE, it.name.as_str()),
            (labels::ZONE, zone),
            (labels::CAPACITY_TYPE, ct.as_str()),
            (labels::ARCH, "amd64"),
            (labels::OS, "linux"),
            (labels::HOSTNAME, name.as_str()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        free.push(it.allocatable());
        s.nodes.push(Arc::new(Node {
            name: name.clone(),
            provider_id: format!("bench:///{zone}/{name}"),
            labels: node_labels,
            capacity: it.capacity.clone(),
            allocatable: it.allocatable(),
            ready: true,
            creation_timestamp: now,
            ..Node::default()
        }));
        s.node_claims.push(Arc::new(NodeClaim {
            name: format!("default-{i:05}"),
            nodepool: pool.name.clone(),
            provider_id: Some(format!("bench:///{zone}/{name}")),
            node_name: Some(name),
            capacity: it.capacity.clone(),
            allocatable: it.allocatable(),
            launched: true,
            registered: true,
            initialized: true,
            creation_timestamp: now,
            initialized_at: Some(now),
            ..NodeClaim::default()
        }));
    }
    for j in 0..pods {
        let cpu = *rng.pick(&[100i64, 250, 500, 1000, 1500]);
        let mem = *rng.pick(&[100i64, 256, 512, 1024, 2048, 4096]) * MI;
        let requests = Resources::new()
            .with(CPU, cpu)
            .with(MEMORY, mem)
            .with(PODS, 1);
        let start = rng.below(nodes.max(1));
        let Some(slot) = (0..nodes)
            .map(|k| (start + k) % nodes)
            .find(|&k| requests.fits_in(&free[k]))
        else {
            continue;
        };
        free[slot].sub(&requests);
        let app = format!("app-{}", j % 50);
        s.pods.push(Arc::new(Pod {
            namespace: "default".into(),
            name: format!("pod-{j:06}"),
            uid: format!("00000000-0000-4000-9000-{j:012}"),
            node_name: Some(s.nodes[slot].name.clone()),
            phase: PodPhase::Running,
            ready: true,
            creation_timestamp: now,
            start_time: Some(now),
            template: Arc::new(PodTemplate {
                labels: [("app".to_string(), app.clone())].into_iter().collect(),
                owner: Some(OwnerRef {
                    kind: "ReplicaSet".into(),
                    name: app,
                    controller: true,
                }),
                requests,
                ..PodTemplate::default()
            }),
            ..Pod::default()
        }));
    }
    s.instance_types.insert(pool.name.clone(), Arc::new(its));
    s.nodepools.push(pool);
    s
}

/// `s` with a zone topology spread (`maxSkew: 1`, `DoNotSchedule`, selecting its app) on the
/// pods of `percent` of the 50 apps, as Deployments spread over zones have: every
/// consolidation candidate that runs one of their pods then counts the running pods per zone.
pub fn with_zone_spread(mut s: Snapshot, percent: usize) -> Snapshot {
    for p in s.pods.iter_mut().map(Arc::make_mut) {
        let Some(app) = p.labels.get("app").cloned() else {
            continue;
        };
        let n: usize = app.trim_start_matches("app-").parse().unwrap_or(usize::MAX);
        if n.saturating_mul(2) < percent {
            p.topology_spread.push(TopologySpreadConstraint {
                max_skew: 1,
                topology_key: labels::ZONE.into(),
                when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
                label_selector: Some(LabelSelector {
                    match_labels: [("app".to_string(), app)].into_iter().collect(),
                    match_expressions: vec![],
                }),
                min_domains: None,
                node_affinity_policy: InclusionPolicy::Honor,
                node_taints_policy: InclusionPolicy::Ignore,
                match_label_keys: vec![],
            });
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_clusters_are_deterministic_and_fit() {
        let a = cluster(20, 150, 7);
        let b = cluster(20, 150, 7);
        assert_eq!(a.pods, b.pods);
        assert_eq!(a.nodes.len(), 20);
        for n in &a.nodes {
            let mut used = Resources::new();
            for p in a
                .pods
                .iter()
                .filter(|p| p.node_name.as_deref() == Some(n.name.as_str()))
            {
                used.add(&p.requests);
            }
            assert!(used.fits_in(&n.allocatable), "{} overcommitted", n.name);
        }
    }
}
