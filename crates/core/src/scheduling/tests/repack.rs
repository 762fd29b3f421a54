//! The improvement pass after the greedy placement: claims that are cheaper as several
//! smaller nodes are split, and claims whose pods must share a host are not.

use crate::labels;
use crate::model::*;
use crate::resources::{self, Resources};
use crate::scheduling::{self, Options};
use crate::testkit::*;

/// Two sizes priced alike per cpu and one big type at ten times the rate, as the largest
/// sizes of some real families are: a claim the greedy grows into it is worth splitting.
fn catalog_with_an_overpriced_giant() -> Vec<InstanceType> {
    let mut its = catalog(4);
    its.truncate(2);
    let mut giant = catalog(32).pop().unwrap();
    giant.name = "giant".into();
    for o in &mut giant.offerings {
        o.price *= 10.0;
    }
    its.push(giant);
    its
}

#[test]
fn a_claim_grown_into_an_overpriced_type_is_split_onto_smaller_nodes() {
    // Three zone-spread pods per zone would fit one it-1 (4 cpu) each; nine 1-cpu pods of
    // one zone do not, and the greedy grows their claim into the giant.
    let ps: Vec<Pod> = pods("web", 9, 1000, 1)
        .into_iter()
        .map(|mut p| {
            p.node_selector.insert(labels::ZONE.into(), ZONES[0].into());
            p
        })
        .collect();
    let s = snapshot(
        vec![pool("default")],
        catalog_with_an_overpriced_giant(),
        ps,
    );
    let greedy = scheduling::solve(
        &s,
        &Options {
            repack: false,
            ..Options::default()
        },
    );
    assert_eq!(greedy.new_claims.len(), 1);
    assert_eq!(type_of(&greedy, &greedy.new_claims[0]), "giant");
    let plan = solve(&s);
    assert!(
        plan.cost < greedy.cost / 5.0,
        "split plan costs {} against {}",
        plan.cost,
        greedy.cost
    );
    assert!(plan.unplaced.is_empty());
    assert_eq!(plan.placements.len(), 9);
    for c in &plan.new_claims {
        assert_ne!(type_of(&plan, c), "giant");
        assert_eq!(zone_of(&plan, c), ZONES[0]);
    }
    let placed: usize = plan.new_claims.iter().map(|c| c.pods.len()).sum();
    assert_eq!(placed, 9);
    // Every placement names the claim that lists the pod.
    for p in &plan.placements {
        let scheduling::Target::NewClaim(k) = p.target else {
            panic!("{} not on a new claim", p.pod);
        };
        assert!(plan.new_claims[k].pods.contains(&p.pod));
    }
}

/// What the plan charges its NodePool's cpu limit: each claim its largest option's capacity.
fn cpu_charged(plan: &scheduling::Plan, its: &[InstanceType]) -> i64 {
    plan.new_claims
        .iter()
        .map(|c| {
            c.instance_types
                .iter()
                .map(|o| {
                    let it = its.iter().find(|it| it.name == plan.name_of(o)).unwrap();
                    it.capacity.get(resources::CPU)
                })
                .max()
                .unwrap_or(0)
        })
        .sum()
}

#[test]
fn a_split_near_a_limit_keeps_each_part_to_types_of_its_own_size() {
    // The whole claim is charged the giant's 64 cpu; three parts that kept the giant among
    // their options would be charged 192, past the limit of 100, and the split was refused.
    let ps: Vec<Pod> = pods("web", 9, 1000, 1)
        .into_iter()
        .map(|mut p| {
            p.node_selector.insert(labels::ZONE.into(), ZONES[0].into());
            p
        })
        .collect();
    let mut np = pool("default");
    np.limits = Resources::new().with(resources::CPU, 100_000);
    let its = catalog_with_an_overpriced_giant();
    let s = snapshot(vec![np], its.clone(), ps);
    let greedy = scheduling::solve(
        &s,
        &Options {
            repack: false,
            ..Options::default()
        },
    );
    assert_eq!(type_of(&greedy, &greedy.new_claims[0]), "giant");
    let plan = solve(&s);
    assert!(plan.unplaced.is_empty());
    assert!(
        plan.cost < greedy.cost / 5.0,
        "split plan costs {} against {}",
        plan.cost,
        greedy.cost
    );
    assert!(plan.new_claims.len() > 1);
    for c in &plan.new_claims {
        assert!(c.instance_types.iter().all(|o| plan.name_of(o) != "giant"));
    }
    assert!(cpu_charged(&plan, &its) <= 100_000);
}

#[test]
fn pods_spread_per_hostname_are_not_moved_by_the_split() {
    let ps: Vec<Pod> = pods("web", 9, 1000, 1)
        .into_iter()
        .map(|mut p| {
            p = with_label(p, "app", "web");
            p.node_selector.insert(labels::ZONE.into(), ZONES[0].into());
            p.topology_spread
                .push(spread(labels::HOSTNAME, 9, "app", "web"));
            p
        })
        .collect();
    let s = snapshot(
        vec![pool("default")],
        catalog_with_an_overpriced_giant(),
        ps,
    );
    let greedy = scheduling::solve(
        &s,
        &Options {
            repack: false,
            ..Options::default()
        },
    );
    assert!(
        greedy
            .new_claims
            .iter()
            .any(|c| type_of(&greedy, c) == "giant")
    );
    assert_eq!(solve(&s), greedy);
}
