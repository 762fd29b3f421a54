//! Workloads that look like real clusters, on the embedded us-east-1 catalog (AL2023
//! allocatable, three zones, synthetic spot prices): Deployments of service-sized pods with
//! zone spreads, hostname anti-affinity, arm64 and GPU requests, DaemonSets, existing nodes,
//! weighted NodePools, limits and `minValues`. Each is generated from a seed, so a run is
//! reproducible and nothing is hand-picked.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::Context;
use nodewright_aws_model::{AmiFamily, NodeClassInput, Settings, SpotPrices, Zone};
use nodewright_core::labels::{self, aws};
use nodewright_core::model::{
    DaemonSet, InclusionPolicy, InstanceType, Node, NodePool, OwnerRef, Pod, PodAffinityTerm,
    PodPhase, PodTemplate, Snapshot, TopologySpreadConstraint, WhenUnsatisfiable,
};
use nodewright_core::requirements::{Operator, Requirement};
use nodewright_core::resources::{self, Resources};
use nodewright_core::rng::Rng;
use nodewright_core::selector::LabelSelector;
use nodewright_core::taints::{Taint, TaintEffect, Toleration, TolerationOperator};

const REGION: &str = "us-east-1";
const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];
const MI: i64 = 1 << 20;
const GPU: &str = nodewright_aws_model::resources::NVIDIA_GPU;

/// Pod shapes (cpu millicores, memory MiB) of typical services, small ones more often.
const SHAPES: [(i64, i64); 14] = [
    (100, 128),
    (250, 256),
    (250, 512),
    (250, 1024),
    (500, 512),
    (500, 1024),
    (500, 4096),
    (1000, 1024),
    (1000, 2048),
    (1000, 8192),
    (1500, 3072),
    (2000, 4096),
    (2000, 16384),
    (4000, 8192),
];

/// What one generated cluster holds besides its NodePools.
#[derive(Clone, Debug, Default)]
struct Mix {
    pods: usize,
    /// Shares of Deployments with each constraint.
    zone_spread: f64,
    anti_affinity: f64,
    arm64: f64,
    gpu: f64,
    daemonsets: bool,
    existing_nodes: usize,
}

/// One generated workload: its name and snapshot.
pub struct Workload {
    pub name: String,
    pub snapshot: Snapshot,
}

/// The embedded catalog as an AL2023 NodeClass over three us-east-1 zones lists it, keeping
/// the types that name their category, generation and family (the NodePools select on them).
pub fn catalog() -> anyhow::Result<Arc<Vec<InstanceType>>> {
    let catalog =
        nodewright_aws_model::catalog::embedded().context("loading the embedded AWS catalog")?;
    let zones: Vec<Zone> = ZONES.iter().map(|z| Zone::new(z)).collect();
    let all = catalog.instance_types(
        REGION,
        &zones,
        &Settings::default(),
        &NodeClassInput::new(AmiFamily::AL2023),
        &SpotPrices::synthetic(),
    );
    let named = |it: &InstanceType, key: &str| {
        it.requirements
            .iter()
            .any(|r| r.key == key && r.operator == Operator::In && r.values.len() == 1)
    };
    Ok(Arc::new(
        all.into_iter()
            .filter(|it| {
                [
                    aws::INSTANCE_CATEGORY,
                    aws::INSTANCE_GENERATION,
                    aws::INSTANCE_FAMILY,
                ]
                .iter()
                .all(|k| named(it, k))
            })
            .collect(),
    ))
}

fn req(key: &str, op: Operator, values: &[&str]) -> Requirement {
    Requirement::new(key, op, values)
}

fn pool(name: &str, weight: i32, requirements: Vec<Requirement>) -> NodePool {
    let mut np = NodePool {
        name: name.into(),
        weight,
        ready: true,
        ..NodePool::default()
    };
    np.template.requirements = requirements;
    np
}

fn cmr_gen3(capacity_types: &[&str]) -> Vec<Requirement> {
    vec![
        req(aws::INSTANCE_CATEGORY, Operator::In, &["c", "m", "r"]),
        req(aws::INSTANCE_GENERATION, Operator::Gt, &["2"]),
        req(labels::CAPACITY_TYPE, Operator::In, capacity_types),
    ]
}

const OD: &[&str] = &["on-demand"];
const SPOT_OD: &[&str] = &["spot", "on-demand"];

/// One workload to generate: its name, its NodePools and what its cluster holds.
type Spec = (&'static str, Vec<NodePool>, Mix);

/// The real-catalog set: every workload at the given seed.
pub fn all(catalog: &Arc<Vec<InstanceType>>, seed: u64) -> Vec<Workload> {
    let specs: Vec<Spec> = pod_constraint_specs()
        .into_iter()
        .chain(pool_feature_specs())
        .collect();
    specs
        .into_iter()
        .enumerate()
        .map(|(i, (name, pools, mix))| Workload {
            name: name.to_string(),
            snapshot: build(catalog, pools, &mix, seed.wrapping_add(i as u64)),
        })
        .collect()
}

/// A mix of `pods` pods with those shares of zone-spread and anti-affinity Deployments.
fn mix(pods: usize, zone_spread: f64, anti_affinity: f64) -> Mix {
    Mix {
        pods,
        zone_spread,
        anti_affinity,
        ..Mix::default()
    }
}

/// The workloads on one default NodePool that differ in their pods' constraints: zone
/// spreads, anti-affinity, arm64, DaemonSets, capacity types and instance families.
fn pod_constraint_specs() -> Vec<Spec> {
    let amd64 = || req(labels::ARCH, Operator::In, &["amd64"]);
    vec![
        (
            "od-cmr-services-3000",
            vec![pool("default", 0, {
                let mut r = cmr_gen3(OD);
                r.push(amd64());
                r
            })],
            mix(3000, 0.3, 0.0),
        ),
        (
            "spot-od-cmr-services-2000",
            vec![pool("default", 0, cmr_gen3(SPOT_OD))],
            mix(2000, 0.3, 0.1),
        ),
        (
            "od-all-families-1500",
            vec![pool(
                "default",
                0,
                vec![req(labels::CAPACITY_TYPE, Operator::In, OD)],
            )],
            Mix {
                daemonsets: true,
                ..mix(1500, 0.2, 0.05)
            },
        ),
        (
            "spot-od-all-families-1500",
            vec![pool(
                "default",
                0,
                vec![req(labels::CAPACITY_TYPE, Operator::In, SPOT_OD)],
            )],
            mix(1500, 0.0, 0.0),
        ),
        (
            "od-cmr-zone-spread-all-1200",
            vec![pool("default", 0, cmr_gen3(OD))],
            Mix {
                daemonsets: true,
                ..mix(1200, 1.0, 0.0)
            },
        ),
        (
            "od-cmr-anti-affinity-800",
            vec![pool("default", 0, cmr_gen3(OD))],
            mix(800, 0.2, 0.6),
        ),
        (
            "spot-od-arm64-mixed-2000",
            vec![pool("default", 0, cmr_gen3(SPOT_OD))],
            Mix {
                arm64: 0.4,
                daemonsets: true,
                ..mix(2000, 0.3, 0.05)
            },
        ),
    ]
}

/// The workloads that exercise NodePool and cluster features: a tainted GPU pool, existing
/// nodes, weighted pools with limits, `minValues`, and a limit the pods outgrow.
fn pool_feature_specs() -> Vec<Spec> {
    let mut families = cmr_gen3(SPOT_OD);
    families.push(Requirement {
        min_values: Some(5),
        ..req(aws::INSTANCE_FAMILY, Operator::Exists, &[])
    });
    let mut limited = pool("default", 0, cmr_gen3(OD));
    limited.limits = Resources::new().with(resources::CPU, 1_200_000);
    vec![
        (
            "od-gpu-and-services-600",
            vec![gpu_pool(), pool("default", 0, cmr_gen3(OD))],
            Mix {
                gpu: 0.15,
                daemonsets: true,
                ..mix(600, 0.2, 0.0)
            },
        ),
        (
            "od-cmr-existing-nodes-1500",
            vec![pool("default", 0, cmr_gen3(OD))],
            Mix {
                existing_nodes: 60,
                daemonsets: true,
                ..mix(1500, 0.3, 0.05)
            },
        ),
        (
            "weighted-pools-limits-2500",
            weighted_pools(),
            Mix {
                daemonsets: true,
                ..mix(2500, 0.3, 0.0)
            },
        ),
        (
            "spot-od-min-values-1000",
            vec![pool("default", 0, families)],
            mix(1000, 0.3, 0.0),
        ),
        (
            "od-cmr-limit-small-400",
            vec![limited],
            Mix {
                daemonsets: true,
                ..mix(400, 0.5, 0.1)
            },
        ),
    ]
}

/// An on-demand pool of GPU instances, tainted so that only pods that tolerate it land there.
fn gpu_pool() -> NodePool {
    let mut gpu_pool = pool(
        "gpu",
        10,
        vec![
            req(aws::INSTANCE_CATEGORY, Operator::In, &["g"]),
            req(labels::CAPACITY_TYPE, Operator::In, OD),
        ],
    );
    gpu_pool.template.taints.push(Taint {
        key: GPU.into(),
        value: "true".into(),
        effect: TaintEffect::NoSchedule,
    });
    gpu_pool
}

/// Spot compute-optimized first, then on-demand general purpose, each up to a cpu limit,
/// then an unweighted fallback.
fn weighted_pools() -> Vec<NodePool> {
    let mut spot_c = pool("spot-compute", 50, {
        let mut r = cmr_gen3(&["spot"]);
        r[0] = req(aws::INSTANCE_CATEGORY, Operator::In, &["c"]);
        r
    });
    spot_c.limits = Resources::new().with(resources::CPU, 256_000);
    let mut od_m = pool("general", 20, {
        let mut r = cmr_gen3(OD);
        r[0] = req(aws::INSTANCE_CATEGORY, Operator::In, &["m"]);
        r
    });
    od_m.limits = Resources::new().with(resources::CPU, 512_000);
    vec![spot_c, od_m, pool("fallback", 0, cmr_gen3(OD))]
}

fn build(catalog: &Arc<Vec<InstanceType>>, pools: Vec<NodePool>, mix: &Mix, seed: u64) -> Snapshot {
    let mut rng = Rng::new(seed);
    let mut s = Snapshot::default();
    for np in &pools {
        s.instance_types.insert(np.name.clone(), catalog.clone());
    }
    s.nodepools = pools;
    if mix.daemonsets {
        s.daemonsets = daemonsets();
    }
    add_existing_nodes(&mut s, catalog, mix.existing_nodes, &mut rng);
    let mut d = 0;
    let pending = s.pods.len();
    while s.pods.len() - pending < mix.pods {
        let left = mix.pods - (s.pods.len() - pending);
        let replicas = replicas(&mut rng).min(left);
        s.pods.extend(
            deployment(&format!("app-{d:03}"), replicas, mix, &mut rng)
                .into_iter()
                .map(Arc::new),
        );
        d += 1;
    }
    s
}

/// Replica counts of a long-tailed fleet: mostly a handful, sometimes dozens.
fn replicas(rng: &mut Rng) -> usize {
    match rng.below(10) {
        0..=4 => 2 + rng.below(5),
        5..=7 => 8 + rng.below(17),
        _ => 30 + rng.below(60),
    }
}

fn selector(app: &str) -> Option<LabelSelector> {
    let mut s = LabelSelector::default();
    s.match_labels.insert("app".into(), app.into());
    Some(s)
}

fn deployment(app: &str, replicas: usize, mix: &Mix, rng: &mut Rng) -> Vec<Pod> {
    let gpu = (rng.below(1000) as f64) < mix.gpu * 1000.0;
    let (cpu, mem) = if gpu {
        (3000, 12 * 1024)
    } else {
        *rng.pick(&SHAPES)
    };
    let zone_spread = (rng.below(1000) as f64) < mix.zone_spread * 1000.0;
    let anti = (rng.below(1000) as f64) < mix.anti_affinity * 1000.0;
    let arm = !gpu && (rng.below(1000) as f64) < mix.arm64 * 1000.0;
    let mut template = Pod {
        namespace: "apps".into(),
        template: Arc::new(PodTemplate {
            labels: [("app".to_string(), app.to_string())].into(),
            owner: Some(OwnerRef {
                kind: "ReplicaSet".into(),
                name: format!("{app}-5d8f7"),
                controller: true,
            }),
            requests: Resources::new()
                .with(resources::CPU, cpu)
                .with(resources::MEMORY, mem * MI)
                .with(resources::PODS, 1),
            ..PodTemplate::default()
        }),
        ..Pod::default()
    };
    if gpu {
        template.requests.set(GPU, 1);
        template.tolerations.push(Toleration {
            key: GPU.into(),
            operator: TolerationOperator::Exists,
            value: String::new(),
            effect: Some(TaintEffect::NoSchedule),
        });
    }
    if arm {
        template
            .node_selector
            .insert(labels::ARCH.into(), "arm64".into());
    }
    if zone_spread {
        template.topology_spread.push(TopologySpreadConstraint {
            max_skew: 1,
            topology_key: labels::ZONE.into(),
            when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
            label_selector: selector(app),
            min_domains: None,
            node_affinity_policy: InclusionPolicy::Honor,
            node_taints_policy: InclusionPolicy::Ignore,
            match_label_keys: vec![],
        });
    }
    if anti {
        template.pod_anti_affinity.push(PodAffinityTerm {
            label_selector: selector(app),
            namespaces: vec![],
            namespace_selector: None,
            topology_key: labels::HOSTNAME.into(),
            match_label_keys: vec![],
            mismatch_label_keys: vec![],
        });
    }
    (0..replicas)
        .map(|i| {
            let mut p = template.clone();
            p.name = format!("{app}-5d8f7-{i:04}");
            p.uid = format!("{app}-{i:04}");
            p
        })
        .collect()
}

/// A CNI agent, kube-proxy and a log shipper on every node.
fn daemonsets() -> Vec<DaemonSet> {
    [
        ("aws-node", 50, 128),
        ("kube-proxy", 100, 64),
        ("fluent-bit", 200, 256),
    ]
    .into_iter()
    .map(|(name, cpu, mem)| {
        let pod = Pod {
            namespace: "kube-system".into(),
            name: name.into(),
            template: Arc::new(PodTemplate {
                labels: [("app".to_string(), name.to_string())].into(),
                requests: Resources::new()
                    .with(resources::CPU, cpu)
                    .with(resources::MEMORY, mem * MI)
                    .with(resources::PODS, 1),
                tolerations: vec![Toleration {
                    key: String::new(),
                    operator: TolerationOperator::Exists,
                    value: String::new(),
                    effect: None,
                }],
                ..PodTemplate::default()
            }),
            ..Pod::default()
        };
        DaemonSet {
            namespace: "kube-system".into(),
            name: name.into(),
            pod,
        }
    })
    .collect()
}

/// `n` running m6i.2xlarge and m6i.4xlarge nodes of the first NodePool, spread over the
/// zones, each between half and nine-tenths full.
fn add_existing_nodes(s: &mut Snapshot, catalog: &[InstanceType], n: usize, rng: &mut Rng) {
    let pool = s.nodepools[0].name.clone();
    for i in 0..n {
        let type_name = if i % 3 == 0 {
            "m6i.4xlarge"
        } else {
            "m6i.2xlarge"
        };
        let Some(it) = catalog.iter().find(|it| it.name == type_name) else {
            continue;
        };
        let name = format!("ip-10-0-{}-{}.ec2.internal", i / 250, i % 250);
        let mut node_labels: BTreeMap<String, String> = it
            .requirements
            .iter()
            .filter(|r| r.operator == Operator::In && r.values.len() == 1)
            .map(|r| (r.key.clone(), r.values[0].clone()))
            .collect();
        node_labels.insert(labels::ZONE.into(), ZONES[i % 3].into());
        node_labels.insert(labels::HOSTNAME.into(), name.clone());
        node_labels.insert(labels::NODEPOOL.into(), pool.clone());
        node_labels.insert(labels::CAPACITY_TYPE.into(), "on-demand".into());
        node_labels.insert(labels::INITIALIZED.into(), "true".into());
        node_labels.insert(labels::REGISTERED.into(), "true".into());
        let alloc = it.allocatable();
        s.nodes.push(Arc::new(Node {
            name: name.clone(),
            labels: node_labels,
            capacity: it.capacity.clone(),
            allocatable: alloc.clone(),
            ready: true,
            ..Node::default()
        }));
        let share = 50 + rng.below(41) as i64;
        s.pods.push(Arc::new(Pod {
            namespace: "apps".into(),
            name: format!("running-{i:04}"),
            uid: format!("running-{i:04}"),
            node_name: Some(name),
            phase: PodPhase::Running,
            template: Arc::new(PodTemplate {
                labels: [("app".to_string(), format!("legacy-{}", i % 7))].into(),
                requests: Resources::new()
                    .with(resources::CPU, alloc.get(resources::CPU) * share / 100)
                    .with(
                        resources::MEMORY,
                        alloc.get(resources::MEMORY) * share / 100,
                    )
                    .with(resources::PODS, 1),
                ..PodTemplate::default()
            }),
            ..Pod::default()
        }));
    }
}
