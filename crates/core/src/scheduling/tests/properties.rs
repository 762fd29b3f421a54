//! Properties over random snapshots: hard constraints hold for every placement, no node is
//! over-committed, limits hold, and the plan does not depend on run or input order.

use proptest::prelude::*;
use std::sync::Arc;

use crate::labels;
use crate::model::*;
use crate::resources::{self, Resources};
use crate::scheduling::{Plan, Target};
use crate::testkit::*;

#[derive(Clone, Debug)]
struct Spec {
    cpu: i64,
    mem: i64,
    zone: Option<usize>,
    anti: bool,
    spread: bool,
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        1i64..=8,
        0i64..=6,
        prop::option::of(0usize..3),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(c, m, zone, anti, spread)| Spec {
            cpu: c * 250,
            mem: m,
            zone,
            anti,
            spread,
        })
}

/// With `convex`, bigger types cost more per cpu (as large sizes and some families do in a real
/// catalog), so the pass that splits claims onto smaller nodes has work to do.
fn build(specs: &[Spec], limit: Option<i64>, convex: bool) -> Snapshot {
    let ps: Vec<Pod> = specs
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut p = pod(&format!("p{i:03}"), s.cpu, s.mem);
            // Spread pods stay unrestricted so the zone skew over all of them is a property.
            if let (Some(z), false) = (s.zone, s.spread) {
                p.node_selector.insert(labels::ZONE.into(), ZONES[z].into());
            }
            if s.anti {
                p = with_label(p, "anti", "yes");
                p.pod_anti_affinity
                    .push(term(labels::HOSTNAME, "anti", "yes"));
            }
            if s.spread {
                p = with_label(p, "spread", "yes");
                p.topology_spread
                    .push(spread(labels::ZONE, 1, "spread", "yes"));
            }
            p
        })
        .collect();
    let mut np = pool("default");
    if let Some(l) = limit {
        np.limits = Resources::new().with(resources::CPU, l);
    }
    let mut its = catalog(6);
    if convex {
        for (i, it) in its.iter_mut().enumerate() {
            for o in &mut it.offerings {
                o.price *= 1.0 + 0.3 * i as f64;
            }
        }
    }
    snapshot(vec![np], its, ps)
}

fn check(specs: &[Spec], s: &Snapshot, plan: &Plan, limit: Option<i64>) {
    let cat = catalog(6);
    let find = |name: &str| cat.iter().find(|it| it.name == name).unwrap();
    let mut charged = 0;
    for c in &plan.new_claims {
        // Every option of every claim holds all of its pods.
        for o in &c.instance_types {
            let alloc = find(plan.name_of(o)).allocatable();
            assert!(
                c.requests.fits_in(&alloc),
                "{} cannot hold {}",
                plan.name_of(o),
                c.requests
            );
        }
        charged += c
            .instance_types
            .iter()
            .map(|o| find(plan.name_of(o)).capacity.get(resources::CPU))
            .max()
            .unwrap_or(0);
        let zone = zone_of(plan, c);
        let mut anti = 0;
        for key in &c.pods {
            let i: usize = key.trim_start_matches("default/p").parse().unwrap();
            let sp = &specs[i];
            if let (Some(z), false) = (sp.zone, sp.spread) {
                assert_eq!(zone, ZONES[z], "{key} requires {}", ZONES[z]);
            }
            anti += usize::from(sp.anti);
        }
        assert!(anti <= 1, "two anti-affinity pods share a node");
    }
    if let Some(l) = limit {
        assert!(charged <= l, "charged {charged} > limit {l}");
    }
    // Zone spread: among spread pods the zones differ by at most one (all pods carry the same
    // constraint, so the skew can only grow through a violating placement).
    let mut per_zone = [0usize; 3];
    for p in &plan.placements {
        let i: usize = p.pod.trim_start_matches("default/p").parse().unwrap();
        if let (true, Target::NewClaim(k)) = (specs[i].spread, &p.target) {
            let z = zone_of(plan, &plan.new_claims[*k]);
            per_zone[ZONES.iter().position(|x| *x == z).unwrap()] += 1;
        }
    }
    let spread_placed: usize = per_zone.iter().sum();
    if spread_placed > 0 {
        let (mn, mx) = (
            per_zone.iter().min().unwrap(),
            per_zone.iter().max().unwrap(),
        );
        assert!(mx - mn <= 1, "zone skew {per_zone:?}");
    }
    assert_eq!(plan.placements.len() + plan.unplaced.len(), s.pods.len());
    assert!(
        plan.lower_bound <= plan.cost + 1e-6,
        "bound {} above cost {}",
        plan.lower_bound,
        plan.cost
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn hard_constraints_hold(specs in prop::collection::vec(spec(), 1..40), convex in any::<bool>()) {
        let s = build(&specs, None, convex);
        let plan = solve(&s);
        check(&specs, &s, &plan, None);
    }

    #[test]
    fn limits_hold(specs in prop::collection::vec(spec(), 1..30), limit in 2i64..40, convex in any::<bool>()) {
        let limit = limit * 1000;
        let s = build(&specs, Some(limit), convex);
        let plan = solve(&s);
        check(&specs, &s, &plan, Some(limit));
    }

    #[test]
    fn plans_are_deterministic_and_order_independent(specs in prop::collection::vec(spec(), 1..30), seed in any::<u64>(), convex in any::<bool>()) {
        let s = build(&specs, None, convex);
        let a = solve(&s);
        let b = solve(&s);
        prop_assert_eq!(&a, &b);
        let mut shuffled = s.clone();
        let mut rng = crate::rng::Rng::new(seed);
        for i in (1..shuffled.pods.len()).rev() {
            let j = rng.below(i + 1);
            shuffled.pods.swap(i, j);
        }
        let c = solve(&shuffled);
        prop_assert_eq!(&a, &c);
    }
}

#[derive(Clone, Debug)]
struct NodeSpec {
    cpu: i64,
    mem: i64,
    zone: usize,
    used_cpu: i64,
}

fn node_spec() -> impl Strategy<Value = NodeSpec> {
    (1i64..=4, 1i64..=8, 0usize..3, 0i64..=3).prop_map(|(c, m, zone, u)| NodeSpec {
        cpu: c,
        mem: m,
        zone,
        used_cpu: (u * 250).min(c * 1000),
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Pods placed on existing nodes never push a node past its allocatable, counting what
    /// already runs there.
    #[test]
    fn existing_nodes_are_never_overcommitted(
        nodes in prop::collection::vec(node_spec(), 1..6),
        specs in prop::collection::vec(spec(), 1..30),
    ) {
        let mut s = build(&specs, None, true);
        for (i, n) in nodes.iter().enumerate() {
            let name = format!("n{i}");
            s.nodes.push(Arc::new(node(&name, ZONES[n.zone], n.cpu, n.mem)));
            if n.used_cpu > 0 {
                s.pods.push(running(pod(&format!("r{i}"), n.used_cpu, 0), &name).into());
            }
        }
        let plan = solve(&s);
        for (i, n) in nodes.iter().enumerate() {
            let name = format!("n{i}");
            let mut cpu = n.used_cpu;
            let mut mem = 0;
            let mut count = usize::from(n.used_cpu > 0);
            for p in &plan.placements {
                if p.target == Target::Node(name.clone()) {
                    let k: usize = p.pod.trim_start_matches("default/p").parse().unwrap();
                    cpu += specs[k].cpu;
                    mem += specs[k].mem * GI;
                    count += 1;
                    if let (Some(z), false) = (specs[k].zone, specs[k].spread) {
                        prop_assert_eq!(ZONES[z], ZONES[n.zone]);
                    }
                }
            }
            prop_assert!(cpu <= n.cpu * 1000, "node {} cpu {} > {}", name, cpu, n.cpu * 1000);
            prop_assert!(mem <= n.mem * GI, "node {} memory over", name);
            prop_assert!(count <= 110);
        }
    }
}
