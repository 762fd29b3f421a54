//! The simulated cloud's settings. The cloud itself is the controller's
//! ([`nodewright_cloud_sim::fleet`]): the same launch decision (the claim's compatible,
//! available offerings in the AWS provider's launch order), injected API errors,
//! insufficient capacity per offering, the ICE memory with its TTL, EC2-shaped instance ids
//! from the seed and spot interruptions, run here on the virtual clock.
//!
//! The instance types come from the embedded AWS catalog, shaped by each EC2NodeClass, unless
//! the scenario names a catalog file in the interchange format ([`CatalogFile`]).

use std::sync::Arc;
use std::time::Duration;

use nodewright_cloud_sim::FleetConfig;
use nodewright_core::model::InstanceType;

/// Launch and registration timings, faults and where the cluster lives.
#[derive(Clone, Debug, PartialEq)]
pub struct CloudConfig {
    pub region: String,
    /// The zones the cluster's subnets are in.
    pub zones: Vec<String>,
    /// From the launch request to a running instance (EC2 CreateFleet and boot start): the
    /// cloud is asked when it has passed, so its instance runs from its answer.
    pub launch_delay: Duration,
    /// From a running instance to a Ready node (kubelet registration and CNI).
    pub registration_delay: Duration,
    /// The cloud's termination delay (`terminationDelay`, from the terminate call to a
    /// terminated instance) and faults (`apiErrorRate`, `insufficientCapacity`,
    /// `spotInterruptionsPerHour`); its own launch delay is zero (see `launch_delay`).
    pub fleet: FleetConfig,
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
            fleet: FleetConfig {
                launch_delay: Duration::ZERO,
                ..FleetConfig::default()
            },
            instance_types: None,
        }
    }
}
