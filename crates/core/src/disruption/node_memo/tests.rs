use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;

use std::cell::OnceCell;
use std::collections::BTreeMap;

use super::*;
use crate::disruption::bench::cluster;
use crate::disruption::candidates::{
    Candidate, RoundSelection, Selection, select_both_counted, select_round,
};
use crate::disruption::drift::drift_reason;
use crate::labels;
use crate::requirements::Operator;

const TIER: &str = "example.com/tier";

#[derive(Clone, Debug)]
enum Op {
    /// A node's tier label set, at a new version.
    Relabel {
        node: usize,
        value: u8,
    },
    /// A node moved to a zone its instance type does not offer, at a new version.
    Rezone {
        node: usize,
    },
    /// The NodePool requires one of these tiers (none: the requirement is dropped).
    Require(Vec<u8>),
    /// The catalog copied into a new list; `cold` drops the offerings of a node's instance
    /// type in the node's zone.
    Catalog {
        cold: bool,
        node: usize,
    },
    /// Time moves on (claims pass the hour after which instance types are checked).
    Later,
    /// A node loses its version (unknown: always checked afresh) or gets one back.
    Unversion {
        node: usize,
    },
    Remove {
        node: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0usize..64, 0u8..3).prop_map(|(node, value)| Op::Relabel { node, value }),
        (0usize..64).prop_map(|node| Op::Rezone { node }),
        proptest::collection::vec(0u8..3, 0..3).prop_map(Op::Require),
        (any::<bool>(), 0usize..64).prop_map(|(cold, node)| Op::Catalog { cold, node }),
        Just(Op::Later),
        (0usize..64).prop_map(|node| Op::Unversion { node }),
        (0usize..64).prop_map(|node| Op::Remove { node }),
    ]
}

/// A cluster whose nodes all carry a version.
fn versioned(seed: u64) -> Snapshot {
    let mut s = cluster(10, 0, seed);
    for (i, n) in s.nodes.iter_mut().map(Arc::make_mut).enumerate() {
        n.resource_version = format!("{i}");
        n.labels.insert(TIER.into(), "t0".into());
    }
    s
}

fn apply(s: &mut Snapshot, op: &Op, write: &mut u64) {
    let n = s.nodes.len();
    let mut bump = |node: &mut Node| {
        *write += 1;
        node.resource_version = format!("w{write}");
    };
    match op {
        Op::Relabel { node, value } if n > 0 => {
            let node = s.node_mut(node % n);
            node.labels.insert(TIER.into(), format!("t{value}"));
            bump(node);
        }
        Op::Rezone { node } if n > 0 => {
            let node = s.node_mut(node % n);
            node.labels
                .insert(labels::ZONE.into(), "test-zone-9".into());
            bump(node);
        }
        Op::Require(tiers) => {
            let pool = &mut s.nodepools[0];
            pool.template.requirements.retain(|r| r.key != TIER);
            if !tiers.is_empty() {
                let values: Vec<String> = tiers.iter().map(|t| format!("t{t}")).collect();
                let values: Vec<&str> = values.iter().map(String::as_str).collect();
                pool.template
                    .requirements
                    .push(Requirement::new(TIER, Operator::In, &values));
            }
        }
        Op::Catalog { cold, node } => {
            let label = |key: &str| {
                s.nodes
                    .get(node % n.max(1))
                    .and_then(|n| n.labels.get(key).cloned())
            };
            let (name, zone) = (label(labels::INSTANCE_TYPE), label(labels::ZONE));
            for list in s.instance_types.values_mut() {
                let mut types = (**list).clone();
                for it in types
                    .iter_mut()
                    .filter(|it| *cold && Some(&it.name) == name.as_ref())
                {
                    it.offerings.retain(|o| Some(&o.zone) != zone.as_ref());
                }
                *list = Arc::new(types);
            }
        }
        Op::Later => s.now = s.now.plus(Duration::from_secs(40 * 60)),
        Op::Unversion { node } if n > 0 => {
            let node = s.node_mut(node % n);
            if node.resource_version.is_empty() {
                bump(node);
            } else {
                node.resource_version.clear();
            }
        }
        Op::Remove { node } if n > 0 => {
            let name = s.nodes.remove(node % n).name.clone();
            s.node_claims
                .retain(|c| c.node_name.as_deref() != Some(name.as_str()));
        }
        _ => {}
    }
}

/// What selection says of every node: the graceful candidates with what their labels say,
/// the graceful blocked nodes, the eventual candidates by node name, and the budget counts.
fn selected(
    graceful: &Selection<'_>,
    mut eventual: Vec<&Candidate<'_>>,
    counts: &BTreeMap<String, (u32, u32)>,
) -> String {
    let show = |cs: &mut dyn Iterator<Item = &Candidate<'_>>| {
        let candidates: Vec<_> = cs
            .map(|c| {
                (
                    c.node.name.clone(),
                    c.instance_type.clone(),
                    c.zone.clone(),
                    c.capacity_type,
                    c.price,
                )
            })
            .collect();
        format!("{candidates:?}")
    };
    eventual.sort_by(|a, b| a.node.name.cmp(&b.node.name));
    format!(
        "{} {:?}\n{}\n{counts:?}",
        show(&mut graceful.candidates.iter()),
        graceful.blocked,
        show(&mut eventual.into_iter()),
    )
}

/// [`selected`] of a round's selection: its eventual candidates are the graceful ones and
/// the eventual-only ones.
fn round_selected(s: &RoundSelection<'_>) -> String {
    let eventual = s
        .graceful
        .candidates
        .iter()
        .chain(&s.eventual_only)
        .collect();
    selected(&s.graceful, eventual, &s.counts)
}

/// Every node's drift reason through the memo, and worked out directly; selection through
/// the memo is checked against selection without it in the same round.
fn reasons(s: &Snapshot, memo: &NodeMemo) -> (Vec<Option<String>>, Vec<Option<String>>) {
    let pool = &s.nodepools[0];
    let types = s
        .instance_types
        .get(&pool.name)
        .map_or(&[][..], |v| v.as_slice());
    let mut round = memo.round(s);
    let (graceful, eventual, counts) = select_both_counted(s);
    let fresh = selected(&graceful, eventual.candidates.iter().collect(), &counts);
    assert_eq!(
        round_selected(&select_round(s, &mut round, true, &OnceCell::new())),
        fresh
    );
    let mut kept = Vec::new();
    let mut fresh = Vec::new();
    for node in &s.nodes {
        let claim = s
            .node_claims
            .iter()
            .find(|c| c.node_name.as_deref() == Some(node.name.as_str()))
            .expect("every node has its claim");
        let first = |name: &str| types.iter().find(|it| it.name == name);
        kept.push(round.reason(claim, node, pool, first, s.now));
        fresh.push(drift_reason(claim, node, pool, types, s.now));
    }
    (kept, fresh)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Round after round of a changing cluster, the memo gives every node the reason a
    /// fresh check gives.
    #[test]
    fn kept_reasons_equal_fresh_ones(
        seed in 0u64..1000,
        ops in proptest::collection::vec(op(), 1..24),
    ) {
        let mut s = versioned(seed);
        let memo = NodeMemo::default();
        let mut write = 0;
        let (kept, fresh) = reasons(&s, &memo);
        prop_assert_eq!(kept, fresh);
        for op in &ops {
            apply(&mut s, op, &mut write);
            let (kept, fresh) = reasons(&s, &memo);
            prop_assert_eq!(kept, fresh, "after {:?}", op);
        }
    }
}

#[test]
fn a_node_at_a_known_version_is_not_checked_again() {
    let mut s = versioned(3);
    let n = s.nodes.len() as u64;
    let memo = NodeMemo::default();
    reasons(&s, &memo);
    assert_eq!(memo.counts(), (0, n));
    reasons(&s, &memo);
    assert_eq!(memo.counts(), (n, n));
    // A node at a new version, and one without a version: both worked out again.
    let mut write = 0;
    apply(&mut s, &Op::Relabel { node: 0, value: 1 }, &mut write);
    s.node_mut(1).resource_version.clear();
    reasons(&s, &memo);
    assert_eq!(memo.counts(), (2 * n - 2, n + 1));
    // New requirements: every versioned node is checked against them, and one now drifts.
    apply(&mut s, &Op::Require(vec![0]), &mut write);
    let (kept, fresh) = reasons(&s, &memo);
    assert_eq!(kept, fresh);
    assert_eq!(kept[0].as_deref(), Some("RequirementsDrifted"));
    assert_eq!(memo.counts(), (2 * n - 2, 2 * n));
    // Selection's facts: worked out at first sight and after the version moved, taken from
    // memory otherwise (new requirements leave them be).
    assert_eq!(memo.facts_counts(), (3 * n - 3, n + 1));
}

#[test]
fn a_round_without_blocked_nodes_selects_the_same_candidates() {
    let mut s = versioned(40);
    // Some nodes blocked for the graceful methods only, some for both.
    s.nodepools[0].disruption.consolidate_after = Some(std::time::Duration::from_secs(60));
    let now = s.now;
    for (i, c) in s.node_claims.iter_mut().map(Arc::make_mut).enumerate() {
        match i % 3 {
            0 => c.last_pod_event_time = Some(now),
            1 => c.initialized = false,
            _ => {}
        }
    }
    let memo = NodeMemo::default();
    let listed = select_round(&s, &mut memo.round(&s), true, &OnceCell::new());
    let unlisted = select_round(&s, &mut memo.round(&s), false, &OnceCell::new());
    assert!(!listed.graceful.blocked.is_empty());
    assert!(!listed.eventual_only.is_empty());
    assert!(unlisted.graceful.blocked.is_empty());
    let without_blocked =
        round_selected(&listed).replacen(&format!("{:?}", listed.graceful.blocked), "[]", 1);
    assert_eq!(round_selected(&unlisted), without_blocked);
}
