//! Where an `Immediate` claim's volume goes, and that it is made with the claim.

use std::sync::Arc;

use nodewright_core::labels;
use nodewright_core::model::{CapacityType, StorageClass};
use nodewright_core::requirements::{NodeSelectorTerm, Operator, Requirement};
use nodewright_core::testkit::{instance_type, offering};

use super::{ClaimTemplate, ensure_claims, immediate_zone};
use crate::cluster::Cluster;

fn zones(z: &[&str]) -> Vec<String> {
    z.iter().map(|s| s.to_string()).collect()
}

fn allowed(z: &[&str]) -> Vec<NodeSelectorTerm> {
    vec![NodeSelectorTerm {
        match_expressions: vec![Requirement::new(labels::ZONE, Operator::In, z)],
    }]
}

#[test]
fn allowed_topologies_decide_the_zone() {
    let offered = zones(&["us-east-1a", "us-east-1b", "us-east-1c"]);
    for claim in ["data-db-0", "data-db-1", "data-db-2", "scratch"] {
        assert_eq!(
            immediate_zone(&allowed(&["us-east-1b"]), &offered, claim).as_deref(),
            Some("us-east-1b")
        );
    }
}

#[test]
fn a_statefulsets_claims_take_the_offered_zones_in_turn() {
    let offered = zones(&["us-east-1a", "us-east-1b", "us-east-1c"]);
    let picked: Vec<String> = (0..3)
        .map(|i| immediate_zone(&[], &offered, &format!("data-db-{i}")).unwrap())
        .collect();
    let mut distinct = picked.clone();
    distinct.sort();
    assert_eq!(distinct, offered, "{picked:?}");
    // Stable: the same name always gives the same zone.
    assert_eq!(
        immediate_zone(&[], &offered, "data-db-1"),
        Some(picked[1].clone())
    );
    assert_eq!(immediate_zone(&[], &[], "data-db-0"), None);
}

fn cluster_with(mode: &str) -> Cluster {
    let mut c = Cluster::default();
    let offering = |zone| offering(zone, CapacityType::OnDemand, 0.1);
    let offerings = vec![offering("us-east-1a"), offering("us-east-1b")];
    let it = instance_type("m5.large", Default::default(), offerings);
    c.catalog.insert("default".into(), Arc::new(vec![it]));
    c.storage_classes.insert(
        "ebs".into(),
        StorageClass {
            name: "ebs".into(),
            provisioner: "ebs.csi.aws.com".into(),
            volume_binding_mode: mode.into(),
            allowed_topologies: allowed(&["us-east-1b"]),
        },
    );
    c
}

#[test]
fn an_immediate_claim_is_bound_when_it_is_created() {
    let template = ClaimTemplate {
        name: "data".into(),
        storage_class: Some("ebs".into()),
    };
    let mut c = cluster_with("Immediate");
    ensure_claims(&mut c, "default", std::slice::from_ref(&template), "db-0");
    let pvc = &c.pvcs[&("default".to_string(), "data-db-0".to_string())];
    let pv = &c.pvs[pvc.volume_name.as_ref().expect("bound at creation")];
    assert_eq!(super::volume_zone(pv), Some("us-east-1b"));
    assert_eq!(c.provisioned.len(), 1);
    assert_eq!(c.provisioned[0].placement, None);

    let mut c = cluster_with("WaitForFirstConsumer");
    ensure_claims(&mut c, "default", &[template], "db-0");
    let pvc = &c.pvcs[&("default".to_string(), "data-db-0".to_string())];
    assert_eq!(pvc.volume_name, None);
    assert!(c.pvs.is_empty());
}
