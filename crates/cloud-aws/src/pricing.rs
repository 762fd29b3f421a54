//! Prices: on-demand from the Pricing API (`GetProducts`), spot from
//! `DescribeSpotPriceHistory`, the embedded catalog's on-demand table when the API cannot be
//! reached, refreshed periodically. Every price carries its source.
//!
//! The calls sit behind [`PriceSource`]: moto serves neither real on-demand prices nor real
//! spot history, so the parsing is tested on recorded responses and the refresh logic on a
//! scripted source.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_pricing::types::{Filter as PricingFilter, FilterType};
use nodewright_aws_model::{OnDemandPrices, PriceBook, SpotPrices};
use serde_json::Value;
use tokio::sync::RwLock;

use crate::AwsClients;
use crate::error::AwsError;

/// One spot price observation.
#[derive(Clone, Debug, PartialEq)]
pub struct SpotPricePoint {
    pub instance_type: String,
    pub zone: String,
    pub usd_per_hour: f64,
    /// Seconds since the epoch.
    pub timestamp: i64,
}

/// Where the on-demand prices in use came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnDemandSource {
    /// The table compiled into the program (see `data/aws/SOURCES.md`).
    Embedded,
    /// The Pricing API.
    PricingApi,
}

impl OnDemandSource {
    pub fn as_str(self) -> &'static str {
        match self {
            OnDemandSource::Embedded => "embedded",
            OnDemandSource::PricingApi => "pricing-api",
        }
    }
}

/// The calls prices come from.
#[async_trait]
pub trait PriceSource: Send + Sync {
    /// `GetProducts` price-list documents (one JSON text each) for Linux on-demand instances in
    /// `region`.
    async fn on_demand_price_list(&self, region: &str) -> Result<Vec<String>, AwsError>;
    /// The current spot price history of the region.
    async fn spot_price_history(&self) -> Result<Vec<SpotPricePoint>, AwsError>;
}

/// The first non-zero USD (CNY in China) price of a `GetProducts` document, with its
/// instance type. `None` for documents without either.
pub fn parse_price_document(doc: &str) -> Option<(String, f64)> {
    let v: Value = serde_json::from_str(doc).ok()?;
    let instance_type = v
        .pointer("/product/attributes/instanceType")?
        .as_str()?
        .to_string();
    let terms = v.pointer("/terms/OnDemand")?.as_object()?;
    for term in terms.values() {
        let Some(dims) = term.get("priceDimensions").and_then(Value::as_object) else {
            continue;
        };
        for dim in dims.values() {
            let Some(per_unit) = dim.get("pricePerUnit") else {
                continue;
            };
            let price = ["USD", "CNY"]
                .iter()
                .filter_map(|c| per_unit.get(*c).and_then(Value::as_str))
                .filter_map(|s| s.parse::<f64>().ok())
                .find(|p| p.is_finite() && *p > 0.0);
            if let Some(p) = price {
                return Some((instance_type, p));
            }
        }
    }
    None
}

/// The on-demand table of `region` from price-list documents.
pub fn on_demand_from_documents(region: &str, docs: &[String]) -> OnDemandPrices {
    let mut prices = OnDemandPrices::new();
    for (t, p) in docs.iter().filter_map(|d| parse_price_document(d)) {
        prices.insert(region, &t, p);
    }
    prices
}

/// The latest price per (instance type, zone).
pub fn latest_spot_prices(points: &[SpotPricePoint]) -> BTreeMap<(String, String), SpotPricePoint> {
    let mut out: BTreeMap<(String, String), SpotPricePoint> = BTreeMap::new();
    for p in points
        .iter()
        .filter(|p| p.usd_per_hour.is_finite() && p.usd_per_hour > 0.0)
    {
        let key = (p.instance_type.clone(), p.zone.clone());
        if out.get(&key).is_none_or(|cur| p.timestamp > cur.timestamp) {
            out.insert(key, p.clone());
        }
    }
    out
}

/// Points from a `DescribeSpotPriceHistory` response in its JSON form (as the AWS CLI prints
/// it): `{"SpotPriceHistory": [{"AvailabilityZone", "InstanceType", "SpotPrice", "Timestamp"}]}`.
pub fn spot_points_from_json(text: &str) -> Result<Vec<SpotPricePoint>, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let items = v
        .get("SpotPriceHistory")
        .and_then(Value::as_array)
        .ok_or("no SpotPriceHistory array")?;
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let field = |k: &str| {
            item.get(k)
                .and_then(Value::as_str)
                .ok_or_else(|| format!("SpotPriceHistory[{i}].{k} is missing"))
        };
        let price: f64 = field("SpotPrice")?
            .parse()
            .map_err(|_| format!("SpotPriceHistory[{i}].SpotPrice is not a number"))?;
        let ts = aws_sdk_ec2::primitives::DateTime::from_str(
            field("Timestamp")?,
            aws_sdk_ec2::primitives::DateTimeFormat::DateTimeWithOffset,
        )
        .map_err(|e| format!("SpotPriceHistory[{i}].Timestamp: {e}"))?;
        out.push(SpotPricePoint {
            instance_type: field("InstanceType")?.to_string(),
            zone: field("AvailabilityZone")?.to_string(),
            usd_per_hour: price,
            timestamp: ts.secs(),
        });
    }
    Ok(out)
}

/// The real calls.
#[derive(Clone, Debug)]
pub struct AwsPriceSource {
    clients: AwsClients,
}

impl AwsPriceSource {
    pub fn new(clients: AwsClients) -> Self {
        AwsPriceSource { clients }
    }
}

fn term(field: &str, value: &str) -> Result<PricingFilter, AwsError> {
    PricingFilter::builder()
        .r#type(FilterType::TermMatch)
        .field(field)
        .value(value)
        .build()
        .map_err(|e| AwsError::new("GetProducts", e.to_string()))
}

#[async_trait]
impl PriceSource for AwsPriceSource {
    async fn on_demand_price_list(&self, region: &str) -> Result<Vec<String>, AwsError> {
        let mut docs = Vec::new();
        // Shared tenancy for virtualised types, dedicated for bare metal, as AWS lists them.
        for (tenancy, family) in [
            ("Shared", "Compute Instance"),
            ("Dedicated", "Compute Instance (bare metal)"),
        ] {
            let filters = vec![
                term("regionCode", region)?,
                term("serviceCode", "AmazonEC2")?,
                term("preInstalledSw", "NA")?,
                term("operatingSystem", "Linux")?,
                term("capacitystatus", "Used")?,
                term("marketoption", "OnDemand")?,
                term("tenancy", tenancy)?,
                term("productFamily", family)?,
            ];
            let mut token = None;
            loop {
                let page = self
                    .clients
                    .pricing
                    .get_products()
                    .service_code("AmazonEC2")
                    .set_filters(Some(filters.clone()))
                    .set_next_token(token)
                    .send()
                    .await
                    .map_err(|e| AwsError::from_sdk("GetProducts", e))?;
                docs.extend(page.price_list().iter().cloned());
                token = page.next_token().map(str::to_string);
                if token.is_none() {
                    break;
                }
            }
        }
        Ok(docs)
    }

    async fn spot_price_history(&self) -> Result<Vec<SpotPricePoint>, AwsError> {
        let mut out = Vec::new();
        let mut token = None;
        let now = aws_sdk_ec2::primitives::DateTime::from(std::time::SystemTime::now());
        loop {
            let page = self
                .clients
                .ec2
                .describe_spot_price_history()
                .product_descriptions("Linux/UNIX")
                .product_descriptions("Linux/UNIX (Amazon VPC)")
                .start_time(now)
                .max_results(1000)
                .set_next_token(token)
                .send()
                .await
                .map_err(|e| AwsError::from_sdk("DescribeSpotPriceHistory", e))?;
            for s in page.spot_price_history() {
                let (Some(t), Some(z), Some(p)) =
                    (s.instance_type(), s.availability_zone(), s.spot_price())
                else {
                    continue;
                };
                let Ok(price) = p.parse::<f64>() else {
                    continue;
                };
                out.push(SpotPricePoint {
                    instance_type: t.as_str().to_string(),
                    zone: z.to_string(),
                    usd_per_hour: price,
                    timestamp: s.timestamp().map(|d| d.secs()).unwrap_or(0),
                });
            }
            token = page
                .next_token()
                .filter(|t| !t.is_empty())
                .map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        Ok(out)
    }
}

/// Prices at one moment, with their sources.
#[derive(Clone, Debug, PartialEq)]
pub struct Prices {
    pub on_demand: OnDemandPrices,
    pub on_demand_source: OnDemandSource,
    pub spot: SpotPrices,
    /// Latest observed spot points, kept so later refreshes merge into them.
    spot_points: BTreeMap<(String, String), SpotPricePoint>,
}

impl Prices {
    pub fn book(&self) -> PriceBook<'_> {
        PriceBook {
            on_demand: &self.on_demand,
            spot: &self.spot,
        }
    }

    /// One line for logs and reports on where the prices come from.
    pub fn provenance(&self) -> String {
        format!(
            "on-demand prices: {}; {}",
            self.on_demand_source.as_str(),
            self.spot.provenance()
        )
    }
}

/// What a refresh did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RefreshReport {
    pub on_demand_error: Option<AwsError>,
    pub spot_error: Option<AwsError>,
}

/// Current prices, starting from the embedded table (spot = on-demand until spot data
/// arrives) and improved by each [`PricingProvider::refresh`]. A failed call keeps what was
/// there.
pub struct PricingProvider {
    region: String,
    source: Arc<dyn PriceSource>,
    /// Skip the Pricing API (isolated VPCs cannot reach it).
    skip_on_demand_api: bool,
    current: RwLock<Arc<Prices>>,
}

impl PricingProvider {
    pub fn new(
        region: &str,
        source: Arc<dyn PriceSource>,
        embedded_on_demand: OnDemandPrices,
        skip_on_demand_api: bool,
    ) -> Self {
        PricingProvider {
            region: region.to_string(),
            source,
            skip_on_demand_api,
            current: RwLock::new(Arc::new(Prices {
                on_demand: embedded_on_demand,
                on_demand_source: OnDemandSource::Embedded,
                spot: SpotPrices::on_demand_default(),
                spot_points: BTreeMap::new(),
            })),
        }
    }

    pub async fn prices(&self) -> Arc<Prices> {
        self.current.read().await.clone()
    }

    /// Fetches on-demand and spot prices in parallel. An empty answer counts as a failure.
    pub async fn refresh(&self) -> RefreshReport {
        let od = async {
            if self.skip_on_demand_api {
                return Ok(None);
            }
            let docs = self.source.on_demand_price_list(&self.region).await?;
            let table = on_demand_from_documents(&self.region, &docs);
            if table.regions().next().is_none() {
                return Err(AwsError::new("GetProducts", "no on-demand prices returned"));
            }
            Ok(Some(table))
        };
        let spot = async {
            let points = self.source.spot_price_history().await?;
            if points.is_empty() {
                return Err(AwsError::new(
                    "DescribeSpotPriceHistory",
                    "no spot prices returned",
                ));
            }
            Ok(points)
        };
        let (od, spot): (
            Result<Option<OnDemandPrices>, AwsError>,
            Result<_, AwsError>,
        ) = tokio::join!(od, spot);
        let mut report = RefreshReport::default();
        let mut next = (**self.current.read().await).clone();
        match od {
            Ok(Some(table)) => {
                next.on_demand = table;
                next.on_demand_source = OnDemandSource::PricingApi;
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(error = %e, "on-demand price refresh failed; keeping {}", next.on_demand_source.as_str());
                report.on_demand_error = Some(e);
            }
        }
        match spot {
            Ok(points) => {
                let mut merged = next.spot_points.clone();
                for (k, p) in latest_spot_prices(&points) {
                    if merged
                        .get(&k)
                        .is_none_or(|cur| p.timestamp >= cur.timestamp)
                    {
                        merged.insert(k, p);
                    }
                }
                next.spot = SpotPrices::observed(
                    merged
                        .values()
                        .map(|p| (p.instance_type.clone(), p.zone.clone(), p.usd_per_hour)),
                );
                next.spot_points = merged;
            }
            Err(e) => {
                tracing::warn!(error = %e, "spot price refresh failed; keeping previous spot prices");
                report.spot_error = Some(e);
            }
        }
        *self.current.write().await = Arc::new(next);
        report
    }
}

#[cfg(test)]
mod tests;
