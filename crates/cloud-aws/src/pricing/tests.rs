//! Prices from recorded Pricing API and spot history documents, and the embedded fallback.

use std::sync::Mutex;

use super::*;

const PRODUCTS: &str = include_str!("../../tests/fixtures/get-products-us-east-1.json");
const SPOT: &str = include_str!("../../tests/fixtures/spot-price-history-us-east-1.json");

fn recorded_documents() -> Vec<String> {
    let v: Value = serde_json::from_str(PRODUCTS).unwrap();
    v["PriceList"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn get_products_documents_give_the_first_non_zero_price() {
    let table = on_demand_from_documents("us-east-1", &recorded_documents());
    assert_eq!(table.get("us-east-1", "m5.large"), Some(0.096));
    assert_eq!(table.get("us-east-1", "c6g.xlarge"), Some(0.136));
    assert_eq!(
        table.get("us-east-1", "t3.nano"),
        Some(0.0052),
        "zero dimensions are skipped"
    );
    assert_eq!(table.get("us-east-1", "m5.metal"), Some(4.608));
    assert_eq!(
        table.get("us-east-1", "x9.free"),
        None,
        "an all-zero price is no price"
    );
    assert_eq!(parse_price_document("not json"), None);
}

#[test]
fn spot_history_keeps_the_latest_price_per_type_and_zone() {
    let points = spot_points_from_json(SPOT).unwrap();
    assert_eq!(points.len(), 5);
    let latest = latest_spot_prices(&points);
    let price = |t: &str, z: &str| latest[&(t.to_string(), z.to_string())].usd_per_hour;
    assert_eq!(price("m5.large", "us-east-1a"), 0.0387);
    assert_eq!(price("m5.large", "us-east-1b"), 0.0351);
    assert_eq!(price("c6g.xlarge", "us-east-1c"), 0.06);
    assert_eq!(latest.len(), 3);
    assert!(spot_points_from_json("{\"SpotPriceHistory\": [{\"SpotPrice\": \"x\"}]}").is_err());
}

/// A price source that answers from recorded data, or fails, as scripted.
struct Scripted {
    docs: Mutex<Result<Vec<String>, AwsError>>,
    spot: Mutex<Result<Vec<SpotPricePoint>, AwsError>>,
}

#[async_trait]
impl PriceSource for Scripted {
    async fn on_demand_price_list(&self, _region: &str) -> Result<Vec<String>, AwsError> {
        self.docs.lock().unwrap().clone()
    }
    async fn spot_price_history(&self) -> Result<Vec<SpotPricePoint>, AwsError> {
        self.spot.lock().unwrap().clone()
    }
}

fn embedded() -> OnDemandPrices {
    let mut p = OnDemandPrices::new();
    p.insert("us-east-1", "m5.large", 0.1);
    p.insert("us-east-1", "r5.large", 0.126);
    p
}

#[tokio::test]
async fn refresh_replaces_fallbacks_and_keeps_them_on_failure() {
    let source = Arc::new(Scripted {
        docs: Mutex::new(Err(AwsError::new("GetProducts", "unreachable"))),
        spot: Mutex::new(Err(AwsError::new(
            "DescribeSpotPriceHistory",
            "unreachable",
        ))),
    });
    let provider = PricingProvider::new("us-east-1", source.clone(), embedded(), false);
    let p = provider.prices().await;
    assert_eq!(p.on_demand_source, OnDemandSource::Embedded);
    assert_eq!(
        p.book().spot("us-east-1", "m5.large", "us-east-1a"),
        Some(0.1),
        "spot starts at on-demand"
    );

    // Both calls fail: the fallbacks stay, and the report says why.
    let report = provider.refresh().await;
    assert!(report.on_demand_error.is_some() && report.spot_error.is_some());
    assert_eq!(
        provider.prices().await.on_demand_source,
        OnDemandSource::Embedded
    );

    // Both succeed: API prices replace the table; spot is observed, per zone.
    *source.docs.lock().unwrap() = Ok(recorded_documents());
    *source.spot.lock().unwrap() = Ok(spot_points_from_json(SPOT).unwrap());
    let report = provider.refresh().await;
    assert_eq!(report, RefreshReport::default());
    let p = provider.prices().await;
    assert_eq!(p.on_demand_source, OnDemandSource::PricingApi);
    assert_eq!(p.book().on_demand("us-east-1", "m5.large"), Some(0.096));
    assert_eq!(
        p.book().on_demand("us-east-1", "r5.large"),
        None,
        "the API table replaces the fallback"
    );
    assert_eq!(
        p.book().spot("us-east-1", "m5.large", "us-east-1a"),
        Some(0.0387)
    );
    assert_eq!(
        p.book().spot("us-east-1", "m5.large", "us-east-1c"),
        None,
        "no observation, no spot offering"
    );
    assert!(p.provenance().contains("pricing-api"));
    assert!(!p.spot.is_synthetic());

    // A later partial answer merges into what is known; an empty one is an error.
    *source.spot.lock().unwrap() = Ok(vec![SpotPricePoint {
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        usd_per_hour: 0.03,
        timestamp: i64::MAX / 2,
    }]);
    provider.refresh().await;
    let p = provider.prices().await;
    assert_eq!(
        p.book().spot("us-east-1", "m5.large", "us-east-1a"),
        Some(0.03)
    );
    assert_eq!(
        p.book().spot("us-east-1", "m5.large", "us-east-1b"),
        Some(0.0351)
    );
    *source.spot.lock().unwrap() = Ok(vec![]);
    *source.docs.lock().unwrap() = Ok(vec![]);
    let report = provider.refresh().await;
    assert!(report.spot_error.is_some() && report.on_demand_error.is_some());
    assert_eq!(
        provider
            .prices()
            .await
            .book()
            .spot("us-east-1", "m5.large", "us-east-1a"),
        Some(0.03)
    );
    assert_eq!(
        provider.prices().await.on_demand_source,
        OnDemandSource::PricingApi
    );
}

#[tokio::test]
async fn isolated_vpcs_skip_the_pricing_api() {
    let source = Arc::new(Scripted {
        docs: Mutex::new(Ok(recorded_documents())),
        spot: Mutex::new(Ok(spot_points_from_json(SPOT).unwrap())),
    });
    let provider = PricingProvider::new("us-east-1", source, embedded(), true);
    let report = provider.refresh().await;
    assert!(report.on_demand_error.is_none());
    let p = provider.prices().await;
    assert_eq!(p.on_demand_source, OnDemandSource::Embedded);
    assert_eq!(p.book().on_demand("us-east-1", "m5.large"), Some(0.1));
}
