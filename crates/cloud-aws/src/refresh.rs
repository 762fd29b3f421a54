//! Periodic refresh of what the provider learns from AWS: instance types with their zone
//! offerings, and prices (on-demand from the Pricing API, spot from the spot price history),
//! each on its own interval, both every 12 hours by default as Karpenter does.
//!
//! A failed refresh keeps what was known before; prices start from the embedded table, so a
//! controller that never reaches the Pricing API still prices every offering.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use crate::cloud::AwsCloud;

/// How often each kind of data is fetched again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RefreshIntervals {
    pub instance_types: Duration,
    pub pricing: Duration,
}

impl Default for RefreshIntervals {
    fn default() -> Self {
        RefreshIntervals {
            instance_types: Duration::from_secs(12 * 60 * 60),
            pricing: Duration::from_secs(12 * 60 * 60),
        }
    }
}

/// Runs `step` now and then every `every`, forever. A slow step delays the next one rather
/// than causing a burst of catch-up calls.
pub async fn every<F, Fut>(every: Duration, mut step: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        step().await;
    }
}

/// Refreshes `cloud`'s instance types and prices on `intervals` until the task is aborted.
/// The first refresh of each runs at once, so API prices replace the embedded table soon
/// after start.
pub fn spawn(cloud: Arc<AwsCloud>, intervals: RefreshIntervals) -> JoinHandle<()> {
    tokio::spawn(async move {
        let types = every(intervals.instance_types, || async {
            match cloud.instance_types.refresh().await {
                Ok(d) => tracing::info!(
                    instance_types = d.infos.len(),
                    "refreshed instance types and offerings"
                ),
                Err(e) => {
                    tracing::warn!(error = %e, "instance type refresh failed; keeping cached data")
                }
            }
        });
        let prices = every(intervals.pricing, || async {
            let report = cloud.pricing.refresh().await;
            let p = cloud.pricing.prices().await;
            if report.on_demand_error.is_none() && report.spot_error.is_none() {
                tracing::info!(prices = %p.provenance(), "refreshed prices");
            } else {
                tracing::warn!(prices = %p.provenance(), "price refresh incomplete");
            }
        });
        tokio::join!(types, prices);
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use async_trait::async_trait;

    use super::*;
    use crate::error::AwsError;
    use crate::pricing::{OnDemandSource, PriceSource, PricingProvider, SpotPricePoint};

    #[tokio::test(start_paused = true)]
    async fn steps_run_at_once_then_once_per_interval() {
        let count = Arc::new(AtomicUsize::new(0));
        let c = count.clone();
        let task = tokio::spawn(every(Duration::from_secs(300), move || {
            let c = c.clone();
            async move {
                c.fetch_add(1, Ordering::SeqCst);
            }
        }));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(
            count.load(Ordering::SeqCst),
            1,
            "the first run is immediate"
        );
        tokio::time::sleep(Duration::from_secs(298)).await;
        assert_eq!(count.load(Ordering::SeqCst), 1);
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(count.load(Ordering::SeqCst), 2);
        tokio::time::sleep(Duration::from_secs(3000)).await;
        assert_eq!(count.load(Ordering::SeqCst), 12);
        task.abort();
    }

    /// Fails until told otherwise, then answers with one on-demand and one spot price.
    struct Flaky {
        up: Mutex<bool>,
        calls: AtomicUsize,
    }

    const DOC: &str = r#"{"product":{"attributes":{"instanceType":"m5.large"}},"terms":{"OnDemand":{"a":{"priceDimensions":{"b":{"pricePerUnit":{"USD":"0.0960000000"}}}}}}}"#;

    #[async_trait]
    impl PriceSource for Flaky {
        async fn on_demand_price_list(&self, _region: &str) -> Result<Vec<String>, AwsError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            if *self.up.lock().unwrap() {
                Ok(vec![DOC.to_string()])
            } else {
                Err(AwsError::new("GetProducts", "unreachable"))
            }
        }
        async fn spot_price_history(&self) -> Result<Vec<SpotPricePoint>, AwsError> {
            if *self.up.lock().unwrap() {
                Ok(vec![SpotPricePoint {
                    instance_type: "m5.large".into(),
                    zone: "us-east-1a".into(),
                    usd_per_hour: 0.04,
                    timestamp: 1,
                }])
            } else {
                Err(AwsError::new("DescribeSpotPriceHistory", "unreachable"))
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn prices_keep_the_embedded_table_until_the_api_answers() {
        let source = Arc::new(Flaky {
            up: Mutex::new(false),
            calls: AtomicUsize::new(0),
        });
        let mut embedded = nodewright_aws_model::OnDemandPrices::new();
        embedded.insert("us-east-1", "m5.large", 0.1);
        let provider = Arc::new(PricingProvider::new(
            "us-east-1",
            source.clone(),
            embedded,
            false,
        ));
        let p = provider.clone();
        let hour = Duration::from_secs(3600);
        let task = tokio::spawn(every(12 * hour, move || {
            let p = p.clone();
            async move {
                p.refresh().await;
            }
        }));
        tokio::time::sleep(hour).await;
        assert_eq!(source.calls.load(Ordering::SeqCst), 1);
        let now = provider.prices().await;
        assert_eq!(now.on_demand_source, OnDemandSource::Embedded);
        assert_eq!(now.book().on_demand("us-east-1", "m5.large"), Some(0.1));

        *source.up.lock().unwrap() = true;
        tokio::time::sleep(12 * hour).await;
        assert_eq!(source.calls.load(Ordering::SeqCst), 2);
        let now = provider.prices().await;
        assert_eq!(now.on_demand_source, OnDemandSource::PricingApi);
        assert_eq!(now.book().on_demand("us-east-1", "m5.large"), Some(0.096));
        assert_eq!(
            now.book().spot("us-east-1", "m5.large", "us-east-1a"),
            Some(0.04)
        );

        // The API goes away again: the last answer stays.
        *source.up.lock().unwrap() = false;
        tokio::time::sleep(12 * hour).await;
        assert_eq!(source.calls.load(Ordering::SeqCst), 3);
        let now = provider.prices().await;
        assert_eq!(now.book().on_demand("us-east-1", "m5.large"), Some(0.096));
        task.abort();
    }
}
