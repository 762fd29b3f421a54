//! A small cluster for disruption tests: one NodePool (budget 100%) of a `large` (4 cpu,
//! $0.40/h) and a `small` (2 cpu, $0.20/h) on-demand type, initialized nodes with their
//! claims, and pods owned by a ReplicaSet.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::labels;
use crate::model::{CapacityType, InstanceType, Node, NodeClaim, Snapshot};
use crate::requirements::Requirement;
use crate::resources::{CPU, MEMORY, PODS, Resources};
use crate::testkit::{disruptable, offering, pod, replica};
use crate::time::Timestamp;

/// An instance type offered on demand at `price` in each of `zones`.
pub fn it(name: &str, cpu: i64, price: f64, zones: &[&str]) -> InstanceType {
    InstanceType {
        name: name.into(),
        requirements: vec![
            Requirement::single(labels::INSTANCE_TYPE, name),
            Requirement::single(labels::ARCH, "amd64"),
            Requirement::single(labels::OS, "linux"),
        ],
        capacity: Resources::new()
            .with(CPU, cpu)
            .with(MEMORY, 16 << 30)
            .with(PODS, 110),
        overhead: Default::default(),
        offerings: zones
            .iter()
            .map(|z| offering(z, CapacityType::OnDemand, price))
            .collect(),
    }
}

/// The labels of a `default` NodePool node of type `ty` in zone `a`.
pub fn node_labels(name: &str, ty: &str) -> BTreeMap<String, String> {
    [
        (labels::NODEPOOL, "default"),
        (labels::INSTANCE_TYPE, ty),
        (labels::ZONE, "a"),
        (labels::CAPACITY_TYPE, "on-demand"),
        (labels::ARCH, "amd64"),
        (labels::OS, "linux"),
        (labels::HOSTNAME, name),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// `(node, type, pod cpu requests)` per node, the types offered in `zones`; node `n` has
/// claim `c-n`, provider id `p-n` and pods `n-0`, `n-1`, ...
pub fn cluster(zones: &[&str], nodes: &[(&str, &str, &[i64])]) -> Snapshot {
    let its = vec![it("large", 4000, 0.4, zones), it("small", 2000, 0.2, zones)];
    let mut s = Snapshot {
        now: Timestamp(1_000_000),
        nodepools: vec![disruptable("default")],
        instance_types: [("default".to_string(), Arc::new(its.clone()))]
            .into_iter()
            .collect(),
        ..Snapshot::default()
    };
    for (name, ty, pods) in nodes {
        let t = its.iter().find(|i| i.name == *ty).expect("a fixture type");
        s.nodes.push(Arc::new(Node {
            name: name.to_string(),
            provider_id: format!("p-{name}"),
            labels: node_labels(name, ty),
            capacity: t.capacity.clone(),
            allocatable: t.allocatable(),
            ready: true,
            ..Node::default()
        }));
        s.node_claims.push(Arc::new(NodeClaim {
            name: format!("c-{name}"),
            nodepool: "default".into(),
            node_name: Some(name.to_string()),
            provider_id: Some(format!("p-{name}")),
            launched: true,
            registered: true,
            initialized: true,
            ..NodeClaim::default()
        }));
        for (i, cpu) in pods.iter().enumerate() {
            let pod = pod(&format!("{name}-{i}"), *cpu, 1);
            s.pods.push(replica(pod, name).into());
        }
    }
    s
}
