//! Planning rounds over small clusters. The simulator here is a first-fit packer over plain
//! data: enough to exercise the decision rules; the scheduling engine has its own tests.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::disruption::candidates::DO_NOT_DISRUPT;
use crate::disruption::command::Method;
use crate::disruption::simulate::{ReplacementOption, SimulatedClaim, Simulation};
use crate::labels;
use crate::model::NodeClaim;
use crate::model::{Budget, BudgetNodes, CapacityType, InstanceType, Node, Pod, PodTemplate};
use crate::resources::{CPU, Resources};
use crate::testkit::{disruptable, instance_type, offering, replica};
use crate::time::Timestamp;

const NOW: Timestamp = Timestamp(100_000_000);

struct FirstFit;

impl Simulator for FirstFit {
    fn simulate(
        &self,
        s: &Snapshot,
        purpose: Purpose,
        without: &BTreeSet<String>,
        pods: &[&Pod],
    ) -> Simulation {
        // Consolidation's rule, as every simulator must keep it: the saving bounds rely on it.
        let closed = match purpose {
            Purpose::Consolidation => crate::disruption::candidates::closed_nodes(s),
            Purpose::Drift => BTreeSet::new(),
        };
        let mut free: Vec<(String, i64)> = s
            .nodes
            .iter()
            .filter(|n| !without.contains(&n.name) && !closed.contains(&n.name))
            .map(|n| {
                let used: i64 = s
                    .pods
                    .iter()
                    .filter(|p| {
                        p.node_name.as_deref() == Some(&n.name)
                            && !pods.iter().any(|q| q.key() == p.key())
                    })
                    .map(|p| p.requests.get(CPU))
                    .sum();
                (n.name.clone(), n.allocatable.get(CPU) - used)
            })
            .collect();
        let mut out = Simulation::default();
        let mut new_cpu = 0;
        for p in pods {
            let cpu = p.requests.get(CPU);
            if let Some(slot) = free.iter_mut().find(|(_, f)| *f >= cpu) {
                slot.1 -= cpu;
            } else {
                new_cpu += cpu;
            }
        }
        if new_cpu > 0 {
            let its = &s.instance_types["default"];
            let mut options: Vec<ReplacementOption> = its
                .iter()
                .filter(|it| it.allocatable().get(CPU) >= new_cpu)
                .map(|it| {
                    let spot = it
                        .offerings
                        .iter()
                        .filter(|o| o.capacity_type == CapacityType::Spot)
                        .map(|o| o.price)
                        .reduce(f64::min);
                    let od = it
                        .offerings
                        .iter()
                        .filter(|o| o.capacity_type == CapacityType::OnDemand)
                        .map(|o| o.price)
                        .reduce(f64::min);
                    let cheapest = it
                        .offerings
                        .iter()
                        .map(|o| o.price)
                        .fold(f64::INFINITY, f64::min);
                    let worst = it.offerings.iter().map(|o| o.price).fold(0.0, f64::max);
                    ReplacementOption {
                        instance_type: it.name.clone(),
                        cheapest_price: cheapest,
                        worst_launch_price: worst,
                        spot_price: spot,
                        on_demand_price: od,
                    }
                })
                .collect();
            if options.is_empty() {
                out.failures
                    .push((pods[0].key(), "no instance type has enough cpu".into()));
                return out;
            }
            options.sort_by(|a, b| a.cheapest_price.total_cmp(&b.cheapest_price));
            let mut cts: Vec<CapacityType> = its
                .iter()
                .flat_map(|it| it.offerings.iter().map(|o| o.capacity_type))
                .collect();
            cts.sort();
            cts.dedup();
            out.new_claims.push(SimulatedClaim {
                nodepool: "default".into(),
                requirements: vec![],
                options,
                capacity_types: cts,
            });
        }
        out
    }
}

fn it(name: &str, cpu: i64, od: f64, spot: Option<f64>) -> InstanceType {
    let mut offerings = vec![offering("a", CapacityType::OnDemand, od)];
    offerings.extend(spot.map(|p| offering("a", CapacityType::Spot, p)));
    instance_type(name, Resources::new().with(CPU, cpu), offerings)
}

struct Cluster(Snapshot);

impl Cluster {
    fn new(its: Vec<InstanceType>) -> Cluster {
        Cluster(Snapshot {
            now: NOW,
            nodepools: vec![disruptable("default")],
            instance_types: [("default".to_string(), Arc::new(its))]
                .into_iter()
                .collect(),
            ..Snapshot::default()
        })
    }

    fn node(mut self, name: &str, it: &str, ct: &str, pods_cpu: &[i64]) -> Cluster {
        let alloc = self.0.instance_types["default"]
            .iter()
            .find(|i| i.name == it)
            .unwrap()
            .allocatable();
        let labels: BTreeMap<String, String> = [
            (labels::NODEPOOL, "default"),
            (labels::INSTANCE_TYPE, it),
            (labels::ZONE, "a"),
            (labels::CAPACITY_TYPE, ct),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        self.0.nodes.push(Arc::new(Node {
            name: name.into(),
            provider_id: format!("p-{name}"),
            labels,
            allocatable: alloc,
            ready: true,
            ..Node::default()
        }));
        self.0.node_claims.push(Arc::new(NodeClaim {
            name: format!("claim-{name}"),
            nodepool: "default".into(),
            node_name: Some(name.into()),
            provider_id: Some(format!("p-{name}")),
            launched: true,
            registered: true,
            initialized: true,
            creation_timestamp: NOW,
            ..NodeClaim::default()
        }));
        for (i, cpu) in pods_cpu.iter().enumerate() {
            // Asking for cpu alone, the one resource the fixture's types have.
            let pod = Pod {
                namespace: "default".into(),
                name: format!("{name}-p{i}"),
                template: Arc::new(PodTemplate {
                    requests: Resources::new().with(CPU, *cpu),
                    ..PodTemplate::default()
                }),
                ..Pod::default()
            };
            self.0.pods.push(replica(pod, name).into());
        }
        self
    }

    fn plan(&self) -> DisruptionPlan {
        plan(&self.0, &FirstFit, Settings::default())
    }

    /// The round with `only_actionable` in batches of one, where the single-node search stops
    /// as early as it can, and the full round; their commands must agree.
    fn early_and_full(&self) -> (DisruptionPlan, DisruptionPlan) {
        let only = Settings {
            only_actionable: true,
            ..Settings::default()
        };
        let early = plan_in_batches(
            &self.0,
            &FirstFit,
            only,
            1,
            &NodeMemo::default(),
            &NoDeadline,
        );
        let full = self.plan();
        assert_eq!(early.commands, full.commands);
        (early, full)
    }
}

fn verdict<'a>(p: &'a DisruptionPlan, node: &str) -> &'a Verdict {
    p.verdicts.iter().find(|v| v.node == node).unwrap()
}

#[test]
fn empty_nodes_are_deleted_together() {
    let c = Cluster::new(vec![it("small", 2000, 0.1, None)])
        .node("a", "small", "on-demand", &[])
        .node("b", "small", "on-demand", &[]);
    let p = c.plan();
    assert_eq!(p.commands.len(), 1);
    assert_eq!(p.commands[0].method, Method::Emptiness);
    assert_eq!(p.commands[0].targets.len(), 2);
    assert!((p.savings_per_hour() - 0.2).abs() < 1e-9);
}

#[test]
fn emptiness_respects_budgets() {
    let mut c = Cluster::new(vec![it("small", 2000, 0.1, None)])
        .node("a", "small", "on-demand", &[])
        .node("b", "small", "on-demand", &[]);
    c.0.nodepools[0].disruption.budgets = vec![Budget {
        nodes: BudgetNodes::Count(1),
        schedule: None,
        duration: None,
        reasons: vec![],
    }];
    let p = c.plan();
    assert_eq!(p.commands[0].targets.len(), 1);
    assert_eq!(
        verdict(&p, "b").message,
        "budget 1 exhausted for reason Empty"
    );
}

#[test]
fn underutilized_node_is_deleted_when_pods_fit_elsewhere() {
    let c = Cluster::new(vec![it("big", 4000, 0.4, None)])
        .node("a", "big", "on-demand", &[1000])
        .node("b", "big", "on-demand", &[2500]);
    let p = c.plan();
    let cmd = p
        .commands
        .iter()
        .find(|c| {
            c.method == Method::SingleNodeConsolidation
                || c.method == Method::MultiNodeConsolidation
        })
        .unwrap();
    assert_eq!(cmd.decision.as_str(), "delete");
    assert_eq!(cmd.targets[0].node, "a");
    assert_eq!(verdict(&p, "b").code, "consolidatable");
}

#[test]
fn consolidation_waits_while_pending_pods_need_new_nodes() {
    let with_pending = |cpu: i64| {
        let mut c = Cluster::new(vec![it("big", 4000, 0.4, None)])
            .node("a", "big", "on-demand", &[1000])
            .node("b", "big", "on-demand", &[2500]);
        c.0.pods.push(Arc::new(Pod {
            namespace: "default".into(),
            name: "pending".into(),
            template: Arc::new(PodTemplate {
                requests: Resources::new().with(CPU, cpu),
                ..PodTemplate::default()
            }),
            ..Pod::default()
        }));
        c.plan()
    };
    let consolidations = |p: &DisruptionPlan| {
        p.commands
            .iter()
            .filter(|c| {
                matches!(
                    c.method,
                    Method::SingleNodeConsolidation | Method::MultiNodeConsolidation
                )
            })
            .count()
    };
    // 3500m fits on neither node as they stand: a new node is coming for it, and `a`'s pod
    // would only queue behind it.
    let p = with_pending(3500);
    assert_eq!(consolidations(&p), 0, "{:?}", p.commands);
    for node in ["a", "b"] {
        let v = verdict(&p, node);
        assert_eq!(v.code, "pending-pods", "{v:?}");
        assert_eq!(
            v.message,
            "1 pending pod needs 1 new node; consolidation waits until they are placed"
        );
    }
    // A pending pod that fits where it is, or fits nowhere at all, launches nothing and holds
    // nothing back.
    for cpu in [500, 6000] {
        let p = with_pending(cpu);
        assert_eq!(consolidations(&p), 1, "{cpu}m: {:?}", p.commands);
        assert_eq!(p.commands[0].targets[0].node, "a");
    }
}

#[test]
fn replaces_with_a_strictly_cheaper_node_or_says_why_not() {
    let its = vec![it("big", 8000, 0.8, None), it("small", 2000, 0.2, None)];
    let p = Cluster::new(its.clone())
        .node("a", "big", "on-demand", &[1000])
        .plan();
    assert_eq!(p.commands.len(), 1);
    assert_eq!(p.commands[0].decision.as_str(), "replace");
    assert_eq!(
        p.commands[0].replacements[0].instance_types,
        vec!["small".to_string()]
    );
    assert!((p.commands[0].savings_per_hour - 0.6).abs() < 1e-9);

    let p = Cluster::new(its)
        .node("a", "small", "on-demand", &[1500])
        .plan();
    assert!(p.commands.is_empty());
    assert_eq!(
        verdict(&p, "a").message,
        "no cheaper replacement: now $0.2000/h, the cheapest that holds the pods is small at \
         $0.2000/h (+0.0000 $/h)"
    );
}

#[test]
fn spot_to_spot_needs_the_feature_gate_and_fifteen_options() {
    let mut its = vec![it("big", 8000, 0.8, Some(0.5))];
    for i in 0..3 {
        its.push(it(&format!("s{i}"), 2000, 0.2, Some(0.1)));
    }
    let c = Cluster::new(its).node("a", "big", "spot", &[1000]);
    assert_eq!(verdict(&c.plan(), "a").code, "spot-to-spot-disabled");
    let p = plan(
        &c.0,
        &FirstFit,
        Settings {
            features: Features {
                spot_to_spot_consolidation: true,
            },
            ..Settings::default()
        },
    );
    assert_eq!(
        verdict(&p, "a").message,
        "only 3 cheaper spot instance types (spot-to-spot needs 15)"
    );
}

#[test]
fn expiration_is_forceful_and_ignores_do_not_disrupt() {
    let mut c =
        Cluster::new(vec![it("small", 2000, 0.1, None)]).node("a", "small", "on-demand", &[500]);
    c.0.nodepools[0].template.expire_after = Some(Duration::from_secs(3600));
    c.0.claim_mut(0).creation_timestamp = Timestamp(NOW.0 - 3_600_000);
    c.0.pod_mut(0)
        .annotations
        .insert(DO_NOT_DISRUPT.into(), "true".into());
    let p = c.plan();
    assert_eq!(p.commands.len(), 1);
    assert_eq!(p.commands[0].method, Method::Expiration);
    assert!(p.commands[0].forceful);
}

#[test]
fn drifted_node_is_replaced_one_at_a_time() {
    let mut c = Cluster::new(vec![it("small", 2000, 0.1, None)])
        .node("a", "small", "on-demand", &[1500])
        .node("b", "small", "on-demand", &[1500]);
    for claim in c.0.node_claims.iter_mut().map(Arc::make_mut) {
        claim.drifted = Some("AMIDrift".into());
    }
    let p = c.plan();
    let drift: Vec<&Command> = p
        .commands
        .iter()
        .filter(|c| c.method == Method::Drift)
        .collect();
    assert_eq!(drift.len(), 1);
    assert_eq!(drift[0].replacements.len(), 1);
    assert_eq!(verdict(&p, "b").code, "drift-queued");
}

#[test]
fn a_node_whose_instance_type_left_the_catalog_drifts_once_it_is_an_hour_old() {
    let mut c = Cluster::new(vec![
        it("small", 2000, 0.1, None),
        it("big", 4000, 0.4, None),
    ])
    .node("a", "big", "on-demand", &[500])
    .node("b", "small", "on-demand", &[500]);
    // "big" is gone; "small" is listed twice, the first entry with no offering in zone "a".
    let mut shadow = it("small", 2000, 0.1, None);
    for o in &mut shadow.offerings {
        o.zone = "elsewhere".into();
    }
    c.0.instance_types.insert(
        "default".into(),
        Arc::new(vec![shadow, it("small", 2000, 0.1, None)]),
    );
    let young = c.plan();
    assert!(young.commands.iter().all(|c| c.method != Method::Drift));
    for claim in c.0.node_claims.iter_mut().map(Arc::make_mut) {
        claim.creation_timestamp = Timestamp(NOW.0 - 2 * 3_600_000);
    }
    let old = c.plan();
    let drift: Vec<&Command> = old
        .commands
        .iter()
        .filter(|c| c.method == Method::Drift)
        .collect();
    assert_eq!(drift.len(), 1);
    // The first "small" in the list has no offering where "b" runs: it drifted too, and waits.
    assert_eq!(drift[0].targets[0].node, "a");
    assert_eq!(verdict(&old, "a").code, "disrupted");
    assert_eq!(verdict(&old, "b").code, "drift-queued");
    assert!(verdict(&old, "b").message.contains("InstanceTypeNotFound"));
}

#[test]
fn plans_are_deterministic_and_blocked_nodes_say_why() {
    let mut c = Cluster::new(vec![it("big", 4000, 0.4, None)])
        .node("a", "big", "on-demand", &[1000])
        .node("b", "big", "on-demand", &[1000])
        .node("c", "big", "on-demand", &[1000]);
    c.0.pod_mut(2)
        .annotations
        .insert(DO_NOT_DISRUPT.into(), "true".into());
    let p1 = c.plan();
    let p2 = c.plan();
    assert_eq!(p1, p2);
    assert_eq!(verdict(&p1, "c").message, "do-not-disrupt pod default/c-p0");
    assert_eq!(p1.verdicts.len(), 3);
    // Every evicted pod has a place: the two deleted nodes' pods fit on the one that stays.
    assert!(p1.commands.iter().all(|c| c.replacements.is_empty()));
}

#[test]
fn validation_rejects_what_changed() {
    use crate::disruption::validate::validate;
    let c = Cluster::new(vec![it("big", 4000, 0.4, None)])
        .node("a", "big", "on-demand", &[])
        .node("b", "big", "on-demand", &[1000])
        .node("c", "big", "on-demand", &[1000]);
    let p = c.plan();
    let empty = p
        .commands
        .iter()
        .find(|c| c.method == Method::Emptiness)
        .unwrap();
    assert_eq!(validate(empty, &c.0, &FirstFit), Ok(()));
    let consolidate = p
        .commands
        .iter()
        .find(|c| c.method != Method::Emptiness)
        .unwrap();
    assert_eq!(validate(consolidate, &c.0, &FirstFit), Ok(()));

    // A pod landed on the empty node, and a protected pod on a consolidation target.
    let mut fresh = c.0.clone();
    let mut moved = (*fresh.pods[0]).clone();
    moved.name = "late".into();
    moved.node_name = Some("a".into());
    fresh.pods.push(moved.into());
    let err = validate(empty, &fresh, &FirstFit).unwrap_err();
    assert_eq!(err.to_string(), "node a is no longer empty");
    let target = &consolidate.targets[0].node;
    let pod = fresh
        .pods
        .iter_mut()
        .find(|p| p.node_name.as_ref() == Some(target))
        .map(Arc::make_mut)
        .unwrap();
    pod.annotations.insert(DO_NOT_DISRUPT.into(), "true".into());
    let err = validate(consolidate, &fresh, &FirstFit).unwrap_err();
    assert_eq!(err.kind(), "churn");
}

mod properties {
    use proptest::prelude::*;

    use super::*;
    use crate::model::PodDisruptionBudget;
    use crate::selector::LabelSelector;

    #[derive(Clone, Debug)]
    struct NodeSpec {
        big: bool,
        pods: Vec<i64>,
        protected: bool,
        pdb_blocked: bool,
        /// A pod event a moment ago: inside the NodePool's `consolidateAfter`.
        fresh: bool,
    }

    fn node_spec() -> impl Strategy<Value = NodeSpec> {
        (
            any::<bool>(),
            prop::collection::vec(prop::sample::select(vec![250i64, 500, 1000, 1500]), 0..4),
            any::<bool>(),
            any::<bool>(),
            prop::bool::weighted(0.3),
        )
            .prop_map(|(big, pods, protected, pdb_blocked, fresh)| NodeSpec {
                big,
                pods,
                protected,
                pdb_blocked,
                fresh,
            })
    }

    fn build(specs: &[NodeSpec], budget: u32) -> Cluster {
        let mut c = Cluster::new(vec![
            it("big", 4000, 0.4, None),
            it("small", 2000, 0.2, None),
        ]);
        c.0.nodepools[0].disruption.budgets = vec![Budget {
            nodes: BudgetNodes::Count(budget),
            schedule: None,
            duration: None,
            reasons: vec![],
        }];
        c.0.nodepools[0].disruption.consolidate_after = Some(Duration::from_secs(60));
        for (i, s) in specs.iter().enumerate() {
            let name = format!("n{i}");
            c = c.node(
                &name,
                if s.big { "big" } else { "small" },
                "on-demand",
                &s.pods,
            );
            let ago = if s.fresh { 10_000 } else { 600_000 };
            let claim =
                c.0.node_claims
                    .last_mut()
                    .map(Arc::make_mut)
                    .expect("the node's claim");
            claim.last_pod_event_time = Some(Timestamp(NOW.0 - ago));
            for p in
                c.0.pods
                    .iter_mut()
                    .filter(|p| p.node_name.as_deref() == Some(name.as_str()))
                    .map(Arc::make_mut)
            {
                p.labels.insert("node".into(), name.clone());
                if s.protected {
                    p.annotations.insert(DO_NOT_DISRUPT.into(), "true".into());
                }
            }
            if s.pdb_blocked {
                c.0.pdbs.push(PodDisruptionBudget {
                    namespace: "default".into(),
                    name: format!("pdb-{name}"),
                    selector: Some(LabelSelector {
                        match_labels: [("node".to_string(), name.clone())].into_iter().collect(),
                        ..LabelSelector::default()
                    }),
                    disruptions_allowed: 0,
                    ..PodDisruptionBudget::default()
                });
            }
        }
        c
    }

    proptest! {
        #[test]
        fn plans_never_violate_protections_or_budgets(specs in prop::collection::vec(node_spec(), 1..8), budget in 0u32..4) {
            let c = build(&specs, budget);
            let p = c.plan();
            prop_assert_eq!(&p, &c.plan());
            // One budget for every reason: all voluntary disruptions together stay within it.
            let mut disrupted = 0u32;
            for cmd in &p.commands {
                for t in &cmd.targets {
                    let i: usize = t.node[1..].parse().unwrap();
                    let spec = &specs[i];
                    if !spec.pods.is_empty() {
                        prop_assert!(!spec.protected, "do-not-disrupt violated by {}", cmd);
                        prop_assert!(!spec.pdb_blocked, "PDB violated by {}", cmd);
                    }
                    if !cmd.forceful {
                        disrupted += 1;
                    }
                }
                if cmd.method == Method::MultiNodeConsolidation || cmd.method == Method::SingleNodeConsolidation {
                    prop_assert!(cmd.savings_per_hour > 0.0, "not strictly cheaper: {}", cmd);
                }
                // Every evicted pod has a place: re-simulating the command finds no failure.
                let without: BTreeSet<String> = cmd.targets.iter().map(|t| t.node.clone()).collect();
                let pods: Vec<&Pod> = c.0.pods.iter().filter(|p| cmd.targets.iter().any(|t| t.pods.contains(&p.key()))).map(|p| &**p).collect();
                prop_assert!(FirstFit.simulate(&c.0, Purpose::Consolidation, &without, &pods).failures.is_empty());
            }
            prop_assert!(disrupted <= budget, "budget {} exceeded: {}", budget, disrupted);
            prop_assert_eq!(p.verdicts.len(), specs.len());
        }

        #[test]
        fn the_saving_bounds_never_rule_out_a_command(specs in prop::collection::vec(node_spec(), 1..8)) {
            let mut c = build(&specs, 10);
            // A type that two `big` nodes can merge into, so multi-node commands exist.
            Arc::make_mut(c.0.instance_types.get_mut("default").unwrap())
                .push(it("huge", 8000, 0.5, None));
            let (graceful, _) = crate::disruption::candidates::select_both(&c.0);
            let bounds = SavingBounds::new(&c.0);
            let cands: Vec<&Candidate<'_>> =
                graceful.candidates.iter().filter(|c| !c.is_empty()).collect();
            let engine = crate::disruption::engine_simulator::EngineSimulator::default();
            let features = Settings::default().features;
            for sim in [&FirstFit as &dyn Simulator, &engine] {
                let decide = |prefix: &[&Candidate<'_>], method| {
                    let job = consolidation::job(prefix);
                    consolidation::decide(&sim.simulate(&c.0, Purpose::Consolidation, &job.without, &job.pods), prefix, method, features)
                };
                for cand in &cands {
                    let found = decide(&[*cand], Method::SingleNodeConsolidation);
                    match (bounds.of(cand), found) {
                        (None, Ok(cmd)) => prop_assert!(false, "{} ruled out, yet {}", cand.node.name, cmd),
                        (Some(b), Ok(cmd)) => prop_assert!(cmd.savings_per_hour <= b, "{} bound {} < {}", cand.node.name, b, cmd),
                        _ => {}
                    }
                }
                for n in 2..=cands.len() {
                    if bounds.rules_out_together(&cands[..n]) {
                        let found = decide(&cands[..n], Method::MultiNodeConsolidation);
                        prop_assert!(found.is_err(), "prefix of {} ruled out, yet {:?}", n, found);
                    }
                }
            }
        }

        #[test]
        fn simulating_only_actionable_candidates_or_no_verdicts_gives_the_same_commands(specs in prop::collection::vec(node_spec(), 1..8), budget in 0u32..4) {
            let c = build(&specs, budget);
            let only = Settings { only_actionable: true, ..Settings::default() };
            prop_assert_eq!(&plan(&c.0, &FirstFit, only).commands, &c.plan().commands);
            let engine = crate::disruption::engine_simulator::EngineSimulator::default();
            prop_assert_eq!(
                &plan(&c.0, &engine, only).commands,
                &plan(&c.0, &engine, Settings::default()).commands
            );
            // Without verdicts, the same commands; and no verdict at all.
            for settings in [only, Settings::default()] {
                let quiet = Settings { commands_only: true, ..settings };
                let full = plan(&c.0, &engine, settings);
                let bare = plan(&c.0, &engine, quiet);
                prop_assert_eq!(&bare.commands, &full.commands);
                prop_assert!(bare.verdicts.is_empty());
                prop_assert!(!full.verdicts.is_empty() || c.0.nodes.is_empty());
                prop_assert_eq!(&plan(&c.0, &FirstFit, quiet).commands, &plan(&c.0, &FirstFit, settings).commands);
            }
            // Small batches make the priciest-first search stop early wherever it can.
            for batch in [1, 2] {
                prop_assert_eq!(
                    &plan_in_batches(&c.0, &FirstFit, only, batch, &NodeMemo::default(), &NoDeadline).commands,
                    &c.plan().commands
                );
                prop_assert_eq!(
                    &plan_in_batches(&c.0, &engine, only, batch, &NodeMemo::default(), &NoDeadline).commands,
                    &plan(&c.0, &engine, Settings::default()).commands
                );
            }
        }
    }
}

#[test]
fn the_single_node_search_stops_once_no_candidate_left_could_save_more() {
    // `c` is the priciest and can go: no other node could save more, so with batches of one
    // the search stops after it. Without the setting every candidate is simulated.
    let c = Cluster::new(vec![
        it("big", 4000, 0.4, None),
        it("small", 2000, 0.2, None),
    ])
    .node("a", "small", "on-demand", &[300])
    .node("b", "small", "on-demand", &[200])
    .node("c", "big", "on-demand", &[100])
    .node("d", "big", "on-demand", &[3000]);
    let (early, full) = c.early_and_full();
    assert_eq!(early.commands.len(), 1);
    assert_eq!(early.commands[0].method, Method::SingleNodeConsolidation);
    assert_eq!(early.commands[0].targets[0].node, "c");
    // `d` costs as much but comes later, so it could only tie.
    for n in ["a", "b", "d"] {
        assert_eq!(verdict(&early, n).code, "not-simulated", "{n}");
        assert_ne!(verdict(&full, n).code, "not-simulated", "{n}");
    }
}

#[test]
fn a_search_over_packed_nodes_stops_at_the_price_gap_not_the_price() {
    // Every node is too full for another's pods, so none can be deleted: a command can at
    // most save the gap between a node's price and the cheapest offering (0.4 - 0.3). `a`
    // is replaced by a `mid` node for exactly that, so no later candidate could do better;
    // ranked by price instead (0.4 each), every one of them would be simulated.
    let c = Cluster::new(vec![it("big", 4000, 0.4, None), it("mid", 2000, 0.3, None)])
        .node("a", "big", "on-demand", &[1900])
        .node("b", "big", "on-demand", &[3900])
        .node("c", "big", "on-demand", &[3900])
        .node("d", "big", "on-demand", &[3900]);
    let (early, full) = c.early_and_full();
    assert_eq!(early.commands.len(), 1);
    assert_eq!(early.commands[0].targets[0].node, "a");
    assert_eq!(early.commands[0].replacements[0].instance_types, ["mid"]);
    for n in ["b", "c", "d"] {
        assert_eq!(verdict(&early, n).code, "not-simulated", "{n}");
        assert_ne!(verdict(&full, n).code, "not-simulated", "{n}");
    }
}

/// Three full `big` nodes: no node's pods fit on another, and only a `big` node holds them.
fn packed_big_nodes() -> Cluster {
    Cluster::new(vec![it("big", 4000, 0.4, None), it("mid", 2000, 0.3, None)])
        .node("a", "big", "on-demand", &[3900])
        .node("b", "big", "on-demand", &[1900, 2000])
        .node("c", "big", "on-demand", &[3900])
}

#[test]
fn candidates_whose_pods_only_their_own_type_holds_are_not_simulated() {
    // Every node is full: a node's pods fit on no other, and only a `big` node holds 3,900m,
    // so a replacement costs what the node does and no command exists. Bounded by the gap to
    // the cheapest offering (0.4 - 0.3) instead, every node would be simulated to find that.
    let c = packed_big_nodes();
    let (early, full) = c.early_and_full();
    assert!(early.commands.is_empty());
    for n in ["a", "b", "c"] {
        let v = verdict(&early, n);
        assert_eq!(v.code, "not-simulated", "{n}");
        assert!(
            v.message.contains("no replacement could cost less"),
            "{n}: {v:?}"
        );
        assert_ne!(verdict(&full, n).code, "not-simulated", "{n}");
    }
}

/// [`FirstFit`], counting the snapshots a round asks it to prepare.
#[derive(Default)]
struct CountingPrepares(std::cell::Cell<usize>);

impl Simulator for CountingPrepares {
    fn simulate(
        &self,
        s: &Snapshot,
        purpose: Purpose,
        without: &BTreeSet<String>,
        pods: &[&Pod],
    ) -> Simulation {
        FirstFit.simulate(s, purpose, without, pods)
    }

    fn prepare<'a>(
        &'a self,
        _: &'a Snapshot,
        _: Purpose,
    ) -> Option<Box<dyn PreparedSimulation + 'a>> {
        self.0.set(self.0.get() + 1);
        None
    }
}

#[test]
fn a_round_the_bounds_settle_prepares_no_snapshot() {
    // As above: no prefix and no node can be consolidated, which the bounds show unaided.
    let c = packed_big_nodes();
    let only = Settings {
        only_actionable: true,
        ..Settings::default()
    };
    let counting = CountingPrepares::default();
    assert!(plan(&c.0, &counting, only).commands.is_empty());
    assert_eq!(counting.0.get(), 0);
    // A round that simulates prepares its snapshot once, for both searches.
    let c = c.node("d", "big", "on-demand", &[100]);
    let counting = CountingPrepares::default();
    assert_eq!(plan(&c.0, &counting, only).commands.len(), 1);
    assert_eq!(counting.0.get(), 1);
}

/// A deadline that passes for `method` once its search has asked `allowed` times.
struct After {
    method: Method,
    allowed: usize,
    asked: std::cell::Cell<usize>,
}

impl After {
    fn new(method: Method, allowed: usize) -> Self {
        After {
            method,
            allowed,
            asked: Default::default(),
        }
    }
}

impl Deadline for After {
    fn start(&self, method: Method) {
        if method == self.method {
            self.asked.set(0);
        }
    }

    fn passed(&self, method: Method) -> bool {
        if method != self.method {
            return false;
        }
        let asked = self.asked.get();
        self.asked.set(asked + 1);
        asked >= self.allowed
    }
}

#[test]
fn a_multi_node_search_out_of_time_keeps_the_longest_prefix_found() {
    // Four `mid` nodes with a small pod each: three go onto the fourth (the search's first
    // step), all four into one `small` node (its second).
    let c = Cluster::new(vec![
        it("mid", 2000, 0.2, None),
        it("small", 1000, 0.1, None),
    ])
    .node("a", "mid", "on-demand", &[100])
    .node("b", "mid", "on-demand", &[100])
    .node("c", "mid", "on-demand", &[100])
    .node("d", "mid", "on-demand", &[100]);
    let full = plan_until(&c.0, &FirstFit, Settings::default(), &NoDeadline);
    assert_eq!(full, c.plan());
    assert!(full.timed_out.is_empty());
    assert_eq!(full.commands.len(), 1);
    assert_eq!(full.commands[0].targets.len(), 4);

    let cut = plan_until(
        &c.0,
        &FirstFit,
        Settings::default(),
        &After::new(Method::MultiNodeConsolidation, 1),
    );
    assert_eq!(cut.timed_out, [Method::MultiNodeConsolidation]);
    assert_eq!(cut.commands.len(), 1, "{:?}", cut.verdicts);
    assert_eq!(cut.commands[0].method, Method::MultiNodeConsolidation);
    assert_eq!(cut.commands[0].targets.len(), 3);
    assert_eq!(cut.commands[0].decision.as_str(), "delete");

    // Out of time before its first step: nothing found, nothing done.
    let none = After::new(Method::MultiNodeConsolidation, 0);
    let cut = plan_until(&c.0, &FirstFit, Settings::default(), &none);
    assert_eq!(cut.timed_out, [Method::MultiNodeConsolidation]);
    assert!(cut.commands.iter().all(|c| c.targets.len() == 1));
}

#[test]
fn a_single_node_search_out_of_time_keeps_the_best_found() {
    // Budget 1, so no multi-node search. `x` could save its whole price as far as the bounds
    // know, so it is simulated first: its three pods do not all fit in `y`'s and `z`'s room,
    // so it is replaced by a `small` node. `w` is deleted (its pod fits on `x`) and saves
    // more, but only a search with time for a second batch finds it.
    let mut c = Cluster::new(vec![
        it("big", 4000, 0.4, None),
        it("mid", 2000, 0.35, None),
        it("small", 1000, 0.1, None),
    ])
    .node("x", "big", "on-demand", &[500, 500, 500])
    .node("y", "big", "on-demand", &[3200])
    .node("z", "big", "on-demand", &[3300])
    .node("w", "mid", "on-demand", &[1950]);
    c.0.nodepools[0].disruption.budgets = vec![Budget {
        nodes: BudgetNodes::Count(1),
        schedule: None,
        duration: None,
        reasons: vec![],
    }];
    let only = Settings {
        only_actionable: true,
        ..Settings::default()
    };
    let kept = NodeMemo::default();
    let full = plan_in_batches(&c.0, &FirstFit, only, 1, &kept, &NoDeadline);
    assert!(full.timed_out.is_empty());
    assert_eq!(full.commands.len(), 1, "{:?}", full.verdicts);
    assert_eq!(full.commands[0].targets[0].node, "w");

    let after_one = After::new(Method::SingleNodeConsolidation, 1);
    let cut = plan_in_batches(&c.0, &FirstFit, only, 1, &kept, &after_one);
    assert_eq!(cut.timed_out, [Method::SingleNodeConsolidation]);
    assert_eq!(cut.commands.len(), 1, "{:?}", cut.verdicts);
    assert_eq!(cut.commands[0].method, Method::SingleNodeConsolidation);
    assert_eq!(cut.commands[0].targets[0].node, "x");
    assert_eq!(cut.commands[0].decision.as_str(), "replace");
    assert_eq!(
        verdict(&cut, "w").message,
        "not simulated: the search ran out of time"
    );
}

#[test]
fn single_node_consolidation_is_not_limited_to_the_first_budgeted_candidates() {
    // Budget 1: `a` ranks first but cannot move anywhere; `b` can. A single-node command only
    // takes one node, so `b` may act although `a` filled the multi-node search's budget slot.
    let mut c = Cluster::new(vec![
        it("big", 4000, 0.4, None),
        it("small", 1000, 0.1, None),
    ])
    .node("a", "big", "on-demand", &[3900])
    .node("b", "small", "on-demand", &[100]);
    c.0.nodepools[0].disruption.budgets = vec![Budget {
        nodes: BudgetNodes::Count(1),
        schedule: None,
        duration: None,
        reasons: vec![],
    }];
    let p = c.plan();
    assert_eq!(p.commands.len(), 1, "{:?}", p.verdicts);
    assert_eq!(p.commands[0].targets[0].node, "b");
    assert_eq!(p.commands[0].decision.as_str(), "delete");
}

#[test]
fn nodes_taken_earlier_in_a_round_hold_nothing_in_its_later_simulations() {
    // Emptiness takes `e`; `c`'s pod would fit on `e` and nowhere else. Launched claims report
    // their allocatable, as they do once launched: a taken node's claim must not stand in for
    // the node as a claim still to register.
    let mut c = Cluster::new(vec![
        it("big", 4000, 0.4, None),
        it("small", 2000, 0.2, None),
    ])
    .node("e", "big", "on-demand", &[])
    .node("c", "big", "on-demand", &[1500]);
    for (claim, node) in
        c.0.node_claims
            .iter_mut()
            .map(Arc::make_mut)
            .zip(&c.0.nodes)
    {
        claim.allocatable = node.allocatable.clone();
    }
    let engine = crate::disruption::engine_simulator::EngineSimulator::default();
    for p in [
        plan(&c.0, &engine, Settings::default()),
        plan(&c.0, &FirstFit, Settings::default()),
    ] {
        let methods: Vec<Method> = p.commands.iter().map(|c| c.method).collect();
        assert_eq!(
            methods,
            [Method::Emptiness, Method::SingleNodeConsolidation],
            "{p:?}"
        );
        let replace = &p.commands[1];
        assert_eq!(replace.targets[0].node, "c");
        assert_eq!(replace.replacements.len(), 1, "{replace}");
        assert_eq!(
            replace.replacements[0].instance_types,
            ["small"],
            "{replace}"
        );
    }
}

#[test]
fn a_replacement_the_clusters_scheduler_would_fill_first_with_the_wrong_pods_is_no_command() {
    // The simulation puts `t`'s 300m pod on `e` (400m free) and opens a small replacement
    // for the 1500m and 500m pods. The cluster's scheduler sends the first pod to the
    // replacement, the emptiest node once Ready, then the 1500m one, and the 500m pod finds
    // room nowhere: a node like `t` would be launched again for it.
    let c = Cluster::new(vec![
        it("big", 4000, 0.4, None),
        it("small", 2000, 0.2, None),
    ])
    .node("e", "big", "on-demand", &[3600])
    .node("t", "big", "on-demand", &[300, 1500, 500]);
    let engine = crate::disruption::engine_simulator::EngineSimulator::default();
    let p = plan(&c.0, &engine, Settings::default());
    assert!(p.commands.is_empty(), "{:?}", p.commands);
    let t = p.verdicts.iter().find(|v| v.node == "t").unwrap();
    assert!(t.message.contains("cluster's scheduler"), "{t:?}");
    // With room for the 500m pod on `e` as well, the scheduler places every pod.
    let c = Cluster::new(vec![
        it("big", 4000, 0.4, None),
        it("small", 2000, 0.2, None),
    ])
    .node("e", "big", "on-demand", &[3400])
    .node("t", "big", "on-demand", &[300, 1500, 500]);
    let p = plan(&c.0, &engine, Settings::default());
    let methods: Vec<Method> = p.commands.iter().map(|c| c.method).collect();
    assert_eq!(methods, [Method::SingleNodeConsolidation], "{p:?}");
    assert_eq!(p.commands[0].replacements[0].instance_types, ["small"]);
}

#[test]
fn the_pods_of_a_running_commands_target_move_first_in_the_clusters_scheduler() {
    // `a` is a running command's target: later rounds plan its pod as staying put, so the
    // simulation moves `t`'s pod to `e`. But `a`'s pod moves first, to `e`, the emptiest
    // node, and then `t`'s pod finds no room.
    let mut c = Cluster::new(vec![
        it("big", 4000, 0.4, None),
        it("small", 2000, 0.2, None),
    ])
    .node("a", "big", "on-demand", &[2000])
    .node("e", "big", "on-demand", &[2000])
    .node("t", "small", "on-demand", &[1500]);
    let disrupted = crate::taints::Taint::new(
        crate::taints::DISRUPTED_TAINT,
        "",
        crate::taints::TaintEffect::NoSchedule,
    );
    c.0.node_mut(0).taints.push(disrupted);
    c.0.claim_mut(0).deletion_timestamp = Some(NOW);
    let engine = crate::disruption::engine_simulator::EngineSimulator::default();
    let p = plan(&c.0, &engine, Settings::default());
    assert!(p.commands.is_empty(), "{:?}", p.commands);
    let t = p.verdicts.iter().find(|v| v.node == "t").unwrap();
    assert!(t.message.contains("cluster's scheduler"), "{t:?}");
}

/// The cluster of the drain-order tests: `a` and `b` are the targets of running commands,
/// each waiting for its own replacement (`ra`, `rb`: launching, planned as the cheapest type,
/// `small`), created `a_at` and `b_at`; `e` has 1000m free; `t` is a candidate whose 200m pod
/// fits on `e`.
fn two_running_commands(a_at: i64, b_at: i64) -> Snapshot {
    let mut c = Cluster::new(vec![
        it("big", 4000, 0.4, None),
        it("small", 2000, 0.2, None),
    ])
    .node("a", "big", "on-demand", &[1500, 1500])
    .node("b", "big", "on-demand", &[500])
    .node("e", "big", "on-demand", &[3000])
    .node("t", "small", "on-demand", &[200]);
    let mut held = crate::disruption::in_flight::InFlight::default();
    for (node, replacement, at) in [("a", "ra", a_at), ("b", "rb", b_at)] {
        c.0.node_claims.push(Arc::new(NodeClaim {
            name: replacement.into(),
            nodepool: "default".into(),
            creation_timestamp: Timestamp(at),
            ..NodeClaim::default()
        }));
        let target = crate::disruption::command::Target {
            node: node.into(),
            nodeclaim: format!("claim-{node}"),
            ..crate::disruption::command::Target::for_claim(node)
        };
        let cmd = Command::new(Method::SingleNodeConsolidation, vec![target], Vec::new());
        held.add(&cmd, [replacement]);
    }
    held.view(&c.0).into_owned()
}

#[test]
fn a_running_commands_pods_use_only_the_replacements_ready_when_it_drains() {
    // `a`'s command started first, so it drains first, when only `ra` is Ready: one 1500m
    // pod takes `ra`, and the other finds room nowhere (`e` has 1000m), though `rb` will
    // have it 15 s later. The cluster's scheduler leaves it pending and a node like `a` is
    // launched for it, so no command is taken meanwhile.
    let view = two_running_commands(NOW.0 - 30_000, NOW.0 - 15_000);
    let p = plan(&view, &FirstFit, Settings::default());
    assert!(p.commands.is_empty(), "{:?}", p.commands);
    let t = p.verdicts.iter().find(|v| v.node == "t").unwrap();
    assert!(t.message.contains("running command's pod"), "{t:?}");
    // Started the other way round, `b`'s 500m pod goes to `rb`, and then `a`'s pods to `ra`
    // and to the 1500m left on `rb`: every pod finds room and `t` is deleted.
    let view = two_running_commands(NOW.0 - 15_000, NOW.0 - 30_000);
    let p = plan(&view, &FirstFit, Settings::default());
    let targets: Vec<&str> = p
        .commands
        .iter()
        .map(|c| c.targets[0].node.as_str())
        .collect();
    assert_eq!(targets, ["t"], "{p:?}");
}
