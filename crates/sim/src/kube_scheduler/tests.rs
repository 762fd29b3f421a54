use std::collections::BTreeMap;
use std::sync::Arc;

use nodewright_core::model::{
    InclusionPolicy, NodeClaim, PodPhase, PodTemplate, TopologySpreadConstraint, WhenUnsatisfiable,
};
use nodewright_core::resources::Resources;
use nodewright_core::selector::LabelSelector;
use nodewright_core::taints::{Taint, TaintEffect};

use super::*;
use crate::cluster::SimClaim;

fn add_node(c: &mut Cluster, name: &str, zone: &str, cpu: i64) {
    let node = Node {
        name: name.into(),
        labels: BTreeMap::from([("topology.kubernetes.io/zone".to_string(), zone.to_string())]),
        allocatable: Resources::new().with(CPU, cpu),
        ready: true,
        ..Node::default()
    };
    c.insert_claim(
        name,
        SimClaim {
            claim: NodeClaim {
                name: name.into(),
                node_name: Some(name.into()),
                ..NodeClaim::default()
            },
            instance: None,
            node: Some(node),
            launched_at: None,
            terminating: None,
            deleted_at: None,
            reason: String::new(),
        },
    );
}

/// Why the pod `key` cannot go on the node of claim `claim`, as [`unfit`] says.
fn why_not(c: &Cluster, key: &str, claim: &str) -> Option<String> {
    let node = c.claims()[claim].node.as_ref().unwrap();
    unfit(c, &c.pods()[key], node)
}

fn pending(c: &mut Cluster, name: &str, cpu: i64) -> String {
    pending_with(c, name, cpu, |_| {})
}

/// [`pending`], the pod changed by `f` before it is added (a pod's affinity terms are
/// fixed when it is created).
fn pending_with(c: &mut Cluster, name: &str, cpu: i64, f: impl FnOnce(&mut Pod)) -> String {
    let mut p = Pod {
        namespace: "d".into(),
        name: name.into(),
        phase: PodPhase::Pending,
        template: Arc::new(PodTemplate {
            labels: BTreeMap::from([("app".to_string(), "web".to_string())]),
            requests: Resources::new().with(CPU, cpu),
            ..PodTemplate::default()
        }),
        ..Pod::default()
    };
    f(&mut p);
    let key = p.key();
    c.insert_pod(p);
    key
}

fn spread(c: &mut Cluster, key: &str, when: WhenUnsatisfiable) {
    c.pod_mut(key)
        .unwrap()
        .topology_spread
        .push(TopologySpreadConstraint {
            max_skew: 1,
            topology_key: "topology.kubernetes.io/zone".into(),
            when_unsatisfiable: when,
            label_selector: Some(LabelSelector {
                match_labels: BTreeMap::from([("app".to_string(), "web".to_string())]),
                ..LabelSelector::default()
            }),
            min_domains: None,
            node_affinity_policy: InclusionPolicy::Honor,
            node_taints_policy: InclusionPolicy::Ignore,
            match_label_keys: vec![],
        });
}

#[test]
fn pods_go_where_they_fit_and_wait_otherwise() {
    let mut c = Cluster::default();
    add_node(&mut c, "small", "a", 1000);
    let fits = pending(&mut c, "fits", 800);
    let big = pending(&mut c, "big", 1500);
    let bound = bind_pending(&mut c, Timestamp(0));
    assert_eq!(bound, vec![(fits, "small".to_string())]);
    assert!(c.pods()[&big].node_name.is_none());
}

#[test]
fn untolerated_taints_keep_pods_off() {
    let mut c = Cluster::default();
    add_node(&mut c, "tainted", "a", 4000);
    c.claim_mut("tainted")
        .unwrap()
        .node
        .as_mut()
        .unwrap()
        .taints = vec![Taint::new("dedicated", "gpu", TaintEffect::NoSchedule)];
    let p = pending(&mut c, "p", 100);
    assert!(bind_pending(&mut c, Timestamp(0)).is_empty());
    assert_eq!(
        why_not(&c, &p, "tainted").as_deref(),
        Some("untolerated taint dedicated")
    );
}

#[test]
fn soft_spread_prefers_the_emptier_zone() {
    let mut c = Cluster::default();
    add_node(&mut c, "a1", "a", 4000);
    add_node(&mut c, "b1", "b", 4000);
    let keys: Vec<String> = (0..4)
        .map(|i| pending(&mut c, &format!("p{i}"), 100))
        .collect();
    for k in &keys {
        spread(&mut c, k, WhenUnsatisfiable::ScheduleAnyway);
    }
    bind_pending(&mut c, Timestamp(0));
    let on_a = c.pods_on("a1").count();
    let on_b = c.pods_on("b1").count();
    assert_eq!((on_a, on_b), (2, 2));
}

#[test]
fn a_pod_with_a_bound_volume_goes_only_to_its_zone() {
    use nodewright_core::model::{PersistentVolume, PersistentVolumeClaim};
    use nodewright_core::requirements::{NodeSelectorTerm, Operator, Requirement};
    let mut c = Cluster::default();
    // The emptier node is in the wrong zone.
    add_node(&mut c, "a1", "a", 2000);
    add_node(&mut c, "b1", "b", 8000);
    let key = pending(&mut c, "db-0", 500);
    c.pod_mut(&key)
        .unwrap()
        .volume_claims
        .push("data-db-0".into());
    c.pvcs.insert(
        ("d".into(), "data-db-0".into()),
        PersistentVolumeClaim {
            namespace: "d".into(),
            name: "data-db-0".into(),
            volume_name: Some("pv".into()),
            storage_class: None,
        },
    );
    c.pvs.insert(
        "pv".into(),
        PersistentVolume {
            name: "pv".into(),
            node_affinity: vec![NodeSelectorTerm {
                match_expressions: vec![Requirement::new(
                    "topology.kubernetes.io/zone",
                    Operator::In,
                    &["a"],
                )],
            }],
            local_or_host_path: false,
        },
    );
    assert_eq!(
        bind_pending(&mut c, Timestamp(0)),
        vec![(key, "a1".to_string())]
    );
}

#[test]
fn hard_spread_refuses_to_exceed_max_skew() {
    let mut c = Cluster::default();
    add_node(&mut c, "a1", "a", 4000);
    add_node(&mut c, "b1", "b", 100);
    let keys: Vec<String> = (0..3)
        .map(|i| pending(&mut c, &format!("p{i}"), 200))
        .collect();
    for k in &keys {
        spread(&mut c, k, WhenUnsatisfiable::DoNotSchedule);
    }
    bind_pending(&mut c, Timestamp(0));
    // Zone b has no room, so zone a may hold only one more than b's zero.
    assert_eq!(c.pods_on("a1").count(), 1);
    assert_eq!(c.pending_pods().len(), 2);
}

/// A required pod (anti-)affinity term on `key` selecting `app=<app>`.
fn term(key: &str, app: &str) -> nodewright_core::model::PodAffinityTerm {
    nodewright_core::model::PodAffinityTerm {
        label_selector: Some(LabelSelector {
            match_labels: BTreeMap::from([("app".to_string(), app.to_string())]),
            ..LabelSelector::default()
        }),
        namespaces: vec![],
        namespace_selector: None,
        topology_key: key.into(),
        match_label_keys: vec![],
        mismatch_label_keys: vec![],
    }
}

const HOST: &str = "kubernetes.io/hostname";
const ZONE: &str = "topology.kubernetes.io/zone";

/// A node `name` in `zone` with its hostname label.
fn host(c: &mut Cluster, name: &str, zone: &str, cpu: i64) {
    add_node(c, name, zone, cpu);
    let node = c.claim_mut(name).unwrap().node.as_mut().unwrap();
    node.labels.insert(HOST.into(), name.into());
}

/// `busy` holds 600m of its 1200m, `roomy` nothing of its 4000m: the emptiest node first
/// puts two 500m pods both on `roomy`.
fn busy_and_roomy(c: &mut Cluster) {
    host(c, "roomy", "a", 4000);
    host(c, "busy", "a", 1200);
    let other = pending_with(c, "other", 600, |p| {
        p.labels = BTreeMap::from([("app".into(), "db".into())]);
    });
    c.bind(&other, "busy", Timestamp(0));
}

#[test]
fn pods_with_hostname_anti_affinity_go_to_different_nodes() {
    let mut c = Cluster::default();
    busy_and_roomy(&mut c);
    let plain: Vec<String> = (0..2)
        .map(|i| pending(&mut c, &format!("plain{i}"), 500))
        .collect();
    let mut apart = Cluster::default();
    busy_and_roomy(&mut apart);
    let anti = |p: &mut Pod| p.pod_anti_affinity = vec![term(HOST, "web")];
    let spaced: Vec<String> = (0..2)
        .map(|i| pending_with(&mut apart, &format!("plain{i}"), 500, anti))
        .collect();
    assert_eq!(spaced, plain);
    assert_eq!(
        bind_pending(&mut c, Timestamp(0)),
        plain
            .iter()
            .map(|k| (k.clone(), "roomy".to_string()))
            .collect::<Vec<_>>(),
        "without the term both go to the emptiest node"
    );
    let bound = bind_pending(&mut apart, Timestamp(0));
    assert_eq!(
        bound,
        vec![
            (plain[0].clone(), "roomy".to_string()),
            (plain[1].clone(), "busy".to_string())
        ]
    );
    // A third cannot go anywhere: both hosts hold a pod it must stay away from.
    let third = pending_with(&mut apart, "third", 100, anti);
    assert!(bind_pending(&mut apart, Timestamp(0)).is_empty());
    assert_eq!(
        why_not(&apart, &third, "roomy").as_deref(),
        Some("required pod anti-affinity on kubernetes.io/hostname")
    );
}

#[test]
fn a_bound_pods_anti_affinity_keeps_the_pods_it_selects_out_of_its_zone() {
    let mut c = Cluster::default();
    host(&mut c, "a1", "a", 4000);
    host(&mut c, "a2", "a", 4000);
    host(&mut c, "b1", "b", 1000);
    let guard = pending_with(&mut c, "guard", 100, |p| {
        p.labels = BTreeMap::from([("app".into(), "guard".into())]);
        p.pod_anti_affinity = vec![term(ZONE, "web")];
    });
    c.bind(&guard, "a1", Timestamp(0));
    // The web pod has no term of its own; the guard's keeps it out of zone a.
    let web = pending(&mut c, "web", 500);
    assert_eq!(
        bind_pending(&mut c, Timestamp(0)),
        vec![(web, "b1".to_string())]
    );
}

#[test]
fn required_affinity_follows_the_pods_it_selects_unless_it_is_the_first() {
    let mut c = Cluster::default();
    busy_and_roomy(&mut c);
    // Affinity to the db pod on busy: the emptier roomy is not allowed.
    let near = pending_with(&mut c, "near", 300, |p| {
        p.pod_affinity = vec![term(HOST, "db")]
    });
    assert_eq!(
        bind_pending(&mut c, Timestamp(0)),
        vec![(near, "busy".to_string())]
    );
    // Affinity to a group no pod belongs to yet: waits, unless the pod is of that group.
    let lonely = pending_with(&mut c, "lonely", 100, |p| {
        p.pod_affinity = vec![term(HOST, "cache")];
    });
    assert!(bind_pending(&mut c, Timestamp(0)).is_empty());
    let first = pending_with(&mut c, "first", 100, |p| {
        p.labels = BTreeMap::from([("app".into(), "cache".into())]);
        p.pod_affinity = vec![term(HOST, "cache")];
    });
    // The first of the group goes to the emptiest node, and the waiting pod, taken after
    // it in the same pass, follows it there.
    assert_eq!(
        bind_pending(&mut c, Timestamp(0)),
        vec![(first, "roomy".to_string()), (lonely, "roomy".to_string())]
    );
}

#[test]
fn a_host_port_is_held_by_one_pod_per_node() {
    let mut c = Cluster::default();
    host(&mut c, "n1", "a", 4000);
    host(&mut c, "n2", "a", 1000);
    let port = |p: &mut Pod| {
        p.host_ports = vec![nodewright_core::model::HostPort {
            port: 8080,
            protocol: "TCP".into(),
            host_ip: String::new(),
        }]
    };
    let keys: Vec<String> = (0..3)
        .map(|i| pending_with(&mut c, &format!("p{i}"), 100, port))
        .collect();
    assert_eq!(
        bind_pending(&mut c, Timestamp(0)),
        vec![
            (keys[0].clone(), "n1".to_string()),
            (keys[1].clone(), "n2".to_string())
        ]
    );
    assert_eq!(
        why_not(&c, &keys[2], "n1").as_deref(),
        Some("host port 8080 is taken")
    );
    // Another port, or the same one over UDP, is free.
    let udp = pending_with(&mut c, "udp", 100, |p| {
        port(p);
        p.host_ports[0].protocol = "UDP".into();
    });
    assert_eq!(
        bind_pending(&mut c, Timestamp(0)),
        vec![(udp, "n1".to_string())]
    );
}

/// Two Ready claims whose nodes share a name both count the name's pods; a tie between
/// them goes to the earlier claim, as a scan in ready order finds it, and a bind lowers
/// only the room of the row it chose for the rest of the pass (the answer the pass gave
/// before it ranked nodes by their room).
#[test]
fn nodes_sharing_a_name_are_ranked_in_ready_order() {
    let mut c = Cluster::default();
    add_node(&mut c, "a", "z", 4000);
    add_node(&mut c, "b", "z", 3000);
    add_node(&mut c, "c", "z", 4000);
    for claim in ["a", "c"] {
        let sc = c.claim_mut(claim).unwrap();
        sc.claim.node_name = Some("shared".into());
        sc.node.as_mut().unwrap().name = "shared".into();
    }
    for i in 0..6 {
        pending(&mut c, &format!("p{i}"), 700);
    }
    let on = ["b", "shared", "shared", "shared", "shared", "b"];
    let want: Vec<(String, String)> = on
        .iter()
        .enumerate()
        .map(|(i, n)| (format!("d/p{i}"), n.to_string()))
        .collect();
    assert_eq!(bind_pending(&mut c, Timestamp(0)), want);
}

/// The pass as first written: every pending pod cloned, every node's free resources summed
/// afresh for each pod. The kept free resources, the ledger's pending keys and the borrowed
/// pods must bind exactly what it binds.
fn bind_pending_plain(cluster: &mut Cluster, now: Timestamp) -> Vec<(String, String)> {
    let mut pending: Vec<Pod> = cluster.pending_pods().into_iter().cloned().collect();
    pending.sort_by(|a, b| {
        b.priority
            .cmp(&a.priority)
            .then(a.creation_timestamp.cmp(&b.creation_timestamp))
            .then(a.key().cmp(&b.key()))
    });
    let mut bound = Vec::new();
    for pod in pending {
        let best = cluster
            .ready_nodes()
            .filter(|(_, n)| unfit(cluster, &pod, n).is_none())
            .min_by_key(|(_, n)| score(cluster, &pod, n, &cluster.free(n)))
            .map(|(_, n)| n.name.clone());
        if let Some(name) = best {
            cluster.bind(&pod.key(), &name, now);
            bound.push((pod.key(), name));
        }
    }
    bound
}

#[derive(Clone, Debug)]
enum Step {
    Node {
        zone: u8,
        cpu: u16,
    },
    Pod {
        cpu: u16,
        spread: Option<bool>,
        priority: i8,
    },
    Remove(u8),
    Pass,
}

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    prop_oneof![
        (0u8..3, 500u16..4000).prop_map(|(zone, cpu)| Step::Node { zone, cpu }),
        (50u16..2500, -1i8..2, proptest::option::of(any::<bool>())).prop_map(
            |(cpu, priority, spread)| Step::Pod {
                cpu,
                spread,
                priority,
            }
        ),
        (0u8..40).prop_map(Step::Remove),
        Just(Step::Pass),
        Just(Step::Pass),
    ]
}

proptest::proptest! {
    #[test]
    fn the_kept_pass_binds_what_the_plain_one_does(
        steps in proptest::collection::vec(step(), 1..60)
    ) {
        let (mut fast, mut plain) = (Cluster::default(), Cluster::default());
        let (mut nodes, mut pods) = (0, 0);
        for (t, s) in steps.iter().enumerate() {
            let now = Timestamp(t as i64 * 1000);
            for c in [&mut fast, &mut plain] {
                match s {
                    Step::Node { zone, cpu } => {
                        add_node(c, &format!("n{nodes}"), &format!("z{zone}"), i64::from(*cpu))
                    }
                    Step::Pod {
                        cpu,
                        spread: how,
                        priority,
                    } => {
                        let key = pending(c, &format!("p{pods}"), i64::from(*cpu));
                        let p = c.pod_mut(&key).unwrap();
                        p.priority = i32::from(*priority);
                        p.creation_timestamp = Timestamp(now.0 / 3000);
                        if let Some(hard) = how {
                            let when = if *hard {
                                WhenUnsatisfiable::DoNotSchedule
                            } else {
                                WhenUnsatisfiable::ScheduleAnyway
                            };
                            spread(c, &key, when);
                        }
                    }
                    Step::Remove(i) => {
                        c.remove_pod(&format!("d/p{i}"), now);
                    }
                    Step::Pass => {}
                }
            }
            match s {
                Step::Node { .. } => nodes += 1,
                Step::Pod { .. } => pods += 1,
                Step::Remove(_) => {}
                Step::Pass => {
                    let a = bind_pending(&mut fast, now);
                    let b = bind_pending_plain(&mut plain, now);
                    proptest::prop_assert_eq!(a, b);
                }
            }
        }
        proptest::prop_assert_eq!(
            bind_pending(&mut fast, Timestamp(0)),
            bind_pending_plain(&mut plain, Timestamp(0))
        );
    }
}
