use proptest::prelude::*;

use super::*;
use crate::disruption::bench::cluster;
use crate::labels;
use crate::model::{PodTemplate, Snapshot};
use crate::scheduling::Compile;
use crate::scheduling::setup::{Targets, targets, targets_with};
use std::sync::Arc;

#[derive(Clone, Debug)]
enum Op {
    Remove(usize),
    /// A copy of a node under a new name, with a label of its own or a shared one.
    Add {
        from: usize,
        own: bool,
    },
    Relabel {
        node: usize,
        value: u8,
    },
    Initialize(usize),
    /// A deprecated zone label that disagrees with the node's zone.
    OldZone {
        node: usize,
        value: u8,
    },
    /// The NodePool's weight changes.
    Weigh(i32),
    /// The instance types are copied into a new list, one offering made unavailable or
    /// (`cold: false`) unchanged.
    Catalog {
        cold: bool,
        index: usize,
    },
    /// A DaemonSet is added.
    Daemon(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0usize..64).prop_map(Op::Remove),
        (0usize..64, any::<bool>()).prop_map(|(from, own)| Op::Add { from, own }),
        (0usize..64, 0u8..4).prop_map(|(node, value)| Op::Relabel { node, value }),
        (0usize..64).prop_map(Op::Initialize),
        (0usize..64, 0u8..3).prop_map(|(node, value)| Op::OldZone { node, value }),
        (0i32..3).prop_map(Op::Weigh),
        (any::<bool>(), 0usize..400).prop_map(|(cold, index)| Op::Catalog { cold, index }),
        (0u8..3).prop_map(Op::Daemon),
    ]
}

fn apply(s: &mut Snapshot, op: &Op, step: usize) {
    let n = s.nodes.len();
    if n == 0 {
        return;
    }
    match *op {
        Op::Weigh(w) => s.nodepools[0].weight = w,
        Op::Catalog { cold, index } => {
            for list in s.instance_types.values_mut() {
                let mut types = (**list).clone();
                if cold && !types.is_empty() {
                    let i = index % types.len();
                    if let Some(o) = types[i].offerings.first_mut() {
                        o.available = false;
                    }
                }
                *list = Arc::new(types);
            }
        }
        Op::Daemon(d) => s.daemonsets.push(crate::model::DaemonSet {
            namespace: "kube-system".into(),
            name: format!("d{d}-{step}"),
            pod: crate::model::Pod {
                template: Arc::new(PodTemplate {
                    requests: crate::resources::Resources::new().with(crate::resources::CPU, 50),
                    ..PodTemplate::default()
                }),
                ..crate::model::Pod::default()
            },
        }),
        Op::Remove(i) => {
            s.nodes.remove(i % n);
        }
        Op::Add { from, own } => {
            let mut node = Node::clone(&s.nodes[from % n]);
            node.name = format!("extra-{step:03}");
            node.labels
                .insert(labels::HOSTNAME.into(), node.name.clone());
            let (k, v) = if own {
                ("example.com/id", format!("id-{step}"))
            } else {
                ("example.com/team", format!("team-{}", step % 3))
            };
            node.labels.insert(k.into(), v);
            s.nodes.push(Arc::new(node));
            s.nodes.sort_by(|a, b| a.name.cmp(&b.name));
        }
        Op::Relabel { node, value } => {
            s.node_mut(node % n)
                .labels
                .insert("example.com/v".into(), format!("v{value}"));
        }
        Op::Initialize(i) => {
            s.node_mut(i % n)
                .labels
                .insert(labels::INITIALIZED.into(), "true".into());
        }
        Op::OldZone { node, value } => {
            s.node_mut(node % n).labels.insert(
                "failure-domain.beta.kubernetes.io/zone".into(),
                format!("test-zone-{value}"),
            );
        }
    }
}

/// Everything a compile decides about the targets, ids included.
fn shape(t: &Targets) -> String {
    let names: Vec<&str> = (0..t.interner.len() as u32)
        .map(|id| t.interner.name(id))
        .collect();
    format!(
        "{names:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}",
        t.existing.all,
        t.fresh,
        t.seqs,
        t.sources,
        t.pools,
        t.allow_undefined,
        (t.hostname, t.zone, t.capacity_type)
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Compiling with the cache, step after step of a changing cluster, gives exactly the
    /// fresh compile: the same ids in the same order, requirements, sequences and ranges.
    #[test]
    fn cached_compiles_equal_fresh_ones(
        seed in 0u64..1000,
        ops in proptest::collection::vec(op(), 1..24),
    ) {
        let mut s = cluster(12, 40, seed);
        let mut cache = NodeCache::new();
        prop_assert_eq!(shape(&targets_with(&s, Compile::cached(&mut cache))), shape(&targets(&s)));
        for (step, op) in ops.iter().enumerate() {
            apply(&mut s, op, step);
            // Odd steps carry versions, which name the labels: known ones go unread.
            for n in s.nodes.iter_mut().map(Arc::make_mut) {
                n.resource_version = if step % 2 == 1 { version_of(n) } else { String::new() };
            }
            prop_assert_eq!(
                shape(&targets_with(&s, Compile::cached(&mut cache))),
                shape(&targets(&s)),
                "after {:?}",
                op
            );
        }
        prop_assert!(cache.hits > 0);
        // Once more over an unchanged cluster: the NodePools come from the cache.
        prop_assert_eq!(shape(&targets_with(&s, Compile::cached(&mut cache))), shape(&targets(&s)));
        prop_assert!(cache.pools.hits > 0);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// Full solves with the cache, step after step of a changing cluster with pods to
    /// place, plan exactly as fresh ones.
    #[test]
    fn cached_full_solves_equal_fresh_ones(
        seed in 0u64..1000,
        ops in proptest::collection::vec(op(), 1..10),
    ) {
        let mut s = cluster(10, 40, seed);
        for p in s.pods.iter_mut().step_by(7).map(Arc::make_mut) {
            p.node_name = None;
            p.phase = crate::model::PodPhase::Pending;
        }
        let options = crate::scheduling::Options::default();
        let mut cache = NodeCache::new();
        let solve = |s: &Snapshot, cache: &mut NodeCache| {
            crate::scheduling::solve_with(s, &options, Compile::cached(cache))
        };
        prop_assert_eq!(solve(&s, &mut cache), crate::scheduling::solve(&s, &options));
        for (step, op) in ops.iter().enumerate() {
            apply(&mut s, op, step);
            prop_assert_eq!(
                solve(&s, &mut cache),
                crate::scheduling::solve(&s, &options),
                "after {:?}",
                op
            );
        }
        prop_assert!(cache.hits > 0);
    }
}

/// Solves of `compiled` without each of the first few nodes (their pods moving), and
/// without nothing.
fn solves(s: &Snapshot, compiled: &Prepared) -> Vec<Option<crate::scheduling::Plan>> {
    let options = crate::scheduling::Options::default();
    let mut sets: Vec<std::collections::BTreeSet<String>> = vec![Default::default()];
    sets.extend(s.nodes.iter().take(4).map(|n| [n.name.clone()].into()));
    sets.iter()
        .map(|without| {
            let pods: Vec<&crate::model::Pod> = s
                .pods
                .iter()
                .filter(|p| p.node_name.as_ref().is_some_and(|n| without.contains(n)))
                .map(|p| &**p)
                .collect();
            compiled.solve(s, without, &pods, &options)
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Compiles from the cache (nodes replayed, requirements handed out again when their
    /// ids did not move, whole compiles kept under a key) solve exactly as fresh ones.
    #[test]
    fn kept_compiles_solve_as_fresh_ones(
        seed in 0u64..1000,
        ops in proptest::collection::vec(op(), 1..12),
    ) {
        let mut s = cluster(10, 60, seed);
        let mut cache = NodeCache::new();
        for (step, op) in ops.iter().enumerate() {
            apply(&mut s, op, step);
            let fresh = Prepared::new(&s).map(|p| solves(&s, &p));
            cache.same_as(step as u64);
            let cached = Prepared::new_with(&s, Compile::cached(&mut cache));
            prop_assert_eq!(cached.as_ref().map(|p| solves(&s, p)), fresh.clone());
            // The same cluster later: the kept compile answers, the same way.
            s.now = crate::time::Timestamp(s.now.0 + 15_000);
            let reused = cache.compiles_reused;
            cache.same_as(step as u64);
            let kept = Prepared::new_with(&s, Compile::cached(&mut cache));
            prop_assert_eq!(cache.compiles_reused, reused + 1);
            prop_assert_eq!(kept.as_ref().map(|p| solves(&s, p)), fresh);
        }
    }
}

/// A version that changes whenever the node's labels do, as a write's would.
fn version_of(n: &Node) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    n.labels.hash(&mut h);
    format!("{:x}", h.finish())
}

#[test]
fn a_node_at_a_known_version_is_not_compared_again() {
    let mut s = cluster(6, 20, 4);
    for (i, n) in s.nodes.iter_mut().map(Arc::make_mut).enumerate() {
        n.resource_version = format!("{i}");
    }
    let mut cache = NodeCache::new();
    targets_with(&s, Compile::cached(&mut cache));
    assert_eq!((cache.misses, cache.by_version), (6, 0));
    targets_with(&s, Compile::cached(&mut cache));
    assert_eq!((cache.hits, cache.by_version), (6, 6));
    // Relabelled at a new version: compiled again. Unversioned: compared, and a hit.
    s.node_mut(0)
        .labels
        .insert("example.com/new".into(), "x".into());
    s.node_mut(0).resource_version = "100".into();
    s.node_mut(1).resource_version = String::new();
    assert_eq!(
        shape(&targets_with(&s, Compile::cached(&mut cache))),
        shape(&targets(&s))
    );
    assert_eq!((cache.misses, cache.hits, cache.by_version), (7, 11, 10));
}

#[test]
fn requirements_no_compile_shares_are_renamed_in_place() {
    let mut s = cluster(8, 30, 3);
    let mut cache = NodeCache::new();
    let first = targets_with(&s, Compile::cached(&mut cache));
    // The first node gone moves every later node's own ids.
    let gone = s.nodes.iter().map(|n| n.name.clone()).min().unwrap();
    s.nodes.retain(|n| n.name != gone);
    // While a compile shares them, the renamed requirements are copies.
    assert_eq!(
        shape(&targets_with(&s, Compile::cached(&mut cache))),
        shape(&targets(&s))
    );
    assert_eq!(cache.renamed_in_place, 0);
    drop(first);
    let s2 = {
        let mut s2 = s.clone();
        let gone = s2.nodes.iter().map(|n| n.name.clone()).min().unwrap();
        s2.nodes.retain(|n| n.name != gone);
        s2
    };
    assert_eq!(
        shape(&targets_with(&s2, Compile::cached(&mut cache))),
        shape(&targets(&s2))
    );
    assert!(cache.renamed_in_place > 0);
}

#[test]
fn a_compile_is_kept_only_under_its_key() {
    let mut s = cluster(6, 30, 2);
    let mut cache = NodeCache::new();
    cache.same_as(1);
    let first = Prepared::new_with(&s, Compile::cached(&mut cache)).unwrap();
    // Without a key, a compile neither uses nor replaces the kept one.
    let _ = Prepared::new_with(&s, Compile::cached(&mut cache));
    cache.same_as(1);
    let again = Prepared::new_with(&s, Compile::cached(&mut cache)).unwrap();
    assert_eq!(cache.compiles_reused, 1);
    assert!(Arc::ptr_eq(&first.0, &again.0));
    // Another key compiles anew, and sees the change.
    s.nodes.remove(0);
    cache.same_as(2);
    let changed = Prepared::new_with(&s, Compile::cached(&mut cache)).unwrap();
    assert_eq!(cache.compiles_reused, 1);
    assert_eq!(
        solves(&s, &changed),
        solves(&s, &Prepared::new(&s).unwrap())
    );
    let nodes = |p: &Prepared| p.targets.existing.iter().filter(|e| !e.in_flight).count();
    assert_eq!(nodes(&first), nodes(&changed) + 1);
}

#[test]
fn a_compile_kept_on_one_thread_equals_one_that_splits() {
    // Large enough that every part that may move to a thread of its own does.
    let s = cluster(300, 4200, 5);
    fn one(cache: Option<&mut NodeCache>) -> Compile<'_> {
        Compile {
            cache,
            one_thread: true,
        }
    }
    assert_eq!(shape(&targets_with(&s, one(None))), shape(&targets(&s)));
    let split = Prepared::new(&s).unwrap();
    let alone = Prepared::new_with(&s, one(None)).unwrap();
    assert_eq!(solves(&s, &alone), solves(&s, &split));
    // With a cache too, filled by a compile that split.
    let mut cache = NodeCache::new();
    let _ = targets_with(&s, Compile::cached(&mut cache));
    assert_eq!(
        shape(&targets_with(&s, one(Some(&mut cache)))),
        shape(&targets(&s))
    );
}

#[test]
fn a_nodes_strings_are_those_its_compile_interns() {
    let s = cluster(3, 10, 1);
    let mut nodes: Vec<Node> = s.nodes.iter().map(|n| (**n).clone()).collect();
    nodes[1]
        .labels
        .insert(labels::HOSTNAME.into(), "host-1".into());
    nodes[2]
        .labels
        .insert("beta.kubernetes.io/arch".into(), "arm64".into());
    for n in &nodes {
        let mut i = crate::scheduling::intern::Interner::new();
        i.trace();
        compile::node_reqs(n, &mut i);
        let traced: Vec<String> = i
            .take_trace()
            .iter()
            .map(|&id| i.name(id).to_string())
            .collect();
        assert_eq!(traced, compile::node_strings(n).collect::<Vec<_>>());
    }
}

#[test]
fn a_node_written_since_is_compared_by_the_strings_its_compile_interns() {
    let mut s = cluster(5, 10, 1);
    let mut cache = NodeCache::new();
    targets_with(&s, Compile::cached(&mut cache));
    targets_with(&s, Compile::cached(&mut cache));
    // Unversioned, so each is compared: all the same.
    assert_eq!((cache.misses, cache.hits, cache.by_version), (5, 5, 0));
    // A value changed, a label added, one removed, the hostname no longer given by a label
    // (the compile then names the node itself): each compiled again; the fifth is a hit.
    let key = s.nodes[0].labels.keys().next().unwrap().clone();
    s.node_mut(0).labels.insert(key, "other".into());
    s.node_mut(1)
        .labels
        .insert("example.com/new".into(), "x".into());
    let key = s.nodes[2].labels.keys().next().unwrap().clone();
    s.node_mut(2).labels.remove(&key);
    assert!(s.node_mut(3).labels.remove(labels::HOSTNAME).is_some());
    assert_eq!(
        shape(&targets_with(&s, Compile::cached(&mut cache))),
        shape(&targets(&s))
    );
    assert_eq!((cache.misses, cache.hits), (9, 6));
    targets_with(&s, Compile::cached(&mut cache));
    assert_eq!((cache.misses, cache.hits), (9, 11));
}

#[test]
fn unchanged_nodepools_are_reused_and_changed_ones_compiled() {
    let mut s = cluster(4, 10, 1);
    let mut cache = NodeCache::new();
    let _ = targets_with(&s, Compile::cached(&mut cache));
    let _ = targets_with(&s, Compile::cached(&mut cache));
    assert_eq!((cache.pools.hits, cache.pools.misses), (1, 1));
    // An equal catalog in a new list is the same input.
    for list in s.instance_types.values_mut() {
        *list = Arc::new((**list).clone());
    }
    let _ = targets_with(&s, Compile::cached(&mut cache));
    assert_eq!((cache.pools.hits, cache.pools.misses), (2, 1));
    s.nodepools[0].weight += 1;
    assert_eq!(
        shape(&targets_with(&s, Compile::cached(&mut cache))),
        shape(&targets(&s))
    );
    assert_eq!((cache.pools.hits, cache.pools.misses), (2, 2));
}

/// Nodes replaced by new ones, round after round, as a long-lived controller sees them:
/// the string table stays the size of the cluster, and every compile still equals a fresh
/// one, ids included.
#[test]
fn strings_of_nodes_long_gone_are_dropped() {
    let mut s = cluster(20, 40, 5);
    let mut cache = NodeCache::new();
    let mut largest = 0;
    for round in 0..600 {
        for (i, n) in s.nodes.iter_mut().map(Arc::make_mut).enumerate() {
            n.name = format!("node-{round}-{i}");
            n.labels.insert(labels::HOSTNAME.into(), n.name.clone());
        }
        let cached = targets_with(&s, Compile::cached(&mut cache));
        if round % 50 == 0 {
            assert_eq!(shape(&cached), shape(&targets(&s)), "round {round}");
        }
        largest = largest.max(cache.names.len());
    }
    // 600 rounds named 12,000 nodes, each with a string of its own (its hostname).
    assert!(largest < 2 * COMPACT_FROM, "{largest} strings");
    assert_eq!(cache.ids.len(), cache.names.len());
    assert_eq!(cache.misses, 600 * 20);
    // What is left is what the last nodes use, and replays them.
    let before = cache.hits;
    assert_eq!(
        shape(&targets_with(&s, Compile::cached(&mut cache))),
        shape(&targets(&s))
    );
    assert_eq!(cache.hits, before + 20);
}

#[test]
fn unchanged_nodes_are_replayed_and_changed_ones_compiled() {
    let mut s = cluster(10, 30, 1);
    let mut cache = NodeCache::new();
    let _ = targets_with(&s, Compile::cached(&mut cache));
    assert_eq!((cache.hits, cache.misses), (0, 10));
    s.node_mut(3)
        .labels
        .insert("example.com/v".into(), "changed".into());
    let _ = targets_with(&s, Compile::cached(&mut cache));
    assert_eq!((cache.hits, cache.misses), (9, 11));
    // Nodes before the changed one keep their ids: their requirements are shared, not
    // renamed; so is everything once nothing changes.
    assert!(
        cache.same_ids > 0 && cache.same_ids < 9,
        "{}",
        cache.same_ids
    );
    let before = cache.same_ids;
    let a = targets_with(&s, Compile::cached(&mut cache));
    let b = targets_with(&s, Compile::cached(&mut cache));
    assert_eq!(cache.same_ids, before + 20);
    assert!(Arc::ptr_eq(&a.existing[0].reqs, &b.existing[0].reqs));
}
