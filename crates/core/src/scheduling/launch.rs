//! Turning a plan into cluster state: every new claim becomes an initialized node running the
//! pods placed on it. Used to build realistic clusters for simulation and benchmarks.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{Plan, Target};
use crate::labels;
use crate::model::{Node, NodeClaim, PodPhase, Snapshot};
use crate::requirements::Operator;
use crate::time::Timestamp;

/// The snapshot after launching `plan`'s claims (named `<prefix>-<n>`) on their cheapest
/// option and binding every placed pod. Unplaced pods stay pending.
pub fn launch(snapshot: &Snapshot, plan: &Plan, prefix: &str, now: Timestamp) -> Snapshot {
    let mut s = snapshot.clone();
    let mut names = Vec::with_capacity(plan.new_claims.len());
    for (i, claim) in plan.new_claims.iter().enumerate() {
        let name = format!("{prefix}-{i}");
        names.push(name.clone());
        let Some(choice) = claim.cheapest() else {
            continue;
        };
        let it = s
            .instance_types
            .get(&claim.nodepool)
            .and_then(|its| its.iter().find(|it| it.name == plan.name_of(choice)))
            .cloned();
        let Some(it) = it else { continue };
        let mut node_labels: BTreeMap<String, String> = it
            .requirements
            .iter()
            .filter(|r| r.operator == Operator::In && r.values.len() == 1)
            .map(|r| (r.key.clone(), r.values[0].clone()))
            .collect();
        for (k, v) in [
            (labels::INSTANCE_TYPE, plan.name_of(choice)),
            (labels::ZONE, plan.zone_of(choice)),
            (labels::CAPACITY_TYPE, choice.capacity_type.as_str()),
            (labels::NODEPOOL, claim.nodepool.as_str()),
            (labels::HOSTNAME, name.as_str()),
        ] {
            node_labels.insert(k.to_string(), v.to_string());
        }
        if let Some(np) = s.nodepools.iter().find(|p| p.name == claim.nodepool) {
            for (k, v) in &np.template.labels {
                node_labels.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        let taints = s
            .nodepools
            .iter()
            .find(|p| p.name == claim.nodepool)
            .map(|p| p.template.taints.clone())
            .unwrap_or_default();
        s.nodes.push(Arc::new(Node {
            name: name.clone(),
            provider_id: format!("sim:///{}/{name}", plan.zone_of(choice)),
            labels: node_labels,
            taints,
            capacity: it.capacity.clone(),
            allocatable: it.allocatable(),
            ready: true,
            creation_timestamp: now,
            ..Node::default()
        }));
        s.node_claims.push(Arc::new(NodeClaim {
            name: name.clone(),
            nodepool: claim.nodepool.clone(),
            requirements: claim.requirement_list.clone(),
            requests: claim.requests.clone(),
            provider_id: Some(format!("sim:///{}/{name}", plan.zone_of(choice))),
            node_name: Some(name.clone()),
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
    let node_of: BTreeMap<&str, String> = plan
        .placements
        .iter()
        .map(|p| {
            let node = match &p.target {
                Target::Node(n) | Target::InFlight(n) => n.clone(),
                Target::NewClaim(i) => names[*i].clone(),
            };
            (p.pod.as_str(), node)
        })
        .collect();
    for pod in &mut s.pods {
        if pod.node_name.is_none()
            && let Some(node) = node_of.get(pod.key().as_str())
        {
            let pod = Arc::make_mut(pod);
            pod.node_name = Some(node.clone());
            pod.phase = PodPhase::Running;
            pod.ready = true;
            pod.start_time = Some(now);
        }
    }
    s
}
