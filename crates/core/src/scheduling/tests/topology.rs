//! Topology spread, pod affinity and anti-affinity (against this run's pods and running ones),
//! and preference relaxation.

use std::collections::BTreeMap;

use crate::labels;
use crate::model::*;
use crate::scheduling::{Options, Target, solve as solve_with};
use crate::testkit::*;

fn zones_of(plan: &crate::scheduling::Plan, prefix: &str) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for p in &plan.placements {
        if let (true, Target::NewClaim(i)) =
            (p.pod.starts_with(&format!("default/{prefix}")), &p.target)
        {
            {
                let i = *i;
                *m.entry(zone_of(plan, &plan.new_claims[i]).to_string())
                    .or_insert(0) += 1;
            }
        }
    }
    m
}

fn spread_pods(n: usize, key: &str, skew: i32) -> Vec<Pod> {
    (0..n)
        .map(|i| {
            let mut p = with_label(pod(&format!("s{i}"), 500, 1), "app", "web");
            p.topology_spread.push(spread(key, skew, "app", "web"));
            p
        })
        .collect()
}

#[test]
fn zone_spread_balances() {
    let plan = solve(&snapshot(
        vec![pool("default")],
        catalog(4),
        spread_pods(7, labels::ZONE, 1),
    ));
    assert!(plan.unplaced.is_empty());
    let z = zones_of(&plan, "s");
    assert_eq!(z.len(), 3, "{z:?}");
    let (min, max) = (z.values().min().unwrap(), z.values().max().unwrap());
    assert!(max - min <= 1, "{z:?}");
}

#[test]
fn zone_spread_refuses_with_counts() {
    // The pod may only go to zone-a, but zone-a already runs one matching pod and the other
    // zones none: one more would make the skew 2.
    let mut s = snapshot(vec![pool("default")], catalog(4), vec![]);
    s.nodes.push(node("n1", "zone-a", 1, 1));
    let mut p = spread_pods(1, labels::ZONE, 1).remove(0);
    p.node_selector.insert(labels::ZONE.into(), "zone-a".into());
    p.topology_spread[0].node_affinity_policy = InclusionPolicy::Ignore;
    s.pods = vec![
        running(with_label(pod("old", 100, 0), "app", "web"), "n1"),
        p,
    ];
    let plan = solve(&s);
    let r = reason_of(&plan, "s0");
    assert!(
        r.contains("topology spread on topology.kubernetes.io/zone (maxSkew 1)"),
        "{r}"
    );
    assert!(r.contains("zone-a=1"), "{r}");
}

#[test]
fn min_domains_keeps_the_minimum_at_zero() {
    // With minDomains above the number of zones the global minimum is 0, so each zone takes
    // at most maxSkew pods and the rest cannot be placed.
    let mut ps = spread_pods(4, labels::ZONE, 1);
    for p in &mut ps {
        p.topology_spread[0].min_domains = Some(5);
    }
    let plan = solve(&snapshot(vec![pool("default")], catalog(4), ps));
    assert_eq!(plan.placements.len(), 3);
    assert_eq!(plan.unplaced.len(), 1);
}

#[test]
fn hostname_spread_uses_one_node_per_pod() {
    let plan = solve(&snapshot(
        vec![pool("default")],
        catalog(4),
        spread_pods(4, labels::HOSTNAME, 1),
    ));
    assert_eq!(plan.new_claims.len(), 4);
    let plan = solve(&snapshot(
        vec![pool("default")],
        catalog(4),
        spread_pods(4, labels::HOSTNAME, 2),
    ));
    assert_eq!(plan.new_claims.len(), 2);
}

#[test]
fn capacity_type_spread() {
    let plan = solve(&snapshot(
        vec![pool("default")],
        catalog(4),
        spread_pods(4, labels::CAPACITY_TYPE, 1),
    ));
    assert!(plan.unplaced.is_empty());
    let mut by_ct = BTreeMap::new();
    for c in &plan.new_claims {
        *by_ct
            .entry(c.cheapest().unwrap().capacity_type)
            .or_insert(0) += c.pods.len();
    }
    assert_eq!(by_ct.get(&CapacityType::Spot), Some(&2), "{by_ct:?}");
    assert_eq!(by_ct.get(&CapacityType::OnDemand), Some(&2), "{by_ct:?}");
}

#[test]
fn schedule_anyway_spread_is_relaxed() {
    // Only zone-a is allowed; a ScheduleAnyway spread cannot hold but must not block.
    let mut ps = spread_pods(3, labels::ZONE, 1);
    for p in &mut ps {
        p.topology_spread[0].when_unsatisfiable = WhenUnsatisfiable::ScheduleAnyway;
        p.topology_spread[0].node_affinity_policy = InclusionPolicy::Ignore;
        p.node_selector.insert(labels::ZONE.into(), "zone-a".into());
    }
    let plan = solve(&snapshot(vec![pool("default")], catalog(4), ps));
    assert!(plan.unplaced.is_empty(), "{:?}", plan.unplaced);
}

#[test]
fn match_label_keys_split_spreads_by_revision() {
    let ps: Vec<Pod> = (0..6)
        .map(|i| {
            let rev = if i < 3 { "r1" } else { "r2" };
            let mut p = with_label(
                with_label(pod(&format!("s{i}"), 500, 1), "app", "web"),
                "rev",
                rev,
            );
            let mut c = spread(labels::HOSTNAME, 1, "app", "web");
            c.match_label_keys = vec!["rev".into()];
            p.topology_spread.push(c);
            p
        })
        .collect();
    let plan = solve(&snapshot(vec![pool("default")], catalog(4), ps));
    // Each revision spreads on its own: three nodes suffice for six pods.
    assert_eq!(
        plan.new_claims.len(),
        3,
        "{:?}",
        plan.new_claims
            .iter()
            .map(|c| c.pods.clone())
            .collect::<Vec<_>>()
    );
}

#[test]
fn pod_affinity_follows_running_pods() {
    let mut s = snapshot(vec![pool("default")], catalog(4), vec![]);
    s.nodes.push(node("n1", "zone-c", 1, 1));
    let mut p = pod("web", 1500, 1);
    p.pod_affinity.push(term(labels::ZONE, "app", "db"));
    s.pods = vec![
        running(with_label(pod("db", 100, 0), "app", "db"), "n1"),
        p.clone(),
    ];
    let plan = solve(&s);
    assert_eq!(zone_of(&plan, claim_of(&plan, "web").unwrap()), "zone-c");
    // Without a matching pod anywhere (and not matching itself) it cannot be placed.
    let plan = solve(&snapshot(vec![pool("default")], catalog(4), vec![p]));
    let r = reason_of(&plan, "web");
    assert!(
        r.contains("pod affinity on topology.kubernetes.io/zone"),
        "{r}"
    );
}

#[test]
fn self_affinity_bootstraps_one_zone() {
    let ps: Vec<Pod> = (0..5)
        .map(|i| {
            let mut p = with_label(pod(&format!("a{i}"), 1500, 1), "grp", "x");
            p.pod_affinity.push(term(labels::ZONE, "grp", "x"));
            p
        })
        .collect();
    let plan = solve(&snapshot(vec![pool("default")], catalog(2), ps));
    assert!(plan.unplaced.is_empty());
    assert_eq!(zones_of(&plan, "a").len(), 1);
}

#[test]
fn anti_affinity_separates_and_explains() {
    let ps: Vec<Pod> = (0..3)
        .map(|i| {
            let mut p = with_label(pod(&format!("n{i}"), 100, 0), "app", "nginx");
            p.pod_anti_affinity
                .push(term(labels::HOSTNAME, "app", "nginx"));
            p
        })
        .collect();
    let plan = solve(&snapshot(vec![pool("default")], catalog(4), ps));
    assert_eq!(plan.new_claims.len(), 3);
    // Zone anti-affinity with running matching pods in every zone.
    let mut s = snapshot(vec![pool("default")], catalog(4), vec![]);
    let mut all = Vec::new();
    for (i, z) in ZONES.iter().enumerate() {
        s.nodes.push(node(&format!("n{i}"), z, 1, 1));
        all.push(running(
            with_label(pod(&format!("old{i}"), 100, 0), "app", "db"),
            &format!("n{i}"),
        ));
    }
    let mut p = pod("new", 500, 1);
    p.pod_anti_affinity.push(term(labels::ZONE, "app", "db"));
    all.push(p);
    s.pods = all;
    let plan = solve(&s);
    let r = reason_of(&plan, "new");
    assert!(
        r.contains("pod anti-affinity on topology.kubernetes.io/zone"),
        "{r}"
    );
}

#[test]
fn running_pods_anti_affinity_keeps_matching_pods_away() {
    let mut s = snapshot(vec![pool("default")], catalog(4), vec![]);
    s.nodes.push(node("n1", "zone-a", 8, 16));
    let mut guard = running(pod("guard", 100, 0), "n1");
    guard
        .pod_anti_affinity
        .push(term(labels::HOSTNAME, "app", "web"));
    s.pods = vec![
        guard,
        with_label(pod("web", 500, 1), "app", "web"),
        pod("other", 500, 1),
    ];
    let plan = solve(&s);
    assert!(matches!(target_of(&plan, "web"), Some(Target::NewClaim(_))));
    assert_eq!(target_of(&plan, "other"), Some(Target::Node("n1".into())));
}

#[test]
fn preferred_anti_affinity_is_relaxed_when_needed() {
    let ps: Vec<Pod> = (0..5)
        .map(|i| {
            let mut p = with_label(pod(&format!("p{i}"), 100, 0), "app", "x");
            p.preferred_pod_anti_affinity.push(WeightedPodAffinityTerm {
                weight: 10,
                term: term(labels::ZONE, "app", "x"),
            });
            p
        })
        .collect();
    let plan = solve(&snapshot(vec![pool("default")], catalog(2), ps.clone()));
    assert!(plan.unplaced.is_empty());
    // The first three honour it: one per zone.
    assert_eq!(zones_of(&plan, "p").len(), 3);
    let ignore = solve_with(
        &snapshot(vec![pool("default")], catalog(2), ps),
        &Options {
            ignore_preferences: true,
            ..Options::default()
        },
    );
    assert_eq!(ignore.new_claims.len(), 1);
}

#[test]
fn schedule_anyway_zone_spread_shares_nodes() {
    let ps: Vec<Pod> = (0..10)
        .map(|i| {
            let mut p = with_label(pod(&format!("s{i}"), 1000, 0), "app", "web");
            let mut c = spread(labels::ZONE, 1, "app", "web");
            c.when_unsatisfiable = WhenUnsatisfiable::ScheduleAnyway;
            p.topology_spread.push(c);
            p
        })
        .collect();
    let plan = solve(&snapshot(vec![pool("default")], catalog(8), ps));
    assert!(plan.unplaced.is_empty());
    let z = zones_of(&plan, "s");
    assert_eq!(z.len(), 3, "{z:?}");
    assert!(
        z.values().max().unwrap() - z.values().min().unwrap() <= 1,
        "{z:?}"
    );
    assert_eq!(
        plan.new_claims.len(),
        3,
        "{:?}",
        plan.new_claims
            .iter()
            .map(|c| c.pods.clone())
            .collect::<Vec<_>>()
    );
}

#[test]
fn node_taints_policy_honor_ignores_tainted_domains() {
    // Zone-c is only offered by a tainted NodePool the pods do not tolerate. With the taint
    // policy honoured it is not a domain for the spread, so two zones share the pods; with it
    // ignored, zone-c counts as an empty domain and holds the skew down.
    let mut a = pool("ab");
    a.template.requirements.push(req(
        labels::ZONE,
        crate::requirements::Operator::In,
        &["zone-a", "zone-b"],
    ));
    let mut c = pool("c");
    c.template.requirements.push(req(
        labels::ZONE,
        crate::requirements::Operator::In,
        &["zone-c"],
    ));
    c.template.taints.push(taint("special", "x"));
    let mk = |policy| {
        let mut ps = spread_pods(4, labels::ZONE, 1);
        for p in &mut ps {
            p.topology_spread[0].node_taints_policy = policy;
        }
        ps
    };
    let honor = solve(&snapshot(
        vec![a.clone(), c.clone()],
        catalog(4),
        mk(InclusionPolicy::Honor),
    ));
    assert!(honor.unplaced.is_empty(), "{:?}", honor.unplaced);
    let ignore = solve(&snapshot(
        vec![a, c],
        catalog(4),
        mk(InclusionPolicy::Ignore),
    ));
    assert_eq!(
        ignore.placements.len(),
        2,
        "zone-c stays empty, so only one pod per zone fits"
    );
    assert!(
        reason_of(&ignore, "s3").contains("topology spread"),
        "{}",
        reason_of(&ignore, "s3")
    );
}

#[test]
fn running_pods_anti_affinity_is_named_when_it_blocks() {
    let mut s = snapshot(vec![], catalog(4), vec![]);
    s.nodes.push(node("n1", "zone-a", 8, 16));
    let mut guard = running(pod("guard", 100, 0), "n1");
    guard
        .pod_anti_affinity
        .push(term(labels::HOSTNAME, "app", "web"));
    s.pods = vec![guard, with_label(pod("web", 500, 1), "app", "web")];
    let plan = solve(&s);
    let r = reason_of(&plan, "web");
    assert!(
        r.contains("the anti-affinity of running pods excludes"),
        "{r}"
    );
}

#[test]
fn preferred_pod_affinity_follows_when_it_can() {
    let mut s = snapshot(vec![pool("default")], catalog(4), vec![]);
    s.nodes.push(node("n1", "zone-c", 1, 1));
    let mut p = pod("web", 1500, 1);
    p.preferred_pod_affinity.push(WeightedPodAffinityTerm {
        weight: 5,
        term: term(labels::ZONE, "app", "db"),
    });
    s.pods = vec![
        running(with_label(pod("db", 100, 0), "app", "db"), "n1"),
        p.clone(),
    ];
    let plan = solve(&s);
    assert_eq!(zone_of(&plan, claim_of(&plan, "web").unwrap()), "zone-c");
    // With nothing to follow, the preference is dropped rather than blocking the pod.
    let plan = solve(&snapshot(vec![pool("default")], catalog(4), vec![p]));
    assert!(plan.unplaced.is_empty());
}

#[test]
fn nodepools_that_are_not_ready_are_skipped() {
    let mut np = pool("default");
    np.ready = false;
    let plan = solve(&snapshot(vec![np], catalog(2), vec![pod("p", 500, 1)]));
    assert!(
        reason_of(&plan, "p").contains("no NodePool is available"),
        "{}",
        reason_of(&plan, "p")
    );
}

#[test]
fn a_term_selects_by_namespace_selector_and_label_keys() {
    use crate::scheduling::setup::term_selects;
    use crate::selector::LabelSelector;
    let mut owner = with_label(pod("owner", 100, 0), "rev", "2");
    owner.namespace = "team-a".into();
    let mut same = with_label(with_label(pod("same", 100, 0), "app", "web"), "rev", "2");
    same.namespace = "team-a".into();
    let mut older = with_label(with_label(pod("older", 100, 0), "app", "web"), "rev", "1");
    older.namespace = "team-a".into();
    let mut elsewhere = same.clone();
    elsewhere.namespace = "team-b".into();
    let none = BTreeMap::new();

    // The owner's namespace by default; `matchLabelKeys` narrows to the owner's revision.
    let mut t = term(labels::HOSTNAME, "app", "web");
    assert!(term_selects(&t, &owner, &same, &none));
    assert!(term_selects(&t, &owner, &older, &none));
    assert!(!term_selects(&t, &owner, &elsewhere, &none));
    t.match_label_keys = vec!["rev".into()];
    assert!(term_selects(&t, &owner, &same, &none));
    assert!(!term_selects(&t, &owner, &older, &none));

    // An empty namespace selector names every namespace; another reads namespace labels.
    t.namespace_selector = Some(LabelSelector::default());
    assert!(term_selects(&t, &owner, &elsewhere, &none));
    t.namespace_selector = Some(LabelSelector {
        match_labels: BTreeMap::from([("tier".to_string(), "front".to_string())]),
        ..LabelSelector::default()
    });
    let labelled = BTreeMap::from([(
        "team-b".to_string(),
        BTreeMap::from([("tier".to_string(), "front".to_string())]),
    )]);
    assert!(!term_selects(&t, &owner, &elsewhere, &none));
    assert!(term_selects(&t, &owner, &elsewhere, &labelled));

    // No selector selects nothing.
    t.label_selector = None;
    assert!(!term_selects(&t, &owner, &same, &labelled));
}

/// The plan of seven zone-spread pods (skew 1 over three zones: one zone takes three) whose
/// NodePool lists the zones in `order`, which is the order the compile first meets them in.
fn spread_over_zones_listed(order: &[&str]) -> crate::scheduling::Plan {
    let mut np = pool("default");
    np.template
        .requirements
        .push(req(labels::ZONE, crate::requirements::Operator::In, order));
    solve(&snapshot(
        vec![np],
        catalog(4),
        spread_pods(7, labels::ZONE, 1),
    ))
}

#[test]
fn ties_between_domains_do_not_depend_on_the_order_their_names_were_first_met() {
    let forward = spread_over_zones_listed(&["zone-a", "zone-b", "zone-c"]);
    let backward = spread_over_zones_listed(&["zone-c", "zone-b", "zone-a"]);
    assert!(forward.unplaced.is_empty());
    assert_eq!(zones_of(&forward, "s"), zones_of(&backward, "s"));
    assert_eq!(forward, backward);
}

/// The one thing listing order changes: a value set is rendered in the order its values were
/// first met (see `intern`'s header).
#[test]
fn rendered_values_keep_the_order_their_nodepool_listed_them_in() {
    let plan_listing = |cts: &[&str]| {
        let mut np = pool("default");
        np.template.requirements.push(req(
            labels::CAPACITY_TYPE,
            crate::requirements::Operator::In,
            cts,
        ));
        solve(&snapshot(vec![np], catalog(4), pods("p", 3, 500, 1)))
    };
    let forward = plan_listing(&["on-demand", "spot"]);
    let mut backward = plan_listing(&["spot", "on-demand"]);
    let values = |plan: &crate::scheduling::Plan| -> Vec<Vec<String>> {
        let claim = &plan.new_claims[0];
        claim
            .requirement_list
            .iter()
            .filter(|r| r.key == labels::CAPACITY_TYPE)
            .map(|r| r.values.clone())
            .collect()
    };
    assert_eq!(values(&forward), [["on-demand", "spot"]]);
    assert_eq!(values(&backward), [["spot", "on-demand"]]);
    // Put back in the other order, the plans are the same.
    for c in &mut backward.new_claims {
        for r in &mut c.requirement_list {
            r.values.sort();
        }
        for line in &mut c.requirements {
            *line = line.replace("[spot, on-demand]", "[on-demand, spot]");
        }
    }
    assert_eq!(forward, backward);
}
