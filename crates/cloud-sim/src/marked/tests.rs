//! The simulated cloud's offered catalog through `CloudProvider::instance_types`: shared while
//! availability holds still, and never a stale copy once an offering leaves or comes back.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use nodewright_aws_model::Catalog;
use nodewright_cloud::CloudProvider;
use nodewright_core::model::{CapacityType, InstanceType};
use nodewright_testkit::nodeclaim;

use crate::{FleetConfig, OfferingPattern, SimCloud, SimCloudConfig};

fn catalog() -> Arc<Catalog> {
    static CATALOG: OnceLock<Arc<Catalog>> = OnceLock::new();
    CATALOG
        .get_or_init(|| Arc::new(nodewright_aws_model::catalog::embedded().unwrap()))
        .clone()
}

/// A cloud where on-demand m5.large has no capacity in us-east-1a.
fn cloud() -> SimCloud {
    let fleet = FleetConfig {
        insufficient_capacity: vec![OfferingPattern {
            instance_type: Some("m5.large".into()),
            zone: Some("us-east-1a".into()),
            capacity_type: Some(CapacityType::OnDemand),
        }],
        ..Default::default()
    };
    let config = SimCloudConfig {
        fleet,
        ..Default::default()
    };
    SimCloud::with_catalog(config, catalog())
}

/// Launches an on-demand m5.large: it fails in us-east-1a, which the cloud then remembers.
async fn launch_m5(c: &SimCloud, name: &str) {
    let claim = nodeclaim::aws(name, "default", &["m5.large"], "on-demand");
    let claim = nodeclaim::requests(claim, serde_json::json!({"cpu": "1"}));
    let claim = serde_json::from_value(claim).unwrap();
    let l = c.create(&claim, None).await.unwrap();
    assert_ne!(l.instance.zone, "us-east-1a");
}

/// Every offering not available, sorted.
fn unavailable(types: &[InstanceType]) -> Vec<(String, String, CapacityType)> {
    let mut out: Vec<_> = types
        .iter()
        .flat_map(|it| {
            it.offerings
                .iter()
                .filter(|o| !o.available)
                .map(|o| (it.name.clone(), o.zone.clone(), o.capacity_type))
        })
        .collect();
    out.sort();
    out
}

#[tokio::test(start_paused = true)]
async fn an_offering_that_leaves_or_returns_is_never_served_from_a_stale_copy() {
    let c = cloud();
    let base = unavailable(&c.class_types(None).unwrap());
    let mut marked = base.clone();
    marked.push((
        "m5.large".into(),
        "us-east-1a".into(),
        CapacityType::OnDemand,
    ));
    marked.sort();

    let before = c.instance_types(None).await.unwrap();
    assert_eq!(unavailable(&before), base);

    launch_m5(&c, "a").await;
    let during = c.instance_types(None).await.unwrap();
    assert_eq!(unavailable(&during), marked, "the failed offering is out");

    // Still inside the 180s window: the same offerings are out.
    tokio::time::advance(Duration::from_secs(170)).await;
    assert_eq!(unavailable(&c.instance_types(None).await.unwrap()), marked);

    // The window has ended: the offering is back.
    tokio::time::advance(Duration::from_secs(11)).await;
    let after = c.instance_types(None).await.unwrap();
    assert_eq!(unavailable(&after), base, "the offering came back");

    // And out again after the next failure.
    launch_m5(&c, "b").await;
    assert_eq!(unavailable(&c.instance_types(None).await.unwrap()), marked);
}

#[tokio::test(start_paused = true)]
async fn calls_with_nothing_changed_in_between_share_one_catalog() {
    let c = cloud();
    let first = c.instance_types(None).await.unwrap();
    tokio::time::advance(Duration::from_secs(30)).await;
    let second = c.instance_types(None).await.unwrap();
    assert!(Arc::ptr_eq(&first, &second), "no offering is out");

    launch_m5(&c, "a").await;
    let marked = c.instance_types(None).await.unwrap();
    assert!(!Arc::ptr_eq(&first, &marked), "an offering went out");
    tokio::time::advance(Duration::from_secs(30)).await;
    let again = c.instance_types(None).await.unwrap();
    assert!(
        Arc::ptr_eq(&marked, &again),
        "the same offering is still out"
    );
}
