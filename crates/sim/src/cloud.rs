//! The simulated cloud: where launches land, how long they take, and how they fail.
//!
//! A launch gets the claim's instance-type options (each with its cheapest compatible
//! offering) and tries them in the AWS provider's launch order, as the controller's simulated
//! cloud does (`aws_model::launch::order`): the first capacity type that has an option
//! (reserved, spot, on-demand), cheapest first, and the first whose offering has capacity wins. Offerings listed under `insufficientCapacity` always fail with
//! an insufficient-capacity error, and `apiErrorRate` fails that share of calls outright.
//!
//! The instance types come from the embedded AWS catalog, shaped by each EC2NodeClass, unless
//! the scenario names a catalog file in the interchange format ([`CatalogFile`]).

use std::sync::Arc;
use std::time::Duration;

use nodewright_aws_model::launch::order::in_launch_order;
use nodewright_core::model::{CapacityType, InstanceType};

use nodewright_core::rng::Rng;

/// Launch and registration timings, faults and where the cluster lives.
#[derive(Clone, Debug, PartialEq)]
pub struct CloudConfig {
    pub region: String,
    /// The zones the cluster's subnets are in.
    pub zones: Vec<String>,
    /// From the launch request to a running instance (EC2 CreateFleet and boot start).
    pub launch_delay: Duration,
    /// From a running instance to a Ready node (kubelet registration and CNI).
    pub registration_delay: Duration,
    /// Share of launch calls that fail with a transient API error.
    pub api_error_rate: f64,
    pub insufficient_capacity: Vec<OfferingPattern>,
    /// Mean interruptions per spot instance per hour.
    pub spot_interruptions_per_hour: f64,
    /// Instance types from a catalog file, offered to every NodePool instead of the
    /// embedded AWS catalog's.
    pub instance_types: Option<CatalogFile>,
}

/// Instance types read from a catalog file in the interchange format (`instanceTypes`, as
/// `nodewright plan --instance-types` reads). They are used as the file gives them: their
/// allocatable, their offerings (zones, capacity types, prices) and their labels; an
/// EC2NodeClass's AMI family and kubelet settings do not reshape them.
#[derive(Clone, Debug, PartialEq)]
pub struct CatalogFile {
    /// The file's name as the scenario or the command line gave it.
    pub name: String,
    pub types: Arc<Vec<InstanceType>>,
}

impl CatalogFile {
    /// Parses the catalog file `name` with contents `text`; the error names the file and,
    /// for a bad instance type, the field (`instanceTypes[2].offerings[0].price`).
    pub fn parse(name: &str, text: &str) -> Result<CatalogFile, String> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("{name}: not valid JSON: {e}"))?;
        let types =
            nodewright_api::interchange::read_catalog(name, &value).map_err(|e| e.to_string())?;
        Ok(CatalogFile {
            name: name.to_string(),
            types: Arc::new(types),
        })
    }
}

impl Default for CloudConfig {
    fn default() -> Self {
        CloudConfig {
            region: "us-east-1".into(),
            zones: vec![
                "us-east-1a".into(),
                "us-east-1b".into(),
                "us-east-1c".into(),
            ],
            launch_delay: Duration::from_secs(3),
            registration_delay: Duration::from_secs(35),
            api_error_rate: 0.0,
            insufficient_capacity: Vec::new(),
            spot_interruptions_per_hour: 0.0,
            instance_types: None,
        }
    }
}

/// Matches offerings; an unset field matches anything.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OfferingPattern {
    pub instance_type: Option<String>,
    pub zone: Option<String>,
    pub capacity_type: Option<CapacityType>,
}

impl OfferingPattern {
    pub fn matches(&self, instance_type: &str, zone: &str, capacity_type: CapacityType) -> bool {
        self.instance_type
            .as_deref()
            .is_none_or(|t| t == instance_type)
            && self.zone.as_deref().is_none_or(|z| z == zone)
            && self.capacity_type.is_none_or(|c| c == capacity_type)
    }
}

/// One offering a launch may land on: the AWS provider's launch choice.
pub use nodewright_aws_model::launch::order::Choice as LaunchOption;

#[derive(Clone, Debug, PartialEq)]
pub struct Instance {
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: CapacityType,
    pub price: f64,
    /// Cheaper options passed over for want of capacity.
    pub out_of_capacity: Vec<LaunchOption>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum LaunchError {
    /// Every option was out of capacity; the offerings tried, for the ICE cache.
    InsufficientCapacity(Vec<LaunchOption>),
    Api(String),
}

impl std::fmt::Display for LaunchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LaunchError::InsufficientCapacity(tried) => {
                let names: Vec<String> = tried
                    .iter()
                    .take(5)
                    .map(|o| format!("{}/{}/{}", o.instance_type, o.zone, o.capacity_type))
                    .collect();
                write!(
                    f,
                    "insufficient capacity for {} offering(s): {}{}",
                    tried.len(),
                    names.join(", "),
                    if tried.len() > 5 { ", ..." } else { "" }
                )
            }
            LaunchError::Api(m) => write!(f, "cloud API error: {m}"),
        }
    }
}

pub struct SimCloud {
    pub config: CloudConfig,
    rng: Rng,
    launched: u64,
}

impl SimCloud {
    pub fn new(config: CloudConfig, seed: u64) -> Self {
        SimCloud {
            config,
            rng: Rng::new(seed),
            launched: 0,
        }
    }

    /// Launches one instance on the first option with capacity, trying them in the AWS
    /// provider's launch order (capacity type first, then price), as the controller's
    /// simulated cloud does.
    pub fn launch(&mut self, options: &[LaunchOption]) -> Result<Instance, LaunchError> {
        if self.rng.chance(self.config.api_error_rate) {
            return Err(LaunchError::Api(
                "RequestLimitExceeded (injected by apiErrorRate)".into(),
            ));
        }
        let ice = |o: &LaunchOption| {
            self.config
                .insufficient_capacity
                .iter()
                .any(|p| p.matches(&o.instance_type, &o.zone, o.capacity_type))
        };
        let options = in_launch_order(options.to_vec());
        match options.iter().position(|o| !ice(o)) {
            Some(i) => {
                let o = &options[i];
                self.launched += 1;
                Ok(Instance {
                    id: format!("i-{:017x}", self.launched),
                    instance_type: o.instance_type.clone(),
                    zone: o.zone.clone(),
                    capacity_type: o.capacity_type,
                    price: o.price,
                    out_of_capacity: options[..i].to_vec(),
                })
            }
            None => Err(LaunchError::InsufficientCapacity(options)),
        }
    }

    /// When a new spot instance will be reclaimed, as a delay from launch, if within `horizon`.
    pub fn spot_interruption_after(&mut self, horizon: Duration) -> Option<Duration> {
        let hours = self
            .rng
            .exponential_hours(self.config.spot_interruptions_per_hour)?;
        let d = Duration::from_secs_f64(hours * 3600.0);
        (d <= horizon).then_some(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opt(t: &str, z: &str, c: CapacityType, price: f64) -> LaunchOption {
        LaunchOption {
            instance_type: t.into(),
            zone: z.into(),
            capacity_type: c,
            price,
        }
    }

    #[test]
    fn the_first_option_with_capacity_wins() {
        let mut cloud = SimCloud::new(
            CloudConfig {
                insufficient_capacity: vec![OfferingPattern {
                    instance_type: Some("c5.large".into()),
                    zone: None,
                    capacity_type: Some(CapacityType::Spot),
                }],
                ..CloudConfig::default()
            },
            1,
        );
        let options = [
            opt("c5.large", "us-east-1a", CapacityType::Spot, 0.03),
            opt("m5.large", "us-east-1b", CapacityType::Spot, 0.04),
        ];
        let i = cloud.launch(&options).unwrap();
        assert_eq!(i.instance_type, "m5.large");
        assert_eq!(i.zone, "us-east-1b");
        assert_eq!(i.out_of_capacity, options[..1].to_vec());
        let err = cloud.launch(&options[..1]).unwrap_err();
        assert!(matches!(err, LaunchError::InsufficientCapacity(ref t) if t.len() == 1));
        assert!(err.to_string().contains("c5.large/us-east-1a/spot"));
    }

    #[test]
    fn api_errors_follow_the_rate_and_the_seed() {
        let config = CloudConfig {
            api_error_rate: 0.5,
            ..CloudConfig::default()
        };
        let options = [opt("c5.large", "us-east-1a", CapacityType::OnDemand, 0.085)];
        let run = |seed| {
            let mut c = SimCloud::new(config.clone(), seed);
            (0..200)
                .map(|_| c.launch(&options).is_err())
                .collect::<Vec<_>>()
        };
        let a = run(3);
        assert_eq!(a, run(3));
        let failures = a.iter().filter(|f| **f).count();
        assert!((70..130).contains(&failures), "{failures}");
    }

    #[test]
    fn no_interruptions_without_a_rate() {
        let mut c = SimCloud::new(CloudConfig::default(), 1);
        assert_eq!(c.spot_interruption_after(Duration::from_secs(86_400)), None);
        let mut c = SimCloud::new(
            CloudConfig {
                spot_interruptions_per_hour: 1000.0,
                ..CloudConfig::default()
            },
            1,
        );
        assert!(
            c.spot_interruption_after(Duration::from_secs(3600))
                .is_some()
        );
    }
}
