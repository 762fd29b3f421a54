//! Hourly prices: on-demand per region and instance type, spot per instance type and zone.
//!
//! On-demand prices are real (the embedded table, or the Pricing API in the AWS provider). Spot
//! prices are either observed (`DescribeSpotPriceHistory`, parsed by the caller), Karpenter's
//! start-up default (the on-demand price in every zone), or synthetic: the embedded data has
//! no spot prices, so [`SpotPrices::synthetic`] derives them from on-demand prices with a
//! deterministic per-(type, zone) discount. Anything reporting a cost must say so when
//! [`SpotPrices::is_synthetic`] is true; [`SpotPrices::provenance`] gives the sentence.

use std::collections::BTreeMap;

/// Karpenter falls back to this region's static table when a region has none.
pub const FALLBACK_REGION: &str = "us-east-1";

/// Lower and upper bound of the synthetic spot discount (fraction off on-demand).
pub const SYNTHETIC_DISCOUNT_BAND: (f64, f64) = (0.55, 0.75);

/// On-demand Linux prices, US dollars per hour.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OnDemandPrices {
    by_region: BTreeMap<String, BTreeMap<String, f64>>,
}

impl OnDemandPrices {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn insert(&mut self, region: &str, instance_type: &str, usd_per_hour: f64) {
        self.by_region
            .entry(region.to_string())
            .or_default()
            .insert(instance_type.to_string(), usd_per_hour);
    }

    /// The price in `region`; a region with no table at all uses [`FALLBACK_REGION`]'s, as
    /// Karpenter's static pricing does. A type missing from the table has no price.
    pub fn get(&self, region: &str, instance_type: &str) -> Option<f64> {
        let table = self
            .by_region
            .get(region)
            .or_else(|| self.by_region.get(FALLBACK_REGION))?;
        table.get(instance_type).copied()
    }

    /// Regions with their own table (the others fall back).
    pub fn regions(&self) -> impl Iterator<Item = &str> {
        self.by_region.keys().map(String::as_str)
    }
}

/// Where spot prices come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpotSource {
    /// Made up from on-demand prices; not market data.
    Synthetic,
    /// Read from `DescribeSpotPriceHistory` (live or a saved snapshot).
    Observed,
    /// Karpenter's default before the first spot refresh: the on-demand price, any zone.
    OnDemandDefault,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SpotPrices {
    source: SpotSource,
    /// (instance type, zone) → price; used for [`SpotSource::Observed`] only.
    observed: BTreeMap<(String, String), f64>,
}

impl SpotPrices {
    /// Synthetic prices: on-demand × (1 − d), d in [`SYNTHETIC_DISCOUNT_BAND`], fixed per
    /// (type, zone) by [`synthetic_discount`], rounded to 1e-6 USD. Same inputs, same prices.
    pub fn synthetic() -> Self {
        SpotPrices {
            source: SpotSource::Synthetic,
            observed: BTreeMap::new(),
        }
    }

    /// Observed prices, latest per (instance type, zone). A zone without an entry has no spot
    /// offering.
    pub fn observed(entries: impl IntoIterator<Item = (String, String, f64)>) -> Self {
        let observed = entries.into_iter().map(|(t, z, p)| ((t, z), p)).collect();
        SpotPrices {
            source: SpotSource::Observed,
            observed,
        }
    }

    /// The on-demand price in every zone, as Karpenter assumes until spot data arrives.
    pub fn on_demand_default() -> Self {
        SpotPrices {
            source: SpotSource::OnDemandDefault,
            observed: BTreeMap::new(),
        }
    }

    pub fn source(&self) -> SpotSource {
        self.source
    }

    pub fn is_synthetic(&self) -> bool {
        self.source == SpotSource::Synthetic
    }

    /// One sentence for reports on where spot prices came from.
    pub fn provenance(&self) -> &'static str {
        match self.source {
            SpotSource::Synthetic => {
                "spot prices are synthetic: on-demand price less a fixed 55-75% discount per \
                 instance type and zone, not market data"
            }
            SpotSource::Observed => "spot prices are observed EC2 spot price history",
            SpotSource::OnDemandDefault => {
                "spot prices are not known yet; the on-demand price stands in for them"
            }
        }
    }

    /// The spot price of `instance_type` in `zone`, given its on-demand price there.
    pub fn get(&self, instance_type: &str, zone: &str, on_demand: Option<f64>) -> Option<f64> {
        match self.source {
            SpotSource::Observed => self
                .observed
                .get(&(instance_type.to_string(), zone.to_string()))
                .copied(),
            SpotSource::OnDemandDefault => on_demand,
            SpotSource::Synthetic => on_demand.map(|od| {
                let p = od * (1.0 - synthetic_discount(instance_type, zone));
                ((p * 1e6).round() / 1e6).max(1e-6)
            }),
        }
    }
}

/// The synthetic discount for (type, zone): a stable 64-bit FNV-1a hash of `type/zone`
/// spread evenly over [`SYNTHETIC_DISCOUNT_BAND`].
pub fn synthetic_discount(instance_type: &str, zone: &str) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in instance_type
        .bytes()
        .chain(std::iter::once(b'/'))
        .chain(zone.bytes())
    {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let unit = (h >> 11) as f64 / (1u64 << 53) as f64;
    let (lo, hi) = SYNTHETIC_DISCOUNT_BAND;
    lo + (hi - lo) * unit
}

/// The prices an instance type's offerings read.
#[derive(Clone, Copy, Debug)]
pub struct PriceBook<'a> {
    pub on_demand: &'a OnDemandPrices,
    pub spot: &'a SpotPrices,
}

impl PriceBook<'_> {
    pub fn on_demand(&self, region: &str, instance_type: &str) -> Option<f64> {
        self.on_demand.get(region, instance_type)
    }

    pub fn spot(&self, region: &str, instance_type: &str, zone: &str) -> Option<f64> {
        self.spot
            .get(instance_type, zone, self.on_demand(region, instance_type))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_spot_is_deterministic_and_in_band() {
        let s = SpotPrices::synthetic();
        assert!(s.is_synthetic());
        let a = s.get("m5.large", "us-east-1a", Some(0.096)).unwrap();
        assert_eq!(Some(a), s.get("m5.large", "us-east-1a", Some(0.096)));
        let mut distinct = std::collections::BTreeSet::new();
        for t in ["m5.large", "c6g.xlarge", "p3dn.24xlarge", "t4g.nano"] {
            for z in ["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d"] {
                let d = synthetic_discount(t, z);
                assert!((0.55..=0.75).contains(&d), "{t} {z}: {d}");
                distinct.insert(d.to_bits());
                let p = s.get(t, z, Some(1.0)).unwrap();
                assert!((0.25..=0.45).contains(&p), "{t} {z}: {p}");
            }
        }
        // The discount really varies by type and zone.
        assert!(distinct.len() > 10);
        assert_eq!(s.get("m5.large", "us-east-1a", None), None);
    }

    #[test]
    fn observed_spot_has_no_price_for_unlisted_zones() {
        let s = SpotPrices::observed([("m5.large".to_string(), "us-east-1a".to_string(), 0.04)]);
        assert_eq!(s.get("m5.large", "us-east-1a", Some(0.096)), Some(0.04));
        assert_eq!(s.get("m5.large", "us-east-1b", Some(0.096)), None);
        assert!(!s.is_synthetic());
        let d = SpotPrices::on_demand_default();
        assert_eq!(d.get("m5.large", "us-east-1b", Some(0.096)), Some(0.096));
    }

    #[test]
    fn missing_region_falls_back_to_us_east_1() {
        let mut p = OnDemandPrices::new();
        p.insert("us-east-1", "m5.large", 0.096);
        p.insert("eu-west-1", "m5.large", 0.107);
        assert_eq!(p.get("eu-west-1", "m5.large"), Some(0.107));
        assert_eq!(p.get("ap-south-2", "m5.large"), Some(0.096));
        assert_eq!(p.get("eu-west-1", "m5.xlarge"), None);
    }
}
