//! Pod affinity terms' selection of other pods (namespaces, `matchLabelKeys`), and plans that
//! must not depend on the order a snapshot lists names in.

use std::collections::BTreeMap;

use crate::labels;
use crate::model::*;
use crate::scheduling::Target;
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
            .map(|r| r.values.to_vec())
            .collect()
    };
    assert_eq!(values(&forward), [["on-demand", "spot"]]);
    assert_eq!(values(&backward), [["spot", "on-demand"]]);
    // Put back in the other order, the plans are the same.
    for c in &mut backward.new_claims {
        for r in &mut c.requirement_list {
            let mut sorted = r.values.to_vec();
            sorted.sort();
            r.values = sorted.into();
        }
        for line in &mut c.requirements {
            *line = line.replace("[spot, on-demand]", "[on-demand, spot]");
        }
    }
    assert_eq!(forward, backward);
}

#[test]
fn running_pods_fall_in_sets_of_one_namespace_and_labels_in_order_of_first_appearance() {
    let web = |name: &str, ns: &str| {
        let mut p = running(with_label(pod(name, 10, 0), "app", "web"), "n");
        p.namespace = ns.into();
        p
    };
    let s = snapshot(
        vec![pool("default")],
        catalog(1),
        vec![
            web("w0", "default"),
            web("x0", "other"),
            with_label(web("w1", "default"), "rev", "2"),
            web("w2", "default"),
            web("x1", "other"),
        ],
    );
    let running: Vec<(usize, usize)> = (0..5).map(|i| (i, 10 + i)).collect();
    assert_eq!(
        crate::scheduling::setup::label_sets(&s, &running),
        vec![
            vec![(0, 10), (3, 13)],
            vec![(1, 11), (4, 14)],
            vec![(2, 12)]
        ]
    );
}
