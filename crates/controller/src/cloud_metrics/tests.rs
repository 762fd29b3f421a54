use nodewright_core::model::{CapacityType, Offering};
use nodewright_core::testkit::offering;

use super::*;
use crate::state::Kind;
use crate::tests::Harness;
use crate::tests::cloud::catalog;

fn line<'a>(text: &'a str, family: &str, labels: &[&str]) -> Option<&'a str> {
    text.lines()
        .find(|l| l.starts_with(&format!("{family}{{")) && labels.iter().all(|x| l.contains(x)))
}

fn value(text: &str, family: &str, labels: &[&str]) -> Option<f64> {
    line(text, family, labels).and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

const AVAILABLE: &str = "karpenter_cloudprovider_instance_type_offering_available";
const PRICE: &str = "karpenter_cloudprovider_instance_type_offering_price_estimate";

#[test]
fn an_offering_listed_by_two_classes_is_available_if_either_can_launch_it() {
    let a = catalog();
    let mut b = catalog();
    b[0].offerings[0].available = false;
    b[0].offerings[0].price = 0.05;
    b[0].offerings.push(Offering {
        available: false,
        ..offering("us-east-1c", CapacityType::Spot, 0.03)
    });
    let rows = rows([a.as_slice(), b.as_slice()]);
    assert_eq!(rows.types["m5.large"], (2.0, 8.0 * (1u64 << 30) as f64));
    let key = |z: &str, c: &str| ("m5.large".to_string(), c.to_string(), z.to_string());
    assert_eq!(
        rows.offerings[&key("us-east-1a", "on-demand")],
        (true, 0.05)
    );
    assert_eq!(rows.offerings[&key("us-east-1c", "spot")], (false, 0.03));
    assert_eq!(rows.offerings.len(), 3 * 2 + 1);
}

#[tokio::test(start_paused = true)]
async fn a_refresh_publishes_every_offering_and_drops_what_is_gone() {
    let h = Harness::new();
    h.nodepool("default", None);
    h.api.mark_synced();
    let m = CloudMetrics::new(&h.context());
    m.pass().await.unwrap();
    let text = h.metrics.encode();
    let large = [
        r#"instance_type="m5.large""#,
        r#"capacity_type="on-demand""#,
        r#"zone="us-east-1b""#,
    ];
    assert_eq!(value(&text, AVAILABLE, &large), Some(1.0));
    assert_eq!(value(&text, PRICE, &large), Some(0.096));
    assert_eq!(
        value(
            &text,
            "karpenter_cloudprovider_instance_type_cpu_cores",
            &[r#"instance_type="m5.2xlarge""#]
        ),
        Some(8.0)
    );
    assert_eq!(
        value(
            &text,
            "karpenter_cloudprovider_instance_type_memory_bytes",
            &[r#"instance_type="m5.xlarge""#]
        ),
        Some((16u64 << 30) as f64)
    );

    // The same catalog again is not published again.
    assert!(!h.metrics.offerings.set(&rows([catalog().as_slice()])));

    // The cloud stops listing m5.large: its series go with it.
    let rest = catalog()[1..].to_vec();
    assert!(h.metrics.offerings.set(&rows([rest.as_slice()])));
    let text = h.metrics.encode();
    assert_eq!(line(&text, AVAILABLE, &large), None);
    assert!(line(&text, AVAILABLE, &[r#"instance_type="m5.xlarge""#]).is_some());
}

/// Each NodePool costs what its claims' offerings cost; a claim whose NodePool went cannot be
/// priced, and is counted as an error of that pool while the pool's cost series goes.
#[tokio::test(start_paused = true)]
async fn each_nodepool_costs_its_claims_offerings_and_an_orphan_claim_is_an_error() {
    let h = Harness::new();
    let claim = crate::tests::termination::initialized_node(&h).await;
    h.nodepool("idle", None);
    let m = CloudMetrics::new(&h.context());
    m.pass().await.unwrap();
    let labels = {
        let Some(crate::state::Object::NodeClaim(c)) = h.api.get(Kind::NodeClaim, &claim) else {
            panic!("no claim {claim}")
        };
        c.metadata.labels.unwrap_or_default()
    };
    let price = catalog()
        .iter()
        .filter(|it| it.name == labels[labels::INSTANCE_TYPE])
        .flat_map(|it| it.offerings.clone())
        .find(|o| {
            o.zone == labels[labels::ZONE]
                && o.capacity_type.as_str() == labels[labels::CAPACITY_TYPE]
        })
        .map(|o| o.price);
    let text = h.metrics.encode();
    const COST: &str = "karpenter_nodepools_cost_total";
    assert!(price.is_some_and(|p| p > 0.0), "{labels:?}");
    assert_eq!(value(&text, COST, &[r#"nodepool="default""#]), price);
    assert_eq!(value(&text, COST, &[r#"nodepool="idle""#]), Some(0.0));
    assert!(!text.contains("karpenter_nodepools_cost_tracker_errors_total{"));

    h.api.delete(Kind::NodePool, "default").unwrap();
    m.pass().await.unwrap();
    let text = h.metrics.encode();
    assert_eq!(line(&text, COST, &[r#"nodepool="default""#]), None);
    assert_eq!(
        value(
            &text,
            "karpenter_nodepools_cost_tracker_errors_total",
            &[r#"nodepool="default""#]
        ),
        Some(1.0)
    );
}
