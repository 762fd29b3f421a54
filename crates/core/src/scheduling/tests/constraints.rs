//! Resources, selectors, node affinity, taints, weights, limits, minValues, host ports,
//! volumes, existing nodes and daemonsets.

use crate::labels;
use crate::model::*;
use crate::requirements::Operator;
use crate::resources::{self, Resources};
use crate::scheduling::{Options, Target, solve as solve_with};
use crate::taints::Taint;
use crate::testkit::*;

#[test]
fn resources_pick_the_cheapest_fitting_type() {
    let plan = solve(&snapshot(
        vec![pool("default")],
        catalog(4),
        vec![pod("p", 3000, 1)],
    ));
    assert!(plan.unplaced.is_empty());
    let c = claim_of(&plan, "p").unwrap();
    // 3 cpu needs it-1 (4 cpu); spot is half price.
    assert_eq!(type_of(&plan, c), "it-1");
    assert_eq!(c.cheapest().unwrap().capacity_type, CapacityType::Spot);
    assert!(
        c.instance_types
            .windows(2)
            .all(|w| w[0].price <= w[1].price)
    );
    assert!((plan.cost - 0.2).abs() < 1e-9);
}

#[test]
fn resources_too_big_says_what_is_missing() {
    let plan = solve(&snapshot(
        vec![pool("default")],
        catalog(2),
        vec![pod("big", 64000, 1)],
    ));
    let r = reason_of(&plan, "big");
    assert!(
        r.contains("NodePool default: no instance type fits requests"),
        "{r}"
    );
    assert!(r.contains("cpu=64"), "{r}");
}

#[test]
fn extended_resources_need_a_type_that_has_them() {
    let mut its = catalog(3);
    its[2].capacity.set("nvidia.com/gpu", 1);
    let mut p = pod("gpu", 500, 1);
    p.requests.set("nvidia.com/gpu", 1);
    let plan = solve(&snapshot(
        vec![pool("default")],
        its,
        vec![p.clone(), pod("cpu", 500, 1)],
    ));
    assert_eq!(type_of(&plan, claim_of(&plan, "gpu").unwrap()), "it-2");
    p.requests.set("nvidia.com/gpu", 2);
    let plan = solve(&snapshot(vec![pool("default")], catalog(3), vec![p]));
    assert!(
        reason_of(&plan, "gpu").contains("nvidia.com/gpu"),
        "{}",
        reason_of(&plan, "gpu")
    );
}

#[test]
fn custom_labels_must_be_defined_by_the_nodepool() {
    let mut p = pod("p", 500, 1);
    p.node_selector.insert("team".into(), "a".into());
    let plan = solve(&snapshot(
        vec![pool("default")],
        catalog(3),
        vec![p.clone()],
    ));
    assert!(
        reason_of(&plan, "p").contains("label team is not defined"),
        "{}",
        reason_of(&plan, "p")
    );
    let mut np = pool("default");
    np.template.labels.insert("team".into(), "a".into());
    let plan = solve(&snapshot(vec![np], catalog(3), vec![p]));
    assert!(plan.unplaced.is_empty());
}

#[test]
fn legacy_provisioner_label_selects_the_nodepool() {
    let mut p = pod("p", 500, 1);
    p.node_selector
        .insert(labels::LEGACY_PROVISIONER_NAME.into(), "default".into());
    let plan = solve(&snapshot(
        vec![pool("default")],
        catalog(2),
        vec![p.clone()],
    ));
    assert!(plan.unplaced.is_empty(), "{:?}", plan.unplaced);
    p.node_selector
        .insert(labels::LEGACY_PROVISIONER_NAME.into(), "other".into());
    let plan = solve(&snapshot(vec![pool("default")], catalog(2), vec![p]));
    assert!(
        reason_of(&plan, "p").contains("karpenter.sh/nodepool"),
        "{}",
        reason_of(&plan, "p")
    );
}

#[test]
fn required_affinity_terms_are_ored() {
    let mut p = pod("p", 500, 1);
    required(&mut p, vec![req(labels::ZONE, Operator::In, &["nowhere"])]);
    required(&mut p, vec![req(labels::ZONE, Operator::In, &["zone-c"])]);
    let plan = solve(&snapshot(
        vec![pool("default")],
        catalog(2),
        vec![p.clone()],
    ));
    assert_eq!(zone_of(&plan, claim_of(&plan, "p").unwrap()), "zone-c");
    p.required_node_affinity.pop();
    let plan = solve(&snapshot(vec![pool("default")], catalog(2), vec![p]));
    assert!(
        reason_of(&plan, "p").contains("nowhere"),
        "{}",
        reason_of(&plan, "p")
    );
}

#[test]
fn numeric_operators_on_instance_labels() {
    let mut p = pod("p", 500, 1);
    required(
        &mut p,
        vec![req(labels::aws::INSTANCE_CPU, Operator::Gt, &["4"])],
    );
    let plan = solve(&snapshot(
        vec![pool("default")],
        catalog(4),
        vec![p.clone()],
    ));
    assert_eq!(type_of(&plan, claim_of(&plan, "p").unwrap()), "it-2");
    p.required_node_affinity.clear();
    required(
        &mut p,
        vec![req(labels::aws::INSTANCE_CPU, Operator::Gte, &["100"])],
    );
    let plan = solve(&snapshot(vec![pool("default")], catalog(4), vec![p]));
    assert!(!plan.unplaced.is_empty());
}

#[test]
fn preferred_node_affinity_is_honoured_then_relaxed() {
    let mut p = pod("p", 500, 1);
    p.preferred_node_affinity.push(WeightedNodeSelectorTerm {
        weight: 10,
        term: crate::requirements::NodeSelectorTerm {
            match_expressions: vec![req(labels::ZONE, Operator::In, &["zone-c"])],
        },
    });
    let plan = solve(&snapshot(
        vec![pool("default")],
        catalog(2),
        vec![p.clone()],
    ));
    assert_eq!(zone_of(&plan, claim_of(&plan, "p").unwrap()), "zone-c");
    p.preferred_node_affinity[0].term.match_expressions[0].values = vec!["nowhere".into()];
    let plan = solve(&snapshot(vec![pool("default")], catalog(2), vec![p]));
    assert!(
        plan.unplaced.is_empty(),
        "an unmet preference must not block: {:?}",
        plan.unplaced
    );
}

#[test]
fn taints_need_tolerations_and_startup_taints_do_not() {
    let mut np = pool("default");
    np.template.taints.push(taint("dedicated", "gpu"));
    np.template.startup_taints.push(taint("init", "x"));
    let plan = solve(&snapshot(
        vec![np.clone()],
        catalog(2),
        vec![pod("p", 500, 1)],
    ));
    assert!(
        reason_of(&plan, "p").contains("taint dedicated=gpu:NoSchedule is not tolerated"),
        "{}",
        reason_of(&plan, "p")
    );
    let mut p = pod("p", 500, 1);
    p.tolerations.push(toleration("dedicated"));
    let plan = solve(&snapshot(vec![np], catalog(2), vec![p]));
    assert!(plan.unplaced.is_empty());
}

#[test]
fn prefer_no_schedule_is_relaxed_last() {
    let mut np = pool("default");
    np.template.taints.push(Taint::new(
        "soft",
        "",
        crate::taints::TaintEffect::PreferNoSchedule,
    ));
    let plan = solve(&snapshot(vec![np], catalog(2), vec![pod("p", 500, 1)]));
    assert!(plan.unplaced.is_empty());
}

#[test]
fn limits_are_never_exceeded_and_named() {
    let mut np = pool("default");
    np.limits = Resources::new().with(resources::CPU, 8000);
    // Each pod needs a node of its own (anti-affinity) and fits a 4-cpu type. A claim is
    // charged its largest option; when the limit is in the way, claims drop their larger
    // fallbacks (each keeps its cheapest type), so exactly two 4-cpu nodes fit under 8 cpu.
    let ps: Vec<Pod> = (0..4)
        .map(|i| {
            let mut p = with_label(pod(&format!("p{i}"), 3000, 1), "app", "x");
            p.pod_anti_affinity.push(term(labels::HOSTNAME, "app", "x"));
            p
        })
        .collect();
    let plan = solve(&snapshot(vec![np], catalog(6), ps));
    assert_eq!(plan.new_claims.len(), 2);
    let charged: i64 = plan
        .new_claims
        .iter()
        .map(|c| {
            c.instance_types
                .iter()
                .map(|o| {
                    catalog(6)
                        .iter()
                        .find(|it| it.name == plan.name_of(o))
                        .unwrap()
                        .capacity
                        .get("cpu")
                })
                .max()
                .unwrap()
        })
        .sum();
    assert!(charged <= 8000, "{charged}");
    let r = reason_of(&plan, "p3");
    assert!(r.contains("limit cpu=8 leaves 0"), "{r}");
}

#[test]
fn node_count_limit() {
    let mut np = pool("default");
    np.limits = Resources::new().with(resources::NODES, 1);
    let ps: Vec<Pod> = (0..2)
        .map(|i| {
            let mut p = with_label(pod(&format!("p{i}"), 500, 1), "app", "x");
            p.pod_anti_affinity.push(term(labels::HOSTNAME, "app", "x"));
            p
        })
        .collect();
    let plan = solve(&snapshot(vec![np], catalog(2), ps));
    assert_eq!(plan.new_claims.len(), 1);
    assert!(
        reason_of(&plan, "p1").contains("limit nodes=1"),
        "{}",
        reason_of(&plan, "p1")
    );
}

#[test]
fn min_values_keeps_enough_types_or_explains() {
    let mut np = pool("default");
    let mut r = req(labels::INSTANCE_TYPE, Operator::Exists, &[]);
    r.min_values = Some(3);
    np.template.requirements.push(r.clone());
    let plan = solve(&snapshot(
        vec![np.clone()],
        catalog(6),
        vec![pod("p", 500, 1)],
    ));
    assert!(claim_of(&plan, "p").unwrap().instance_types.len() >= 3);
    np.template.requirements[0].min_values = Some(10);
    let plan = solve(&snapshot(vec![np], catalog(6), vec![pod("p", 500, 1)]));
    assert!(
        reason_of(&plan, "p").contains("minValues for node.kubernetes.io/instance-type"),
        "{}",
        reason_of(&plan, "p")
    );
}

#[test]
fn min_values_best_effort_places_and_marks_the_claim() {
    let mut np = pool("default");
    let mut r = req(labels::INSTANCE_TYPE, Operator::Exists, &[]);
    r.min_values = Some(10);
    np.template.requirements.push(r);
    let s = snapshot(vec![np], catalog(6), vec![pod("p", 500, 1)]);
    let plan = solve_with(
        &s,
        &Options {
            min_values_best_effort: true,
            ..Options::default()
        },
    );
    assert!(plan.unplaced.is_empty());
    assert!(plan.new_claims[0].min_values_relaxed);
    let strict = solve_with(&s, &Options::default());
    assert_eq!(strict.unplaced.len(), 1);
}

#[test]
fn instance_type_options_are_capped() {
    let s = snapshot(vec![pool("default")], catalog(20), vec![pod("p", 500, 1)]);
    let plan = solve_with(
        &s,
        &Options {
            max_instance_types: 5,
            ..Options::default()
        },
    );
    assert_eq!(plan.new_claims[0].instance_types.len(), 5);
}

#[test]
fn host_ports_conflict_on_one_node() {
    let hp = HostPort {
        port: 8080,
        protocol: "TCP".into(),
        host_ip: String::new(),
    };
    let mut a = pod("a", 500, 1);
    a.host_ports.push(hp.clone());
    let mut b = pod("b", 500, 1);
    b.host_ports.push(hp.clone());
    let plan = solve(&snapshot(vec![pool("default")], catalog(3), vec![a, b]));
    assert_eq!(plan.new_claims.len(), 2);
    // An existing node whose port is taken refuses the pod and says so.
    let mut s = snapshot(vec![], catalog(3), vec![]);
    s.nodes.push(node("n1", "zone-a", 8, 16));
    let mut user = running(pod("user", 100, 1), "n1");
    user.host_ports.push(hp.clone());
    let mut c = pod("c", 500, 1);
    c.host_ports.push(hp);
    s.pods = vec![user, c];
    let plan = solve(&s);
    let r = reason_of(&plan, "c");
    assert!(r.contains("host port 8080 is already in use"), "{r}");
    assert!(r.contains("no NodePool"), "{r}");
}

#[test]
fn existing_nodes_then_in_flight_then_new() {
    let mut s = snapshot(vec![pool("default")], catalog(3), vec![]);
    s.nodes.push(node("n1", "zone-a", 2, 4));
    s.node_claims.push(NodeClaim {
        name: "claim-1".into(),
        nodepool: "default".into(),
        labels: [(labels::ZONE.to_string(), "zone-b".to_string())]
            .into_iter()
            .collect(),
        allocatable: Resources::new()
            .with(resources::CPU, 2000)
            .with(resources::MEMORY, 4 * GI)
            .with(resources::PODS, 20),
        ..NodeClaim::default()
    });
    s.pods = vec![
        running(pod("old", 1500, 1), "n1"),
        pod("a", 400, 1),
        pod("b", 1500, 1),
        pod("c", 1500, 1),
    ];
    let plan = solve(&s);
    assert_eq!(target_of(&plan, "a"), Some(Target::Node("n1".into())));
    assert_eq!(
        target_of(&plan, "b"),
        Some(Target::InFlight("claim-1".into()))
    );
    assert!(matches!(target_of(&plan, "c"), Some(Target::NewClaim(_))));
}

#[test]
fn closed_nodes_take_only_the_pods_of_deleting_nodes() {
    let mut s = snapshot(vec![pool("default")], catalog(3), vec![]);
    // "shut" is the tighter fit, so it is visited first.
    s.nodes.push(node("shut", "zone-a", 2, 4));
    s.nodes.push(node("open", "zone-a", 4, 4));
    let mut gone = node("gone", "zone-a", 2, 4);
    gone.deletion_timestamp = Some(crate::time::Timestamp(1));
    s.nodes.push(gone);
    // Alike but for where they come from; "a" is first in the queue.
    s.pods = vec![pod("a", 1500, 1), running(pod("e", 1500, 1), "gone")];
    let open = Some(Target::Node("open".into()));
    let shut = Some(Target::Node("shut".into()));

    let plan = solve(&s);
    assert_eq!(
        (target_of(&plan, "a"), target_of(&plan, "e")),
        (shut.clone(), open.clone())
    );

    let closing = |names: &[&str]| Options {
        closed: std::sync::Arc::new(names.iter().map(|n| n.to_string()).collect()),
        ..Options::default()
    };
    // The deleting node's pod may still land on the closed node; the other may not.
    let plan = solve_with(&s, &closing(&["shut"]));
    assert_eq!((target_of(&plan, "a"), target_of(&plan, "e")), (open, shut));

    // With both nodes closed, "a" needs a new node.
    let plan = solve_with(&s, &closing(&["shut", "open"]));
    assert!(
        matches!(target_of(&plan, "a"), Some(Target::NewClaim(_))),
        "{plan:?}"
    );
    assert_eq!(target_of(&plan, "e"), Some(Target::Node("shut".into())));
}

#[test]
fn terminating_pods_of_deleting_nodes_are_placed_only_for_statefulsets() {
    let mut s = snapshot(vec![pool("default")], catalog(3), vec![]);
    let mut gone = node("gone", "zone-a", 8, 16);
    gone.deletion_timestamp = Some(crate::time::Timestamp(1));
    s.nodes.push(gone);
    let owned = |name: &str, kind: &str, terminating: bool| {
        let mut p = running(pod(name, 1000, 1), "gone");
        p.owner = Some(OwnerRef {
            kind: kind.into(),
            name: "o".into(),
            controller: true,
        });
        if terminating {
            p.deletion_timestamp = Some(crate::time::Timestamp(2));
        }
        p
    };
    s.pods = vec![
        owned("evicted", "ReplicaSet", true),
        owned("moving", "ReplicaSet", false),
        owned("db-0", "StatefulSet", true),
    ];
    let mut placed: Vec<&str> = crate::scheduling::setup::pods_to_schedule(&s)
        .into_iter()
        .map(|i| s.pods[i].name.as_str())
        .collect();
    placed.sort();
    // The evicted pod's ReplicaSet makes a pending replacement: placing both would count it
    // twice.
    assert_eq!(placed, vec!["db-0", "moving"]);
}

#[test]
fn daemonset_overhead_is_reserved_per_type() {
    let mut ds = pod("ds", 1000, 1);
    ds.owner = Some(OwnerRef {
        kind: "DaemonSet".into(),
        name: "ds".into(),
        controller: true,
    });
    let mut s = snapshot(vec![pool("default")], catalog(3), vec![pod("p", 1500, 1)]);
    s.daemonsets.push(DaemonSet {
        namespace: "kube-system".into(),
        name: "ds".into(),
        pod: ds,
    });
    let plan = solve(&s);
    let c = claim_of(&plan, "p").unwrap();
    // 1.5 + 1 cpu no longer fits the 2-cpu type.
    assert_eq!(type_of(&plan, c), "it-1");
    assert_eq!(c.requests.get("cpu"), 2500);
}

#[test]
fn volume_topology_pins_the_zone_and_missing_claims_are_reported() {
    let mut p = pod("db", 500, 1);
    p.volume_claims.push("data".into());
    let mut s = snapshot(vec![pool("default")], catalog(2), vec![p.clone()]);
    s.persistent_volume_claims.push(PersistentVolumeClaim {
        namespace: "default".into(),
        name: "data".into(),
        volume_name: Some("pv-1".into()),
        storage_class: None,
    });
    s.persistent_volumes.push(PersistentVolume {
        name: "pv-1".into(),
        node_affinity: vec![crate::requirements::NodeSelectorTerm {
            match_expressions: vec![req(labels::ZONE, Operator::In, &["zone-b"])],
        }],
        local_or_host_path: false,
    });
    let plan = solve(&s);
    assert_eq!(zone_of(&plan, claim_of(&plan, "db").unwrap()), "zone-b");
    let plan = solve(&snapshot(vec![pool("default")], catalog(2), vec![p]));
    assert!(
        reason_of(&plan, "db").contains("PersistentVolumeClaim default/data does not exist"),
        "{}",
        reason_of(&plan, "db")
    );
}

#[test]
fn identical_pods_share_nodes() {
    let plan = solve(&snapshot(
        vec![pool("default")],
        catalog(8),
        pods("w", 30, 500, 1),
    ));
    assert!(plan.unplaced.is_empty());
    assert_eq!(plan.new_claims.len(), 1);
    assert_eq!(plan.new_claims[0].pods.len(), 30);
    assert!(plan.lower_bound > 0.0 && plan.lower_bound <= plan.cost + 1e-9);
}

#[test]
fn reserved_offerings_are_used_only_as_far_as_they_go() {
    let mut its = catalog(2);
    its[0].offerings.push(Offering {
        zone: "zone-a".into(),
        capacity_type: CapacityType::Reserved,
        price: 0.01,
        available: true,
        reservation_id: Some("cr-1".into()),
        reservation_capacity: Some(1),
    });
    let ps: Vec<Pod> = (0..2)
        .map(|i| {
            let mut p = with_label(pod(&format!("p{i}"), 500, 1), "app", "x");
            p.pod_anti_affinity.push(term(labels::HOSTNAME, "app", "x"));
            p
        })
        .collect();
    let plan = solve(&snapshot(vec![pool("default")], its, ps));
    assert_eq!(plan.new_claims.len(), 2);
    let cts: Vec<CapacityType> = plan
        .new_claims
        .iter()
        .map(|c| c.cheapest().unwrap().capacity_type)
        .collect();
    assert_eq!(
        cts.iter().filter(|&&c| c == CapacityType::Reserved).count(),
        1,
        "{cts:?}"
    );
    // One reserved node at 0.01 and one spot node at 0.1.
    assert!((plan.cost - 0.11).abs() < 1e-9, "{}", plan.cost);
}

#[test]
fn storage_class_topology_applies_to_unbound_claims() {
    let mut p = pod("db", 500, 1);
    p.volume_claims.push("data".into());
    let mut s = snapshot(vec![pool("default")], catalog(2), vec![p]);
    s.persistent_volume_claims.push(PersistentVolumeClaim {
        namespace: "default".into(),
        name: "data".into(),
        volume_name: None,
        storage_class: Some("zonal".into()),
    });
    s.storage_classes.push(StorageClass {
        name: "zonal".into(),
        provisioner: "ebs.csi.aws.com".into(),
        volume_binding_mode: "WaitForFirstConsumer".into(),
        allowed_topologies: vec![crate::requirements::NodeSelectorTerm {
            match_expressions: vec![req(labels::ZONE, Operator::In, &["zone-c"])],
        }],
    });
    let plan = solve(&s);
    assert_eq!(zone_of(&plan, claim_of(&plan, "db").unwrap()), "zone-c");
    s.storage_classes.clear();
    let plan = solve(&s);
    assert!(
        reason_of(&plan, "db").contains("StorageClass zonal"),
        "{}",
        reason_of(&plan, "db")
    );
}

#[test]
fn pods_whose_only_offering_is_a_full_reservation_are_reported() {
    let mut its = catalog(1);
    its[0].offerings = vec![Offering {
        zone: "zone-a".into(),
        capacity_type: CapacityType::Reserved,
        price: 0.01,
        available: true,
        reservation_id: Some("cr-1".into()),
        reservation_capacity: Some(1),
    }];
    let ps: Vec<Pod> = (0..2)
        .map(|i| {
            let mut p = with_label(pod(&format!("p{i}"), 500, 1), "app", "x");
            p.pod_anti_affinity.push(term(labels::HOSTNAME, "app", "x"));
            p
        })
        .collect();
    let plan = solve(&snapshot(vec![pool("default")], its, ps));
    assert_eq!(plan.new_claims.len(), 1);
    assert_eq!(plan.unplaced.len(), 1);
    assert!(
        plan.unplaced[0].reason.contains("reserved capacity"),
        "{}",
        plan.unplaced[0].reason
    );
    assert_eq!(plan.placements.len(), 1);
}

#[test]
fn daemonset_host_ports_block_pods_that_need_them() {
    let mut ds = pod("ds", 100, 0);
    ds.host_ports.push(HostPort {
        port: 9100,
        protocol: "TCP".into(),
        host_ip: String::new(),
    });
    let mut p = pod("exporter", 100, 0);
    p.host_ports.push(HostPort {
        port: 9100,
        protocol: "TCP".into(),
        host_ip: String::new(),
    });
    let mut s = snapshot(
        vec![pool("default")],
        catalog(2),
        vec![p, pod("plain", 100, 0)],
    );
    s.daemonsets.push(DaemonSet {
        namespace: "kube-system".into(),
        name: "node-exporter".into(),
        pod: ds,
    });
    let plan = solve(&s);
    assert!(
        reason_of(&plan, "exporter").contains("host port 9100 is held by a daemonset"),
        "{}",
        reason_of(&plan, "exporter")
    );
    assert!(claim_of(&plan, "plain").is_some());
}
