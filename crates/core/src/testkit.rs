//! Builders of core's types for tests: offerings and instance types, a catalog in three zones,
//! NodePools, pods, nodes and snapshots, the selectors and terms pods carry, and readers of a
//! plan; [`cluster`] is the small disruption cluster.
//!
//! Compiled for core's own tests and, through the `testkit` feature, for the tests of every
//! crate above core (`nodewright-core = { workspace = true, features = ["testkit"] }` under
//! `[dev-dependencies]`). It lives here rather than in `crates/testkit` because core's unit
//! tests cannot use a crate that depends on core: that crate would see a second copy of core,
//! whose types are not these. `crates/testkit` holds the Kubernetes side (objects as JSON).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::labels;
use crate::model::*;
use crate::requirements::{NodeSelectorTerm, Operator, Requirement};
use crate::resources::{self, Resources};
use crate::scheduling::{self, Options, Plan, Target};
use crate::selector::LabelSelector;
use crate::taints::{Taint, TaintEffect, Toleration, TolerationOperator};

pub mod cluster;

/// One GiB, in bytes.
pub const GI: i64 = 1 << 30;
/// The zones [`catalog`] offers every type in.
pub const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];

/// An available offering of `capacity_type` in `zone` at `price`, not a reservation.
pub fn offering(zone: &str, capacity_type: CapacityType, price: f64) -> Offering {
    Offering {
        zone: zone.into(),
        capacity_type,
        price,
        available: true,
        reservation_id: None,
        reservation_capacity: None,
    }
}

/// An instance type of `capacity` with no requirements and no overhead.
pub fn instance_type(name: &str, capacity: Resources, offerings: Vec<Offering>) -> InstanceType {
    InstanceType {
        name: name.into(),
        requirements: vec![],
        capacity,
        overhead: Overhead::default(),
        offerings,
    }
}

/// `n` types: type `i` has `2(i+1)` cpu and `4(i+1)` GiB, priced `0.1/cpu`, on-demand and
/// spot in every zone, with a `family` label alternating `small`/`large`.
pub fn catalog(n: usize) -> Vec<InstanceType> {
    (0..n)
        .map(|i| {
            let k = i as i64 + 1;
            let price = 0.2 * k as f64;
            let mut offerings = Vec::new();
            for z in ZONES {
                for ct in [CapacityType::OnDemand, CapacityType::Spot] {
                    let p = if ct == CapacityType::Spot {
                        price * 0.5
                    } else {
                        price
                    };
                    offerings.push(offering(z, ct, p));
                }
            }
            InstanceType {
                name: format!("it-{i}"),
                requirements: vec![
                    Requirement::single(labels::ARCH, "amd64"),
                    Requirement::single(labels::OS, "linux"),
                    Requirement::single(
                        "example.com/family",
                        if i % 2 == 0 { "small" } else { "large" },
                    ),
                    Requirement::single(labels::aws::INSTANCE_CPU, &(2 * k).to_string()),
                ],
                capacity: Resources::new()
                    .with(resources::CPU, 2000 * k)
                    .with(resources::MEMORY, 4 * GI * k)
                    .with(resources::PODS, 20 * k),
                overhead: Overhead::default(),
                offerings,
            }
        })
        .collect()
}

/// A ready NodePool with the defaults: no requirements, the default disruption block.
pub fn pool(name: &str) -> NodePool {
    NodePool {
        name: name.into(),
        ready: true,
        ..NodePool::default()
    }
}

/// A ready NodePool whose one budget lets every node be disrupted at once.
pub fn disruptable(name: &str) -> NodePool {
    let mut p = pool(name);
    p.disruption.budgets = vec![Budget {
        nodes: BudgetNodes::Percent(100),
        schedule: None,
        duration: None,
        reasons: vec![],
    }];
    p
}

/// A snapshot of `pools`, each offering all of `its`, with `pods` and nothing else.
pub fn snapshot(pools: Vec<NodePool>, its: Vec<InstanceType>, pods: Vec<Pod>) -> Snapshot {
    let its = Arc::new(its);
    let mut s = Snapshot {
        pods: pods.into_iter().map(Into::into).collect(),
        ..Snapshot::default()
    };
    for p in &pools {
        s.instance_types.insert(p.name.clone(), its.clone());
    }
    s.nodepools = pools;
    s
}

/// A pending pod `default/<name>` requesting `cpu_m` millicores and `mem_gi` GiB.
pub fn pod(name: &str, cpu_m: i64, mem_gi: i64) -> Pod {
    Pod {
        namespace: "default".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        template: Arc::new(PodTemplate {
            requests: Resources::new()
                .with(resources::CPU, cpu_m)
                .with(resources::MEMORY, mem_gi * GI)
                .with(resources::PODS, 1),
            ..PodTemplate::default()
        }),
        ..Pod::default()
    }
}

/// `n` [`pod`]s named `<prefix>-0` to `<prefix>-<n-1>`.
pub fn pods(prefix: &str, n: usize, cpu_m: i64, mem_gi: i64) -> Vec<Pod> {
    (0..n)
        .map(|i| pod(&format!("{prefix}-{i}"), cpu_m, mem_gi))
        .collect()
}

/// `p` with the label `k=v` added.
pub fn with_label(mut p: Pod, k: &str, v: &str) -> Pod {
    p.labels.insert(k.into(), v.into());
    p
}

/// A selector of the one label `k=v`.
pub fn sel(k: &str, v: &str) -> Option<LabelSelector> {
    let mut s = LabelSelector::default();
    s.match_labels.insert(k.into(), v.into());
    Some(s)
}

/// A pod affinity term over topology `key` selecting `k=v` in the pod's own namespace.
pub fn term(key: &str, k: &str, v: &str) -> PodAffinityTerm {
    PodAffinityTerm {
        label_selector: sel(k, v),
        namespaces: vec![],
        namespace_selector: None,
        topology_key: key.into(),
        match_label_keys: vec![],
        mismatch_label_keys: vec![],
    }
}

/// A `DoNotSchedule` spread over topology `key` with `maxSkew` `skew`, counting pods with
/// `k=v`.
pub fn spread(key: &str, skew: i32, k: &str, v: &str) -> TopologySpreadConstraint {
    TopologySpreadConstraint {
        max_skew: skew,
        topology_key: key.into(),
        when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
        label_selector: sel(k, v),
        min_domains: None,
        node_affinity_policy: InclusionPolicy::Honor,
        node_taints_policy: InclusionPolicy::Ignore,
        match_label_keys: vec![],
    }
}

/// Adds a required node affinity term of `reqs` to `p`.
pub fn required(p: &mut Pod, reqs: Vec<Requirement>) {
    p.required_node_affinity.push(NodeSelectorTerm {
        match_expressions: reqs,
    });
}

/// `key op values`, without `minValues`.
pub fn req(key: &str, op: Operator, values: &[&str]) -> Requirement {
    Requirement::new(key, op, values)
}

/// A `NoSchedule` taint `key=value`.
pub fn taint(key: &str, value: &str) -> Taint {
    Taint::new(key, value, TaintEffect::NoSchedule)
}

/// A toleration of every taint with `key`, whatever its value and effect.
pub fn toleration(key: &str) -> Toleration {
    Toleration {
        key: key.into(),
        operator: TolerationOperator::Exists,
        value: String::new(),
        effect: None,
    }
}

/// A ready node in `zone` with `cpu` cores and `mem` GiB allocatable.
pub fn node(name: &str, zone: &str, cpu: i64, mem_gi: i64) -> Node {
    let mut labels = BTreeMap::new();
    labels.insert(labels::ZONE.to_string(), zone.to_string());
    labels.insert(labels::HOSTNAME.to_string(), name.to_string());
    labels.insert(labels::NODEPOOL.to_string(), "default".to_string());
    labels.insert(labels::INITIALIZED.to_string(), "true".to_string());
    let alloc = Resources::new()
        .with(resources::CPU, cpu * 1000)
        .with(resources::MEMORY, mem_gi * GI)
        .with(resources::PODS, 110);
    Node {
        name: name.into(),
        labels,
        capacity: alloc.clone(),
        allocatable: alloc,
        ready: true,
        ..Node::default()
    }
}

/// `p` bound to `node` and running.
pub fn running(mut p: Pod, node: &str) -> Pod {
    p.node_name = Some(node.into());
    p.phase = PodPhase::Running;
    p
}

/// `p` [`running`] on `node`, Ready, and controlled by the ReplicaSet `rs`: a pod disruption
/// may move.
pub fn replica(p: Pod, node: &str) -> Pod {
    let mut p = running(p, node);
    p.ready = true;
    p.owner = Some(OwnerRef {
        kind: "ReplicaSet".into(),
        name: "rs".into(),
        controller: true,
    });
    p
}

/// [`scheduling::solve`] with the default options.
pub fn solve(s: &Snapshot) -> Plan {
    scheduling::solve(s, &Options::default())
}

/// The new claim a pod was placed on.
pub fn claim_of<'a>(plan: &'a Plan, pod: &str) -> Option<&'a scheduling::NewClaim> {
    let key = format!("default/{pod}");
    plan.placements
        .iter()
        .find(|p| p.pod == key)
        .and_then(|p| match p.target {
            Target::NewClaim(i) => Some(&plan.new_claims[i]),
            _ => None,
        })
}

/// Where the pod `default/<pod>` was placed, if anywhere.
pub fn target_of(plan: &Plan, pod: &str) -> Option<Target> {
    let key = format!("default/{pod}");
    plan.placements
        .iter()
        .find(|p| p.pod == key)
        .map(|p| p.target.clone())
}

/// Why the pod `default/<pod>` was left pending; empty when it was placed.
pub fn reason_of(plan: &Plan, pod: &str) -> String {
    let key = format!("default/{pod}");
    plan.unplaced
        .iter()
        .find(|u| u.pod == key)
        .map(|u| u.reason.clone())
        .unwrap_or_default()
}

/// The zone a claim launches in (its cheapest option's offering).
pub fn zone_of<'a>(plan: &'a Plan, c: &scheduling::NewClaim) -> &'a str {
    plan.zone_of(c.cheapest().expect("claim has options"))
}

/// The instance type a claim launches as (its cheapest option).
pub fn type_of<'a>(plan: &'a Plan, c: &scheduling::NewClaim) -> &'a str {
    plan.name_of(c.cheapest().expect("claim has options"))
}
