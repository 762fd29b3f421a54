//! The synthetic scheduling benchmark, rebuilt from upstream's description: 400 fake instance
//! types, one NodePool with huge limits, and the "diverse" pod mix (generic, zone-spread,
//! hostname-spread, zone-affinity and hostname-anti-affinity pods) or the preference mix.
//! Randomness comes from a seeded [`Rng`], so every size is reproducible.
//!
//! Not a test fixture: tests build their snapshots with `testkit`; this is the benchmarks' workload.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::labels;
use crate::model::{
    CapacityType, InclusionPolicy, InstanceType, NodePool, Offering, Overhead, Pod,
    PodAffinityTerm, PodTemplate, Snapshot, TopologySpreadConstraint, WeightedNodeSelectorTerm,
    WeightedPodAffinityTerm, WhenUnsatisfiable,
};
use crate::requirements::{NodeSelectorTerm, Requirement};
use crate::resources::{self, Resources};
use crate::rng::Rng;
use crate::selector::LabelSelector;
use crate::time::Timestamp;

/// The seed every benchmark workload is drawn from unless told otherwise.
pub const SEED: u64 = 42;
pub(crate) const ZONES: [&str; 3] = ["test-zone-1", "test-zone-2", "test-zone-3"];
const GI: i64 = 1 << 30;
const MI: i64 = 1 << 20;
const CPUS: [i64; 5] = [100, 250, 500, 1000, 1500];
const MEMS: [i64; 6] = [100, 256, 512, 1024, 2048, 4096];
const LABEL_VALUES: [&str; 7] = ["a", "b", "c", "d", "e", "f", "g"];

/// Upstream's fake catalog: type `i` has `i+1` cpu, `2(i+1)` GiB, `10(i+1)` pods, 100m cpu and
/// 10Mi memory held back, priced `0.1/cpu + 1e-10/byte`, offered as spot in two zones and
/// on-demand in three.
pub(crate) fn instance_types(n: usize) -> Vec<InstanceType> {
    (0..n)
        .map(|i| {
            let cpu = (i as i64 + 1) * 1000;
            let mem = (i as i64 + 1) * 2 * GI;
            let price = (i as f64 + 1.0) * 0.1 + mem as f64 * 1e-10;
            let offer = |zone: &str, ct| Offering {
                zone: zone.to_string(),
                capacity_type: ct,
                price,
                available: true,
                reservation_id: None,
                reservation_capacity: None,
            };
            InstanceType {
                name: format!("fake-it-{i}"),
                requirements: vec![
                    Requirement::single(labels::ARCH, "amd64"),
                    Requirement::single(labels::OS, "linux"),
                ],
                capacity: Resources::new()
                    .with(resources::CPU, cpu)
                    .with(resources::MEMORY, mem)
                    .with(resources::PODS, (i as i64 + 1) * 10),
                overhead: Overhead {
                    kube_reserved: Resources::new()
                        .with(resources::CPU, 100)
                        .with(resources::MEMORY, 10 * MI),
                    ..Overhead::default()
                },
                offerings: vec![
                    offer(ZONES[0], CapacityType::Spot),
                    offer(ZONES[1], CapacityType::Spot),
                    offer(ZONES[0], CapacityType::OnDemand),
                    offer(ZONES[1], CapacityType::OnDemand),
                    offer(ZONES[2], CapacityType::OnDemand),
                ],
            }
        })
        .collect()
}

fn labels_of(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut m: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    m.insert("testing/cluster".into(), "unspecified".into());
    m
}

fn selector(k: &str, v: &str) -> Option<LabelSelector> {
    let mut s = LabelSelector::default();
    s.match_labels.insert(k.into(), v.into());
    Some(s)
}

fn base_pod(rng: &mut Rng, i: usize, labels: BTreeMap<String, String>) -> Pod {
    let cpu = *rng.pick(&CPUS);
    let mem = *rng.pick(&MEMS) * MI;
    Pod {
        namespace: "default".into(),
        name: format!("bench-{i:06}"),
        uid: format!("00000000-0000-4000-8000-{i:012}"),
        creation_timestamp: Timestamp(1_767_225_600_000 + i as i64 * 1000),
        template: Arc::new(PodTemplate {
            labels,
            requests: Resources::new()
                .with(resources::CPU, cpu)
                .with(resources::MEMORY, mem)
                .with(resources::PODS, 1),
            ..PodTemplate::default()
        }),
        ..Pod::default()
    }
}

fn spread(key: &str, value: &str) -> TopologySpreadConstraint {
    TopologySpreadConstraint {
        max_skew: 1,
        topology_key: key.into(),
        when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
        label_selector: selector("my-label", value),
        min_domains: None,
        node_affinity_policy: InclusionPolicy::Honor,
        node_taints_policy: InclusionPolicy::Ignore,
        match_label_keys: vec![],
    }
}

fn term(key: &str, sel: Option<LabelSelector>) -> PodAffinityTerm {
    PodAffinityTerm {
        label_selector: sel,
        namespaces: vec![],
        namespace_selector: None,
        topology_key: key.into(),
        match_label_keys: vec![],
        mismatch_label_keys: vec![],
    }
}

/// Upstream's `makeDiversePods(n)`: five equal slices, the remainder generic.
pub fn diverse_pods(n: usize, rng: &mut Rng) -> Vec<Pod> {
    let slice = n / 5;
    let mut pods = Vec::with_capacity(n);
    let mut i = 0;
    let mut next = |rng: &mut Rng, kind: usize, pods: &mut Vec<Pod>| {
        let pod = match kind {
            1 => {
                let l = *rng.pick(&LABEL_VALUES);
                let mut p = base_pod(rng, i, labels_of(&[("my-label", l)]));
                let sel = *rng.pick(&LABEL_VALUES);
                p.topology_spread.push(spread(labels::ZONE, sel));
                p
            }
            2 => {
                let l = *rng.pick(&LABEL_VALUES);
                let mut p = base_pod(rng, i, labels_of(&[("my-label", l)]));
                let sel = *rng.pick(&LABEL_VALUES);
                p.topology_spread.push(spread(labels::HOSTNAME, sel));
                p
            }
            3 => {
                let v = *rng.pick(&LABEL_VALUES);
                let mut p = base_pod(rng, i, labels_of(&[("my-affininity", v)]));
                p.pod_affinity
                    .push(term(labels::ZONE, selector("my-affininity", v)));
                p
            }
            4 => {
                let mut p = base_pod(rng, i, labels_of(&[("app", "nginx")]));
                p.pod_anti_affinity
                    .push(term(labels::HOSTNAME, selector("app", "nginx")));
                p
            }
            _ => {
                let l = *rng.pick(&LABEL_VALUES);
                base_pod(rng, i, labels_of(&[("my-label", l)]))
            }
        };
        pods.push(pod);
        i += 1;
    };
    for kind in 0..5 {
        for _ in 0..slice {
            next(rng, kind, &mut pods);
        }
    }
    while pods.len() < n {
        next(rng, 0, &mut pods);
    }
    pods
}

/// Upstream's preference benchmark pods: `app=nginx`, preferring zone 1, preferring to avoid
/// each other per zone (weight 10) and per host (weight 1).
pub fn preference_pods(n: usize, rng: &mut Rng) -> Vec<Pod> {
    (0..n)
        .map(|i| {
            let mut p = base_pod(rng, i, labels_of(&[("app", "nginx")]));
            p.preferred_node_affinity.push(WeightedNodeSelectorTerm {
                weight: 1,
                term: NodeSelectorTerm {
                    match_expressions: vec![Requirement::single(labels::ZONE, ZONES[0])],
                },
            });
            p.preferred_pod_anti_affinity.push(WeightedPodAffinityTerm {
                weight: 10,
                term: term(labels::ZONE, selector("app", "nginx")),
            });
            p.preferred_pod_anti_affinity.push(WeightedPodAffinityTerm {
                weight: 1,
                term: term(labels::HOSTNAME, selector("app", "nginx")),
            });
            p
        })
        .collect()
}

/// The benchmark's NodePool: no requirements, limits of 10M cpu and 10M Gi of memory.
pub(crate) fn nodepool() -> NodePool {
    NodePool {
        name: "default".into(),
        limits: Resources::new()
            .with(resources::CPU, 10_000_000 * 1000)
            .with(resources::MEMORY, 10_000_000 * GI),
        ready: true,
        ..NodePool::default()
    }
}

/// A complete benchmark snapshot.
pub fn snapshot(pods: Vec<Pod>, instance_type_count: usize) -> Snapshot {
    let np = nodepool();
    let mut s = Snapshot {
        pods: pods.into_iter().map(Arc::new).collect(),
        ..Snapshot::default()
    };
    s.instance_types.insert(
        np.name.clone(),
        Arc::new(instance_types(instance_type_count)),
    );
    s.nodepools.push(np);
    s
}

/// Adds `n` registered nodes (8 cpu, 16 GiB, spread over the zones) of the benchmark NodePool,
/// each running one pod that leaves 1 cpu and 2 GiB free: a cluster the new pods must look at
/// before launching anything.
pub fn add_existing_nodes(s: &mut Snapshot, n: usize) {
    for i in 0..n {
        let name = format!("node-{i:05}");
        let mut node_labels = BTreeMap::new();
        node_labels.insert(labels::ZONE.to_string(), ZONES[i % 3].to_string());
        node_labels.insert(labels::HOSTNAME.to_string(), name.clone());
        node_labels.insert(labels::NODEPOOL.to_string(), "default".to_string());
        node_labels.insert(labels::INSTANCE_TYPE.to_string(), "fake-it-7".to_string());
        node_labels.insert(labels::CAPACITY_TYPE.to_string(), "on-demand".to_string());
        node_labels.insert(labels::INITIALIZED.to_string(), "true".to_string());
        let alloc = Resources::new()
            .with(resources::CPU, 8000)
            .with(resources::MEMORY, 16 * GI)
            .with(resources::PODS, 80);
        s.nodes.push(Arc::new(crate::model::Node {
            name: name.clone(),
            labels: node_labels,
            capacity: alloc.clone(),
            allocatable: alloc,
            ready: true,
            ..crate::model::Node::default()
        }));
        s.pods.push(Arc::new(Pod {
            namespace: "default".into(),
            name: format!("running-{i:05}"),
            uid: format!("running-{i:05}"),
            node_name: Some(name),
            phase: crate::model::PodPhase::Running,
            template: Arc::new(PodTemplate {
                labels: labels_of(&[("my-label", LABEL_VALUES[i % LABEL_VALUES.len()])]),
                requests: Resources::new()
                    .with(resources::CPU, 7000)
                    .with(resources::MEMORY, 14 * GI)
                    .with(resources::PODS, 1),
                ..PodTemplate::default()
            }),
            ..Pod::default()
        }));
    }
}

/// Upstream's sizes.
pub const SIZES: [usize; 9] = [1, 50, 100, 500, 1000, 2000, 5000, 10000, 20000];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_is_seeded_and_uniform_enough() {
        let mut a = Rng::new(SEED);
        let mut b = Rng::new(SEED);
        let xs: Vec<usize> = (0..1000).map(|_| a.below(7)).collect();
        let ys: Vec<usize> = (0..1000).map(|_| b.below(7)).collect();
        assert_eq!(xs, ys);
        for v in 0..7 {
            let n = xs.iter().filter(|&&x| x == v).count();
            assert!((90..200).contains(&n), "value {v} drawn {n} times");
        }
    }

    #[test]
    fn diverse_mix_has_five_slices() {
        let pods = diverse_pods(103, &mut Rng::new(SEED));
        assert_eq!(pods.len(), 103);
        assert_eq!(
            pods.iter()
                .filter(|p| !p.topology_spread.is_empty())
                .count(),
            40
        );
        assert_eq!(
            pods.iter().filter(|p| !p.pod_affinity.is_empty()).count(),
            20
        );
        assert_eq!(
            pods.iter()
                .filter(|p| !p.pod_anti_affinity.is_empty())
                .count(),
            20
        );
        let it = &instance_types(400)[0];
        assert_eq!(it.allocatable().get("cpu"), 900);
        assert!((it.offerings[0].price - 0.3147483648).abs() < 1e-12);
    }
}
