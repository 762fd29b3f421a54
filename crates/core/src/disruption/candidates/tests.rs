use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::model::{OwnerRef, PodPhase};
use crate::selector::LabelSelector;
use crate::testkit::{self, instance_type, offering, replica, with_label};

const NOW: Timestamp = Timestamp(1_000_000_000);

fn snapshot_with(pods: Vec<Pod>, pdbs: Vec<PodDisruptionBudget>) -> Snapshot {
    let labels: BTreeMap<String, String> = [
        (labels::NODEPOOL, "default"),
        (labels::INSTANCE_TYPE, "m5.large"),
        (labels::ZONE, "us-east-1a"),
        (labels::CAPACITY_TYPE, "on-demand"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let it = instance_type(
        "m5.large",
        Default::default(),
        vec![offering("us-east-1a", CapacityType::OnDemand, 0.096)],
    );
    Snapshot {
        now: NOW,
        nodepools: vec![NodePool {
            name: "default".into(),
            ready: true,
            ..NodePool::default()
        }],
        instance_types: [("default".to_string(), Arc::new(vec![it]))]
            .into_iter()
            .collect(),
        nodes: vec![Arc::new(Node {
            name: "n1".into(),
            provider_id: "p1".into(),
            labels,
            ready: true,
            ..Node::default()
        })],
        node_claims: vec![Arc::new(NodeClaim {
            name: "default-abc".into(),
            nodepool: "default".into(),
            node_name: Some("n1".into()),
            provider_id: Some("p1".into()),
            launched: true,
            registered: true,
            initialized: true,
            ..NodeClaim::default()
        })],
        pods: pods.into_iter().map(Into::into).collect(),
        pdbs,
        ..Snapshot::default()
    }
}

/// A replica labelled `app=web` on `n1`.
fn pod(name: &str) -> Pod {
    with_label(replica(testkit::pod(name, 0, 0), "n1"), "app", "web")
}

fn pdb(name: &str, allowed: i32) -> PodDisruptionBudget {
    PodDisruptionBudget {
        namespace: "default".into(),
        name: name.into(),
        selector: Some(LabelSelector {
            match_labels: [("app".to_string(), "web".to_string())]
                .into_iter()
                .collect(),
            ..LabelSelector::default()
        }),
        disruptions_allowed: allowed,
        ..PodDisruptionBudget::default()
    }
}

fn only_blocker(s: &Snapshot, class: MethodClass) -> Option<String> {
    let sel = select(s, class);
    sel.blocked.first().map(|(_, b)| b.to_string())
}

#[test]
fn plain_node_is_a_candidate_with_price_and_costs() {
    let s = snapshot_with(vec![pod("a"), pod("b")], vec![]);
    let sel = select(&s, MethodClass::Graceful);
    assert!(sel.blocked.is_empty());
    let c = &sel.candidates[0];
    assert_eq!(c.price, 0.096);
    assert_eq!(c.reschedule_cost, 3.0);
    assert!(!c.is_empty());
}

#[test]
fn daemon_and_finished_pods_leave_a_node_empty() {
    let mut ds = pod("ds");
    ds.owner = Some(OwnerRef {
        kind: "DaemonSet".into(),
        name: "d".into(),
        controller: true,
    });
    let mut done = pod("job");
    done.phase = PodPhase::Succeeded;
    let s = snapshot_with(vec![ds, done], vec![]);
    assert!(select(&s, MethodClass::Graceful).candidates[0].is_empty());
}

#[test]
fn do_not_disrupt_pod_blocks_and_duration_lapses() {
    let mut p = pod("x");
    p.annotations.insert(DO_NOT_DISRUPT.into(), "true".into());
    let s = snapshot_with(vec![p.clone()], vec![]);
    assert_eq!(
        only_blocker(&s, MethodClass::Graceful).as_deref(),
        Some("do-not-disrupt pod default/x")
    );

    p.annotations.insert(DO_NOT_DISRUPT.into(), "5m".into());
    p.start_time = Some(Timestamp(NOW.0 - 60_000));
    let s = snapshot_with(vec![p.clone()], vec![]);
    assert_eq!(
        select(&s, MethodClass::Graceful).blocked[0].1.code(),
        "pod-do-not-disrupt"
    );
    p.start_time = Some(Timestamp(NOW.0 - 600_000));
    let s = snapshot_with(vec![p], vec![]);
    assert!(select(&s, MethodClass::Graceful).blocked.is_empty());
}

/// Only a duration, once the pod has started, says when its protection ends.
#[test]
fn a_timed_do_not_disrupt_says_when_it_ends() {
    let mut p = pod("x");
    p.annotations.insert(DO_NOT_DISRUPT.into(), "5m".into());
    assert_eq!(timed_do_not_disrupt(&p, NOW), None, "not started");
    p.start_time = Some(Timestamp(NOW.0 - 60_000));
    let until = Timestamp(NOW.0 + 240_000);
    assert_eq!(timed_do_not_disrupt(&p, NOW), Some((until, false)));
    assert_eq!(timed_do_not_disrupt(&p, until), Some((until, true)));
    for value in ["true", "soon", "0s"] {
        p.annotations.insert(DO_NOT_DISRUPT.into(), value.into());
        assert_eq!(timed_do_not_disrupt(&p, NOW), None, "{value}");
    }
}

#[test]
fn node_annotation_blocks() {
    let mut s = snapshot_with(vec![], vec![]);
    Arc::make_mut(&mut s.node_mut(0).annotations).insert(DO_NOT_DISRUPT.into(), "true".into());
    assert_eq!(
        only_blocker(&s, MethodClass::Graceful).as_deref(),
        Some("node has karpenter.sh/do-not-disrupt=true")
    );
}

#[test]
fn pdbs_block_when_they_allow_nothing() {
    let s = snapshot_with(vec![pod("a")], vec![pdb("web", 0)]);
    assert_eq!(
        only_blocker(&s, MethodClass::Graceful).as_deref(),
        Some("PDB default/web allows 0 evictions (pod default/a)")
    );
    let s = snapshot_with(vec![pod("a")], vec![pdb("web", 1)]);
    assert!(select(&s, MethodClass::Graceful).blocked.is_empty());
    let s = snapshot_with(vec![pod("a")], vec![pdb("web", 1), pdb("web2", 1)]);
    assert_eq!(
        select(&s, MethodClass::Graceful).blocked[0].1.code(),
        "multiple-pdbs"
    );
    let mut unhealthy = pod("a");
    unhealthy.ready = false;
    let mut always = pdb("web", 0);
    always.unhealthy_pod_eviction_policy = UnhealthyPodEvictionPolicy::AlwaysAllow;
    let s = snapshot_with(vec![unhealthy], vec![always]);
    assert!(select(&s, MethodClass::Graceful).blocked.is_empty());
}

#[test]
fn drift_ignores_pod_blockers_only_with_a_grace_period() {
    let mut p = pod("x");
    p.annotations.insert(DO_NOT_DISRUPT.into(), "true".into());
    let mut s = snapshot_with(vec![p], vec![]);
    assert!(!select(&s, MethodClass::Eventual).blocked.is_empty());
    s.claim_mut(0).termination_grace_period = Some(Duration::from_secs(600));
    assert!(select(&s, MethodClass::Eventual).blocked.is_empty());
    assert!(!select(&s, MethodClass::Graceful).blocked.is_empty());
}

#[test]
fn consolidate_after_counts_from_last_pod_event() {
    let mut s = snapshot_with(vec![], vec![]);
    s.nodepools[0].disruption.consolidate_after = Some(Duration::from_secs(60));
    s.claim_mut(0).last_pod_event_time = Some(Timestamp(NOW.0 - 48_000));
    assert_eq!(
        only_blocker(&s, MethodClass::Graceful).as_deref(),
        Some("consolidateAfter not elapsed (12s left)")
    );
    assert!(select(&s, MethodClass::Eventual).blocked.is_empty());
    s.claim_mut(0).last_pod_event_time = Some(Timestamp(NOW.0 - 61_000));
    assert!(select(&s, MethodClass::Graceful).blocked.is_empty());
    s.nodepools[0].disruption.consolidate_after = None;
    assert_eq!(
        select(&s, MethodClass::Graceful).blocked[0].1.code(),
        "consolidation-disabled"
    );
}

#[test]
fn lifecycle_states_block() {
    let mut s = snapshot_with(vec![], vec![]);
    s.claim_mut(0).initialized = false;
    assert_eq!(
        select(&s, MethodClass::Graceful).blocked[0].1.code(),
        "not-initialized"
    );
    let mut s = snapshot_with(vec![], vec![]);
    s.claim_mut(0).deletion_timestamp = Some(NOW);
    assert_eq!(
        select(&s, MethodClass::Graceful).blocked[0].1.code(),
        "deleting"
    );
    let mut s = snapshot_with(vec![], vec![]);
    s.node_mut(0).labels.remove(labels::NODEPOOL);
    assert_eq!(
        select(&s, MethodClass::Graceful).blocked[0].1.code(),
        "not-managed"
    );
    let mut s = snapshot_with(vec![], vec![]);
    s.node_claims.clear();
    assert_eq!(
        select(&s, MethodClass::Graceful).blocked[0].1.code(),
        "no-nodeclaim"
    );
    let mut s = snapshot_with(vec![], vec![]);
    s.nodepools.clear();
    assert_eq!(
        only_blocker(&s, MethodClass::Graceful).as_deref(),
        Some("NodePool default not found")
    );
}

#[test]
fn budget_counts_include_disrupting_nodes() {
    let mut s = snapshot_with(vec![], vec![]);
    assert_eq!(budget_node_counts(&s)["default"], (1, 0));
    s.node_mut(0).ready = false;
    assert_eq!(budget_node_counts(&s)["default"], (1, 1));
}

#[test]
fn ownerless_pod_blocks_graceful_and_drift_without_grace_period() {
    let mut bare = pod("x");
    bare.owner = None;
    let s = snapshot_with(vec![pod("a"), bare.clone()], vec![]);
    assert_eq!(
        only_blocker(&s, MethodClass::Graceful).as_deref(),
        Some("pod default/x has no controller")
    );
    assert_eq!(
        select(&s, MethodClass::Graceful).blocked[0].1.code(),
        "pod-has-no-controller"
    );
    assert!(only_blocker(&s, MethodClass::Eventual).is_some());
    // Drift of a claim with a termination grace period ignores pod-level blockers.
    let mut tgp = s.clone();
    tgp.claim_mut(0).termination_grace_period = Some(Duration::from_secs(60));
    assert!(only_blocker(&tgp, MethodClass::Eventual).is_none());
}

#[test]
fn any_owner_reference_counts_and_finished_or_mirror_pods_do_not_block() {
    let mut other = pod("x");
    other.owner = None;
    other.other_owner_references = 1;
    let mut done = pod("done");
    done.owner = None;
    done.phase = PodPhase::Succeeded;
    let mut leaving = pod("leaving");
    leaving.owner = None;
    leaving.deletion_timestamp = Some(NOW);
    let mut mirror = pod("static");
    mirror.owner = None;
    mirror
        .annotations
        .insert("kubernetes.io/config.mirror".into(), "abc".into());
    let s = snapshot_with(vec![other, done, leaving, mirror], vec![]);
    assert_eq!(only_blocker(&s, MethodClass::Graceful), None);
}

#[test]
fn the_blocked_pod_named_is_the_first_by_key_whatever_the_pod_order() {
    let mut later = pod("z");
    later
        .annotations
        .insert(DO_NOT_DISRUPT.into(), "true".into());
    let mut ownerless = pod("m");
    ownerless.owner = None;
    let mut first = pod("b");
    first
        .annotations
        .insert(DO_NOT_DISRUPT.into(), "true".into());
    let s = snapshot_with(vec![later, ownerless, pod("a"), first], vec![]);
    assert_eq!(
        only_blocker(&s, MethodClass::Graceful).as_deref(),
        Some("do-not-disrupt pod default/b")
    );
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    /// What can differ about one node and its pods.
    #[derive(Clone, Debug)]
    struct NodeSpec {
        managed: bool,
        has_claim: bool,
        by_provider: bool,
        initialized: bool,
        /// The Node is not Ready (it still counts for budgets, as disrupting).
        not_ready: bool,
        deleting: bool,
        node_protected: bool,
        grace_period: bool,
        quiet_secs: i64,
        zone_b: bool,
        expires: bool,
        /// Per pod: (do-not-disrupt, ownerless, daemon, finished, priority, deletion cost).
        pods: Vec<(bool, bool, bool, bool, i32, Option<i32>)>,
    }

    fn node_spec() -> impl Strategy<Value = NodeSpec> {
        let pod = (
            prop::bool::weighted(0.1),
            prop::bool::weighted(0.1),
            prop::bool::weighted(0.2),
            prop::bool::weighted(0.1),
            prop::sample::select(vec![0, 1 << 24, -(1 << 26)]),
            prop::option::weighted(0.2, -2_000_000_000i32..2_000_000_000),
        );
        (
            (
                prop::bool::weighted(0.9),
                prop::bool::weighted(0.9),
                any::<bool>(),
                prop::bool::weighted(0.9),
                prop::bool::weighted(0.1),
                prop::bool::weighted(0.1),
                prop::bool::weighted(0.1),
            ),
            (any::<bool>(), 0i64..120, any::<bool>(), any::<bool>()),
            prop::collection::vec(pod, 0..5),
        )
            .prop_map(
                |(
                    (
                        managed,
                        has_claim,
                        by_provider,
                        initialized,
                        deleting,
                        node_protected,
                        not_ready,
                    ),
                    (grace_period, quiet_secs, zone_b, expires),
                    pods,
                )| NodeSpec {
                    managed,
                    has_claim,
                    by_provider,
                    initialized,
                    not_ready,
                    deleting,
                    node_protected,
                    grace_period,
                    quiet_secs,
                    zone_b,
                    expires,
                    pods,
                },
            )
    }

    fn build(specs: &[NodeSpec], consolidate_after: Option<u64>, pdb_allows: i32) -> Snapshot {
        let mut s = snapshot_with(vec![], vec![pdb("web", pdb_allows)]);
        s.nodepools[0].disruption.consolidate_after = consolidate_after.map(Duration::from_secs);
        let template_node = Node::clone(&s.nodes.remove(0));
        let template_claim = NodeClaim::clone(&s.node_claims.remove(0));
        // Reversed, so selection's own ordering by name is exercised.
        for (i, spec) in specs.iter().enumerate().rev() {
            let name = format!("n{i}");
            let mut node = template_node.clone();
            node.name = name.clone();
            node.provider_id = format!("p{i}");
            node.ready = !spec.not_ready;
            if !spec.managed {
                node.labels.remove(labels::NODEPOOL);
            }
            if spec.zone_b {
                node.labels.insert(labels::ZONE.into(), "us-east-1b".into());
            }
            if spec.node_protected {
                Arc::make_mut(&mut node.annotations).insert(DO_NOT_DISRUPT.into(), "true".into());
            }
            if spec.has_claim {
                let mut claim = template_claim.clone();
                claim.name = format!("default-{i}");
                if spec.by_provider {
                    claim.node_name = None;
                }
                claim.provider_id = Some(node.provider_id.clone());
                claim.initialized = spec.initialized;
                claim.deletion_timestamp = spec.deleting.then_some(NOW);
                claim.termination_grace_period = spec.grace_period.then(|| Duration::from_secs(60));
                claim.last_pod_event_time = Some(Timestamp(NOW.0 - spec.quiet_secs * 1000));
                claim.creation_timestamp = Timestamp(NOW.0 - 3_600_000);
                claim.expire_after = spec.expires.then(|| Duration::from_secs(7200));
                s.node_claims.push(Arc::new(claim));
            }
            for (j, &(dnd, ownerless, daemon, finished, priority, deletion_cost)) in
                spec.pods.iter().enumerate()
            {
                let mut p = pod(&format!("p{i}-{j}"));
                p.node_name = Some(name.clone());
                p.priority = priority;
                if dnd {
                    p.annotations.insert(DO_NOT_DISRUPT.into(), "true".into());
                }
                if let Some(c) = deletion_cost {
                    p.annotations
                        .insert(cost::POD_DELETION_COST.into(), c.to_string());
                }
                if ownerless {
                    p.owner = None;
                }
                if daemon && let Some(o) = p.owner.as_mut() {
                    o.kind = "DaemonSet".into();
                }
                if finished {
                    p.phase = PodPhase::Succeeded;
                }
                s.pods.push(p.into());
            }
            s.nodes.push(Arc::new(node));
        }
        s
    }

    proptest! {
        /// The one-pass selection for both classes is exactly the selection of each class.
        #[test]
        fn selecting_both_classes_at_once_equals_selecting_each(
            specs in prop::collection::vec(node_spec(), 0..8),
            consolidate_after in prop::option::weighted(0.8, prop::sample::select(vec![0u64, 30, 90])),
            pdb_allows in 0i32..2,
        ) {
            let s = build(&specs, consolidate_after, pdb_allows);
            let (graceful, eventual, counts) = select_both_counted(&s);
            prop_assert_eq!(counts, budget_node_counts(&s));
            prop_assert_eq!(
                format!("{graceful:?}"),
                format!("{:?}", select(&s, MethodClass::Graceful))
            );
            prop_assert_eq!(
                format!("{eventual:?}"),
                format!("{:?}", select(&s, MethodClass::Eventual))
            );
        }

        /// Selecting a few nodes by name gives exactly their entries of the full selection.
        #[test]
        fn selecting_some_nodes_equals_their_part_of_selecting_all(
            specs in prop::collection::vec(node_spec(), 0..8),
            consolidate_after in prop::option::weighted(0.8, prop::sample::select(vec![0u64, 30, 90])),
            pdb_allows in 0i32..2,
            picks in prop::collection::vec(0usize..10, 0..4),
        ) {
            let s = build(&specs, consolidate_after, pdb_allows);
            let mut names: Vec<&str> = picks
                .iter()
                .map(|&i| s.nodes.get(i).map_or("no-such-node", |n| n.name.as_str()))
                .collect();
            names.dedup();
            for class in [MethodClass::Graceful, MethodClass::Eventual] {
                let all = select(&s, class);
                let only = select_only(&s, class, &names);
                let picked = |n: &str| names.contains(&n);
                let want_candidates: Vec<String> = all
                    .candidates
                    .iter()
                    .filter(|c| picked(&c.node.name))
                    .map(|c| format!("{c:?}"))
                    .collect();
                let want_blocked: Vec<String> = all
                    .blocked
                    .iter()
                    .filter(|(n, _)| picked(n))
                    .map(|b| format!("{b:?}"))
                    .collect();
                let got_candidates: Vec<String> =
                    only.candidates.iter().map(|c| format!("{c:?}")).collect();
                let got_blocked: Vec<String> =
                    only.blocked.iter().map(|b| format!("{b:?}")).collect();
                prop_assert_eq!(got_candidates, want_candidates);
                prop_assert_eq!(got_blocked, want_blocked);
            }
        }
    }
}
