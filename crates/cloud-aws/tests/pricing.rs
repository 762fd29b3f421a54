//! The price calls through the real SDK against moto: spot history parses (moto answers a
//! constant price for every offering), and the Pricing API, which moto does not serve, leaves
//! the embedded on-demand table in place.

mod support;

use std::sync::Arc;

use nodewright_cloud_aws::pricing::{AwsPriceSource, PriceSource};
use nodewright_cloud_aws::{OnDemandSource, PricingProvider};

#[tokio::test]
async fn spot_history_through_the_sdk_and_embedded_on_demand_fallback() {
    let Some(moto) =
        support::moto("spot_history_through_the_sdk_and_embedded_on_demand_fallback").await
    else {
        return;
    };
    let source = Arc::new(AwsPriceSource::new(moto.clients.clone()));
    let points = source
        .spot_price_history()
        .await
        .expect("DescribeSpotPriceHistory");
    assert!(points.len() > 1000, "{} points", points.len());
    let m5a = points
        .iter()
        .find(|p| p.instance_type == "m5.large" && p.zone == "us-east-1a")
        .expect("m5.large in us-east-1a");
    assert!(m5a.usd_per_hour > 0.0 && m5a.timestamp > 0);

    let embedded = nodewright_aws_model::catalog::embedded()
        .unwrap()
        .on_demand_prices()
        .clone();
    let od = embedded.get("us-east-1", "m5.large").unwrap();
    let provider = PricingProvider::new("us-east-1", source, embedded, false);
    let report = provider.refresh().await;
    assert!(report.spot_error.is_none(), "{report:?}");
    assert!(report.on_demand_error.is_some(), "moto has no Pricing API");
    let prices = provider.prices().await;
    assert_eq!(prices.on_demand_source, OnDemandSource::Embedded);
    assert_eq!(prices.book().on_demand("us-east-1", "m5.large"), Some(od));
    assert_eq!(
        prices.book().spot("us-east-1", "m5.large", "us-east-1a"),
        Some(m5a.usd_per_hour)
    );
    // moto offers m5.large in every zone but e, so there is no spot price there.
    assert_eq!(
        prices.book().spot("us-east-1", "m5.large", "us-east-1e"),
        None
    );
}
