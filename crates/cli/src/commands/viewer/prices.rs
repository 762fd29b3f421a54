//! $/h of a node, from the same tables the simulated cloud offers its instance types at: the
//! embedded catalog's on-demand prices (`data/aws/`, taken at
//! [`ON_DEMAND_PRICES_TAKEN_AT`]) and its synthetic spot prices
//! ([`SpotPrices::synthetic`], a fixed discount per type and zone). A node the controller
//! launched with `--cloud-provider sim` therefore shows the price the controller chose it at.
//! Under `--cloud-provider aws` the controller refreshes prices from AWS; the viewer does not
//! call AWS, so there it shows the embedded on-demand price and a synthetic spot price.

use nodewright_aws_model::catalog::{self, ON_DEMAND_PRICES_TAKEN_AT};
use nodewright_aws_model::pricing::{OnDemandPrices, SpotPrices};
use nodewright_core::labels::{CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT};

/// Hours in a month, as AWS's calculators and eks-node-viewer count them (365 × 24 / 12).
pub const HOURS_PER_MONTH: f64 = 730.0;

pub struct Prices {
    on_demand: OnDemandPrices,
    spot: SpotPrices,
}

impl Prices {
    /// The embedded catalog's prices, as `controller --cloud-provider sim` uses them.
    pub fn embedded() -> anyhow::Result<Prices> {
        let catalog = catalog::embedded()
            .map_err(|e| anyhow::anyhow!("reading the embedded instance-type catalog: {e}"))?;
        Ok(Prices::new(
            catalog.on_demand_prices().clone(),
            SpotPrices::synthetic(),
        ))
    }

    pub fn new(on_demand: OnDemandPrices, spot: SpotPrices) -> Prices {
        Prices { on_demand, spot }
    }

    /// One line for the screen on where the prices come from.
    pub fn source(&self) -> String {
        let spot = if self.spot.is_synthetic() {
            "spot synthetic (on-demand less 55-75%), as the simulated cloud prices it"
        } else {
            self.spot.provenance()
        };
        format!("prices: on-demand from the embedded catalog ({ON_DEMAND_PRICES_TAKEN_AT}); {spot}")
    }

    /// The hourly price of `instance_type` bought as `capacity_type` in `zone` of `region`;
    /// `None` for a type or capacity type the tables do not price (reserved capacity is paid
    /// for by its reservation).
    pub fn hourly(
        &self,
        region: &str,
        zone: &str,
        instance_type: &str,
        capacity_type: &str,
    ) -> Option<f64> {
        let on_demand = self.on_demand.get(region, instance_type);
        match capacity_type {
            CAPACITY_TYPE_ON_DEMAND => on_demand,
            CAPACITY_TYPE_SPOT => self.spot.get(instance_type, zone, on_demand),
            _ => None,
        }
    }
}

/// The region of an AWS zone name (`us-east-1a` → `us-east-1`), for nodes without the region
/// label.
pub fn region_of_zone(zone: &str) -> &str {
    zone.trim_end_matches(|c: char| c.is_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_demand_and_spot_come_from_the_tables() {
        let mut od = OnDemandPrices::new();
        od.insert("us-east-1", "m5.large", 0.096);
        let p = Prices::new(od, SpotPrices::synthetic());
        assert_eq!(
            p.hourly("us-east-1", "us-east-1a", "m5.large", "on-demand"),
            Some(0.096)
        );
        let spot = p.hourly("us-east-1", "us-east-1a", "m5.large", "spot");
        assert_eq!(
            spot,
            SpotPrices::synthetic().get("m5.large", "us-east-1a", Some(0.096))
        );
        assert!(spot.unwrap() < 0.096);
        assert_eq!(
            p.hourly("us-east-1", "us-east-1a", "m5.large", "reserved"),
            None
        );
        assert_eq!(
            p.hourly("us-east-1", "us-east-1a", "m9.huge", "on-demand"),
            None
        );
    }

    #[test]
    fn embedded_prices_match_the_simulated_clouds_offerings() {
        let p = Prices::embedded().unwrap();
        let catalog = catalog::embedded().unwrap();
        let od = catalog.on_demand_prices().get("us-east-1", "m5.large");
        assert!(od.is_some());
        assert_eq!(
            p.hourly("us-east-1", "us-east-1b", "m5.large", "on-demand"),
            od
        );
        assert!(p.source().contains("synthetic"));
    }

    #[test]
    fn zones_name_their_region() {
        assert_eq!(region_of_zone("us-east-1a"), "us-east-1");
        assert_eq!(region_of_zone("eu-west-3c"), "eu-west-3");
        assert_eq!(region_of_zone(""), "");
    }
}
